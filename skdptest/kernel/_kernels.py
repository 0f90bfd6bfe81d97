"""Kernel resolution: turn a ``kernel`` parameter into a Gram-matrix function
and the bound that the sensitivity of the kernel statistics needs.

The sensitivity of MMD and HSIC depends on the kernel only through the
*feature diameter*

    D = sup_{x, x'} ||phi(x) - phi(x')||_H
      = sup_{x, x'} sqrt(k(x, x) + k(x', x') - 2 k(x, x')).

With kappa >= sup_x k(x, x):

- for a kernel with values in [0, kappa] (rbf, laplacian, chi2, the stationary
  Gaussian-process kernels of scikit-learn), D <= sqrt(2 kappa);
- for any positive definite kernel, |k(x, x')| <= kappa (Cauchy-Schwarz), so
  D <= 2 sqrt(kappa).

Callables are not assumed positive definite: their Gram values are mapped to
[-kappa, kappa] (NaN to 0, then clipped; a function of the pair of rows only,
so no data-dependent refusal) and the tests use the squared statistics with a
sensitivity valid for any kernel bounded by kappa (see ``ResolvedKernel``).

Only these *public* bounds enter the noise; the data never do.
"""

from __future__ import annotations

import inspect
import math
from functools import partial
from numbers import Real

import numpy as np
from sklearn.base import clone
from sklearn.gaussian_process import kernels as gpk
from sklearn.metrics.pairwise import (
    KERNEL_PARAMS,
    PAIRWISE_KERNEL_FUNCTIONS,
    additive_chi2_kernel,
)

from .. import _noise
from .._params import Callable, InstanceOf, InvalidParameterError, NoneValue
from ._distances import euclidean, l1_distances, squared_euclidean

__all__ = [
    "ResolvedKernel",
    "check_kernel_spec",
    "private_median_gamma",
    "resolve_kernel",
    "uses_private_median",
]

# name -> (kappa, nonnegative): kernels with values in [0, kappa] or [-kappa, kappa].
_BOUNDED = {
    "rbf": (1.0, True),
    "laplacian": (1.0, True),
    "chi2": (1.0, True),
    "cosine": (1.0, False),
}
_UNBOUNDED = {"linear", "polynomial", "poly"}
_NOT_POSITIVE_DEFINITE = {"sigmoid", "additive_chi2"}
_GAMMA_KERNELS = {"rbf", "laplacian", "chi2"}
# kernel name -> distance of its private median heuristic
_MEDIAN_KERNELS = {"rbf": "euclidean", "laplacian": "manhattan"}
# Share of a fit's epsilon spent on each private median bandwidth.
MEDIAN_EPSILON_SHARE = 0.05
# Candidate bandwidths: a public log-grid, in units of sqrt(d) (euclidean) or
# d (manhattan), the scale of the data-independent default bandwidth.
MEDIAN_GRID = np.geomspace(1e-3, 1e3, 121)

# Parameter constraints of a kernel specification (kernel, kernel_params,
# kernel_bound); the full checks run in check_kernel_spec.
KERNEL_CONSTRAINT = [InstanceOf(str), InstanceOf(gpk.Kernel), Callable()]
KERNEL_PARAMS_CONSTRAINT = [NoneValue(), InstanceOf(dict)]

# Rows per block of the private median's pairwise distances.
_MEDIAN_STEP = 1024
# Rows per block when a kernel is evaluated piecewise (diagonal checks).
_DIAG_BLOCK = 256
# Largest accepted kernel bound kappa (public): every sum the statistics form
# (at most 4 n^2 kappa_x kappa_y in absolute value) stays far from overflow.
MAX_KAPPA = 2.0**200
# The rbf kernel uses scikit-learn's expansion ||x||^2 + ||y||^2 - 2 x.y (fast,
# BLAS) for rows whose squared norm is at most this public constant; rows above
# it (where the expansion loses all accuracy or overflows to inf - inf = NaN)
# are recomputed from the coordinate differences, which cannot cancel.
RBF_EXPANSION_MAX_SQNORM = 2.0**40
# exp(t) below t = -708 gives subnormal values or 0, which numpy's exp computes 3-6x
# slower than normal ones (a Gram matrix of mostly far-apart pairs takes a few times
# longer): a running time that depends on the data. The named rbf,
# laplacian and chi2 kernels clamp exponents at EXP_FLOOR before exp and set the
# values there to exactly 0 after (they are below e^-690 < 1e-299: products with the
# permutation coefficients, >= 1/N, stay normal for any N < 2^30).
EXP_FLOOR = -690.0


