"""dpMMD's bandwidth aggregate over the cyclic group (``cyclic=True``; route and computation).

The pooled rows are put in one uniformly random order (drawn from the generator, never
from the data); the relabellings are the N cyclic shifts ``s = 0 .. N - 1`` of the group
labels ``l`` in that order (``s = 0``: the observed labels). Every dpMMD statistic is one
quadratic form of the labels, ``T = sum_ij K_ij C[l_i, l_j]`` with a public ``G x G``
coefficient matrix ``C`` (:func:`label_coefficients`): two groups, ``MMD_b^2 = v^T K v``
with ``v_i = 1/m`` on group 0 and ``-1/n`` on group 1 (``C = w w^T``, ``w = (1/m, -1/n)``);
three or more, the k-sample statistic of the permutation route, ``sum_g 1_g^T K 1_g /
(N n_g) - 1^T K 1 / N^2`` (``C = diag(1 / (N n_g)) - 1 / N^2``; its pooled term is the
same for every relabelling, so it folds into ``C``). The shifted statistic is
``T_s = sum_ij K_ij L_{i+s, j+s}`` with ``L_ij = C[l_i, l_j]``: a cyclic quadratic form,
all N shifts by FFT (:mod:`._cyclic`). ``L``'s diagonal spectra are computed once per fit
and shared by the 19 bandwidths; the pooled distances' diagonals ``0 .. N // 2`` are kept,
and each bandwidth costs one ``exp`` of them (half the Gram matrix, bit for bit the
permutation route's values), their transforms and one inverse transform:
``O(N^2 log N)`` instead of ``N^2 (B + 1)``, whatever the number of groups.

Validity: the cyclic shifts of positions form a group; under H0 the pooled rows are
exchangeable, so (as for any group of relabellings, and as for dpHSIC's cyclic
re-pairings) the statistics ``(T_0, ..., T_{N-1})`` are exchangeable and the DP
permutation p-value over the whole group is valid at every N. Privacy: every ``T_s`` is
the aggregate statistic of the same rows under a data-independent relabelling with the
same group sizes: the aggregate's sensitivity holds unchanged; the FFT rounding is a
certified absolute error (:func:`mmd_cyclic_abs_error`) added to the noise's calibration.
"""

from __future__ import annotations

import math
import threading

import numpy as np
from joblib import effective_n_jobs

from .._threads import blas_threads, limit_blas, run_in_threads
from ._bandwidth import (
    Progress,
    map_in_threads,
    mmd_centre,
)
from ._cyclic import (
    SPECTRA_BLOCK,
    cyclic_form_abs_error,
    diagonal_forms,
    half_diagonal_weights,
    half_diagonals,
)
from ._kernelbase import RouteStatistics
from ._kernels import gram_distances, gram_from_distances
from ._relabel import _TWO_THREADS_MIN
from ._route_mmd_aggregate import MMDAggregateRoute
from ._testbase import predicted_note

__all__ = [
    "MMDCyclicRoute",
    "cyclic_applies",
    "held_cyclic_fits",
    "label_coefficients",
    "mmd_cyclic_abs_error",
    "mmd_cyclic_memory_bytes",
    "mmd_cyclic_statistics",
    "mmd_cyclic_work",
    "ordered_rows",
]

_U64 = 2.0**-53
# "auto" takes the cyclic group when both the group and the request have at least this
# many relabellings: a fit asking for fewer keeps its B random relabellings (no warning).
AUTO_MIN_SHIFTS = 999


def cyclic_applies(params, n, n_features, n_groups, aggregate):
    """Whether a dpMMD fit runs over the cyclic group (public sizes and parameters only).

    ``cyclic=True``: yes (the plan refuses it without the aggregate); ``False``: no;
    ``"auto"``: for the aggregate (any number of groups) when
    ``min(N - 1, n_permutations) >= 999`` (the group and the request both have at least
    999 relabellings) and the memory plan of the held route
    (:func:`held_cyclic_fits`, N up to about 11 000 with the defaults) or of the blocked
    one (:mod:`._route_mmd_cyclic_blocked`, ``O(N)``) is within ``max_memory``.
    ``n_groups`` does not enter the rule: the route's cost and memory are those of one
    label vector, whatever the groups.
    """
    cyclic = params["cyclic"]
    if cyclic != "auto":
        return bool(cyclic)
    if not (aggregate and min(n - 1, params["n_permutations"]) >= AUTO_MIN_SHIFTS):
        return False
    if held_cyclic_fits(params, n, n_features):
        return True
    from ._route_mmd_cyclic_blocked import mmd_cyclic_blocked_memory_bytes
    from ._testbase import with_median_and_data

    memory = mmd_cyclic_blocked_memory_bytes(n, 19, params["n_jobs"])
    return with_median_and_data(memory, params, n, n_features) <= params["max_memory"]


