"""DPHSICTest: the differentially private permutation HSIC test (dpHSIC)."""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from joblib import effective_n_jobs

from .._base import BasePrivateTest, check_numeric, validate_input
from .._budget import PrivacyBudget
from .._params import (
    Boolean,
    InstanceOf,
    Interval,
    InvalidParameterError,
    NoneValue,
    Options,
    RandomState,
)
from .._threads import blas_threads, limit_blas, run_in_threads
from ._bandwidth import (
    aggregate_sensitivity,
    bandwidth_grid,
    centre_abs_error,
    hsic_centre,
    hsic_centre_constants,
    map_in_threads,
    trace_abs_error,
    uses_aggregate,
)
from ._distributed import (
    check_finite,
    dask_feature_rows,
    is_dask,
    refuse_dask,
    validate_dask_input,
)
from ._features import (
    MAX_COMPONENTS,
    check_feature_kernel,
    draw_frequencies,
    feature_hsic_abs_error,
    feature_hsic_memory_bytes,
    feature_hsic_statistics,
    feature_shape,
    make_features,
    spectral_gamma,
)
from ._hsic_blocked import (
    BLOCKED_KERNELS,
    blocked_aggregate_statistics,
    choose_diagonal_block,
)
from ._hsic_time import HSICProgress, check_time, predict_seconds
from ._kernels import (
    EVAL_BYTES_NAMED,
    KERNEL_CONSTRAINT,
    KERNEL_PARAMS_CONSTRAINT,
    MEDIAN_EPSILON_SHARE,
    check_kernel_spec,
    kernel_eval_bytes,
    median_memory_bytes,
    private_median_gamma,
    resolve_kernel,
    uses_private_median,
)
from ._mmd import DEFAULT_MAX_MEMORY, MAX_PERMUTATIONS, check_memory, fitting_routes, warn_ignored
from ._results import make_permutation_result, noise_plan, plan_noise

__all__ = [
    "DPHSICTest",
    "hsic_abs_error",
    "hsic_cyclic_statistics",
    "hsic_memory_bytes",
    "hsic_permutation_statistics",
    "hsic_sensitivity",
    "hsic_squared_sensitivity",
]

# Elements of the gathered kernel values held at once by the numpy backend:
# small enough (512 KiB) for the column gather to read cache-resident rows.
_GATHER_ELEMENTS = 2**16
# The numpy backend uses threads when n^2 * (B + 1) reaches this.
_THREADS_MIN_WORK = 5e7
# Use the optional numba backend ("auto") when n^2 * (B + 1) reaches this
# (below it, loading the cached kernel, or compiling it once, costs more than
# it saves).
_NUMBA_MIN_WORK = 1e9
# The in-memory cyclic aggregate runs when its plan is at most this (and max_memory);
# above it (n > about 2600 with 19 x 19 bandwidths) the blocked one (_hsic_blocked).
IN_MEMORY_AGGREGATE_MAX = 2**30
# Diagonals gathered at once for their spectra (the aggregate's cyclic path).
_SPECTRA_BLOCK = 256
# Safety factor of the certified float32 error bound (see _blocked_error_bound);
# tests inflate it to force refinements.
_F32_BOUND_SAFETY = 2.0

# Optional accelerator, imported on first need (importing numba costs about
# 0.4 s and 50 MB); plain numpy is the default-installable path.
_NOT_LOADED = object()
_numba = _NOT_LOADED
_numba_trace_kernel = None
_PRECISIONS = ("auto", "float32", "float64")


def _load_numba():
    global _numba
    if _numba is _NOT_LOADED:
        try:
            import numba
        except ImportError:  # pragma: no cover - depends on the environment
            numba = None
        _numba = numba
    return _numba


def hsic_sensitivity(n_samples, diameter_x, diameter_y):
    """Global sensitivity ``2 (n - 1) D_x D_y / n^2`` of ``sqrt(HSIC_b)``.

    Parameters
    ----------
    n_samples : int
        Number n of pairs (public).
    diameter_x, diameter_y : float
        Public bounds on the feature diameters of the two kernels.

    Returns
    -------
    sensitivity : float
        ``4 (n - 1) / n^2`` for two kernels with values in [0, 1].
    """
    n = int(n_samples)
    return 2.0 * (n - 1) * float(diameter_x) * float(diameter_y) / (n * n)


def hsic_squared_sensitivity(n_samples, kappa_x, kappa_y):
    """Sensitivity ``16 kappa_x kappa_y / n`` of ``HSIC_b`` for ANY bounded kernels.

    Used when a kernel is a callable (not assumed positive definite), with
    ``|k| <= kappa_x`` and ``|l| <= kappa_y`` for every pair of rows.

    Notes
    -----
    ``n^2 HSIC_b = <HKH, L>`` with ``H = I - 11^T/n`` (and ``<HKH, L> =
    <HKH, HLH>``). Replacing pair 1 changes row and column a of K and b of L
    (``a = b`` for the observed pairing, ``a != b`` for a permuted one), each
    entry by at most ``2 kappa``: ``<HK'H, L'> - <HKH, L> = <E, HL'H> +
    <HKH, F>`` with E, F those changes. ``<HKH, F>`` involves only row and
    column b of HKH, whose absolute values sum to at most ``2 n kappa_x`` each
    (``(HKH)_bj = (K_bj - r_b) - (c_j - g)``: deviations of values in
    ``[-kappa_x, kappa_x]`` from their mean, at most ``n kappa_x`` in total each),
    so it is at most ``2 kappa_y * 4 n kappa_x``; likewise for the other term:
    ``|n^2 Delta HSIC_b| <= 16 n kappa_x kappa_y``.
    """
    return 16.0 * float(kappa_x) * float(kappa_y) / int(n_samples)


_U64 = 2.0**-53


def _gamma(k):
    return k * _U64 / (1.0 - k * _U64)


def hsic_abs_error(n_samples, kappa_x, kappa_y, diameter_x, diameter_y, *, cyclic=False,
                   squared=False):
    """Certified bound on the float64 error of each computed dpHSIC statistic.

    The Gram values as evaluated are taken as the kernels' values (``|K| <=
    kappa_x``, ``|L| <= kappa_y``); the bound covers the arithmetic after
    them, for either backend. Centring (column means over n terms, their mean,
    three additions) puts each entry of ``Kc`` within ``e_c = gamma_{2n+8} 8
    kappa_x`` of ``(HKH)_ij`` (``|HKH| <= 4 kappa_x``). The trace
    ``sum_ij Kc_ij L_ij`` passes each product through at most ``k =
    2^16 + 2n + 8`` roundings (numpy: an einsum over a 2^16-element block
    then the sum over blocks; numba: a row sum then the sum over rows), so it
    is within ``gamma_k 4 kappa_x kappa_y n^2 + e_c kappa_y n^2`` of the exact
    trace. The cyclic path replaces the sum by FFTs: each circular correlation
    of diagonals is within ``c log2(n) u ||a||_2 ||b||_2`` of exact
    (normwise FFT bound, Higham, Section 24.1), summed over n diagonals
    (``sum_d ||a_d|| ||b_d|| <= 4 kappa_x kappa_y n^2``), with ``c = 10 (log2 n +
    2) + n`` covering pocketfft's radices and the accumulation of the spectra.
    Everything is doubled as a safety factor. Then ``|sqrt(a) - sqrt(b)| <=
    sqrt(|a - b|)`` (a, b >= 0), the division by n and the rounding of the
    square root (``2 u D_x D_y``) give the bound on ``sqrt(HSIC_b)``; the
    squared statistic ``HSIC_b`` is the trace error over ``n^2``.
    """
    n = int(n_samples)
    kx, ky = float(kappa_x), float(kappa_y)
    if cyclic:
        rel = (10.0 * (math.log2(n) + 2.0) + n) * _U64 * 4.0
    else:
        rel = _gamma(2**16 + 2 * n + 8) * 4.0
    rel += _gamma(2 * n + 8) * 8.0
    err_t = 2.0 * rel * kx * ky * n * n
    if squared:
        return err_t / (n * n) + 8 * _U64 * kx * ky
    return math.sqrt(err_t) / n + 2 * _U64 * float(diameter_x) * float(diameter_y)