class ResolvedKernel:
    """A kernel ready for use: Gram matrices plus its public bound.

    Parameters
    ----------
    func : callable
        ``func(X, Y=None)`` returns the Gram matrix, float64, of shape
        ``(len(X), len(Y))`` (``Y=None`` means ``Y = X``).
    kappa : float
        Public bound on ``k(x, x)`` over the data domain (positive definite
        kernels), or on ``|k(x, x')|`` (``positive_definite=False``).
    nonnegative : bool
        Whether the kernel is known to take values in ``[0, kappa]``.
    description : str
        Human-readable name.
    positive_definite : bool, default=True
        Whether the kernel is known to be positive definite (named and
        scikit-learn kernels). False for callables: their Gram values are
        then mapped into ``[-kappa, kappa]`` (NaN to 0, then clipped), so
        ``|k| <= kappa`` holds by construction, for every pair of rows.
    rebuild : callable, default=None
        ``rebuild(gamma)`` returns the same kernel with another ``gamma``
        (named kernels; used by the private median bandwidth).
    unit_diagonal : bool, default=False
        Whether every evaluated Gram matrix ``func(X)`` has exactly 1 on its
        diagonal (named rbf and laplacian: ``exp(-gamma * 0)``). A public
        property of the kernel, so code may branch on it without revealing
        anything about the data (not even through its running time).
    metric : str, default=None
        The kernel's name for named kernels ("rbf", "laplacian", ...), else None: the
        bandwidth aggregate evaluates the distances of "rbf" and "laplacian" once and
        each bandwidth by one ``exp`` of them (:func:`gram_from_distances`, bit for bit
        the kernel's values).
    """

    def __init__(self, func, kappa, nonnegative, description, *, positive_definite=True,
                 rebuild=None, unit_diagonal=False, metric=None):
        self._func = func
        self.kappa = float(kappa)
        self.nonnegative = bool(nonnegative)
        self.description = description
        self.positive_definite = bool(positive_definite)
        self._rebuild = rebuild
        self.unit_diagonal = bool(unit_diagonal)
        self.metric = metric

    @property
    def diameter(self):
        """Public bound D on ``||phi(x) - phi(x')||`` (see the module notes)."""
        if self.nonnegative:
            return math.sqrt(2.0 * self.kappa)
        return 2.0 * math.sqrt(self.kappa)

    def with_gamma(self, gamma):
        """The same kernel with ``gamma`` (named kernels only)."""
        return self._rebuild(gamma)

    def __call__(self, X, Y=None):
        K = self._func(X, Y)
        K = np.asarray(K, dtype=np.float64)
        n_y = len(X) if Y is None else len(Y)
        if K.shape != (len(X), n_y):
            raise ValueError(
                f"kernel {self.description} returned an array of shape {K.shape}; "
                f"expected ({len(X)}, {n_y})."
            )
        if not self.positive_definite:
            # |k| <= kappa by construction: the any-kernel sensitivity holds
            # whatever the callable returns (a function of the two rows only).
            K = np.nan_to_num(K, nan=0.0, posinf=self.kappa, neginf=-self.kappa)
            np.clip(K, -self.kappa, self.kappa, out=K)
            if Y is None:  # a Gram matrix is read by triangles: make it symmetric
                K = (K + K.T) / 2.0
        return K

    def diag(self, X):
        """``k(x_i, x_i)`` for every row, computed block by block."""
        out = np.empty(len(X))
        for start in range(0, len(X), _DIAG_BLOCK):
            block = X[start:start + _DIAG_BLOCK]
            out[start:start + len(block)] = np.diagonal(self(block))
        return out