def held_cyclic_fits(params, n, n_features):
    """Whether the held cyclic route's memory plan (:func:`mmd_cyclic_memory_bytes`, with
    the data) is within ``max_memory``; above it the cyclic aggregate runs by blocks."""
    from ._kernels import kernel_eval_bytes
    from ._testbase import with_median_and_data

    memory = mmd_cyclic_memory_bytes(n, 19, params["n_jobs"],
                                     eval_bytes=kernel_eval_bytes(params["kernel"]))
    return with_median_and_data(memory, params, n, n_features) <= params["max_memory"]


def label_coefficients(sizes):
    """The public ``G x G`` matrix ``C`` of dpMMD's statistic ``T = sum_ij K_ij C[l_i, l_j]``.

    Two groups: ``C = w w^T`` with ``w = (1/m, -1/n)`` (so ``C[l_i, l_j] = v_i v_j``, the
    same floats as the product of the permutation route's coefficients); three or more:
    the k-sample statistic's ``C[g, g] = (N - n_g) / (N^2 n_g)`` and ``C[g, h] = -1/N^2``
    (``1 / (N n_g) - 1 / N^2`` on the diagonal: the pooled term ``-1^T K 1 / N^2`` is
    folded in). Each entry is within ``3 u`` (relative) of its exact value: integers
    below ``2^53`` for ``N < 2^17`` and at most three roundings.
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    if sizes.size == 2:
        w = np.array([1.0 / sizes[0], -1.0 / sizes[1]])
        return np.multiply.outer(w, w)
    n = float(sizes.sum())
    C = np.full((sizes.size, sizes.size), -1.0 / (n * n))
    C[np.diag_indices(sizes.size)] = (n - sizes) / (n * n * sizes)
    return C


def _label_norms(sizes):
    """``(sum_ij abs(L_ij), ||L||_F)`` of ``L_ij = C[l_i, l_j]`` (exact, then rounded up
    by a relative ``2^-50``): two groups ``(4, N / (m n))``; k groups
    ``2 (N^2 - sum n_g^2) / N^2`` and ``sqrt(sum_g (N - n_g)^2 + N^2 - sum n_g^2) / N^2``."""
    from fractions import Fraction

    sizes = [int(s) for s in sizes]
    n = sum(sizes)
    sq = sum(s * s for s in sizes)
    if len(sizes) == 2:
        m, k = sizes
        form, frob2 = Fraction(4), Fraction(n * n, (m * k) ** 2)
    else:
        form = Fraction(2 * (n * n - sq), n * n)
        frob2 = Fraction(sum((n - s) ** 2 for s in sizes) + n * n - sq, n**4)
    up = 1.0 + 2.0**-50
    return float(form) * up, math.sqrt(float(frob2)) * up * up


def mmd_cyclic_abs_error(sizes, kappa, diameter):
    """Certified bound on the float64 error of each computed ``MMD_b`` of the cyclic
    route (the Gram values as evaluated taken as exact; |K| <= kappa).

    ``T_s = sum_ij K_ij L_{i+s,j+s}`` with ``L_ij = C[l_i, l_j]`` (:func:`label_coefficients`):
    ``sum_ij |K_ij L_ij| <= kappa sum_ij |L_ij|`` bounds every ``|T_s|`` (``4 kappa`` for
    two groups, ``||v||_1^2``; ``2 kappa (1 - sum_g n_g^2 / N^2)`` for k groups), and by
    Cauchy-Schwarz over the diagonals ``sum_d ||a_d|| ||b_d|| <= ||K||_F ||L||_F <=
    kappa N ||L||_F`` (two groups: ``||v v^T||_F = 1/m + 1/n``; see :func:`_label_norms`).
    ``L``'s entries are within ``4 u`` (relative) of exact.
    :func:`._cyclic.cyclic_form_abs_error` bounds the error of ``T_s``; then
    ``|sqrt(a) - sqrt(b)| <= sqrt(|a - b|)`` (a, b >= 0) and the rounding of the square
    root (``2 u D``).
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    n = int(sizes.sum())
    if sizes.size == 2:  # the two-group values as before (unchanged releases)
        form, frob = 4.0, 1.0 / int(sizes[0]) + 1.0 / int(sizes[1])
    else:
        form, frob = _label_norms(sizes)
    err_t = cyclic_form_abs_error(n, kappa * n * frob, form * kappa,
                                  coefficient_rounding=4 * _U64)
    return math.sqrt(err_t) + 2 * _U64 * diameter


def _workers(n_jobs, n_gammas):
    return 1 if n_jobs is None or n_jobs == 1 else min(n_gammas,
                                                       max(1, int(effective_n_jobs(n_jobs))))