def hsic_memory_bytes(n_samples, n_permutations, *, cyclic=False, block=256,
                      block_rows=None, eval_bytes=EVAL_BYTES_NAMED):
    """Estimated peak memory, in bytes, of the dpHSIC statistics.

    A public function of n and B. Permutation path (blocked, see ``_hsic_statistics``):
    the float32 copy of L (``4 n^2``; during a refinement, once it is freed, the float64
    L rows of one sweep, at most ``max(4 n^2, 64 MiB)``), the B + 1 permutations (int32,
    ``4 n (B + 1)``), the temporaries of one block of ``block_rows`` rows of K~ (kernel
    evaluation, centring, weights, products, gathers, numpy threads: ``160 block_rows n``),
    the exact summation's chunk (64 MiB) and the B + 1 statistics and noise. Cyclic path:
    the centred ``Kc`` (float64) and either the centring's second matrix or the
    evaluation of ``L`` (``eval_bytes`` per entry, :func:`~._kernels.kernel_eval_bytes`):
    ``8 n^2 + max(16, eval_bytes) n^2``, then the gathered diagonals of ``block``
    diagonals at a time, their index arrays and spectra (``64 block n``).
    """
    n = int(n_samples)
    if cyclic:
        return 8 * n * n + max(16, int(eval_bytes)) * n * n + block * n * 64 + 64 * n
    rows = _BLOCK_ROWS if block_rows is None else block_rows
    rows = max(1, -(-int(rows) // _ROW_TILE)) * _ROW_TILE
    return (max(4 * n * n, _REFINE_MIN_BYTES) + 4 * n * (n_permutations + 1)
            + 160 * min(rows, n) * n + 64 * 2**20 + 64 * (n_permutations + 1))


def hsic_aggregate_memory_bytes(n_samples, n_permutations, n_x, n_y, *, cyclic,
                                workers=1, eval_bytes=EVAL_BYTES_NAMED):
    """Planned peak memory, in bytes, of :func:`hsic_aggregate_statistics`: an upper
    bound from public sizes (measured against it in ``tests/kernel/test_memory.py``).

    ``n_x`` and ``n_y`` bandwidths per side, ``workers`` x bandwidths computed at once
    (``n_jobs``), ``eval_bytes`` the peak bytes per entry of one kernel evaluation
    (:func:`~._kernels.kernel_eval_bytes`). With ``M = 8 n^2`` (one n x n float64
    matrix), ``S = 16 n (n // 2 + 1)`` (the complex spectra of one matrix's diagonals)
    and ``T = 64 n b`` (the gathered diagonals of one block of ``b`` diagonals, their
    index arrays and transforms):

    - cyclic: the y spectra (``n_y S``), then per worker the larger of a kernel
      evaluation and an x Gram matrix with its spectra (``M + S + T``);
    - permutations: the permutations (int32, ``4 n (B + 1)``), the y Gram matrices
      (``n_y M``), per worker the larger of a kernel evaluation and an x Gram matrix
      (``M``) plus the permutation threads' gathers (8 threads, or one below
      ``_THREADS_MIN_WORK``, of ``16 max(2^16, n) + 8 n`` bytes);

    plus the statistics (``8 (B + 1)`` per pair and worker) and 1 MiB of small arrays.
    The y side is computed first, one matrix at a time, within the same bound.
    """
    n, B = int(n_samples), int(n_permutations)
    M, evaluation = 8 * n * n, int(eval_bytes) * n * n
    if cyclic:
        B = n - 1
        S = 16 * n * (n // 2 + 1)
        per_worker = max(evaluation, M + S + 64 * n * _SPECTRA_BLOCK)
        held = n_y * S
    else:
        threads = 8 if float(n) * n * (B + 1) >= _THREADS_MIN_WORK else 1
        per_worker = max(evaluation, M) + threads * (16 * max(_GATHER_ELEMENTS, n) + 8 * n)
        held = n_y * M + 4 * n * (B + 1)
    small = 8 * (B + 1) * (n_y + 2) * (workers + 1) + 2**20
    return held + workers * per_worker + small


def _double_centre(K):
    """``H K H`` with ``H = I - 11^T / n`` (O(n^2), no matrix product)."""
    row = K.mean(axis=0)
    Kc = K - row
    Kc -= row[:, None]
    Kc += row.mean()
    return Kc


def draw_permutations(n, n_permutations, rng):
    """Row 0 the identity, rows 1..B independent uniform permutations of 0..n-1.

    One Fisher-Yates shuffle per row (``Generator.permuted``), no sorting.
    """
    dtype = np.int32 if n < 2**31 else np.int64
    out = np.empty((n_permutations + 1, n), dtype=dtype)
    out[:] = np.arange(n, dtype=dtype)
    rng.permuted(out[1:], axis=1, out=out[1:])
    return out


def _traces_numpy(Kc, L, perms):
    """``sum_ij Kc_ij L[p_i, p_j]`` for every row ``p`` of ``perms`` (numpy).

    Per permutation and block of rows: copy the rows of ``L`` (sequential),
    gather their columns while they are cache resident (blocks of 512 KiB:
    about 5x faster than whole-matrix gathers at n = 4000), then one dot
    product.
    """
    n = Kc.shape[0]
    out = np.empty(perms.shape[0])
    rows = max(1, _GATHER_ELEMENTS // n)
    for b, p in enumerate(perms):
        p = p.astype(np.intp)  # once, not at every take
        total = 0.0
        for start in range(0, n, rows):
            G = L.take(p[start:start + rows], axis=0).take(p, axis=1)
            # einsum, not BLAS ddot: no thread start-up per call
            total += np.einsum("ij,ij->", Kc[start:start + rows], G)
        out[b] = total
    return out


def _get_trace_kernel():  # pragma: no cover - needs numba
    global _numba_trace_kernel
    if _numba_trace_kernel is None:
        numba = _load_numba()
        njit, prange = numba.njit, numba.prange

        @njit(parallel=True, fastmath=True, cache=True)
        def block_traces(Kt, L, perms, start, acc):
            # acc[b] += sum over the block's rows i = start + r of
            # 2 sum_{j<i} Kt[r, j] L[p_i, p_j] + Kt[r, i] L[p_i, p_i]  (K~ and L symmetric:
            # one triangle). One source for every caller: the whole matrix (start = 0,
            # float64 L: the aggregate's exact path) or row blocks of K~ against the
            # float32 copy of L (the blocked path: half the memory traffic; the product
            # of two float32 values is exact in float64). Groups of 8 permutations share
            # each row of K~; the row of L is first copied (a sequential stream) into a
            # cache-resident buffer of L's dtype, then gathered (random reads straight
            # from L are latency-bound), except for the first rows, which gather so few
            # entries that the copy costs more. Every product is formed and summed in
            # float64; any summation order is covered by the error bounds (fastmath may
            # reassociate).
            n_perm, n = perms.shape
            n_groups = (n_perm + 7) // 8
            direct = n // 16
            for grp in prange(n_groups):
                b0 = 8 * grp
                b1 = min(b0 + 8, n_perm)
                buf = np.empty_like(L[0])
                for r in range(Kt.shape[0]):
                    i = start + r
                    Ki = Kt[r]
                    for b in range(b0, b1):
                        p = perms[b]
                        row = L[p[i]]
                        s = 0.0
                        if i < direct:
                            for j in range(i):
                                s += np.float64(Ki[j]) * np.float64(row[p[j]])
                        else:
                            for j in range(n):
                                buf[j] = row[j]
                            for j in range(i):
                                s += np.float64(Ki[j]) * np.float64(buf[p[j]])
                        acc[b] += 2.0 * s + np.float64(Ki[i]) * np.float64(row[p[i]])

        _numba_trace_kernel = block_traces
    return _numba_trace_kernel


@contextlib.contextmanager
def _numba_threads():  # pragma: no cover - needs numba
    """numba's parallel loops on at most the BLAS thread count in force (so that
    ``threadpoolctl.threadpool_limits`` caps them too); restored afterwards."""
    numba = _load_numba()
    before = numba.get_num_threads()
    numba.set_num_threads(max(1, min(blas_threads(), numba.config.NUMBA_NUM_THREADS)))
    try:
        yield
    finally:
        numba.set_num_threads(before)


def _resolve_backend(backend, work):
    if backend == "auto":
        backend = os.environ.get("SKDPTEST_HSIC_BACKEND", "auto")
    if backend == "auto":
        if work >= _NUMBA_MIN_WORK and _load_numba() is not None:
            return "numba"
        return "numpy"
    if backend == "numba" and _load_numba() is None:
        raise ImportError("backend='numba' needs the optional dependency numba.")
    if backend not in ("numpy", "numba"):
        raise ValueError(f"backend must be 'auto', 'numpy' or 'numba', got {backend!r}.")
    return backend


def permutation_traces(Kc, L, perms, backend="auto"):
    """``T_b = sum_ij Kc_ij L[p_b(i), p_b(j)]`` for each permutation ``p_b``.

    Exact: since ``Kc = H K H`` is doubly centred, ``tr(Kc H L_p H) = tr(Kc L_p)``,
    so only one of the two kernel matrices needs centring.
    """
    n = Kc.shape[0]
    work = float(n) * n * perms.shape[0]
    backend = _resolve_backend(backend, work)
    if backend == "numba":  # pragma: no cover - needs numba
        acc = np.zeros(perms.shape[0])
        with _numba_threads():
            _get_trace_kernel()(np.ascontiguousarray(Kc), np.ascontiguousarray(L),
                                np.ascontiguousarray(perms, dtype=np.int32), 0, acc)
        return acc
    n_threads = min(blas_threads(), 8) if work >= _THREADS_MIN_WORK else 1
    if n_threads == 1:
        return _traces_numpy(Kc, L, perms)
    # numpy's take and einsum release the GIL: threads over permutations, as many as
    # the BLAS thread count in force (threadpoolctl caps both).
    return np.concatenate(run_in_threads([lambda c=c: _traces_numpy(Kc, L, c)
                                          for c in np.array_split(perms, n_threads)]))


def _resolve_precision(precision):
    if precision == "auto":
        precision = os.environ.get("SKDPTEST_HSIC_PRECISION", "auto")
    if precision not in _PRECISIONS:
        raise ValueError(
            f"precision must be 'auto', 'float32' or 'float64', got {precision!r}."
        )
    return "float32" if precision == "auto" else precision


def _stat(traces, n, squared=False):
    # both maps are monotone in floating point (enclosures carry over)
    if squared:
        return traces / (float(n) * n)
    return np.sqrt(np.maximum(traces, 0.0)) / n


# -- the blocked exact path ------------------------------------------------------------------
#
# Canonical values. Every Gram value is computed by the same call whatever the block size:
# rows in tiles of _ROW_TILE at the fixed positions 0, T, 2T, ... (``kernel(data[t0:t1],
# data)``, its diagonal from ``kernel(data[t0:t1])`` so that e.g. a WhiteKernel keeps its
# noise). Both matrices are read by their lower triangles, mirrored: K_s[i, j] = K[max(i, j),
# min(i, j)] (row max(i, j) as evaluated), likewise L_s; K~ = H K_s H is formed row by row from
# the column means of K_s (accumulated tile by tile, in tile order) and mirrored the same way.
# The float64 statistic of a permutation p is the EXACTLY ROUNDED sum (_ExactSum) of the
# rounded products fl(w K~_ij L_s[p_i, p_j]) over j <= i (w = 2 below the diagonal, 1 on it):
# order free, hence the same whatever the blocks, the chunks of the refinement or the backend.
# The B permuted statistics are first computed from a float32 copy of L_s (the only n x n
# array held), with a certified enclosure of that float64 value (_blocked_error_bound); the
# core refines the few comparisons the enclosure leaves undecided.

# Rows per kernel evaluation (fixed positions: the canonical values above).
_ROW_TILE = 64
# Rows of K~ streamed at once (rounded up to a multiple of _ROW_TILE); the release does not
# depend on it (tests vary it).
_BLOCK_ROWS = 64
# Elements per chunk of the exact summation (its temporaries: about 48 bytes each).
_SUM_CHUNK = 2**20
# Floor, in bytes, of the float64 L rows held by one sweep of the refinement (otherwise the
# size of the float32 copy of L, freed by then: two sweeps).
_REFINE_MIN_BYTES = 64 * 2**20


class _ExactSum:
    """The exactly rounded sum of many float64 values, independent of their order.

    Each finite value is ``M 2**(e - 53)`` with an integer ``|M| < 2**53`` (``frexp``);
    M is cut into three 18-bit pieces whose sums are accumulated per exponent by
    ``bincount`` (float64 sums of integers below ``2**18 2**30``: exact), moved into a
    Python integer every ``2**30`` values; the final division is correctly rounded. A
    non-finite value makes the sum NaN (the caller refuses non-finite statistics).
    """

    _OFFSET = 1100  # frexp exponents of finite doubles lie in [-1073, 1024]
    _NBINS = 2200

    def __init__(self):
        self._bins = np.zeros((3, self._NBINS))
        self._count = 0
        self._total = 0
        self._finite = True

    def add(self, values):
        v = np.asarray(values, dtype=np.float64).ravel()
        for start in range(0, v.size, _SUM_CHUNK):
            c = v[start:start + _SUM_CHUNK]
            if not np.all(np.isfinite(c)):
                self._finite = False
                return
            m, e = np.frexp(c)
            M = (m * 2.0**53).astype(np.int64)  # exact: m has at most 53 bits
            idx = e + self._OFFSET
            for k in range(3):
                part = M >> (18 * k)
                if k < 2:
                    part = part & ((1 << 18) - 1)
                self._bins[k] += np.bincount(idx, weights=part, minlength=self._NBINS)
            self._count += c.size
            if self._count >= 2**30:
                self._flush()

    def _flush(self):
        for k in range(3):
            for b in np.flatnonzero(self._bins[k]):
                self._total += int(self._bins[k, b]) << int(18 * k + b)
        self._bins[:] = 0.0
        self._count = 0

    def value(self):
        if not self._finite:
            return math.nan
        self._flush()
        # units of 2**(-OFFSET - 53); int / int is correctly rounded
        return self._total / (1 << (self._OFFSET + 53))


def _gram_tile(kernel, data, t0, t1):
    """Rows ``t0 .. t1 - 1`` of the Gram matrix, as the canonical evaluation.

    BLAS on one thread: a multi-threaded distance product leaves OpenBLAS workers
    spinning for ~0.1 s, through the permutation loops that follow (see ``skdptest/_threads.py``).
    """
    with limit_blas():
        rows = np.array(kernel(data[t0:t1], data), dtype=np.float64)
        diag = np.diagonal(kernel(data[t0:t1]))
    rows[np.arange(t1 - t0), np.arange(t0, t1)] = diag
    return rows


def _gram_rows(kernel, data, start, stop):
    """Canonical rows ``start .. stop - 1`` (``start`` a multiple of ``_ROW_TILE``)."""
    n = len(data)
    return np.vstack([_gram_tile(kernel, data, t0, min(t0 + _ROW_TILE, n))
                      for t0 in range(start, stop, _ROW_TILE)])


def _lower_weights(start, stop, n):
    """``w[r, j]``: 2 for ``j < start + r``, 1 on the diagonal, 0 above it."""
    i = np.arange(start, stop)[:, None]
    j = np.arange(n)[None, :]
    return np.where(j < i, 2.0, np.where(j == i, 1.0, 0.0))


def _column_means(kernel, data):
    """Column means of ``K_s`` (the mirrored lower triangle) and their mean."""
    n = len(data)
    colsum = np.zeros(n)
    for t0 in range(0, n, _ROW_TILE):
        t1 = min(t0 + _ROW_TILE, n)
        low = _gram_tile(kernel, data, t0, t1) * (_lower_weights(t0, t1, n) > 0)
        diag = low[np.arange(t1 - t0), np.arange(t0, t1)]
        colsum += low.sum(axis=0)  # column j gets K[i, j], i >= j
        colsum[t0:t1] += low.sum(axis=1) - diag  # column i gets K[i, j], j < i
    m = colsum / n
    return m, float(m.mean())


def _centred_rows(kernel, data, m, g, start, stop):
    """Canonical rows of ``K~ = H K_s H`` (entries j <= i; the rest is not used)."""
    K = _gram_rows(kernel, data, start, stop)
    K -= m  # the same three operations as _double_centre
    K -= m[start:stop, None]
    K += g
    return K


def _l_scale(kappa_y):
    """A power of two ``2**k`` with ``|L| / 2**k <= 2**64`` (no float32 overflow)."""
    e = math.frexp(max(float(kappa_y), 1.0))[1]
    return 2.0 ** max(0, e - 64)


def _blocked_error_bound(n, k_abs_sum, l_max, scale):
    """Certified ``eta``: every float32-streamed trace is within eta of the canonical one.

    ``T^`` (computed from ``L32 = fl32(L_s / scale)``, products and sums in float64, times
    ``scale``) against ``T_c``, the canonical exactly rounded float64 trace. With
    ``S = l_max sum_ij |K~_ij| >= sum_ij |K~_ij L_s[p_i, p_j]|`` for every p, u = 2^-24,
    t = 2^-149 (float32 subnormal spacing, scaled back by ``scale``), u64 = 2^-53 and
    ``gamma_k = k u64 / (1 - k u64)``:

    - rounding L to float32: ``|a c' - a c| <= u |a c| + t |a|``, summed:
      ``u S + t sum|K~|``;
    - each product passes through at most 2n + 1 float64 roundings (the product, the
      row sum over j < i in any order, the diagonal term, the sum over rows): within
      ``gamma_{2n+1} ((1 + u) S + t sum|K~|)`` of the exact sum of ``w a c'``;
    - ``T_c``: the rounded products (u64 each) and one final rounding: ``2.01 u64 S``;
    - float64 underflow: at most ``2^-1074`` per operation, ``n^2 (2n + 3)`` operations.

    The sum is multiplied by ``_F32_BOUND_SAFETY`` (2), which also covers the rounding of
    ``S`` (relative error below ``gamma_{n^2}``) and of this formula.
    """
    u, u64, t = 2.0**-24, 2.0**-53, 2.0**-149 * scale
    k = 2 * n + 1
    gamma = k * u64 / (1.0 - k * u64)
    s = l_max * k_abs_sum
    eta = (u * s + t * k_abs_sum + gamma * ((1 + u) * s + t * k_abs_sum)
           + 2.01 * u64 * s + 2.0 * n * n * (2 * n + 3) * 2.0**-1074)
    return _F32_BOUND_SAFETY * eta


def _block_traces_numpy(Kw, L32, perms, start, stop):
    """``sum_ij Kw_ij L32[p_(start+i), p_j]`` for each permutation (float64 products)."""
    out = np.empty(perms.shape[0])
    for b, p in enumerate(perms):
        p = p.astype(np.intp)
        G = L32.take(p[start:stop], axis=0).take(p, axis=1)
        out[b] = np.einsum("ij,ij->", Kw, G)  # G is cast to float64
    return out


def _build_l32(kernel_y, Y, scale):
    """The float32 copy of ``L_s / scale`` (exactly symmetric) and ``max |L_s|``."""
    n = len(Y)
    L32 = np.empty((n, n), dtype=np.float32)
    l_max = 0.0
    for t0 in range(0, n, _ROW_TILE):
        t1 = min(t0 + _ROW_TILE, n)
        rows = _gram_tile(kernel_y, Y, t0, t1)
        low = rows * (_lower_weights(t0, t1, n) > 0)
        l_max = max(l_max, float(np.max(np.abs(low))))
        L32[t0:t1] = rows / scale  # scale: a power of two (exact)
    for t0 in range(0, n, _ROW_TILE):  # mirror the lower triangle
        t1 = min(t0 + _ROW_TILE, n)
        D = L32[t0:t1, t0:t1]
        L32[t0:t1, t0:t1] = np.tril(D) + np.tril(D, -1).T
        L32[t0:t1, t1:] = L32[t1:, t0:t1].T
    return L32, l_max


def _float32_pass(X, Y, perms, kernel_x, kernel_y, m, g, backend, block_rows):
    """Observed canonical trace and the float32-streamed permuted traces, one pass."""
    n = len(X)
    scale = _l_scale(kernel_y.kappa)
    L32, l_max = _build_l32(kernel_y, Y, scale)
    observed = _ExactSum()
    k_abs_sum = 0.0
    acc = np.zeros(perms.shape[0] - 1)
    rest = np.ascontiguousarray(perms[1:], dtype=np.int32)
    n_threads = 1
    if backend == "numpy" and float(n) * n * rest.shape[0] >= _THREADS_MIN_WORK:
        n_threads = min(blas_threads(), 8)  # threadpoolctl caps it, as it caps BLAS
    chunks = np.array_split(rest, n_threads)
    for s in range(0, n, block_rows):
        e = min(s + block_rows, n)
        Kt = _centred_rows(kernel_x, X, m, g, s, e)
        W = _lower_weights(s, e, n)
        Kw = Kt * W  # exact (w in {0, 1, 2})
        k_abs_sum += float(np.abs(Kw).sum())
        Lrows = _gram_rows(kernel_y, Y, s, e)
        observed.add((Kw * Lrows)[W > 0])
        del Lrows
        if backend == "numba":  # pragma: no cover - needs numba
            with _numba_threads():
                _get_trace_kernel()(np.ascontiguousarray(Kt), L32, rest, s, acc)
        elif n_threads == 1:
            acc += _block_traces_numpy(Kw, L32, rest, s, e)
        else:
            acc += np.concatenate(run_in_threads(
                [lambda c=c, Kw=Kw, s=s, e=e: _block_traces_numpy(Kw, L32, c, s, e)
                 for c in chunks]))
    eta = _blocked_error_bound(n, k_abs_sum, l_max, scale)
    return observed.value(), acc * scale, eta


def _exact_traces(X, Y, perms, idx, kernel_x, kernel_y, m, g, block_rows):
    """The canonical float64 traces of the permutations ``perms[idx]``.

    Sweeps over chunks of canonical L rows held in float64 (at most about the size of the
    float32 copy, which is freed by then); in each, the K~ rows are streamed and every
    product ``w K~_ij L_s[p_i, p_j]`` whose row ``max(p_i, p_j)`` lies in the chunk is added
    to the permutation's exact sum (order free: the chunks and blocks do not matter).
    """
    n = len(X)
    tile_bytes = 8 * n * _ROW_TILE
    chunk = max(1, max(4 * n * n, _REFINE_MIN_BYTES) // tile_bytes) * _ROW_TILE
    sums = [_ExactSum() for _ in idx]
    sel = [np.asarray(perms[b], dtype=np.intp) for b in idx]
    for c0 in range(0, n, chunk):
        c1 = min(c0 + chunk, n)
        Lc = _gram_rows(kernel_y, Y, c0, c1)
        for s in range(0, n, block_rows):
            e = min(s + block_rows, n)
            W = _lower_weights(s, e, n)
            Kw = _centred_rows(kernel_x, X, m, g, s, e) * W
            live = W > 0
            for acc, p in zip(sums, sel, strict=True):
                a = p[s:e, None]
                hi = np.maximum(a, p[None, :])
                take = live & (hi >= c0) & (hi < c1)
                lo = np.minimum(a, p[None, :])[take]
                acc.add(Kw[take] * Lc[hi[take] - c0, lo])
        del Lc
    return np.array([acc.value() for acc in sums])


def _hsic_statistics(X, Y, n_permutations, rng, kernel_x, kernel_y, backend="auto",
                     precision="auto", squared=False, block_rows=None):
    """The B + 1 ``sqrt(HSIC_b)`` statistics by the blocked exact path.

    Returns ``(statistics, bounds, refine)`` for :func:`make_permutation_result`. Only a
    float32 copy of L is held (``4 n^2`` bytes); rows of ``K~ = H K H`` are computed on
    the fly, ``block_rows`` at a time. The observed statistic is the canonical float64
    value (see the comment above ``_ROW_TILE``); the B permuted ones are float32-streamed
    approximations, ``bounds = (lower, upper)`` certified enclosures of their canonical
    values and ``refine(idx)`` computes those. ``precision="float64"`` (or the environment
    variable ``SKDPTEST_HSIC_PRECISION``) computes every statistic canonically (bounds and
    refine None; slow: a test reference). The canonical values, hence the release, do not
    depend on ``block_rows`` or ``backend``.
    """
    n = len(X)
    if block_rows is None:
        block_rows = _BLOCK_ROWS
    block_rows = max(1, -(-int(block_rows) // _ROW_TILE)) * _ROW_TILE
    perms = draw_permutations(n, n_permutations, rng)
    m, g = _column_means(kernel_x, X)
    precision = _resolve_precision(precision)
    if precision == "float64":
        traces = _exact_traces(X, Y, perms, range(perms.shape[0]), kernel_x, kernel_y, m, g,
                               block_rows)
        return _stat(traces, n, squared), None, None
    backend = _resolve_backend(backend, float(n) * n * perms.shape[0])
    t0, approx, eta = _float32_pass(X, Y, perms, kernel_x, kernel_y, m, g, backend,
                                    block_rows)
    traces = np.r_[t0, approx]
    # outward rounding: lower <= T^ - eta and upper >= T^ + eta exactly
    lower = np.nextafter(traces - eta, -np.inf)
    upper = np.nextafter(traces + eta, np.inf)
    lower[0] = upper[0] = t0

    def refine(idx):
        # holds no float32 copy: L32 is freed when _float32_pass returns
        return _stat(_exact_traces(X, Y, perms, idx, kernel_x, kernel_y, m, g, block_rows),
                     n, squared)

    # max(., 0), sqrt and / n are monotone in floating point: the enclosures of the
    # traces carry over to the statistics
    return (_stat(traces, n, squared), (_stat(lower, n, squared), _stat(upper, n, squared)),
            refine)


def hsic_permutation_statistics(X, Y, n_permutations, rng, kernel_x, kernel_y,
                                backend="auto", squared=False, block_rows=None):
    """The B + 1 (non-private) ``sqrt(HSIC_b)`` statistics, observed first.

    ``sqrt(HSIC_b) = sqrt(sum_ij K_ij (H L H)_ij) / n``; a permuted statistic pairs
    ``x_i`` with ``y_{p(i)}``. Each is the canonical float64 value of the blocked path
    (the value a release compares; exactly rounded sums), whatever ``backend``.

    Returns
    -------
    statistics : ndarray of shape (n_permutations + 1,)
    """
    return _hsic_statistics(X, Y, n_permutations, rng, kernel_x, kernel_y, backend=backend,
                            precision="float64", squared=squared, block_rows=block_rows)[0]


def hsic_cyclic_statistics(X, Y, rng, kernel_x, kernel_y, block=256, squared=False):
    """``sqrt(HSIC_b)`` for all n cyclic re-pairings, observed first.

    The rows are first put in a uniformly random order (data independent),
    then ``y`` is shifted cyclically: ``T_s = sum_ij Kc_ij L_{i+s, j+s}``
    (indices mod n) for s = 0 .. n - 1. With ``a_d(i) = Kc_{i, i+d}`` and
    ``b_d(i) = L_{i, i+d}``, ``T_s = sum_d sum_i a_d(i) b_d(i + s)``: one circular
    cross-correlation per diagonal, all by FFT in O(n^2 log n), ``block``
    diagonals at a time.

    Returns
    -------
    statistics : ndarray of shape (n,)
    """
    n = len(X)
    order = rng.permutation(n)
    X, Y = X[order], Y[order]
    Kc = _double_centre(kernel_x(X))
    L = kernel_y(Y)
    rows = np.arange(n)
    spectrum = np.zeros(n // 2 + 1, dtype=np.complex128)
    for d0 in range(0, n, block):
        cols = (rows[None, :] + np.arange(d0, min(d0 + block, n))[:, None]) % n
        fa = np.fft.rfft(Kc[rows[None, :], cols], axis=1)
        fb = np.fft.rfft(L[rows[None, :], cols], axis=1)
        spectrum += np.einsum("ij,ij->j", np.conj(fa), fb)
    traces = np.fft.irfft(spectrum, n=n)
    return _stat(traces, n, squared)


def _centred_gram(kernel, data, centre=True):
    """``(HKH, tr(K) - 1^T K 1 / n)`` of one marginal's Gram matrix (BLAS on one
    thread, as in :func:`_gram_tile`); ``centre=False``: ``(None, trace)``.

    ``HKH`` is formed in place (the operations of :func:`_double_centre`, the same
    values): one n x n matrix held, not two.
    """
    with limit_blas():
        K = kernel(data)
    trace = float(np.trace(K)) - float(K.sum()) / len(data)
    if not centre:
        return None, trace
    row = K.mean(axis=0)
    K -= row
    K -= row[:, None]
    K += row.mean()
    return K, trace


def _diagonal_spectra(M, block=_SPECTRA_BLOCK):
    """``rfft`` of every cyclic diagonal ``d -> (M[i, i + d])_i`` of ``M`` (n x n).

    ``block`` diagonals at a time (each transform is of one row: the same values as
    one call on all of them), so that the gathered diagonals and their index arrays
    take ``O(block n)`` memory besides the ``(n, n // 2 + 1)`` complex result.
    """
    n = M.shape[0]
    rows = np.arange(n)
    out = np.empty((n, n // 2 + 1), dtype=np.complex128)
    for d0 in range(0, n, block):
        d1 = min(d0 + block, n)
        out[d0:d1] = np.fft.rfft(M[rows[None, :], (rows[None, :] + rows[d0:d1, None]) % n],
                                 axis=1)
    return out


def hsic_aggregate_statistics(X, Y, n_permutations, rng, kernel_x, kernel_y, gammas_x,
                              gammas_y, *, cyclic=False, n_jobs=None, progress=None):
    """The B + 1 statistics of the dpHSIC bandwidth aggregate (see ``_bandwidth``).

    For every pair of the public grids (``None`` in a grid: the kernel as given) the
    statistics ``s_b = sqrt(HSIC_b)`` with the SAME re-pairings (random permutations
    drawn once, or all n cyclic shifts of one random order), minus the re-pairing
    invariant ``h = sqrt(max(tr(HKH) tr(HLH) / ((n - 1) n^2), f))``; returns their
    maximum over the pairs, for each b. The x bandwidths are computed on ``n_jobs``
    threads; every value is computed by the same calls whatever ``n_jobs``.
    Permutations: each pair costs one :func:`permutation_traces` (float64). Cyclic:
    the diagonal spectra of every centred x Gram matrix and every y Gram matrix are
    computed once; a pair costs one sum of n spectrum products.

    Returns
    -------
    statistics : ndarray of shape (B + 1,) (B = n - 1 when ``cyclic``)
    """
    n = len(X)
    kxs = [kernel_x if g is None else kernel_x.with_gamma(g) for g in gammas_x]
    kys = [kernel_y if g is None else kernel_y.with_gamma(g) for g in gammas_y]
    nonneg = (kernel_x.nonnegative, kernel_y.nonnegative)
    kappas = (kernel_x.kappa, kernel_y.kappa)
    if cyclic:
        order = rng.permutation(n)  # as hsic_cyclic_statistics
        X, Y = X[order], Y[order]
    else:
        perms = draw_permutations(n, n_permutations, rng)
    # one y Gram matrix at a time: its trace term, then what the pairs read (the
    # matrix, or its diagonal spectra); see aggregate_memory_bytes
    traces_y = [_centred_gram(k, Y, centre=False)[1] for k in kys]
    if cyclic:
        ys = [_diagonal_spectra(k(Y)) for k in kys]
    else:
        ys = [np.ascontiguousarray(k(Y)) for k in kys]

    def one(i):
        Kc, tx = _centred_gram(kxs[i], X)
        if cyclic:
            fa = _diagonal_spectra(Kc)
            del Kc  # only its spectra are read from here
            np.conjugate(fa, out=fa)
        out = []
        for L, ty in zip(ys, traces_y, strict=True):
            if cyclic:
                traces = np.fft.irfft(np.einsum("ij,ij->j", fa, L), n=n)
            else:
                traces = permutation_traces(np.ascontiguousarray(Kc), L, perms,
                                            backend="numpy")
            h, _ = hsic_centre(tx, ty, n, kappas, nonneg)
            out.append(_stat(traces, n) - h)
        if progress is not None:
            progress.step()
        return np.max(np.vstack(out), axis=0)

    parts = map_in_threads(one, list(range(len(kxs))), n_jobs)
    return np.max(np.vstack(parts), axis=0)


class DPHSICTest(BasePrivateTest):
    r"""Differentially private permutation HSIC independence test.

    Tests H0: the rows of ``X`` are independent of the paired rows of ``y``,
    with the dpHSIC test of Kim & Schrab [1]_: the plug-in statistic
    :math:`\sqrt{\mathrm{HSIC}_b}` on the observed pairs and on
    ``n_permutations`` random re-pairings, each privatised by independent
    Laplace noise of scale :math:`2\Delta/\xi`,
    :math:`\xi = \varepsilon + \log(1/(1-\delta))`, and the rank p-value of
    the noisy observed statistic.

    Privacy: (``epsilon``, ``delta``)-DP for one fit (or one ``score``) under
    the neighbouring relation *replace one pair* :math:`(x_i, y_i)`. The
    number of pairs is public. ``delta = 0`` gives pure ``epsilon``-DP.

    **Released** (everything that leaves a fit): ``result_.pvalue`` and
    ``result_.reject`` (a function of it); ``gamma_`` and ``y_gamma_``
    (= ``result_.gamma``, ``result_.y_gamma``) with the private median
    heuristic; public quantities (n, ``n_permutations``, ``sensitivity``,
    ``noise_scale``...). The noisy observed statistic is *not* released (it
    shares its noise with the p-value; the permutation theorem covers the
    p-value only). Joint argument: each private bandwidth is a
    (``0.05 epsilon``)-DP exponential mechanism on one marginal (invariant
    under re-pairing); the p-value is (``epsilon - `` the bandwidth shares,
    ``delta``)-DP given the bandwidths (Theorem 2 of [1]_); by sequential
    composition the whole fit is (``epsilon``, ``delta``)-DP.

    Parameters
    ----------
    kernel : str, sklearn.gaussian_process.kernels.Kernel or callable, default="rbf"
        Kernel on ``X``: see :class:`DPMMDTest` for the accepted forms and
        bounds. Default: the bandwidth aggregate over a public grid (rbf or
        laplacian without a ``gamma``), on both kernels, every pair of the two
        grids (19 x 19), with one DP p-value and no extra privacy cost (see
        :class:`DPMMDTest` and ``skdptest/kernel/_bandwidth.py``). An explicit
        ``gamma`` gives the single-bandwidth test, ``{"gamma": None}`` the
        previous default ``1 / n_features``.
        If either kernel is a callable (not assumed positive definite, values
        clipped to ``[-bound, bound]``), the squared statistic ``HSIC_b`` is
        privatised with a sensitivity valid for any bounded kernels (Notes).
    kernel_params : dict, default=None
        Keyword arguments of ``kernel``. ``{"gamma": "median"}`` (rbf,
        laplacian) asks for a private median heuristic on ``X`` alone, bought
        with 5 % of ``epsilon`` (see :class:`DPMMDTest`); the total charged is
        still ``(epsilon, delta)``.
    kernel_bound : float, default=None
        Public bound on ``k(x, x)`` for kernels without a known one (checked on
        the data), or on ``|k(x, x')|`` for a callable (enforced by clipping).
        At most ``2**200``.
    y_kernel : str, Kernel or callable, default="rbf"
        Kernel on ``y`` (default ``gamma = 1 / n_targets``).
    y_kernel_params : dict, default=None
        Keyword arguments of ``y_kernel`` (``{"gamma": "median"}`` as for
        ``kernel_params``, on ``y`` alone, another 5 % of ``epsilon``).
    y_kernel_bound : float, default=None
        Public bound on ``l(y, y)`` for ``y_kernel``.
    epsilon : float, default=1.0
        Privacy loss of one fit, > 0.
    delta : float, default=0.0
        Failure probability, in [0, 1).
    alpha : float, default=0.05
        Level of the test.
    n_permutations : int, default=2000
        Number B of random re-pairings, in [1, 10**6]. With ``cyclic`` in force
        (``cyclic=True``, or "auto" with the bandwidth aggregate) the n - 1 cyclic
        shifts are used instead, and a value other than the default raises
        :class:`~skdptest.PrivacyLeakWarning` (so do ``n_jobs``, ``n_components``,
        ``feature_map`` and the kernel bounds where the chosen route ignores them).
    cyclic : bool or "auto", default="auto"
        "auto": True when the bandwidth aggregate is used (its 361 bandwidth
        pairs are cheap by FFT only; B = n - 1, so n >= 20 is needed to reject
        at alpha = 0.05), else False. True: instead of random permutations,
        put the rows in a random order and use
        all n cyclic shifts of ``y`` (B = n - 1, ``n_permutations`` ignored): an
        exact randomization test over the cyclic group (the law of i.i.d. pairs
        under H0 is invariant under each shift), computed by FFT in
        O(n^2 log n) in total instead of O(n^2 B).
    max_memory : int, default=4 * 2**30
        Public limit, in bytes, on the planned peak memory of a release, an
        upper bound (see :func:`hsic_memory_bytes`: the exact permutation path
        holds a float32 copy of L, ``4 n^2`` bytes, plus ``4 n (B + 1)`` for the
        permutations and O(n) block temporaries: n = 20 000, B = 2000 plans
        1.89 GiB; the cyclic path float64 n x n matrices, ``24 n^2`` and more;
        the aggregate, ``hsic_aggregate_memory_bytes``, the spectra of its 19 y
        Gram matrices, about ``152 n^2``). When the default cyclic aggregate
        (rbf or laplacian kernels) plans more than ``max_memory`` or 1 GiB (n
        above about 2600 with 19 x 19 bandwidths), it runs by diagonal blocks
        instead (``result_.method`` "dpHSIC cyclic aggregate blocked", see
        ``skdptest/kernel/_hsic_blocked.py``): the same statistic, sensitivity
        and noise, ``O(block n)`` memory per bandwidth plus ``16 n_x n_y (n / 2
        + 1)`` bytes of accumulated spectra: n = 20 000 plans 1.2 GiB and
        n = 10**5 3.5 GiB. A fit that fits no route is refused before the
        budget is charged, naming the routes that fit.
    max_time : float, default=None
        Public limit, in seconds, on the predicted running time of a fit: a fit
        predicted to take longer is refused before the budget is charged. The
        prediction (``skdptest/kernel/_hsic_time.py``) counts the route's
        dominant operations from public sizes (n, the numbers of features, B,
        the grids) and times them on this machine with a ~0.1 s
        micro-benchmark on public arrays; the random-features route is not
        predicted (never refused). None: no limit.
    n_jobs : int, default=None
        Threads (joblib) over the x bandwidths of the aggregate (BLAS capped
        at one thread per worker); -1 uses all cores. The release does not
        depend on it.
    verbose : {0, 1} or "auto", default="auto"
        1 prints the predicted running time, then the progress (work units
        done, elapsed, ETA) and one-time hints (``cyclic=True``, ``n_jobs=-1``)
        to stderr; "auto" does so when the fit is predicted to take more than
        10 s (see ``max_time``); 0 prints nothing. Nothing printed is derived
        from the data.
    method : {"exact", "features"}, default="exact"
        ``"features"``: random Fourier features on both sides (``kernel`` and
        ``y_kernel`` rbf or laplacian; each ``gamma`` numeric, ``"median"`` or, if
        absent, ``1 / n_features``), ``n_components`` frequencies per side drawn from
        the generator (never from the data). The statistic is the Frobenius norm of the
        feature cross-covariance, ``sqrt(HSIC_b)`` of the feature kernels (positive
        definite, diameter ``2R``, ``R = 1 + 2^-16``): sensitivity
        ``8 (n - 1) R^2 / n^2``, certified float64 error
        (:func:`~skdptest.kernel._features.feature_hsic_abs_error`), O(n D^2 B) time,
        O(n D) memory. Random permutations only (``cyclic=True`` is refused); the
        result's ``method`` is ``"dpHSIC features"``. **Dask input**: with
        ``"features"``, ``X`` (and ``y``) may be dask arrays or dataframes; a
        permutation pairs rows of different chunks, so no per-chunk sums exist: the
        quantised feature rows (never the raw rows) are computed on the workers and
        gathered to the client (``4 n (Mx + My)`` bytes, M features per row and side),
        where the permutations run; the release is the numpy input's, bit for bit.
        ``"exact"`` (and a private median bandwidth) refuse dask input before the
        charge.
    n_components : int, default=64
        Number D of random frequencies per side (2D features) with
        ``method="features"``, in [1, 2**14]; ignored otherwise.
    feature_map : {"fourier", "squared"}, default="fourier"
        With ``method="features"``: ``"fourier"``, the ``2 D`` random Fourier features
        ``phi``; ``"squared"``, the ``D (2 D + 1)`` features of ``phi (x) phi``, whose
        kernel ``(phi(x)^T phi(x'))^2`` is never negative, so the feature diameter is
        about ``sqrt(2)`` instead of 2 and the privacy noise half as large (both
        sides) (frequencies drawn for ``gamma / 2``: the squared kernel
        approximates the same rbf or laplacian kernel). Costs ``D + 1/2`` times the
        features of ``"fourier"``: the choice for moderate N and small epsilon (see
        :func:`~skdptest.kernel._features.feature_shape`).
    budget : PrivacyBudget, default=None
        Ledger charged ``(epsilon, delta)`` by every ``fit`` and ``score``.
    random_state : None, int, RandomState instance or Generator, default=None
        Source of the permutations and the noise. For tests and reproducible examples only: any
        value other than ``None`` raises :class:`~skdptest.FixedRandomStateWarning` (whoever holds
        the seed, the generator or a pickle of the estimator can replay the noise, and equal seeds
        correlate the noise of different fits). ``None`` draws fresh OS entropy and keeps nothing
        from which the noise could be regenerated.

    Attributes
    ----------
    result_ : PermutationTestResult
        The private result of the last fit.
    gamma_ : float or None
        The privately chosen ``gamma`` of ``kernel`` with
        ``kernel_params={"gamma": "median"}`` (a DP release, covered by the
        composition above), else None.
    y_gamma_ : float or None
        The same for ``y_kernel``.
    gamma_grid_, y_gamma_grid_ : ndarray of shape (19,) or None
        The public bandwidth grids of the aggregate (None for a side with a
        fixed kernel); ``result_.method`` then ends in ``" aggregate"``.
    n_features_in_ : int
        Number of features of ``X`` seen in ``fit``.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Feature names, when ``X`` is a DataFrame with string column names.

    See Also
    --------
    DPMMDTest : The private permutation two-sample test.

    Notes
    -----
    :math:`\sqrt{\mathrm{HSIC}_b} = \|\hat C_{xy}\|_{HS}` with the empirical
    cross-covariance operator
    :math:`\hat C = \frac1n\sum_i \phi(x_i)\otimes\psi(y_i) - \hat\mu_x\otimes\hat\mu_y`.
    Write the part of :math:`\hat C` that depends on pair 1 as
    :math:`\frac{n-1}{n^2}[(\phi - m_x)\otimes(\psi - m_y) - m_x\otimes m_y]`,
    :math:`m_x, m_y` the mean embeddings of the other :math:`n-1` pairs.
    Since :math:`\|\phi - m_x\| \le D_x` (a convex combination of feature
    differences), replacing the pair moves :math:`\hat C` by at most
    :math:`\frac{n-1}{n^2}\,2 D_x D_y`, so

    .. math:: \Delta = 2(n - 1) D_x D_y / n^2,

    with :math:`D` the feature diameter of each kernel (:math:`\sqrt{2\kappa}` for
    values in :math:`[0, \kappa]`, :math:`2\sqrt\kappa` for a positive definite
    kernel with :math:`k(x,x)\le\kappa`); two kernels in [0, 1] give
    :math:`4(n-1)/n^2`. For a permuted statistic the replaced pair's ``x`` and
    ``y`` land in two different pairs; the same computation (each affected
    term is a feature difference times a centred feature, of norm at most
    :math:`(n-1)D/n`) gives the same bound, so it holds for all B + 1 values.

    All permuted statistics are exact (up to float64 rounding): with :math:`\tilde K = HKH`,
    :math:`n^2\,\mathrm{HSIC}_b(\pi) = \sum_{ij}\tilde K_{ij} L_{\pi(i)\pi(j)}`.
    Blocked computation (``cyclic=False``, one bandwidth): only a float32 copy
    of L is held; rows of :math:`\tilde K` are computed on the fly from 64-row
    kernel tiles at fixed positions, both matrices read by their lower
    triangles. The float64 value of each statistic is the exactly rounded sum
    of its rounded products (independent of the block size, the backend and
    the thread count). The B permuted traces are streamed from the float32 L
    (a compiled loop when the optional ``numba`` is installed, else numpy
    gathers; ``SKDPTEST_HSIC_BACKEND`` = ``numpy``, ``numba`` or ``auto``)
    with a certified bound :math:`|\hat T_b - T_b| \le \eta` (see
    ``_blocked_error_bound``): each comparison :math:`s_b + N_b \ge \tilde
    s_0` is decided from the enclosure of :math:`s_b` when it can be
    (floating-point addition, square root and division are monotone) and
    from the float64 value otherwise (recomputed by sweeps over float64 L
    rows; about one comparison in a thousand at n = 4000, eps = 1). The
    p-value and the decision are therefore those of the all-float64
    computation for the same seed, with the same privacy and validity;
    ``SKDPTEST_HSIC_PRECISION=float64`` computes every statistic in float64.

    **Callable kernels.** With a callable ``kernel`` or ``y_kernel`` the
    statistic is :math:`\mathrm{HSIC}_b = \langle HKH, L\rangle / n^2` and
    :math:`\Delta = 16\kappa_x\kappa_y/n` for any kernels with
    :math:`|k| \le \kappa_x`, :math:`|l| \le \kappa_y`
    (:func:`hsic_squared_sensitivity`).

    **Floating point.** The noise is calibrated to :math:`\Delta + 2\eta`,
    :math:`\eta` (``result_.abs_error``) a certified bound on the float64
    rounding of each statistic computed from the Gram values
    (:func:`hsic_abs_error`); non-finite statistics are refused. Everything
    that can refuse the input (parameters, kernels, memory) runs before the
    budget is charged.

    References
    ----------
    .. [1] I. Kim and A. Schrab, "Differentially Private Permutation Tests:
       Applications to Kernel Methods", arXiv:2310.19043, 2023.
    .. [2] A. Gretton, K. Fukumizu, C. H. Teo, L. Song, B. Schoelkopf and
       A. Smola, "A Kernel Statistical Test of Independence", NIPS 2007.

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest import DPHSICTest
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 2))
    >>> y = X[:, 0] + 0.5 * rng.normal(size=400)
    >>> result = DPHSICTest(epsilon=1.0, random_state=0).test(X, y)
    >>> bool(result.reject), result.method
    (True, 'dpHSIC cyclic aggregate')
    """

    _requires_y = True

    _parameter_constraints = {
        "kernel": KERNEL_CONSTRAINT,
        "kernel_params": KERNEL_PARAMS_CONSTRAINT,
        "kernel_bound": [NoneValue(), Interval(Real, 0, None, closed="neither")],
        "y_kernel": KERNEL_CONSTRAINT,
        "y_kernel_params": KERNEL_PARAMS_CONSTRAINT,
        "y_kernel_bound": [NoneValue(), Interval(Real, 0, None, closed="neither")],
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "delta": [Interval(Real, 0, 1, closed="left")],
        "alpha": [Interval(Real, 0, 1, closed="neither")],
        "n_permutations": [Interval(Integral, 1, MAX_PERMUTATIONS)],
        "cyclic": [Boolean(), Options("auto")],
        "max_memory": [Interval(Integral, 1, None)],
        "max_time": [NoneValue(), Interval(Real, 0, None, closed="neither")],
        "n_jobs": [NoneValue(), Interval(Integral, None, None)],
        "verbose": [Interval(Integral, 0, 1), Options("auto")],
        "method": [Options("exact", "features")],
        "n_components": [Interval(Integral, 1, MAX_COMPONENTS)],
        "feature_map": [Options("fourier", "squared")],
        "budget": [NoneValue(), InstanceOf(PrivacyBudget)],
        "random_state": [RandomState()],
    }

    def __init__(self, *, kernel="rbf", kernel_params=None, kernel_bound=None,
                 y_kernel="rbf", y_kernel_params=None, y_kernel_bound=None, epsilon=1.0,
                 delta=0.0, alpha=0.05, n_permutations=2000, cyclic="auto",
                 max_memory=DEFAULT_MAX_MEMORY, max_time=None, n_jobs=None, verbose="auto",
                 method="exact",
                 n_components=64, feature_map="fourier",
                 budget=None, random_state=None):
        self.kernel = kernel
        self.kernel_params = kernel_params
        self.kernel_bound = kernel_bound
        self.y_kernel = y_kernel
        self.y_kernel_params = y_kernel_params
        self.y_kernel_bound = y_kernel_bound
        self.epsilon = epsilon
        self.delta = delta
        self.alpha = alpha
        self.n_permutations = n_permutations
        self.cyclic = cyclic
        self.max_memory = max_memory
        self.max_time = max_time
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.method = method
        self.n_components = n_components
        self.feature_map = feature_map
        self.budget = budget
        self.random_state = random_state

    def _check_params(self, params):
        check_kernel_spec(params["kernel"], params["kernel_params"], params["kernel_bound"])
        check_kernel_spec(params["y_kernel"], params["y_kernel_params"],
                          params["y_kernel_bound"], name="y_kernel")
        if params["n_jobs"] == 0:
            raise InvalidParameterError("n_jobs must be None, a positive int or a negative "
                                        "int (joblib's convention), got 0.")
        if params["method"] == "features" and params["cyclic"] is True:
            raise InvalidParameterError(
                "cyclic=True is not available with method='features' (random "
                "permutations of the feature rows); use cyclic='auto' or False.")
        return params

    def _validate_input(self, X, y, reset):
        if is_dask(X):  # lazily: metadata only (finiteness is checked in the plan)
            return validate_dask_input(self, X, y, reset, labels=False)
        if is_dask(y):  # X in memory: y (n values) is brought to it
            y = y.compute()
        # the core's one validation path (the library's refusals of dates, masked arrays,
        # missing values...) on both variables; y may be 2-D
        X, y = validate_input(self, X, y, reset=reset, multi_output=True, y_numeric=True)
        check_numeric(X, "X")
        y = np.asarray(check_numeric(np.asarray(y), "y"), dtype=np.float64)
        if y.ndim == 1:
            y = y.reshape(-1, 1)
        return X.astype(np.float64, copy=False), y

    def _plan(self, params, X, y):
        n = X.shape[0]
        if n < 2:
            raise ValueError(f"DPHSICTest needs at least 2 samples; got {n} sample.")
        if is_dask(X):
            refuse_dask("DPHSICTest", params["method"],
                        (("kernel_params", params["kernel_params"]),
                         ("y_kernel_params", params["y_kernel_params"])))
        if params["method"] == "features":
            warn_ignored(self, params, [
                (name, "method='features' uses the feature kernel, bounded by 1 (leave "
                 f"{name}=None).") for name in ("kernel_bound", "y_kernel_bound")] + [
                ("n_jobs", "method='features' runs on the BLAS threads in force (leave "
                 "n_jobs=None).")])
            return self._features_plan(params, X, y)
        warn_ignored(self, params, [
            (name, "it applies to method='features' only (leave it at its default or set "
             "method='features').") for name in ("n_components", "feature_map")])
        kx = resolve_kernel(params["kernel"], params["kernel_params"], params["kernel_bound"],
                            X)
        ky = resolve_kernel(params["y_kernel"], params["y_kernel_params"],
                            params["y_kernel_bound"], y, name="y_kernel")
        squared = not (kx.positive_definite and ky.positive_definite)
        if squared:
            sensitivity = hsic_squared_sensitivity(n, kx.kappa, ky.kappa)
        else:
            sensitivity = hsic_sensitivity(n, kx.diameter, ky.diameter)
        # the bandwidth aggregate (see _bandwidth) on each side without a gamma, when both
        # kernels are positive definite (the sqrt statistic); a callable on the other side
        # keeps the single data-independent bandwidth (gamma = 1 / n_features)
        grids = [[None], [None]]
        if not squared:
            for k, (name, data) in enumerate((("kernel", X), ("y_kernel", y))):
                if uses_aggregate(params[name], params[f"{name}_params"]):
                    grids[k] = list(bandwidth_grid(params[name], data.shape[1]))
        aggregate = grids != [[None], [None]]
        cyclic, B = params["cyclic"], params["n_permutations"]
        if cyclic == "auto":  # the aggregate's many pairs are cheap by FFT only
            cyclic = aggregate
        if cyclic:
            why = "cyclic=True" if params["cyclic"] is True else (
                "cyclic='auto' with the bandwidth aggregate (no 'gamma' in kernel_params "
                "or y_kernel_params) means cyclic=True")
            warn_ignored(self, params, [(
                "n_permutations", f"{why}, which uses all n - 1 = {n - 1} cyclic shifts "
                "of one random order instead. Set cyclic=False for random permutations, "
                "or leave n_permutations at its default.")])
        if not aggregate:
            warn_ignored(self, params, [
                ("n_jobs", "it parallelises the bandwidth aggregate only (kernel_params or "
                 "y_kernel_params without 'gamma'); one bandwidth pair runs on the BLAS "
                 "threads in force (leave n_jobs=None).")])
        # the private medians run first, on one marginal at a time; the validated data
        # may be a float64 copy of the input
        extra = 16 * n * (X.shape[1] + y.shape[1])
        if uses_private_median(params["kernel"], params["kernel_params"]) or \
                uses_private_median(params["y_kernel"], params["y_kernel_params"]):
            floor = median_memory_bytes(n)
        else:
            floor = 0
        blocked = None
        workers = 1
        if aggregate:  # in-memory Gram matrices (or their spectra), see the function
            workers = min(effective_n_jobs(params["n_jobs"] or 1), len(grids[0]))
            memory = hsic_aggregate_memory_bytes(
                n, B, len(grids[0]), len(grids[1]), cyclic=cyclic, workers=workers,
                eval_bytes=max(kernel_eval_bytes(params["kernel"]),
                               kernel_eval_bytes(params["y_kernel"])))
            limit = min(params["max_memory"], IN_MEMORY_AGGREGATE_MAX)
            if cyclic and max(memory, floor) + extra > limit and all(
                    params[name] in BLOCKED_KERNELS for name in ("kernel", "y_kernel")):
                # the automatic route: the same statistic by diagonal blocks, O(block n)
                # memory per bandwidth (see _hsic_blocked), when the in-memory one would
                # exceed max_memory or 1 GiB (public n, grids, n_jobs and max_memory
                # only); it is also the faster one there
                block, need = choose_diagonal_block(
                    n, len(grids[0]), len(grids[1]), workers,
                    params["max_memory"] - extra)
                if block is not None:
                    blocked, memory = block, need
        else:
            memory = hsic_memory_bytes(n, B, cyclic=cyclic, eval_bytes=max(
                kernel_eval_bytes(params["kernel"]), kernel_eval_bytes(params["y_kernel"])))
        memory = max(memory, floor) + extra
        hint = ""
        if memory > params["max_memory"]:  # the routes that fit (public sizes only)
            data = extra
            routes = [
                ("kernel_params={'gamma': g} and y_kernel_params={'gamma': g} (one "
                 "bandwidth pair, the blocked exact path, cyclic=False)",
                 hsic_memory_bytes(n, B) + data),
                ("one bandwidth pair with cyclic=True (all n cyclic shifts by FFT)",
                 hsic_memory_bytes(n, B, cyclic=True) + data),
                ("method='features'", feature_hsic_memory_bytes(n, 64, 64, B) + data),
            ]
            if aggregate and cyclic:
                routes.insert(0, ("cyclic=False (the aggregate over random permutations)",
                                  hsic_aggregate_memory_bytes(
                                      n, B, len(grids[0]), len(grids[1]), cyclic=False)
                                  + data))
            hint = fitting_routes(routes, params["max_memory"])
        check_memory(memory, params["max_memory"],
                     f"DPHSICTest with n = {n} pairs"
                     + ("" if cyclic else f" and n_permutations = {B}"), hint)
        route = ("cyclic " if cyclic else "") + ("aggregate" if aggregate else "")
        route = (route.strip() or "exact") + (" blocked" if blocked else "")
        predicted = predict_seconds(
            route, n, X.shape[1], y.shape[1], len(grids[0]), len(grids[1]), B,
            backend_numba=_resolve_backend("auto", float(n) * n * (B + 1)) == "numba",
            workers=workers)
        check_time(predicted, params["max_time"], f"DPHSICTest ({route}) with n = {n} pairs")
        median = (uses_private_median(params["kernel"], params["kernel_params"]),
                  uses_private_median(params["y_kernel"], params["y_kernel_params"]))
        noise_epsilon = params["epsilon"]
        for used in median:  # the same subtraction as before (same float)
            if used:
                noise_epsilon -= MEDIAN_EPSILON_SHARE * params["epsilon"]
        abs_error = hsic_abs_error(n, kx.kappa, ky.kappa, kx.diameter, ky.diameter,
                                   cyclic=cyclic, squared=squared)
        if aggregate:
            constants = hsic_centre_constants(n, (kx.kappa, ky.kappa),
                                              (kx.nonnegative, ky.nonnegative))
            sensitivity = aggregate_sensitivity(sensitivity, constants)
            errors = (trace_abs_error(n, kx.kappa), trace_abs_error(n, ky.kappa))
            abs_error += centre_abs_error(constants, errors, 2.0 * kx.diameter * ky.diameter)
        return _HSICPlan(
            kernels=(kx, ky), median=median, squared=squared, sensitivity=sensitivity,
            abs_error=abs_error, noise_epsilon=noise_epsilon,
            noise=plan_noise(sensitivity, abs_error, noise_epsilon, params["delta"]),
            memory_bytes=memory, cyclic=bool(cyclic),
            grids=(tuple(grids[0]), tuple(grids[1])) if aggregate else None,
            blocked=blocked, predicted_seconds=predicted,
        )

    def _features_plan(self, params, X, y):
        # Random features on both sides (see _features): each feature kernel is positive
        # definite, with the certified diameter D_f of the computed rows (feature_shape:
        # 2R for "fourier", sqrt(2) R^2 + 2 eta for "squared"), so the sqrt-HSIC
        # sensitivity 2 (n - 1) D_f^2 / n^2 holds for all B + 1 statistics (the Notes'
        # argument, for the feature kernels).
        n = X.shape[0]
        gamma_x = check_feature_kernel(params["kernel"], params["kernel_params"], X.shape[1])
        gamma_y = check_feature_kernel(params["y_kernel"], params["y_kernel_params"],
                                       y.shape[1])
        D, B, kind = params["n_components"], params["n_permutations"], params["feature_map"]
        n_dims, _, diameter = feature_shape(D, kind)
        memory = feature_hsic_memory_bytes(n, D, D, B, kind=kind)
        check_memory(memory, params["max_memory"],
                     f"DPHSICTest(method='features', n_components={D}, feature_map={kind!r}) "
                     f"with n = {n} pairs ({n_dims} features per row and side)")
        median = (uses_private_median(params["kernel"], params["kernel_params"]),
                  uses_private_median(params["y_kernel"], params["y_kernel_params"]))
        noise_epsilon = params["epsilon"]
        for used in median:
            if used:
                noise_epsilon -= MEDIAN_EPSILON_SHARE * params["epsilon"]
        sensitivity = hsic_sensitivity(n, diameter, diameter)
        abs_error = feature_hsic_abs_error(n, D, D, kind)
        if is_dask(X):  # NaN / infinity refused on the workers, before the charge
            check_finite(X, y)
        return _HSICPlan(
            kernels=(None, None), median=median, squared=False, sensitivity=sensitivity,
            abs_error=abs_error, noise_epsilon=noise_epsilon,
            noise=plan_noise(sensitivity, abs_error, noise_epsilon, params["delta"]),
            memory_bytes=memory,
            features=((params["kernel"], gamma_x), (params["y_kernel"], gamma_y), D, kind),
        )

    def _features_release(self, prep, rng):
        # order of the draws: private bandwidths (x then y, if asked), frequencies (x then
        # y, never from the data), permutations, noise
        params, plan, X, y = prep.params, prep.plan, prep.X, prep.y
        (name_x, gamma_x), (name_y, gamma_y), D, kind = plan.features
        released = [None, None]
        if plan.median[0]:
            eps_bw = MEDIAN_EPSILON_SHARE * params["epsilon"]
            gamma_x = released[0] = float(private_median_gamma(X, name_x, eps_bw, rng))
        if plan.median[1]:
            eps_bw = MEDIAN_EPSILON_SHARE * params["epsilon"]
            gamma_y = released[1] = float(private_median_gamma(y, name_y, eps_bw, rng))
        omega_x = draw_frequencies(name_x, spectral_gamma(gamma_x, kind), X.shape[1], D, rng)
        omega_y = draw_frequencies(name_y, spectral_gamma(gamma_y, kind), y.shape[1], D, rng)
        if is_dask(X):
            # a permutation pairs rows of different chunks: no per-chunk sums exist, so
            # the feature rows (never the raw rows) are gathered, 4 n (Mx + My) bytes
            F, G = dask_feature_rows(X, omega_x, kind), dask_feature_rows(y, omega_y, kind)
        else:
            F, G = make_features(X, omega_x, kind), make_features(y, omega_y, kind)
        stats = feature_hsic_statistics(F, G, params["n_permutations"], rng)
        return make_permutation_result(
            stats, plan.sensitivity, plan.abs_error, epsilon=params["epsilon"],
            delta=params["delta"], alpha=params["alpha"], n_samples=X.shape[0], rng=rng,
            noise_epsilon=plan.noise_epsilon, statistic="sqrt",
            method="dpHSIC features" if kind == "fourier" else "dpHSIC squared features",
            gamma=released[0], y_gamma=released[1],
        )

    def _release(self, prep, rng):
        params, plan, X, y = prep.params, prep.plan, prep.X, prep.y
        if plan.features is not None:
            return self._features_release(prep, rng)
        kernels = list(plan.kernels)
        gammas = [None, None]
        specs = [(params["kernel"], X), (params["y_kernel"], y)]
        for k, (kernel, data) in enumerate(specs):
            if plan.median[k]:
                # one marginal at a time: invariant under re-pairing
                eps_bw = MEDIAN_EPSILON_SHARE * params["epsilon"]
                gammas[k] = float(private_median_gamma(data, kernel, eps_bw, rng))
                kernels[k] = kernels[k].with_gamma(gammas[k])
        kx, ky = kernels
        method = "dpHSIC cyclic" if plan.cyclic else "dpHSIC"
        verbose, predicted = params["verbose"], plan.predicted_seconds
        if plan.grids is not None and plan.blocked is not None:
            sides = []
            for k, (name, grid) in enumerate(zip(("kernel", "y_kernel"), plan.grids,
                                                 strict=True)):
                if grid != (None,):
                    sides.append((params[name], grid))
                    continue
                gamma = gammas[k] if plan.median[k] else (params[f"{name}_params"] or {}).get(
                    "gamma")
                if gamma is None:  # scikit-learn's default, 1 / n_features
                    gamma = 1.0 / (X if k == 0 else y).shape[1]
                sides.append((params[name], (float(gamma),)))
            steps = 2 * -(-X.shape[0] // plan.blocked)
            progress = HSICProgress(verbose, predicted, steps, "diagonal blocks")
            progress.begin(f"dpHSIC cyclic aggregate by diagonal blocks: "
                           f"{len(plan.grids[0]) * len(plan.grids[1])} bandwidth pairs on "
                           f"n = {X.shape[0]} pairs, {plan.blocked} diagonals per block")
            stats = blocked_aggregate_statistics(
                X, y, rng, sides[0], sides[1], (kx.kappa, ky.kappa),
                (kx.nonnegative, ky.nonnegative), block=plan.blocked,
                n_jobs=params["n_jobs"], progress=progress)
            bounds = refine = None
            method += " aggregate blocked"
        elif plan.grids is not None:
            pairs = len(plan.grids[0]) * len(plan.grids[1])
            progress = HSICProgress(verbose, predicted, len(plan.grids[0]), "x bandwidths")
            hints = []
            if not plan.cyclic:
                hints.append("cyclic=True (FFT) is much faster")
            if params["n_jobs"] in (None, 1):
                hints.append("n_jobs=-1 uses all cores")
            progress.begin(f"dpHSIC aggregate: {pairs} bandwidth pairs on n = {X.shape[0]} "
                           "pairs" + ("; " + ", ".join(hints) if hints else ""))
            stats = hsic_aggregate_statistics(
                X, y, params["n_permutations"], rng, kx, ky, *plan.grids, cyclic=plan.cyclic,
                n_jobs=params["n_jobs"], progress=progress)
            bounds = refine = None
            method += " aggregate"
        elif plan.cyclic:
            progress = HSICProgress(verbose, predicted, 1, "statistics")
            progress.begin(f"dpHSIC cyclic: {X.shape[0]} shifts by FFT")
            stats = hsic_cyclic_statistics(X, y, rng, kx, ky, squared=plan.squared)
            bounds = refine = None
            progress.step()
        else:
            progress = HSICProgress(verbose, predicted, 1, "statistics")
            hints = ["cyclic=True (FFT) is much faster"]
            if _load_numba() is None:
                hints.append("pip install 'skdptest[fast]' (numba) speeds this path up")
            progress.begin(f"dpHSIC: {params['n_permutations'] + 1} statistics on n = "
                           f"{X.shape[0]} pairs; " + ", ".join(hints))
            stats, bounds, refine = _hsic_statistics(X, y, params["n_permutations"], rng,
                                                     kx, ky, squared=plan.squared)
            progress.step()
        return make_permutation_result(
            stats, plan.sensitivity, plan.abs_error, epsilon=params["epsilon"],
            delta=params["delta"], alpha=params["alpha"], n_samples=X.shape[0], rng=rng,
            noise_epsilon=plan.noise_epsilon,
            method=method,
            statistic="squared" if plan.squared else "sqrt", bounds=bounds, refine=refine,
            gamma=gammas[0], y_gamma=gammas[1],
        )

    def _fitted_attributes(self, prep, result):
        grids = prep.plan.grids
        return {"gamma_": result.gamma, "y_gamma_": result.y_gamma,
                "gamma_grid_": None if grids is None or grids[0] == (None,) else
                np.array(grids[0]),
                "y_gamma_grid_": None if grids is None or grids[1] == (None,) else
                np.array(grids[1])}

    def _noise_plan(self, prep):
        """What a fit noises (the grey-box audit hook, doc/contributing.md)."""
        share = MEDIAN_EPSILON_SHARE * prep.params["epsilon"]
        shares = [share for used in prep.plan.median if used]
        return noise_plan(prep.plan, prep.params["delta"], shares)

    def _score_value(self, result):
        return -math.log(result.pvalue)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        return tags


@dataclass(frozen=True)
class _HSICPlan:
    """Public plan of one dpHSIC release (parameters, n and the kernels' bounds)."""

    kernels: tuple
    median: tuple
    squared: bool
    sensitivity: float
    abs_error: float
    noise_epsilon: float
    noise: object
    memory_bytes: int
    cyclic: bool = False
    grids: tuple | None = None
    # diagonals per block of the blocked cyclic aggregate (_hsic_blocked), else None
    blocked: int | None = None
    # predicted running time, seconds (public sizes; progress and max_time)
    predicted_seconds: float = 0.0
    # ((kernel, gamma or None), (y_kernel, gamma or None), n_components) with
    # method="features", else None
    features: tuple | None = None
