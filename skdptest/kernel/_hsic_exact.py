"""dpHSIC's blocked exact path (one bandwidth pair, random permutations): a float32
copy of L, rows of ``K~ = H K H`` on the fly, certified enclosures and exactly rounded
float64 refinements (see the comment above ``_ROW_TILE``)."""

from __future__ import annotations

import math

import numpy as np

from .._threads import blas_threads, limit_blas, run_in_threads
from . import _hsic_traces as _traces
from ._hsic_traces import (
    _get_trace_kernel,
    _numba_threads,
    _resolve_backend,
    _resolve_precision,
    _stat,
    draw_permutations,
)
from ._kernels import EVAL_BYTES_NAMED

__all__ = ["hsic_memory_bytes", "hsic_permutation_statistics"]

# Safety factor of the certified float32 error bound (see _blocked_error_bound);
# tests inflate it to force refinements.
_F32_BOUND_SAFETY = 2.0

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
        # Python floats (``tolist``), not numpy scalars: the same exact integers, 4x faster
        for k in range(3):
            nonzero = np.flatnonzero(self._bins[k])
            for b, v in zip(nonzero.tolist(), self._bins[k, nonzero].tolist(), strict=True):
                self._total += int(v) << (18 * k + b)
        self._bins[:] = 0.0
        self._count = 0

    def value(self):
        if not self._finite:
            return math.nan
        self._flush()
        # units of 2**(-OFFSET - 53); int / int is correctly rounded
        return self._total / (1 << (self._OFFSET + 53))


class _ExactSums:
    """The exactly rounded sums of many groups of float64 values (:class:`_ExactSum` for
    each group: the same integer bins, hence the same values), fed for a range of groups
    by one ``bincount`` and read out by one pass over the nonzero bins of all groups.

    Why: dpHSIC's canonical traces of small samples cost more in per-call overhead of one
    :class:`_ExactSum` per permutation than in arithmetic.
    """

    def __init__(self, n_sums):
        self._bins = np.zeros((3, n_sums, _ExactSum._NBINS))
        self._count = 0  # values added since the last flush, all groups together
        self._totals = [0] * n_sums
        self._finite = np.ones(n_sums, dtype=bool)

    def add(self, first, which, values):
        """Add ``values[t]`` to the sum of group ``first + which[t]`` (``which >= 0``)."""
        nbins = _ExactSum._NBINS
        which = np.asarray(which, dtype=np.intp).ravel()
        v = np.asarray(values, dtype=np.float64).ravel()
        n_groups = int(which.max()) + 1 if which.size else 0
        for start in range(0, v.size, _SUM_CHUNK):
            w, c = which[start:start + _SUM_CHUNK], v[start:start + _SUM_CHUNK]
            finite = np.isfinite(c)
            if not np.all(finite):  # such a group's sum is NaN (as in _ExactSum.add)
                self._finite[first + w[~finite]] = False
                w, c = w[finite], c[finite]
            m, e = np.frexp(c)
            M = (m * 2.0**53).astype(np.int64)  # exact: m has at most 53 bits
            idx = w * nbins + (e + _ExactSum._OFFSET)
            for k in range(3):
                part = M >> (18 * k)
                if k < 2:
                    part = part & ((1 << 18) - 1)
                self._bins[k, first:first + n_groups] += np.bincount(
                    idx, weights=part, minlength=n_groups * nbins).reshape(n_groups, nbins)
            # no group's bins reach 2**18 2**30 (exact float64 integers) between flushes
            self._count += c.size
            if self._count >= 2**30:
                self._flush()

    def _flush(self):
        k, g, b = np.nonzero(self._bins)
        totals = self._totals
        for kk, gg, bb, v in zip(k.tolist(), g.tolist(), b.tolist(),
                                 self._bins[k, g, b].tolist(), strict=True):
            totals[gg] += int(v) << (18 * kk + bb)
        self._bins[:] = 0.0
        self._count = 0

    def values(self):
        """The sums (NaN for a group that received a non-finite value)."""
        self._flush()
        scale = 1 << (_ExactSum._OFFSET + 53)
        return np.array([t / scale if ok else math.nan
                         for t, ok in zip(self._totals, self._finite.tolist(), strict=True)],
                        dtype=np.float64)


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
    if backend == "numpy" and float(n) * n * rest.shape[0] >= _traces._THREADS_MIN_WORK:
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
    sel = np.asarray(perms[np.asarray(list(idx), dtype=np.intp)], dtype=np.intp).reshape(
        -1, n)
    sums = _ExactSums(sel.shape[0])
    for c0 in range(0, n, chunk):
        c1 = min(c0 + chunk, n)
        Lc = _gram_rows(kernel_y, Y, c0, c1)
        for s in range(0, n, block_rows):
            e = min(s + block_rows, n)
            W = _lower_weights(s, e, n)
            Kw = _centred_rows(kernel_x, X, m, g, s, e) * W
            live = W > 0
            # several permutations at once (the same products, added to each one's sum)
            group = max(1, _GROUP_ENTRIES // ((e - s) * n))
            for q0 in range(0, sel.shape[0], group):
                p = sel[q0:q0 + group]
                a = p[:, s:e, None]
                hi = np.maximum(a, p[:, None, :])
                take = live & (hi >= c0) & (hi < c1)
                which = np.repeat(np.arange(len(p)),
                                  np.count_nonzero(take.reshape(len(p), -1), axis=1))
                lo = np.minimum(a, p[:, None, :])[take]
                sums.add(q0, which, np.broadcast_to(Kw, take.shape)[take]
                         * Lc[hi[take] - c0, lo])
        del Lc
    return sums.values()


# Entries (permutations x block rows x n) of the index arrays of one group of permutations
# in _exact_traces: about 100 bytes each, within the summation chunk of the memory plan.
_GROUP_ENTRIES = 2**17


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