def mmd_cyclic_memory_bytes(n, n_gammas=19, n_jobs=None, *, eval_bytes=16, threads=None):
    """Planned peak memory, in bytes, of :func:`mmd_cyclic_statistics` (an upper bound).

    With ``h = N // 2 + 1`` (the diagonals kept) and ``b = min(SPECTRA_BLOCK, h)``: while
    the distances are formed, the full matrix (``8 N^2``), its evaluation temporaries
    (``eval_bytes N^2``) and its kept diagonals (``8 h N``), beside the label spectra
    being formed (``16 h^2`` and one block, ``24 N b``); then the diagonals and the label
    spectra, and per thread (``n_jobs`` bandwidths, each on ``threads``: the BLAS thread
    count in force, when serial) one block of kernel diagonals, their transforms and
    the block's product (``40 N b``); plus the statistics and 1 MiB of small arrays.
    """
    n = int(n)
    h = n // 2 + 1
    b = min(SPECTRA_BLOCK, h)
    workers = _workers(n_jobs, n_gammas)
    if threads is None:
        threads = blas_threads()
    threads = workers if workers > 1 else max(1, int(threads))
    diagonals, labels = 8 * h * n, 16 * h * h
    forming = 8 * n * n + int(eval_bytes) * n * n + diagonals + labels + 24 * n * b
    computing = diagonals + labels + threads * 40 * n * b
    return max(forming, computing) + 8 * n * (n_gammas + 4) + 2**20


def mmd_cyclic_work(n, n_features, n_gammas):
    """The work of a cyclic aggregate release, in :class:`._timing.MachineRates` units.

    ``exp``: the distances once and, per bandwidth, the kernel on the diagonals
    ``0 .. N // 2`` (``N^2 / 2`` entries); ``tri``: the transforms and spectrum products,
    counted as ``9 N^2 log2 N`` triangular-product units per bandwidth and once for the
    labels (fitted to the default fit's CPU time at N = 1000 and 2000, d = 2: the best
    of three fits, 0.13 / 0.55 s, against the calibrated rates' exp parts 0.08 / 0.33 s).
    """
    dist = float(n) * n * (1 + n_features / 8.0)
    fft = 9.0 * float(n) * n * math.log2(max(n, 2))
    return {"mask": float(n), "exp": dist + n_gammas * float(n) * n / 2,
            "tri": (n_gammas + 1) * fft, "n": float(n)}


