"""The bandwidth aggregate: kernel tests that keep their power on raw (unscaled) data.

A Gaussian (or Laplace) kernel with a fixed bandwidth loses all power when the data's
scale is far from it (raw columns in cm, mm^2, dollars...). Instead of choosing one
bandwidth, the aggregate computes the test statistic for every bandwidth of a wide
PUBLIC grid (a function of the kernel name and the number of features only, never of
the data), with the same relabellings for all of them, centres each bandwidth's
statistics by a relabelling-invariant constant and releases ONE DP permutation p-value
of their maximum:

    T_b = max_l [ s_b(l) - h(l) ],    h(l) = sqrt(max(c(l), f)),

where ``s_b(l)`` is the usual statistic (``MMD_b`` or ``sqrt(HSIC_b)``) of relabelling b
with bandwidth l, ``c(l)`` the exact mean of ``s_b(l)^2`` over uniformly random
relabellings (a closed form, see below) and ``f`` a public floor.

Why the centring: the biased statistic has a relabelling-invariant part (its diagonal)
which is largest for the narrowest bandwidths (K close to the identity), so an
uncentred maximum is won by a degenerate bandwidth with the same value for every
relabelling, and the test loses all power. After centring, every bandwidth is near 0
under the permutation law.

Validity. ``T`` is one fixed function of the data applied to every relabelling: the
grid is public and ``c(l)`` depends on the pooled rows (dpMMD) or on the two marginals
(dpHSIC) only, so it is the same for the observed data and every relabelling of it.
Exchangeability of (T_0, ..., T_B) under H0 is preserved, and the DP permutation p-value
of the core is valid at every finite sample size.

Privacy. All bandwidths of the grid have the same kernel bound kappa, hence the same
sensitivity Delta of ``s_b(l)`` (the usual bound, for every relabelling). The centring
term moves by at most ``Delta_h = min(Delta, Delta_c / (2 sqrt f))`` (``sqrt(max(., f))``
is ``1 / (2 sqrt f)``-Lipschitz; the bound Delta is the norm argument below). So each
``s_b(l) - h(l)`` moves by at most ``Delta + Delta_h`` and so does their maximum
(``|max_l a_l - max_l b_l| <= max_l |a_l - b_l|``). The release is the core's
(epsilon, delta)-DP permutation p-value with that sensitivity: no extra privacy cost.

Closed forms (``K`` the Gram matrix, ``H = I - 11^T / N``, values in ``[0, kappa]``):

- dpMMD (G groups, N rows): for the k-sample statistic
  ``E_pi[T^2] = (G - 1) tr(HKH) / (N (N - 1))``; for two groups ``MMD_b^2 =
  N^2/(m n) T^2``. Replacing a row changes the diagonal entry by at most ``w`` and
  ``2 (N - 1)`` off-diagonal entries by at most ``w`` (``w = kappa`` for nonnegative
  kernels, ``2 kappa`` otherwise), so ``tr(HKH) = sum_i K_ii (1 - 1/N) - sum_{i != j}
  K_ij / N`` moves by at most ``3 w (N - 1) / N``.
- dpHSIC (n pairs): ``E_pi[HSIC_b] = tr(K~) tr(L~) / ((n - 1) n^2)``, ``K~ = HKH``
  (``E_pi[P L~ P^T] = tr(L~) H / (n - 1)``); with ``a = tr(K~) / n <= kappa_x``,
  ``b = tr(L~) / n <= kappa_y``, each moving by at most ``3 w (n - 1) / n^2``,
  ``c = a b / (n - 1)`` moves by at most ``3 (w_x kappa_y + kappa_x w_y) / n^2``.

Norm bound: ``sqrt(c)`` is the L2 norm over relabellings of the vectors whose norms are
``s_b``; each moves by at most Delta, so ``sqrt(c)`` does too (floor included).
"""

from __future__ import annotations

import contextvars
import math
import sys
import time
from copy import deepcopy

import numpy as np

from ._distances import l1_distances, squared_euclidean

__all__ = [
    "AGGREGATE_FLOOR",
    "aggregate_sensitivity",
    "bandwidth_grid",
    "centre_abs_error",
    "distance_block",
    "hsic_centre",
    "mmd_centre",
    "trace_abs_error",
    "uses_aggregate",
]

# Public floor of the centring term, as a fraction of the largest possible c(l): it
# bounds the Lipschitz constant of sqrt(max(c, f)), so the centring costs about
# 1 / sqrt(8 N) of Delta (0.05 at N = 400) instead of a second Delta.
AGGREGATE_FLOOR = 1.0 / 8.0
# Public grid: gamma = 2^k / d (rbf: exp(-gamma ||x - y||^2), length scales
# sqrt(d) / 64 .. 4096 sqrt(d) in steps of 2) or gamma = 2^k / d (laplacian:
# exp(-gamma ||x - y||_1), scales d / 64 .. 4096 d in steps of 2). Wide enough for raw
# columns with spreads from about 0.01 to 10^4; 19 bandwidths each.
_GRID_EXPONENTS = {"rbf": np.arange(-24, 13, 2), "laplacian": np.arange(-12, 7, 1)}
_U64 = 2.0**-53