def exp_of_exponents(T):
    """``exp(T)`` in place, values with ``T <= EXP_FLOOR`` set to exactly 0.

    The same operations on every entry whatever the values (why: see
    ``EXP_FLOOR``): exp never sees an exponent below the floor (no subnormal or
    underflowing result), and the flush is a product with a 0/1 mask. Above the
    floor the values are numpy's ``exp`` bit for bit; -inf gives 0, NaN stays NaN.
    """
    keep = T > EXP_FLOOR
    np.maximum(T, EXP_FLOOR, out=T)
    np.exp(T, out=T)
    np.multiply(T, keep, out=T)
    return T


def stable_laplacian(X, Y=None, gamma=None):
    """``exp(-gamma ||x - y||_1)``: scikit-learn's ``laplacian_kernel`` bit for bit
    above ``e^EXP_FLOOR``, exactly 0 below (see :func:`exp_of_exponents`)."""
    if gamma is None:
        gamma = 1.0 / X.shape[1]
    K = l1_distances(X, Y)
    np.multiply(K, -gamma, out=K)
    return exp_of_exponents(K)


def stable_chi2(X, Y=None, gamma=1.0):
    """``exp(-gamma sum (x - y)^2 / (x + y))``: scikit-learn's ``chi2_kernel`` bit for
    bit above ``e^EXP_FLOOR``, exactly 0 below (see :func:`exp_of_exponents`)."""
    K = additive_chi2_kernel(X, Y)
    K *= gamma
    # NaN only where both (x - y)^2 and x + y overflowed (inf / inf): distinct float64
    # values near 1e308 differ by at least 2e292, so the true exponent is below -1e276
    # and the value is 0 (a function of the pair; no NaN reaches the statistics)
    np.copyto(K, -np.inf, where=np.isnan(K))
    return exp_of_exponents(K)


def stable_rbf(X, Y=None, gamma=None):
    """``exp(-gamma ||x - y||^2)`` without cancellation or overflow to NaN.

    Rows of squared norm at most ``RBF_EXPANSION_MAX_SQNORM`` use
    scikit-learn's expansion (``euclidean_distances``, then ``rbf_kernel``'s
    operations: bit for bit above ``e^EXP_FLOOR``, exactly 0 below, see
    :func:`exp_of_exponents`); the rows and columns of larger rows are recomputed
    from the coordinate differences (a sum of squares: no cancellation; an overflow
    gives +inf, hence the correct limit 0).
    """
    if gamma is None:
        gamma = 1.0 / X.shape[1]
    with np.errstate(over="ignore", invalid="ignore"):
        K = squared_euclidean(X, Y)
        np.multiply(K, -gamma, out=K)
        exp_of_exponents(K)
        Yv = X if Y is None else Y
        big_x = np.flatnonzero(~(np.einsum("ij,ij->i", X, X) <= RBF_EXPANSION_MAX_SQNORM))
        big_y = np.flatnonzero(~(np.einsum("ij,ij->i", Yv, Yv) <= RBF_EXPANSION_MAX_SQNORM))
        for i in big_x:
            K[i] = exp_of_exponents(-gamma * np.sum((Yv - X[i]) ** 2, axis=1))
        for j in big_y:
            K[:, j] = exp_of_exponents(-gamma * np.sum((X - Yv[j]) ** 2, axis=1))
    return K


def gram_distances(name, X):
    """The pooled distances of the named ``rbf`` or ``laplacian`` kernel, held once.

    ``rbf``: the squared euclidean distances exactly as :func:`stable_rbf` forms them
    (scikit-learn's expansion; rows and columns of squared norm above
    ``RBF_EXPANSION_MAX_SQNORM`` recomputed from coordinate differences);
    ``laplacian``: the l1 distances of :func:`stable_laplacian`. Then
    :func:`gram_from_distances` gives, for any ``gamma``, the Gram matrix of the kernel
    bit for bit (the same elementwise operations on the same values): the bandwidth
    aggregate evaluates the distances once per fit, one ``exp`` per bandwidth.
    """
    if name == "laplacian":
        return l1_distances(X)
    with np.errstate(over="ignore", invalid="ignore"):
        D = squared_euclidean(X)
        sq = np.einsum("ij,ij->i", X, X)
        big = np.flatnonzero(~(sq <= RBF_EXPANSION_MAX_SQNORM))
        for i in big:  # stable_rbf's rows, then its columns (the same sums)
            D[i] = np.sum((X - X[i]) ** 2, axis=1)
        for j in big:
            D[:, j] = np.sum((X - X[j]) ** 2, axis=1)
    return D