def _label_spectra(codes, C, block=SPECTRA_BLOCK):
    """The weighted spectra of ``L``'s diagonals ``0 .. N // 2``
    (:func:`._cyclic.cyclic_forms`), ``L_ij = C[codes_i, codes_j]``:
    ``b_d(i) = C[codes_i, codes_{(i+d) % N}]``."""
    codes = np.asarray(codes)
    n = codes.size
    half = n // 2 + 1
    weights = half_diagonal_weights(n)
    out = np.empty((half, n // 2 + 1), dtype=np.complex128)
    rows = np.arange(n)
    for d0 in range(0, half, block):
        d1 = min(d0 + block, half)
        idx = rows[d0:d1, None] + rows[None, :]
        np.remainder(idx, n, out=idx)
        shifted = codes[idx]
        del idx
        b = C[codes[None, :], shifted]
        del shifted
        out[d0:d1] = np.fft.rfft(b, axis=1)
        out[d0:d1] *= weights[d0:d1, None]
    return out


def ordered_rows(X, codes, rng):
    """The rows and their labels in one uniformly random order (``rng.permutation(N)``,
    nothing else drawn; never from the data), with the group sizes and the label
    coefficients ``C`` (:func:`label_coefficients`): ``(X, codes, sizes, C)``."""
    codes = np.asarray(codes)
    sizes = np.bincount(codes)
    order = rng.permutation(codes.size)
    codes = codes[order].astype(np.int8 if sizes.size <= 127 else np.int64)
    return X[order], codes, sizes, label_coefficients(sizes)


def mmd_cyclic_statistics(X, codes, rng, kernel, gammas, kernel_name, *, n_jobs=None,
                          progress=None, forms=False):
    """The N statistics of the cyclic bandwidth aggregate (observed first).

    ``rng`` draws one uniformly random order of the rows (``rng.permutation(N)``, nothing
    else); then for every ``gamma`` of the public grid the statistics ``MMD_b`` of the N
    cyclic shifts of the labels in that order, minus the centring ``h`` (as the
    permutation aggregate, :func:`._route_aggregate.mmd_aggregate_statistics`), and their
    maximum over the grid. Two groups: the two-group ``MMD_b``; three or more: the
    k-sample statistic (the permutation route's with ``ksample=True``), both the square
    root of ``T_s = sum_ij K_ij C[l_{i+s}, l_{j+s}]`` (:func:`label_coefficients`).
    ``forms=True`` returns the quadratic forms ``T_s`` of each bandwidth instead (shape
    ``(len(gammas), N)``; for tests).

    The pooled distances are computed once and their cyclic diagonals ``0 .. N // 2`` kept
    as rows (``4 N^2`` bytes; the full matrix is then freed); a bandwidth evaluates its
    kernel on those diagonals only, block by block (``exp_of_exponents``: the permutation
    route's Gram values bit for bit, half of them), each block transformed at once
    (:func:`._cyclic.diagonal_forms`); the centring's ``tr(K)`` and ``1^T K 1`` are the
    diagonals' weighted sums. Bandwidths run on ``n_jobs`` threads, a bandwidth's blocks
    on the BLAS thread count in force; every value is computed by the same calls
    whatever the thread counts.

    Returns
    -------
    statistics : ndarray of shape (N,)
    """
    X, codes, sizes, C = ordered_rows(X, codes, rng)
    n = codes.size

    def distance_diagonals():
        with limit_blas():  # the same values, no spinning BLAS workers
            return half_diagonals(gram_distances(kernel_name, X))

    if float(n) * n < _TWO_THREADS_MIN:  # too small to gain from a worker (~0.2 ms)
        spectra, Dd = _label_spectra(codes, C), distance_diagonals()
    else:
        spectra, Dd = run_in_threads([lambda: _label_spectra(codes, C), distance_diagonals])
    weights = half_diagonal_weights(n)
    serial = n_jobs is None or n_jobs == 1 or len(gammas) <= 1
    threads = (blas_threads() if serial and float(n) * n >= _TWO_THREADS_MIN else 1)

    def one(i):
        local = threading.local()

        def rows(d0, d1):
            buf = getattr(local, "buf", None)
            if buf is None or buf.shape[0] < d1 - d0:
                buf = local.buf = np.empty((min(SPECTRA_BLOCK, Dd.shape[0]), n))
            return gram_from_distances(Dd[d0:d1], gammas[i], buf[:d1 - d0])

        T, sums = diagonal_forms(rows, n, spectra, n_threads=threads)
        if progress is not None:
            progress.step()
        if forms:
            return T
        trace = float(sums[0]) - float(np.dot(weights, sums)) / n
        h = mmd_centre(trace, sizes, kernel.kappa, kernel.nonnegative)[0]
        return np.sqrt(np.maximum(T, 0.0)) - h

    parts = map_in_threads(one, list(range(len(gammas))), n_jobs)
    if forms:
        return np.vstack(parts)
    return np.max(np.vstack(parts), axis=0)


class MMDCyclicRoute(MMDAggregateRoute):
    """dpMMD's bandwidth aggregate over the N cyclic shifts (``" cyclic aggregate"``)."""

    name = "cyclic aggregate"

    def memory(self, params, n, n_groups):
        from ._kernels import kernel_eval_bytes

        return mmd_cyclic_memory_bytes(n, 19, params["n_jobs"],
                                       eval_bytes=kernel_eval_bytes(params["kernel"]))

    def n_statistics(self, params, n):
        return n

    def work(self, n, n_features, n_groups, params, gammas, median):
        return mmd_cyclic_work(n, n_features, len(gammas))

    def adjust(self, params, X, sizes, kernel, sensitivity, abs_error, method):
        # the aggregate's adjustment, from the FFT's certified error instead of the
        # permutation route's quadratic forms' (the same sensitivity and centring)
        return super().adjust(params, X, sizes, kernel, sensitivity,
                              mmd_cyclic_abs_error(sizes, kernel.kappa, kernel.diameter),
                              method + " cyclic")

    # what the progress counts and the computation (the blocked route overrides them)
    steps = "bandwidths"
    compute = staticmethod(mmd_cyclic_statistics)

    def n_steps(self, plan, n):
        return len(plan.gammas)

    def statistics(self, plan, X, y, rng):
        n = X.shape[0]
        progress = Progress(plan.progress, self.n_steps(plan, n), self.steps)
        progress.message(
            f"dpMMD {self.name}: {len(plan.gammas)} bandwidths x {n} cyclic shifts "
            f"by FFT on N = {n} rows" + predicted_note(plan)
            + ("" if plan.n_jobs not in (None, 1) else
               f"; n_jobs=-1 computes the {self.steps} on all cores"))
        stats = self.compute(X, plan.codes, rng, plan.kernel, plan.gammas, plan.kernel_name,
                             n_jobs=plan.n_jobs, progress=progress)
        return RouteStatistics(stats)