def uses_aggregate(kernel, kernel_params):
    """Whether a kernel specification asks for the bandwidth aggregate.

    True for ``kernel`` "rbf" or "laplacian" with no ``gamma`` given (``kernel_params``
    None or without a "gamma" key) or with ``gamma="aggregate"``. An explicit numeric
    ``gamma``, "median", or ``gamma=None`` (scikit-learn's ``1 / n_features``, the
    previous default) keeps the single-bandwidth test.
    """
    if not (isinstance(kernel, str) and kernel in _GRID_EXPONENTS):
        return False
    if kernel_params is None:
        return True
    if not isinstance(kernel_params, dict):
        return False
    if "gamma" not in kernel_params:
        return True
    gamma = kernel_params["gamma"]
    return isinstance(gamma, str) and gamma == "aggregate"


def bandwidth_grid(kernel, n_features):
    """The public bandwidth grid of the aggregate: ``gamma = 2^k / n_features``.

    Parameters
    ----------
    kernel : {"rbf", "laplacian"}
    n_features : int
        Number of features (public).

    Returns
    -------
    gammas : ndarray of shape (19,)
        Exact powers of two over ``n_features``, largest length scale first.
    """
    return np.ldexp(1.0, _GRID_EXPONENTS[kernel]) / float(n_features)


def distance_block(kernel, X, Y=None):
    """Squared euclidean (rbf) or l1 (laplacian) distances, without overflow to NaN.

    Rows of squared norm above ``2**40`` are recomputed from coordinate differences
    (the expansion ``||x||^2 + ||y||^2 - 2 x.y`` loses all accuracy there).
    """
    Yv = X if Y is None else Y
    if kernel == "laplacian":
        return l1_distances(X, Yv)
    with np.errstate(over="ignore", invalid="ignore"):
        D = squared_euclidean(X, Y)
        big_x = np.flatnonzero(~(np.einsum("ij,ij->i", X, X) <= 2.0**40))
        big_y = np.flatnonzero(~(np.einsum("ij,ij->i", Yv, Yv) <= 2.0**40))
        for i in big_x:
            D[i] = np.sum((Yv - X[i]) ** 2, axis=1)
        for j in big_y:
            D[:, j] = np.sum((X - Yv[j]) ** 2, axis=1)
    return D


def _floor_sqrt(c, floor):
    return math.sqrt(max(float(c), floor))


def mmd_centre(trace_hkh, sizes, kappa, nonnegative):
    """Centring term and its public constants for one bandwidth of dpMMD.

    Parameters
    ----------
    trace_hkh : float
        ``tr(HKH) = tr(K) - 1^T K 1 / N`` of the pooled Gram matrix (computed).
    sizes : array-like of int
        Group sizes (public).
    kappa : float
        Kernel bound; ``nonnegative`` says whether values lie in ``[0, kappa]``.

    Returns
    -------
    h : float
        ``sqrt(max(c, f))``, c the mean squared statistic over relabellings.
    constants : dict
        Public ``floor``, ``delta_c`` (sensitivity of c), ``c_max`` and ``rho``
        (the factor from the k-sample to the two-group units).
    """
    constants = mmd_centre_constants(sizes, kappa, nonnegative)
    n = int(np.sum(sizes))
    c = constants["rho"] * constants["groups"] * trace_hkh / (n * (n - 1.0))
    return _floor_sqrt(c, constants["floor"]), constants