def gram_from_distances(D, gamma, out, rows=None):
    """``exp(-gamma D)`` into ``out`` (rows ``r0:r1`` of both when ``rows`` is given),
    with the exponent clamp of :func:`exp_of_exponents`: :func:`stable_rbf` or
    :func:`stable_laplacian` bit for bit on the distances of :func:`gram_distances`."""
    if rows is not None:
        D, out = D[rows[0]:rows[1]], out[rows[0]:rows[1]]
    with np.errstate(over="ignore", invalid="ignore"):
        np.multiply(D, -float(gamma), out=out)
        exp_of_exponents(out)
    return out


def _gp_nonnegative(kernel):
    """Whether a scikit-learn GP kernel is known to take nonnegative values."""
    if isinstance(kernel, (gpk.RBF, gpk.Matern, gpk.RationalQuadratic,
                           gpk.ExpSineSquared, gpk.WhiteKernel)):
        return True
    if isinstance(kernel, gpk.ConstantKernel):
        return np.all(np.asarray(kernel.constant_value) >= 0)
    if isinstance(kernel, (gpk.Sum, gpk.Product)):
        return _gp_nonnegative(kernel.k1) and _gp_nonnegative(kernel.k2)
    if isinstance(kernel, gpk.Exponentiation):
        return _gp_nonnegative(kernel.kernel)
    if isinstance(kernel, gpk.PairwiseKernel):
        return kernel.metric in {"rbf", "laplacian", "chi2"}
    return False


def _check_positive_real(value, name, expected):
    """``value`` must be a finite real number > 0 (bool refused)."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise InvalidParameterError(f"{name} must be {expected}, got {type(value).__name__}.")
    if not (math.isfinite(value) and value > 0):
        raise InvalidParameterError(f"{name} must be finite and > 0, got {value}.")


def check_kernel_spec(kernel, kernel_params, kernel_bound, *, name="kernel"):
    """Static checks of a kernel specification (no data needed).

    Raises
    ------
    InvalidParameterError
        (a ``ValueError`` and a ``TypeError``) naming the parameter.
    """
    params_name = f"{name}_params"
    bound_name = f"{name}_bound"
    if kernel_params is not None and not isinstance(kernel_params, dict):
        raise InvalidParameterError(
            f"{params_name} must be None or a dict, got {type(kernel_params).__name__}."
        )
    params = {} if kernel_params is None else kernel_params
    if kernel_bound is not None:
        _check_positive_real(kernel_bound, bound_name, "None or a real number")
        if kernel_bound > MAX_KAPPA:
            raise InvalidParameterError(
                f"{bound_name}={kernel_bound} is above the largest accepted bound "
                f"{MAX_KAPPA:.3g} (the statistics' sums would overflow); rescale the kernel."
            )
    if isinstance(kernel, str):
        if kernel not in PAIRWISE_KERNEL_FUNCTIONS:
            raise InvalidParameterError(
                f"{name}={kernel!r} is not a kernel name; choose one of "
                f"{sorted(PAIRWISE_KERNEL_FUNCTIONS)}, a "
                "sklearn.gaussian_process.kernels.Kernel or a callable."
            )
        if kernel in _NOT_POSITIVE_DEFINITE:
            raise InvalidParameterError(
                f"{name}={kernel!r} is not a positive definite kernel: the "
                "sensitivity bounds of MMD/HSIC do not hold for it."
            )
        allowed = KERNEL_PARAMS[kernel]
        unknown = sorted(set(params) - set(allowed))
        if unknown:
            raise InvalidParameterError(
                f"{params_name} has keys {unknown} that {name}={kernel!r} does not take "
                f"(allowed: {sorted(allowed)})."
            )
        gamma = params.get("gamma")
        if isinstance(gamma, str) and gamma == "aggregate":
            if kernel not in _MEDIAN_KERNELS:
                raise InvalidParameterError(
                    f"{params_name}['gamma']='aggregate' is available for "
                    f"{sorted(_MEDIAN_KERNELS)} only, not {name}={kernel!r}."
                )
        elif isinstance(gamma, str) and gamma == "median":
            if kernel not in _MEDIAN_KERNELS:
                raise InvalidParameterError(
                    f"{params_name}['gamma']='median' is available for "
                    f"{sorted(_MEDIAN_KERNELS)} only, not {name}={kernel!r}."
                )
        elif kernel in _GAMMA_KERNELS and gamma is not None:
            _check_positive_real(gamma, f"{params_name}['gamma']", "a real number")
        if kernel in _UNBOUNDED and kernel_bound is None:
            raise InvalidParameterError(
                f"{name}={kernel!r} has no bound on k(x, x) over an unbounded domain, so "
                f"its sensitivity is infinite; give {bound_name} (a public bound on "
                f"k(x, x) for every possible row) or use a bounded kernel such as 'rbf'."
            )
    elif isinstance(kernel, gpk.Kernel):
        if params:
            unknown = sorted(set(params) - set(kernel.get_params(deep=True)))
            if unknown:
                raise InvalidParameterError(
                    f"{params_name} has keys {unknown} that the kernel {kernel} does not take."
                )
        _check_gp_hyperparameters(kernel, params, name)
        if not kernel.is_stationary() and kernel_bound is None:
            raise InvalidParameterError(
                f"{name}={kernel} is not stationary, so k(x, x) has no known bound; "
                f"give {bound_name} (a public bound on k(x, x)) or use a stationary kernel."
            )
    elif callable(kernel):
        if kernel_bound is None:
            raise InvalidParameterError(
                f"a callable {name} needs an explicit {bound_name}: a public bound on "
                "k(x, x) for every possible row (the sensitivity depends on it)."
            )
        try:
            sig = inspect.signature(kernel)
        except (TypeError, ValueError):  # pragma: no cover - builtins
            sig = None
        if sig is not None and params:
            accepts_kwargs = any(
                p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values()
            )
            unknown = sorted(set(params) - set(sig.parameters))
            if unknown and not accepts_kwargs:
                raise InvalidParameterError(
                    f"{params_name} has keys {unknown} that the callable {name} does not take."
                )
    else:
        raise InvalidParameterError(
            f"{name} must be a kernel name, a sklearn.gaussian_process.kernels.Kernel or "
            f"a callable, got {type(kernel).__name__}."
        )


# GP hyperparameters that must be > 0 (a zero length scale gives 0/0 = NaN);
# every other one must be >= 0 (a negative constant is not positive definite).
_GP_POSITIVE = ("length_scale", "periodicity", "nu", "alpha")


def _check_gp_hyperparameters(kernel, params, name):
    """Refuse degenerate GP hyperparameters (zero scales, non-finite values)."""
    gp = clone(kernel)
    if params:
        gp.set_params(**params)
    values = gp.get_params(deep=True)
    for hp in gp.hyperparameters:
        value = np.asarray(values[hp.name], dtype=np.float64)
        positive = hp.name.split("__")[-1] in _GP_POSITIVE
        ok = np.all(np.isfinite(value)) and (np.all(value > 0) if positive
                                               else np.all(value >= 0))
        if not ok:
            need = "finite and > 0" if positive else "finite and >= 0"
            with np.errstate(invalid="ignore"):  # the kernel's repr takes sqrt(constant)
                shown = repr(kernel)
            raise InvalidParameterError(
                f"{name}={shown}: hyperparameter {hp.name} must be {need}, got "
                f"{values[hp.name]} (the kernel would return NaN or not be positive "
                "definite)."
            )


_STABLE = {"rbf": stable_rbf, "laplacian": stable_laplacian, "chi2": stable_chi2}


def _pairwise(name, params, X, Y=None):
    if name in _STABLE:
        return _STABLE[name](X, Y, **params)
    func = PAIRWISE_KERNEL_FUNCTIONS[name]
    return func(X, Y, **params)


def _gp_limit(kernel, n_features):
    """A GP kernel's public value between two points ``2^500`` apart per coordinate.

    Its limit at infinite distance for kernels that have one (every stationary
    scikit-learn kernel but ``ExpSineSquared``, and their sums and products with
    constants): ``RBF``/``RationalQuadratic`` give 0 there, ``Matern`` too (where its
    formula at an overflowed distance gives ``inf * 0 = NaN``), ``C + k`` gives C.
    """
    with np.errstate(all="ignore"):
        value = float(kernel(np.zeros((1, n_features)),
                             np.full((1, n_features), 2.0**500))[0, 0])
    return value if math.isfinite(value) else 0.0


def _gp_call(kernel, limit, X, Y=None):
    # A pair whose distance overflows float64 (rows near 1e154 or beyond) can make a
    # GP kernel's formula NaN (Matern: inf * 0; ExpSineSquared: sin(inf)): such an
    # entry gets the kernel's public far-away value, a function of the pair, so the
    # Gram matrix is the limit of the kernel's Gram matrices (positive semi-definite,
    # k(x, x) unchanged) and no NaN reaches the statistics after the charge. The same
    # operations run whatever the values (no branch on the data).
    K = np.asarray(kernel(X, Y), dtype=np.float64)
    if not K.flags.writeable:  # a property of the kernel's code, not of the data
        K = K.copy()
    np.copyto(K, limit, where=~np.isfinite(K))
    return K


def _callable_call(kernel, params, X, Y=None):
    return kernel(X, X if Y is None else Y, **params)


def resolve_kernel(kernel, kernel_params, kernel_bound, X, *, name="kernel"):
    """Resolve a checked kernel specification against the data ``X``.

    Called before the budget is charged. With a user-given ``kernel_bound``
    on a named or scikit-learn kernel (assumed positive definite), the
    diagonal ``k(x_i, x_i)`` of the data is checked against it: data outside
    the declared domain are an input error (``ValueError``). A callable is
    not checked: its values are mapped into ``[-kernel_bound, kernel_bound]``
    (see :class:`ResolvedKernel`).

    Returns
    -------
    kernel : ResolvedKernel
    """
    check_kernel_spec(kernel, kernel_params, kernel_bound, name=name)
    params = {} if kernel_params is None else dict(kernel_params)
    if uses_private_median(kernel, params) or (isinstance(params.get("gamma"), str)
                                               and params["gamma"] == "aggregate"):
        params["gamma"] = None  # placeholder until the bandwidth is drawn or looped over
    bound_name = f"{name}_bound"
    if isinstance(kernel, str):
        if kernel == "chi2" and np.any(X < 0):
            raise ValueError(
                f"{name}='chi2' needs nonnegative features; X has negative values."
            )
        if kernel in _BOUNDED:
            kappa, nonneg = _BOUNDED[kernel]
            if kernel_bound is not None:
                kappa = float(kernel_bound)
        else:
            kappa, nonneg = float(kernel_bound), False

        def build(gamma, kernel=kernel, params=params, kappa=kappa, nonneg=nonneg):
            p = params if gamma is None else {**params, "gamma": float(gamma)}
            return ResolvedKernel(partial(_pairwise, kernel, p), kappa, nonneg, repr(kernel),
                                  rebuild=build, unit_diagonal=kernel in ("rbf", "laplacian"),
                                  metric=kernel)

        resolved = build(None)
    elif isinstance(kernel, gpk.Kernel):
        gp = clone(kernel)
        if params:
            gp.set_params(**params)
        func = partial(_gp_call, gp, _gp_limit(gp, X.shape[1]))
        if kernel_bound is not None:
            kappa = float(kernel_bound)
        else:
            kappa = float(gp.diag(np.zeros((1, X.shape[1])))[0])
            if not (math.isfinite(kappa) and 0 < kappa <= MAX_KAPPA):
                raise InvalidParameterError(
                    f"{name}={kernel} has k(x, x) = {kappa}; expected > 0 and at most "
                    f"{MAX_KAPPA:.3g} (the statistics' sums would overflow)."
                )
        resolved = ResolvedKernel(func, kappa, _gp_nonnegative(gp), repr(kernel))
    else:
        func = partial(_callable_call, kernel, params)
        name_ = getattr(kernel, "__name__", type(kernel).__name__)
        resolved = ResolvedKernel(func, float(kernel_bound), False, name_,
                                  positive_definite=False)
        # Shape check on a public probe (zeros), not on the data: a wrong shape
        # is refused before the charge without reading a private row.
        probe = np.zeros((3, X.shape[1]))
        resolved(probe[:2], probe)
        return resolved
    if kernel_bound is not None:
        # one refusal for every way the data leave the declared domain (an overflow to
        # inf included), under numpy's quiet error state: one bit, no warning
        with np.errstate(all="ignore"):
            # a GP kernel's own diagonal, before the far-away substitution of _gp_call
            diag = gp.diag(X) if isinstance(kernel, gpk.Kernel) else resolved.diag(X)
        if not np.all(diag <= resolved.kappa * (1 + 1e-12)):
            raise ValueError(
                f"{bound_name}={kernel_bound} is violated: k(x, x) exceeds it on some row "
                "of X. The bound must hold for every possible row (a public domain bound)."
            )
    return resolved


# Peak bytes per Gram entry while one kernel block is evaluated (memory plans): the
# named kernels measured at most 10.4 (the distances, a 0/1 mask); scikit-learn GP
# kernels at most 40 (Matern, ExpSineSquared: several n x m temporaries). A user's
# callable is assumed to stay within the GP figure (its code is not the library's).
EVAL_BYTES_NAMED = 16
EVAL_BYTES_OTHER = 48


def kernel_eval_bytes(kernel):
    """Planned peak bytes per Gram entry of evaluating ``kernel`` (a specification)."""
    return EVAL_BYTES_NAMED if isinstance(kernel, str) else EVAL_BYTES_OTHER


def median_memory_bytes(n_samples):
    """Planned peak bytes of :func:`private_median_gamma` on n rows.

    One block of ``s = min(n, 1024)`` rows against another: the distances (evaluated
    as a kernel block), the upper-triangle indices and values of a diagonal block, and
    the grid indices (int64): at most ``40 s^2`` bytes (measured 20 s^2 at n = 1000).
    """
    s = min(int(n_samples), _MEDIAN_STEP)
    return 40 * s * s + 2**20


def uses_private_median(kernel, kernel_params):
    """Whether the specification asks for the private median bandwidth."""
    return (isinstance(kernel, str) and isinstance(kernel_params, dict)
            and isinstance(kernel_params.get("gamma"), str)
            and kernel_params["gamma"] == "median")


def median_selection_probabilities(X, kernel, epsilon):
    """Exponential-mechanism probabilities over ``MEDIAN_GRID`` (see below)."""
    n, d = X.shape
    metric = _MEDIAN_KERNELS[kernel]
    grid = MEDIAN_GRID * (math.sqrt(d) if metric == "euclidean" else d)
    dist = euclidean if metric == "euclidean" else l1_distances
    counts = np.zeros(grid.size + 1, dtype=np.int64)
    step = _MEDIAN_STEP
    for i in range(0, n, step):
        for j in range(i, n, step):
            D = dist(X[i:i + step], X[j:j + step])
            if i == j:
                D = D[np.triu_indices(D.shape[0], k=1)]
            idx = np.searchsorted(grid, D.ravel(), side="left")
            counts += np.bincount(idx, minlength=grid.size + 1)
    below = np.cumsum(counts)[:grid.size]  # pairs at distance <= grid[k]
    utility = -np.abs(below - n * (n - 1) / 4.0)
    logits = epsilon * utility / (2.0 * (n - 1))
    logits -= logits.max()
    probs = np.exp(logits)
    return grid, probs / probs.sum()


def private_median_gamma(X, kernel, epsilon, rng):
    """An epsilon-DP median-heuristic ``gamma`` for ``kernel`` in {rbf, laplacian}.

    The median w of the pairwise distances (euclidean for rbf, l1 for
    laplacian) is chosen by the exponential mechanism over a public log-grid
    of candidates, with utility ``-|#{pairs at distance <= w} - P/2|``, P the
    number of pairs. Replacing one row changes ``n - 1`` pair distances, so
    the utility has sensitivity ``n - 1`` and the choice is epsilon-DP under
    replacing one row. Returns ``1 / w^2`` (rbf) or ``1 / w`` (laplacian).
    """
    grid, probs = median_selection_probabilities(X, kernel, epsilon)
    w = grid[_noise.choice_index(rng, probs)]
    return 1.0 / w**2 if kernel == "rbf" else 1.0 / w