def mmd_centre_constants(sizes, kappa, nonnegative):
    """Public constants of the dpMMD centring (see :func:`mmd_centre`)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    n, g = int(sizes.sum()), int(sizes.size)
    rho = n * n / float(sizes[0] * sizes[1]) if g == 2 else 1.0
    w = kappa if nonnegative else 2.0 * kappa
    scale = rho * (g - 1)
    return {"rho": rho, "groups": g - 1, "floor": AGGREGATE_FLOOR * scale * kappa / n,
            "delta_c": scale * 3.0 * w / n**2, "c_max": scale * kappa / (n - 1.0),
            "trace_max": n * kappa, "trace_coef": scale / (n * (n - 1.0))}


def hsic_centre(trace_x, trace_y, n, kappas, nonnegative):
    """Centring term and public constants for one bandwidth pair of dpHSIC.

    ``trace_x = tr(HKH)``, ``trace_y = tr(HLH)`` (computed); ``c = trace_x trace_y /
    ((n - 1) n^2)``. Returns ``(h, constants)`` as :func:`mmd_centre`.
    """
    constants = hsic_centre_constants(n, kappas, nonnegative)
    c = trace_x * trace_y / ((n - 1.0) * n * n)
    return _floor_sqrt(c, constants["floor"]), constants


def hsic_centre_constants(n, kappas, nonnegative):
    """Public constants of the dpHSIC centring (see :func:`hsic_centre`)."""
    (kx, ky), (nx, ny) = kappas, nonnegative
    wx, wy = (kx if nx else 2 * kx), (ky if ny else 2 * ky)
    return {"floor": AGGREGATE_FLOOR * kx * ky / (n - 1.0),
            "delta_c": 3.0 * (wx * ky + kx * wy) / n**2, "c_max": kx * ky / (n - 1.0),
            "trace_max": (n * kx, n * ky), "trace_coef": 1.0 / ((n - 1.0) * n * n)}


def aggregate_sensitivity(sensitivity, constants):
    """``Delta + min(Delta, Delta_c / (2 sqrt f))``: the sensitivity of the aggregate."""
    lipschitz = constants["delta_c"] / (2.0 * math.sqrt(constants["floor"]))
    return float(sensitivity) + min(float(sensitivity), lipschitz)


def _gamma(k):
    return k * _U64 / (1.0 - k * _U64)


def trace_abs_error(n, kappa):
    """Certified bound on the float64 error of ``tr(K) - sum(K) / n`` (|K| <= kappa).

    ``sum(K)`` adds at most ``n^2`` terms of magnitude at most kappa in any order
    (within ``gamma_{n^2} n^2 kappa``), ``tr(K)`` n terms; the division and the
    subtraction add two relative roundings. Doubled as a safety factor.
    """
    k = n * n + n + 8
    return 2.0 * (_gamma(k) * (n * n * kappa / n + n * kappa) + 4 * _U64 * 2 * n * kappa)


def centre_abs_error(constants, trace_errors, s_max):
    """Certified bound on the error of one computed ``s_b(l) - h(l)`` beyond ``s_b``'s.

    ``c`` is a product of the traces (errors ``trace_errors``, bounded by
    ``constants["trace_max"]``) and a public coefficient, within ``e_c``; then
    ``sqrt(max(., f))`` is ``1 / (2 sqrt f)``-Lipschitz (plus its rounding), and the
    subtraction rounds once (``u (s_max + h_max)``). Doubled as a safety factor.
    """
    coef = constants["trace_coef"]
    if isinstance(constants["trace_max"], tuple):  # dpHSIC: a product of two traces
        (tx, ty), (ex, ey) = constants["trace_max"], trace_errors
        e_c = coef * (ex * ty + tx * ey + ex * ey)
    else:
        e_c = coef * trace_errors
    e_c += 8 * _U64 * constants["c_max"]
    h_max = math.sqrt(max(constants["c_max"], constants["floor"]) + e_c)
    err = e_c / (2.0 * math.sqrt(constants["floor"])) + 2 * _U64 * h_max
    return 2.0 * (err + 2 * _U64 * (s_max + h_max))


class Progress:
    """Progress of a long release on stderr (``verbose=1``): steps done, elapsed, ETA.

    Prints nothing derived from the data: only counts of public work units and times.
    """

    def __init__(self, verbose, total, what):
        self.verbose, self.total, self.what = int(verbose), int(total), what
        self.done, self.start = 0, time.perf_counter()

    def message(self, text):
        if self.verbose:
            print(f"[skdptest] {text}", file=sys.stderr, flush=True)

    def step(self, k=1):
        self.done += k
        if not self.verbose:
            return
        elapsed = time.perf_counter() - self.start
        eta = elapsed / self.done * (self.total - self.done)
        self.message(f"{self.what} {self.done}/{self.total} done, {elapsed:.1f} s elapsed, "
                     f"ETA {eta:.1f} s")


def map_in_threads(func, items, n_jobs):
    """``[func(item) for item in items]``, on ``n_jobs`` threads (joblib).

    Each item is computed by the same calls whatever ``n_jobs``; BLAS is capped to one
    thread per worker (threadpoolctl, when several workers run) so that the machine is
    not oversubscribed. Results come back in order.
    """
    if n_jobs is None or n_jobs == 1 or len(items) <= 1:
        return [func(item) for item in items]
    from joblib import Parallel


    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl ships with scikit-learn
        threadpool_limits = None
    if threadpool_limits is None:  # pragma: no cover
        return Parallel(n_jobs=n_jobs, prefer="threads")(_in_context(func, items))
    with threadpool_limits(limits=1, user_api="blas"):
        return Parallel(n_jobs=n_jobs, prefer="threads")(_in_context(func, items))


def _in_context(func, items):
    """joblib tasks running ``func(item)`` each in a copy of the caller's context:
    joblib's threads do not inherit it, and numpy's error state ("ignore" after the
    charge) is a context variable."""
    from joblib import delayed

    # copied here, on the calling thread (joblib may consume a generator from a worker)
    return [delayed(contextvars.copy_context().run)(func, item) for item in items]


def same_stream(rng, n_copies):
    """``n_copies`` independent copies of ``rng`` in its current state.

    Used to draw the same relabellings for every bandwidth; the caller then moves
    ``rng`` to the state one copy reached (as if it had been used once).
    """
    return [deepcopy(rng) for _ in range(n_copies)]
