"""DPMMDTest: the differentially private permutation MMD test (dpMMD)."""

from __future__ import annotations

import inspect
import math
import threading
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import numpy as np
from scipy import sparse
from sklearn.utils.multiclass import type_of_target

from .._base import BasePrivateTest
from .._budget import PrivacyBudget
from .._params import (
    InstanceOf,
    Interval,
    InvalidParameterError,
    NoneValue,
    Options,
    RandomState,
)
from .._threads import blas_threads, limit_blas, map_dynamic, run_in_threads
from .._warnings import warn_leak
from ._bandwidth import (
    Progress,
    aggregate_sensitivity,
    bandwidth_grid,
    centre_abs_error,
    map_in_threads,
    mmd_centre,
    mmd_centre_constants,
    same_stream,
    trace_abs_error,
    uses_aggregate,
)
from ._distributed import (
    dask_feature_mmd_statistics,
    dask_labels,
    dask_mmd_memory_bytes,
    is_dask,
    refuse_dask,
    stack_dask_samples,
    validate_dask_input,
)
from ._features import (
    MAX_COMPONENTS,
    check_feature_kernel,
    draw_frequencies,
    feature_mmd_abs_error,
    feature_mmd_memory_bytes,
    feature_mmd_statistics,
    feature_shape,
    make_features,
    max_exact_rows,
    spectral_gamma,
)
from ._kernels import (
    KERNEL_CONSTRAINT,
    KERNEL_PARAMS_CONSTRAINT,
    MEDIAN_EPSILON_SHARE,
    check_kernel_spec,
    gram_distances,
    gram_from_distances,
    kernel_eval_bytes,
    median_memory_bytes,
    private_median_gamma,
    resolve_kernel,
    uses_private_median,
)
from ._results import make_permutation_result, noise_plan, plan_noise
from ._timing import (
    AUTO_PROGRESS_SECONDS,
    check_max_time,
    format_seconds,
    predicted_seconds,
)
from ._trmm import map_row_blocks, trmm_rows

__all__ = [
    "DPMMDTest",
    "mmd_abs_error",
    "mmd_memory_bytes",
    "mmd_permutation_statistics",
    "mmd_sensitivity",
    "mmd_squared_sensitivity",
]

# The pooled N x N kernel matrix is held only when several column chunks reuse
# it and it fits in this many bytes; otherwise kernel blocks are evaluated on
# the fly (blocked path, never holding it).
MAX_KERNEL_BYTES = 256 * 2**20
# With one column chunk and a kernel matrix up to this size, it is evaluated while
# the coefficients are drawn in a thread (then held together): the triangular product
# wherever the kernel is held at all (it was 32 MiB, so N = 4000 took the symmetric
# blocking, (1 + 1/n_blocks) times the flops).
PREFETCH_KERNEL_BYTES = MAX_KERNEL_BYTES
# Bound on the float64 coefficient matrix V (N x columns) held at once.
MAX_COLUMN_BYTES = 256 * 2**20
# k-sample with more groups than this: one sparse product per relabelling.
MANY_GROUPS = 16
# Rows per kernel block (512-768 measured best for 1000 <= N <= 4000 here).
BLOCK_ROWS = 768
# Largest accepted n_permutations (public): B + 1 statistics and noise draws.
MAX_PERMUTATIONS = 10**6
# Default public limit on a release's estimated peak memory (max_memory).
DEFAULT_MAX_MEMORY = 4 * 2**30


def mmd_sensitivity(group_sizes, diameter):
    """Global sensitivity of the (k-sample) MMD statistic under replacing one row.

    Parameters
    ----------
    group_sizes : array-like of int
        Sizes ``n_1 .. n_G`` of the groups (public).
    diameter : float
        Public bound ``D >= ||phi(x) - phi(x')||`` of the kernel feature map.

    Returns
    -------
    sensitivity : float
        ``D / min(m, n)`` for two groups; ``(D / N) sqrt((N - n_min) / n_min)``
        for three or more (see :class:`DPMMDTest`, Notes).
    """
    sizes = np.asarray(group_sizes, dtype=np.int64)
    n_min = int(sizes.min())
    if sizes.size == 2:
        return float(diameter) / n_min
    n_total = int(sizes.sum())
    return float(diameter) / n_total * math.sqrt((n_total - n_min) / n_min)


def mmd_squared_sensitivity(group_sizes, kappa):
    """Sensitivity of the *squared* (k-sample) MMD for ANY kernel with ``|k| <= kappa``.

    Used for callable kernels, which are not assumed positive definite.

    Parameters
    ----------
    group_sizes : array-like of int
        Sizes ``n_1 .. n_G`` (public).
    kappa : float
        Public bound on ``|k(x, x')|`` for every pair of rows.

    Returns
    -------
    sensitivity : float
        ``8 kappa / n_min - 2 kappa / n_min^2`` for two groups (statistic
        ``v^T K v``); ``8 kappa (N - n_min) / N^2`` for three or more
        (statistic ``sum_g 1_g^T K 1_g / (N n_g) - 1^T K 1 / N^2``).

    Notes
    -----
    Both statistics are quadratic forms ``sum_jl c_jl K_jl`` in the Gram matrix.
    Replacing row i changes row and column i of K, each entry by at most
    ``2 kappa``, so the statistic moves by at most
    ``2 kappa (2 sum_{l != i} |c_il| + |c_ii|)``. Two groups: ``|c_il| =
    |v_i||v_l|``, ``sum_l |v_l| = 2``, ``|v_i| = 1/n_g``: ``8 kappa/n_g -
    2 kappa/n_g^2``. k-sample: for i in group h, ``c_il = 1/(N n_h) - 1/N^2``
    on the h row block and ``-1/N^2`` elsewhere, ``sum_l |c_il| =
    2 (N - n_h)/N^2``. Both are largest at ``n_min``; a relabelling keeps the
    sizes, so the bound holds for every permuted statistic.
    """
    sizes = np.asarray(group_sizes, dtype=np.int64)
    n_min = int(sizes.min())
    if sizes.size == 2:
        return 8.0 * kappa / n_min - 2.0 * kappa / n_min**2
    n_total = int(sizes.sum())
    return 8.0 * kappa * (n_total - n_min) / n_total**2


_U64 = 2.0**-53


def _gamma(k):
    return k * _U64 / (1.0 - k * _U64)


def mmd_abs_error(group_sizes, kappa, diameter, *, squared=False):
    """Certified bound on the float64 error of each computed MMD statistic.

    The Gram values as evaluated are taken as the kernel's values; the bound
    covers the arithmetic after them. (The named exp kernels evaluate values below
    ``e^-690`` as 0, see ``_kernels.EXP_FLOOR``: a change of at most ``4 e^-690`` in
    a quadratic form, far below one rounding of this bound.) Every statistic is a quadratic form
    ``sum_jl c_jl K_jl`` whose absolute terms sum to at most ``S = 4 kappa``
    (two groups: ``(sum |v|)^2 kappa``) or ``2 kappa`` (k-sample: the group
    terms and the grand-mean term, ``kappa`` each). The triangular evaluation
    (:func:`triangular_quadratic_forms`) computes ``2 v^T (L + I) v + sum (d_i - 2)
    v_i^2``, whose absolute terms sum to at most ``S + 4 sum v_i^2`` (the unit
    diagonal twice, ``|d_i - 2| <= kappa + 2``); ``sum v_i^2`` is ``1/n_1 + 1/n_2``
    (two groups) or ``(G + 1) / N`` over the columns of a k-sample statistic. Each
    product passes through at most ``k = 2N + G + max(N, n_blocks^2) + 64``
    roundings (a length-N inner product, the sum over N rows, the sum over the
    block pairs, the diagonal terms and the G columns), in any summation order,
    so the computed quadratic form is within ``gamma_k S'`` of the exact one
    (Higham, Lemma 3.1/3.3). The bound is doubled as a safety factor for the
    rounding of the coefficients (relative error at most 4u each). For the
    statistic ``sqrt(max(q, 0))``, ``|sqrt(a) - sqrt(b)| <= sqrt(|a - b|)`` for
    a, b >= 0 plus the rounding of the square root (``u D``) give
    ``sqrt(2 gamma_k S') + 2 u D``.
    """
    sizes = np.asarray(group_sizes, dtype=np.int64)
    n, n_groups = int(sizes.sum()), int(sizes.size)
    if n_groups == 2:
        s = 4.0 * kappa + 4.0 * (1.0 / sizes[0] + 1.0 / sizes[1])
    else:
        s = 2.0 * kappa + 4.0 * (n_groups + 1) / n
    n_blocks = len(_block_edges(n)) - 1
    err_q = 2.0 * (_gamma(2 * n + n_groups + max(n, n_blocks**2) + 64) + 8 * _U64) * s
    if squared:
        return err_q
    return math.sqrt(err_q) + 2 * _U64 * diameter


def mmd_memory_bytes(n, n_groups, n_permutations, *, ksample=None, max_kernel_bytes=None,
                     max_column_bytes=None, eval_bytes=16):
    """Planned peak memory, in bytes, of :func:`mmd_permutation_statistics`.

    A public function of the shapes: the kernel matrix or blocks held (with one
    evaluation temporary: ``eval_bytes`` per entry in all, see
    :func:`~._kernels.kernel_eval_bytes`), the coefficient chunk with its
    relabelling keys and masks or one-hot codes, the block products, and the
    B + 1 statistics with their noise. The input ``X`` is not counted.
    """
    if max_kernel_bytes is None:
        max_kernel_bytes = MAX_KERNEL_BYTES
    if max_column_bytes is None:
        max_column_bytes = MAX_COLUMN_BYTES
    if ksample is None:
        ksample = n_groups > 2
    n_cols = n_groups if ksample else 1
    n_stats = n_permutations + 1
    per_chunk = max(1, int(max_column_bytes // (8 * n * n_cols)))
    rows = min(per_chunk, n_stats)
    n_chunks = -(-n_stats // per_chunk) + (1 if ksample else 0)
    full = 8 * n * n
    edges = _block_edges(n)
    block = 8 * int(np.max(np.diff(edges))) ** 2
    if ksample and n_groups > MANY_GROUPS and full <= max_kernel_bytes:
        # K held, its evaluation temporary, the permuted code rows
        return max(2 * full, eval_bytes * n * n) + 8 * n_stats * n + 64 * n_stats
    if (n_chunks > 1 and full <= max_kernel_bytes) or (
            n_chunks == 1 and full <= min(PREFETCH_KERNEL_BYTES, max_kernel_bytes)):
        kernel = max(2 * full, eval_bytes * n * n)
    else:  # two blocks held and one being evaluated
        kernel = 2 * block + max(block, eval_bytes * block // 8)
    columns = 8 * n * n_cols * rows
    codes = (5 * n * rows) if not ksample else (n * rows * (n_groups + 8))
    return kernel + 2 * columns + codes + 64 * n_stats


def mmd_aggregate_memory_bytes(n, n_groups, n_permutations, n_jobs=None, *, eval_bytes=16):
    """Planned peak memory, in bytes, of :func:`mmd_aggregate_statistics`.

    With the pooled distances held (:func:`aggregate_holds_distances`): the distances,
    one Gram buffer per concurrent bandwidth (``n_jobs``) and one more ``8 N^2`` for the
    distances' evaluation temporaries (then the ``exp`` masks), with the coefficient
    chunk of :func:`mmd_memory_bytes`. Otherwise :func:`mmd_memory_bytes`.
    """
    single = mmd_memory_bytes(n, n_groups, n_permutations, eval_bytes=eval_bytes)
    if not aggregate_holds_distances(n, n_groups, n_permutations):
        return single
    n_buffers = 1 if n_jobs is None or n_jobs == 1 else min(19, _joblib_workers(n_jobs))
    full = 8 * n * n
    kernel = max(2 * full, eval_bytes * n * n)
    return single - kernel + full * (2 + n_buffers)


def mmd_work(n, n_features, n_groups, n_permutations, *, n_bandwidths=None,
             feature_dims=None, median=False):
    """The work of a dpMMD release, in the units of :class:`._timing.MachineRates`.

    A public function of the sizes and the route: ``tri`` counts ``N^2`` per column of
    the triangular forms (the symmetric blocking ``(1 + 1/n_blocks)`` times that, the
    sparse many-groups products twice), ``exp`` counts Gram entries evaluated (a
    distance entry costs ``1 + n_features / 8`` of them), ``mask`` the relabelling
    entries drawn (shuffles of three or more groups four times). ``n_bandwidths``: the
    aggregate; ``feature_dims``: ``method="features"`` with that many feature columns.
    """
    n_stats = n_permutations + 1
    ksample = n_groups > 2
    mask = float(n) * n_stats * (4 if ksample else 1)
    dist = float(n) * n * (1 + n_features / 8.0)
    work = {"mask": mask, "exp": dist * 2 if median else 0.0, "tri": 0.0}
    if feature_dims is not None:  # O(N D B): the feature sums of every relabelling
        work["tri"] += 2.0 * n * feature_dims * n_stats
        work["exp"] += 4.0 * n * feature_dims
        return work
    cols = n_groups * n_stats + 1 if ksample else n_stats
    per_chunk = max(1, int(MAX_COLUMN_BYTES // (8 * n * (n_groups if ksample else 1))))
    n_chunks = -(-n_stats // per_chunk)
    held = 8 * n * n <= MAX_KERNEL_BYTES
    many = ksample and n_groups > MANY_GROUPS and held
    blocks = len(_block_edges(n)) - 1
    if many:
        one_tri, one_exp = 2.0 * n * n * n_stats, dist
    elif held:
        one_tri, one_exp = float(n) * n * cols, dist
    else:
        one_tri = (1 + 1 / blocks) * float(n) * n * cols
        one_exp = dist * n_chunks
    if n_bandwidths is None:
        work["tri"] += one_tri
        work["exp"] += one_exp
    elif aggregate_holds_distances(n, n_groups, n_permutations):
        passes = 1 if n_chunks == 1 else n_chunks
        work["tri"] += n_bandwidths * float(n) * n * cols
        work["exp"] += dist + n_bandwidths * float(n) * n * passes
    else:  # every bandwidth on its own, with the centring's blocked trace
        work["tri"] += n_bandwidths * one_tri
        work["exp"] += n_bandwidths * (one_exp + dist)
    return work


def _block_edges(n):
    # Symmetric blocking does (1 + 1/n_blocks)/2 of the full product's work; at least
    # three blocks once they stay large enough for BLAS (measured fastest at N = 1000-2000).
    n_blocks = max(1, -(-n // BLOCK_ROWS), 3 if n >= 768 else (2 if n >= 512 else 1))
    return np.linspace(0, n, n_blocks + 1).round().astype(int)


def column_quadratic_forms(X, kernel, columns, n_chunks, *, max_kernel_bytes=None,
                           col_sq=None):
    """``diag(V^T K V)`` for every column chunk ``V`` produced by ``columns``.

    ``K`` is the kernel matrix of ``X``. When it is held (``8 N^2 <= max_kernel_bytes``,
    256 MiB, N <= 5792; one column chunk: evaluated while the chunk is drawn in a
    thread; several chunks: evaluated once, reused), every chunk costs one triangular
    product
    (:func:`triangular_quadratic_forms`, ``N^2 C`` flops, half of ``K @ V``).
    Otherwise its blocks are evaluated on the fly for every chunk, never holding
    it: symmetric blocking uses only the blocks ``K[r, s]`` with ``r <= s``
    (off-diagonal ones twice), ``(1 + 1/n_blocks) N^2 C`` flops.

    Parameters
    ----------
    X : ndarray of shape (N, d)
    kernel : ResolvedKernel
    columns : iterable of ndarray of shape (N, c)
        Coefficient matrices, consumed one at a time.
    n_chunks : int
        Number of chunks ``columns`` yields.
    col_sq : float, optional
        See :func:`triangular_quadratic_forms`.

    Returns
    -------
    q : ndarray of shape (sum of c,)
    """
    if max_kernel_bytes is None:
        max_kernel_bytes = MAX_KERNEL_BYTES
    n = len(X)
    columns = iter(columns)
    if n_chunks > 1 and 8 * n * n <= max_kernel_bytes:
        K = held_kernel(X, kernel)
        return np.concatenate([triangular_quadratic_forms(K, V, col_sq) for V in columns])
    if n_chunks == 1 and 8 * n * n <= min(PREFETCH_KERNEL_BYTES, max_kernel_bytes):
        # The kernel fits, one chunk: the (mostly single-threaded: exp) kernel is
        # evaluated on a worker thread while the coefficients are drawn here
        # (numpy's bounded integers, sort and ufuncs release the GIL).
        V, K = run_in_threads([lambda: next(columns), lambda: held_kernel(X, kernel)])
        return triangular_quadratic_forms(K, V, col_sq)
    edges = _block_edges(n)
    pairs = [(i, j) for i in range(len(edges) - 1) for j in range(i, len(edges) - 1)]
    out = []
    for V in columns:
        if isinstance(V, _MaskRows):
            V = V.dense().T
        q = np.zeros(V.shape[1])
        for i, j in pairs:
            P = _kernel_block(X, kernel, edges, i, j) @ V[edges[j]:edges[j + 1]]
            part = np.einsum("ij,ij->j", V[edges[i]:edges[i + 1]], P)
            if i == j:
                q += part
            else:
                q += 2.0 * part
        out.append(q)
    return np.concatenate(out)


def held_kernel(X, kernel):
    """The kernel matrix of ``X`` (C-ordered), evaluated with every BLAS on one thread.

    Why: its own work is mostly the single-threaded ``exp``, and a multi-threaded
    BLAS call would leave OpenBLAS workers spinning for ~0.1 s, taking cores from
    the relabelling draws and the triangular product that follow (see ``skdptest/_threads.py``).
    """
    with limit_blas():
        return np.ascontiguousarray(kernel(X))


def triangular_quadratic_forms(K, V, col_sq=None):
    """``diag(V^T K V)`` from the lower triangle of ``K``: half the work of ``K @ V``.

    With ``L`` the strict lower triangle of ``K`` and ``d`` its diagonal, ``v^T K v =
    2 v^T (L + I) v + sum_i (d_i - 2) v_i^2`` (and ``v^T (L + I) v = v^T (L^T + I) v``).
    ``(L^T + I) v`` is BLAS ``dtrmm`` (``N^2`` flops per column against the ``2 N^2``
    of ``K v``; the unit diagonal is implied, not read), one block of columns per
    worker thread, GIL-free (:mod:`._trmm`). A block's coefficients are written into
    the product's buffer just before its product and refilled in pieces for the final
    reduction: no float64 copy of ``V`` is held. The upper triangle of ``K`` is never
    read: the quadratic forms are those of the symmetric matrix with ``K``'s lower
    triangle (the kernel's evaluated values). Rounding: see :func:`mmd_abs_error`.

    Parameters
    ----------
    K : ndarray of shape (N, N)
        C-ordered float64 kernel matrix.
    V : ndarray of shape (N, C) or _MaskRows
        The columns, or two-group coefficient rows given by their masks (filled
        block by block, never held as float64).
    col_sq : float, optional
        ``sum_i v_i^2``, the same for every column (two-group coefficients: ``1/m``
        on m rows, ``-1/n`` on n rows, ``m (1/m)^2 + n (1/n)^2`` in a few roundings),
        instead of a pass over ``V``. Callers pass it only for kernels with a public
        unit diagonal (``ResolvedKernel.unit_diagonal``), so the branch taken never
        depends on the data; the diagonal is still checked (a guard that such
        kernels always pass).

    Returns
    -------
    q : ndarray of shape (C,)
    """
    rows = V if isinstance(V, _MaskRows) else _DenseRows(V.T)
    K = np.ascontiguousarray(K, dtype=np.float64)
    d = np.diagonal(K)
    unit = col_sq is not None and bool(np.all(d == d[0]))
    d_minus_2 = d - 2.0
    q = np.empty(rows.n_rows)
    P = np.empty((rows.n_rows, K.shape[0]))  # one buffer; each thread owns its rows

    def block(r0, r1):
        # The coefficients go straight into P; for the reduction they are refilled
        # from the masks (1 byte per entry) rather than copied and kept (8 bytes):
        # memory traffic, not flops, is what these passes cost.
        trmm_rows(K, rows.block(r0, r1, out=P[r0:r1]))
        scratch = np.empty((min(_REDUCE_ROWS, r1 - r0), K.shape[0]))
        for s0 in range(r0, r1, _REDUCE_ROWS):
            s1 = min(s0 + _REDUCE_ROWS, r1)
            Mb, Pb, out = rows.block(s0, s1, out=scratch[:s1 - s0]), P[s0:s1], q[s0:s1]
            out[...] = (Mb[:, None, :] @ Pb[:, :, None])[:, 0, 0]
            out *= 2.0
            if unit:  # unit diagonal (rbf, laplacian): one product per matrix
                out += (d[0] - 2.0) * col_sq
            else:
                out += np.einsum("ij,ij,j->i", Mb, Mb, d_minus_2)

    map_row_blocks(block, rows.n_rows)
    return q


# Rows per piece of the final reduction: few numpy calls per thread (threads making
# many small calls contend for the GIL: 32-row pieces cost 2 ms more at N = 1000).
_REDUCE_ROWS = 512


class _DenseRows:
    """Coefficient rows held as a float64 matrix (any strides)."""

    def __init__(self, M):
        self.M = M
        self.n_rows = M.shape[0]

    def block(self, r0, r1, out=None):
        """Rows ``r0:r1`` (written into ``out`` when given, else a view)."""
        if out is None:
            return self.M[r0:r1]
        out[...] = self.M[r0:r1]
        return out


class _MaskRows:
    """Two-group coefficient rows: ``first`` where ``masks`` is True, ``second`` elsewhere.

    One multiply-add pass per block (3x faster than ``np.where``); the slope is
    nudged by ulps so that ``slope + second`` rounds to ``first`` exactly.
    """

    def __init__(self, masks, first, second):
        self.masks, self.first, self.second = masks, first, second
        self.n_rows = masks.shape[0]
        slope = first - second
        for _ in range(4):
            if slope + second == first:
                break
            slope = np.nextafter(slope, np.inf if slope + second < first else -np.inf)
        self.slope = slope if slope + second == first else None

    def block(self, r0, r1, out=None):
        masks = self.masks[r0:r1]
        if out is None:
            out = np.empty(masks.shape)
        if self.slope is None:  # pragma: no cover - not seen in float64
            out[...] = np.where(masks, self.first, self.second)
            return out
        np.multiply(masks, self.slope, out=out)
        out += self.second
        return out

    def dense(self):
        out = np.empty(self.masks.shape)

        def fill(r0, r1):
            self.block(r0, r1, out=out[r0:r1])

        _in_row_blocks(fill, self.n_rows, self.masks.shape[1])
        return out


def _kernel_block(X, kernel, edges, i, j):
    rows = X[edges[i]:edges[i + 1]]
    if i == j:
        return kernel(rows)
    return kernel(rows, X[edges[j]:edges[j + 1]])


def _smallest_int_dtype(n_values):
    for dtype in (np.int8, np.int16, np.int32):
        if n_values <= np.iinfo(dtype).max:
            return dtype
    return np.int64  # pragma: no cover


# Up to this many rows, relabelling keys are 16-bit (ties at the threshold, redrawn,
# stay below 3 %: 0.6 % at N = 1000); beyond, 32-bit.
KEY16_MAX_ROWS = 4096


def _two_group_masks(n, m, n_rows, rng, tie_rng, out=None):
    """``n_rows`` uniformly random ``m``-subsets of ``range(n)`` as boolean masks.

    Each row gets ``n`` i.i.d. uniform keys (16-bit up to ``KEY16_MAX_ROWS``
    rows, else 32-bit; one bulk draw of ``ceil(n / 4)`` or ``ceil(n / 2)`` 64-bit
    words per row) and the ``m`` smallest are selected (16-bit keys: numpy's radix
    sort; 32-bit: ``np.partition``; no sequential shuffle; large draws on
    :func:`blas_threads` threads, which gives the same masks). The keys are
    exchangeable, so the selected set is uniform over the ``m``-subsets whenever
    the ``m``-th smallest key is unique (an event invariant under permuting the
    positions); a row with a tie there is redrawn with 32-bit keys from ``tie_rng``
    until it has none (rejection keeps the law exact), in row order. Redraws never
    touch ``rng``, so the relabellings do not depend on how the rows are chunked.
    Written into ``out`` when given.
    """
    per_word = 4 if n <= KEY16_MAX_ROWS else 2
    words = rng.integers(0, 2**64, size=(n_rows, -(-n // per_word)), dtype=np.uint64)
    keys = words.view(np.uint16 if per_word == 4 else np.uint32)[:, :n]
    masks = np.empty((n_rows, n), dtype=bool) if out is None else out
    tied = np.zeros(n_rows, dtype=bool)

    def select(r0, r1):
        k = keys[r0:r1]
        if per_word == 4 and m < n:
            # numpy sorts 16-bit keys stably by radix (25 % faster than partition
            # here); the m-th smallest is tied iff the next one equals it.
            ordered = np.sort(k, axis=1, kind="stable")
            np.equal(ordered[:, m - 1], ordered[:, m], out=tied[r0:r1])
        else:
            ordered = np.partition(k, m - 1, axis=1)
        np.less_equal(k, ordered[:, m - 1:m], out=masks[r0:r1])
        if not (per_word == 4 and m < n):
            tied[r0:r1] = np.count_nonzero(masks[r0:r1], axis=1) != m

    _in_row_blocks(select, n_rows, n)
    for r in np.flatnonzero(tied):
        while True:
            row = tie_rng.integers(0, 2**32, size=n, dtype=np.uint32)
            masks[r] = row <= np.partition(row, m - 1)[m - 1]
            if np.count_nonzero(masks[r]) == m:
                break
    return masks


# Below this many entries, relabelling work stays on one thread.
_TWO_THREADS_MIN = 2**19


def _in_row_blocks(func, n_rows, n_cols):
    """``func(0, n_rows)`` as ``func(r0, r1)`` over row blocks taken in turn by
    :func:`blas_threads` threads when the work is large (numpy's sort and ufuncs
    release the GIL; a thread busy with the kernel joins when it is done). The rows
    are independent, so the results are the same."""
    n_threads = 1 if n_rows < 2 or n_rows * n_cols < _TWO_THREADS_MIN else blas_threads()
    n_blocks = max(1, min(n_rows, 4 * n_threads if n_threads > 1 else 1))
    edges = [n_rows * t // n_blocks for t in range(n_blocks + 1)]
    map_dynamic(func, list(zip(edges[:-1], edges[1:], strict=True)), n_threads)


def _tie_generator(rng):
    # Drawn once per call, before any relabelling, whatever the chunking.
    return np.random.default_rng(int(rng.integers(2**63)))


def draw_assignments(codes, n_permutations, rng):
    """Label assignments: row 0 the observed codes, rows 1..B uniform relabellings.

    Each row b >= 1 is an independent uniformly random rearrangement of the
    observed codes, depending only on the public group sizes and ``rng``. Two
    groups: a uniform subset of the positions for group 0 (the ``m`` smallest
    of ``N`` random 32-bit keys, see :func:`_two_group_masks`). Three or more
    groups: numpy's ``Generator.permuted`` (one Fisher-Yates shuffle per row).
    The estimator draws its coefficient matrices the same way, in chunks,
    which consumes ``rng`` identically and gives the same relabellings.
    """
    codes = np.asarray(codes)
    sizes = np.bincount(codes)
    out = np.empty((n_permutations + 1, codes.size), dtype=_smallest_int_dtype(sizes.size))
    out[0] = codes
    tie_rng = _tie_generator(rng) if sizes.size == 2 else None
    out[1:] = _relabelled_codes(codes, sizes, n_permutations, False, rng, tie_rng)
    return out


def _two_group_rows(codes, sizes, n_rows, first_is_observed, rng, tie_rng):
    """Coefficient rows ``1/m`` (group 0) and ``-1/n`` (group 1), relabelled
    (a :class:`_MaskRows`; ``.dense()`` is the float64 matrix)."""
    first, second = 1.0 / sizes[0], -1.0 / sizes[1]
    start = 1 if first_is_observed else 0
    masks = np.empty((n_rows, codes.size), dtype=bool)
    _two_group_masks(codes.size, int(sizes[0]), n_rows - start, rng, tie_rng,
                     out=masks[start:])
    if first_is_observed:
        masks[0] = codes == 0
    return _MaskRows(masks, first, second)


def _relabelled_codes(codes, sizes, n_rows, first_is_observed, rng, tie_rng):
    """``n_rows`` relabelled code rows, drawn as by :func:`draw_assignments`."""
    if sizes.size != 2:
        return _permuted_rows(codes.astype(_smallest_int_dtype(sizes.size)), n_rows,
                              first_is_observed, rng)
    out = np.empty((n_rows, codes.size), dtype=np.int8)
    start = 1 if first_is_observed else 0
    masks = _two_group_masks(codes.size, int(sizes[0]), n_rows - start, rng, tie_rng)
    out[start:] = ~masks
    if first_is_observed:
        out[0] = codes
    return out


def _permuted_rows(template, n_rows, first_is_observed, rng):
    """``n_rows`` copies of ``template``, each shuffled (row 0 kept if observed)."""
    out = np.empty((n_rows, template.size), dtype=template.dtype)
    out[:] = template
    start = 1 if first_is_observed else 0
    rng.permuted(out[start:], axis=1, out=out[start:])
    return out


def _ksample_many_groups(X, kernel, codes, sizes, n_stats, rng):
    """k-sample statistics for many groups: O(N^2) per relabelling.

    ``sum_g 1_g^T K 1_g / (N n_g)`` from one sparse (G x N one-hot) by dense
    (N x N) product per relabelling, instead of G matrix columns each.
    """
    n = codes.size
    K = kernel(X)
    grand = K.sum(axis=1).sum() / n**2  # chains of at most 2N additions (see mmd_abs_error)
    weights = 1.0 / (n * sizes.astype(np.float64))
    template = codes.astype(_smallest_int_dtype(sizes.size))
    A = _permuted_rows(template, n_stats, True, rng)
    rows = np.arange(n)
    ones = np.ones(n)
    out = np.empty(n_stats)
    for b, a in enumerate(A):
        onehot = sparse.csr_matrix((ones, (a, rows)), shape=(sizes.size, n))
        M = onehot @ K  # M[g, i] = sum_{j in g} K[j, i]
        out[b] = np.dot(weights[a], M[a, rows]) - grand
    return out


def _coefficient_columns(codes, sizes, n_stats, ksample, per_chunk, rng):
    """The coefficient matrices of :func:`mmd_permutation_statistics`, lazily.

    Returns ``(columns, n_chunks, finish, col_sq)``: a generator of ``(N, c)``
    matrices or (two groups) :class:`_MaskRows` of ``c`` rows (observed first,
    ``per_chunk`` statistics each; k-sample: the pooled column ``1/N`` first),
    their number, the map from their concatenated quadratic forms to the B + 1
    squared statistics, and ``sum_i v_i^2`` of every column when it is the same for
    all (two groups), else None.
    """
    n, n_groups = codes.size, sizes.size
    starts = range(0, n_stats, per_chunk)
    tie_rng = _tie_generator(rng) if n_groups == 2 else None
    if not ksample:
        def two_group():
            # the rows of the transposed coefficient matrix, given by their masks
            for start in starts:
                yield _two_group_rows(codes, sizes, min(per_chunk, n_stats - start),
                                      start == 0, rng, tie_rng)

        first, second = 1.0 / sizes[0], -1.0 / sizes[1]
        col_sq = sizes[0] * (first * first) + sizes[1] * (second * second)
        return two_group(), len(starts), lambda q: q, float(col_sq)
    weights = 1.0 / np.sqrt(n * sizes.astype(np.float64))
    groups = np.arange(n_groups)

    def onehot():
        yield np.full((n, 1), 1.0 / n)
        for start in starts:
            A = _relabelled_codes(codes, sizes, min(per_chunk, n_stats - start),
                                  start == 0, rng, tie_rng)
            yield ((A.T[:, :, None] == groups) * weights).reshape(n, -1)

    def finish(q):
        return q[1:].reshape(n_stats, n_groups).sum(axis=1) - q[0]

    return onehot(), len(starts) + 1, finish, None


def mmd_permutation_statistics(X, codes, n_permutations, rng, kernel, *, ksample=None,
                               max_kernel_bytes=None, max_column_bytes=None, squared=False):
    """The B + 1 (non-private) MMD statistics: observed first, then permuted.

    Two groups (``ksample=False``): ``MMD_b = sqrt(v^T K v)`` with ``v`` equal to
    ``1/m`` on group 0 and ``-1/n`` on group 1. Three or more groups (or
    ``ksample=True``): ``sqrt(sum_g (n_g / N) ||mu_g - mu||^2)`` with ``mu_g`` the
    group mean embeddings and ``mu`` the pooled one (for two groups this equals
    ``sqrt(m n) / N * MMD_b``).

    Parameters
    ----------
    X : ndarray of shape (N, d)
    codes : ndarray of shape (N,)
        Group codes ``0 .. G - 1``.
    n_permutations : int
    rng : numpy.random.Generator
        Source of the relabellings (consumed as by :func:`draw_assignments`).
    kernel : ResolvedKernel
    squared : bool, default=False
        Return the squared statistics (quadratic forms, not clipped at 0).

    Returns
    -------
    statistics : ndarray of shape (n_permutations + 1,)
    """
    if max_column_bytes is None:
        max_column_bytes = MAX_COLUMN_BYTES
    codes = np.asarray(codes)
    n = codes.size
    sizes = np.bincount(codes)
    n_groups = sizes.size
    if ksample is None:
        ksample = n_groups > 2
    n_cols = n_groups if ksample else 1
    n_stats = n_permutations + 1
    per_chunk = max(1, int(max_column_bytes // (8 * n * n_cols)))

    if ksample and n_groups > MANY_GROUPS and 8 * n * n <= (
            MAX_KERNEL_BYTES if max_kernel_bytes is None else max_kernel_bytes):
        stat2 = _ksample_many_groups(X, kernel, codes, sizes, n_stats, rng)
    else:
        columns, n_chunks, finish, col_sq = _coefficient_columns(
            codes, sizes, n_stats, ksample, per_chunk, rng)
        stat2 = finish(column_quadratic_forms(
            X, kernel, columns, n_chunks, max_kernel_bytes=max_kernel_bytes,
            col_sq=col_sq if kernel.unit_diagonal else None))
    if squared:  # the quadratic forms themselves (any bounded kernel)
        return stat2
    return np.sqrt(np.maximum(stat2, 0.0))


def _trace_hkh(X, kernel):
    """``tr(K) - 1^T K 1 / N`` of the Gram matrix, in row blocks (O(N) memory per row).

    BLAS on one thread, as in :func:`held_kernel`: a multi-threaded distance
    product here left OpenBLAS workers spinning through the next bandwidth's
    triangular product (measured: 40 ms instead of 20 ms per block at N = 1000).
    """
    n = len(X)
    trace = total = 0.0
    with limit_blas():
        for start in range(0, n, BLOCK_ROWS):
            K = kernel(X[start:start + BLOCK_ROWS], X)
            trace += float(np.trace(K, offset=start))
            total += float(K.sum())
    return trace - total / n


def aggregate_holds_distances(n, n_groups, n_permutations, *, max_kernel_bytes=None):
    """Whether the aggregate holds the pooled distances (a public function of the sizes).

    Held when ``8 N^2 <= max_kernel_bytes`` (``MAX_KERNEL_BYTES``, 256 MiB: N <= 5792) and
    the groups are at most ``MANY_GROUPS``; otherwise every bandwidth runs the
    single-bandwidth computation on its own copy of the generator.
    """
    if max_kernel_bytes is None:
        max_kernel_bytes = MAX_KERNEL_BYTES
    return 8 * n * n <= max_kernel_bytes and not (n_groups > 2 and n_groups > MANY_GROUPS)


def _gram_and_trace(D, gamma, out):
    """The Gram matrix ``exp(-gamma D)`` into ``out`` and ``tr(K) - 1^T K 1 / N``.

    The ``exp`` runs in fixed blocks of ``BLOCK_ROWS`` rows taken by :func:`blas_threads`
    threads (numpy's ufuncs release the GIL); each block's sum and trace are kept per
    block and added in block order, so the values do not depend on the thread count.
    """
    n = D.shape[0]
    starts = list(range(0, n, BLOCK_ROWS))
    sums, traces = np.empty(len(starts)), np.empty(len(starts))

    def block(i, _):
        r0 = starts[i]
        r1 = min(r0 + BLOCK_ROWS, n)
        Kb = gram_from_distances(D, gamma, out, rows=(r0, r1))
        traces[i] = float(np.trace(Kb, offset=r0))
        sums[i] = float(Kb.sum())

    n_threads = 1 if n * n < _TWO_THREADS_MIN else blas_threads()
    map_dynamic(block, [(i, None) for i in range(len(starts))], n_threads)
    trace = total = 0.0
    for t, s_ in zip(traces, sums, strict=True):  # the order of _trace_hkh's blocks
        trace += t
        total += s_
    return out, trace - total / n


def mmd_aggregate_statistics(X, codes, n_permutations, rng, kernel, gammas, *, n_jobs=None,
                             progress=None, kernel_name=None, max_kernel_bytes=None):
    """The B + 1 statistics of the bandwidth aggregate (see ``_bandwidth``).

    For every ``gamma`` of the public grid: the statistics ``s_b`` of
    :func:`mmd_permutation_statistics` with the SAME relabellings, minus the
    relabelling-invariant centring ``h = sqrt(max(c, f))``. Returns the maximum over
    the grid, for each b.

    When the pooled distances fit (:func:`aggregate_holds_distances`; ``kernel_name``
    "rbf" or "laplacian", the named kernel of ``kernel``) they are computed once (while
    the relabellings are drawn, in a thread), the relabellings are drawn once and shared
    by every bandwidth, and each bandwidth costs one ``exp`` of the distances (its Gram
    matrix, bit for bit the kernel's, see ``_kernels.gram_from_distances``), whose sum
    and trace give the centring, and one triangular product per column chunk
    (several chunks: chunk by chunk, the Gram matrices recomputed for each). Otherwise
    each bandwidth reads its own copy of ``rng`` in the same state. Either way ``rng``
    ends where one pass leaves it, and the relabellings are those of one
    single-bandwidth test. Bandwidths are computed on ``n_jobs`` threads; every value
    is computed by the same calls whatever ``n_jobs``.

    Returns
    -------
    statistics : ndarray of shape (n_permutations + 1,)
    """
    codes = np.asarray(codes)
    sizes = np.bincount(codes)
    n, n_groups = codes.size, sizes.size
    ksample = n_groups > 2
    n_stats = n_permutations + 1
    if kernel_name in ("rbf", "laplacian") and aggregate_holds_distances(
            n, n_groups, n_permutations, max_kernel_bytes=max_kernel_bytes):
        return _aggregate_held(X, codes, sizes, n_stats, rng, kernel, gammas, kernel_name,
                               n_jobs, progress)
    copies = same_stream(rng, len(gammas))

    def one(i):
        k = kernel.with_gamma(gammas[i])
        stats = mmd_permutation_statistics(X, codes, n_permutations, copies[i], k,
                                           ksample=ksample,
                                           max_kernel_bytes=max_kernel_bytes)
        h, _ = mmd_centre(_trace_hkh(X, k), sizes, kernel.kappa, kernel.nonnegative)
        if progress is not None:
            progress.step()
        return stats - h

    parts = map_in_threads(one, list(range(len(gammas))), n_jobs)
    rng.bit_generator.state = copies[0].bit_generator.state
    return np.max(np.vstack(parts), axis=0)


def _aggregate_held(X, codes, sizes, n_stats, rng, kernel, gammas, name, n_jobs, progress):
    """:func:`mmd_aggregate_statistics` with the pooled distances held."""
    n, n_groups = codes.size, sizes.size
    ksample = n_groups > 2
    per_chunk = max(1, int(MAX_COLUMN_BYTES // (8 * n * (n_groups if ksample else 1))))
    columns, n_chunks, finish, col_sq = _coefficient_columns(codes, sizes, n_stats, ksample,
                                                             per_chunk, rng)
    cs = col_sq if kernel.unit_diagonal else None

    def distances():
        with limit_blas():  # as held_kernel: the same values, no spinning BLAS workers
            return gram_distances(name, X)

    first, D = run_in_threads([lambda: next(columns), distances])
    n_gammas = len(gammas)
    centres = [None] * n_gammas
    parts = [[] for _ in range(n_gammas)]
    # one Gram buffer per concurrent bandwidth (n_jobs threads take them in turn)
    n_buffers = 1 if n_jobs is None or n_jobs == 1 else min(n_gammas, _joblib_workers(n_jobs))
    buffers = [np.empty((n, n)) for _ in range(n_buffers)]
    free = list(range(n_buffers))
    lock = threading.Lock()

    def chunk_forms(V):
        def one(i):
            with lock:
                slot = free.pop()
            try:
                K, trace = _gram_and_trace(D, gammas[i], buffers[slot])
                if centres[i] is None:
                    centres[i] = mmd_centre(trace, sizes, kernel.kappa,
                                            kernel.nonnegative)[0]
                parts[i].append(np.concatenate([triangular_quadratic_forms(K, W, cs)
                                                for W in V]))
            finally:
                with lock:
                    free.append(slot)
            if progress is not None and n_chunks <= 1 + ksample:
                progress.step()

        map_in_threads(one, list(range(n_gammas)), n_jobs)

    if n_chunks <= 1 + ksample:  # one pass (k-sample: the pooled column and one chunk)
        chunk_forms([first, *columns])
    else:
        chunk_forms([first])
        for V in columns:
            chunk_forms([V])
        if progress is not None:
            progress.step(n_gammas)
    buffers = D = None  # freed before the final reductions
    stats = [np.sqrt(np.maximum(finish(np.concatenate(p)), 0.0)) - centres[i]
             for i, p in enumerate(parts)]
    return np.max(np.vstack(stats), axis=0)


def _joblib_workers(n_jobs):
    """Threads joblib runs for ``n_jobs`` (its convention: -1 all cores, -2 all but one)."""
    from joblib import effective_n_jobs

    return max(1, int(effective_n_jobs(n_jobs)))


_STACK_HINT = (
    "To test two samples X1 and X2, stack them and label the rows: "
    "X = np.vstack([X1, X2]); y = np.repeat([0, 1], [len(X1), len(X2)]), "
    "or call DPMMDTest(...).test_samples(X1, X2)."
)


@dataclass(frozen=True)
class _MMDPlan:
    """Public plan of one dpMMD release (a function of the labels' counts, the
    shape of X and the parameters; never of private values)."""

    classes: Any
    codes: Any
    sizes: Any
    kernel: Any
    median: bool
    squared: bool
    sensitivity: float
    abs_error: float
    noise_epsilon: float
    noise: Any
    memory_bytes: int
    method: str
    gammas: Any = None
    # (kernel name, gamma or None, n_components, feature map) with method="features"
    features: Any = None
    # progress on stderr, and the predicted seconds shown with it (None: not predicted)
    progress: bool = False
    predicted_seconds: Any = None


def check_memory(needed, limit, what, hint=""):
    """Refuse (before the charge) a release whose estimated peak memory exceeds the limit."""
    if needed > limit:
        raise InvalidParameterError(
            f"{what} needs about {needed / 2**30:.3g} GiB of memory ({needed} bytes), above "
            f"max_memory={limit} bytes ({limit / 2**30:.3g} GiB).{hint} Raise max_memory if "
            "the machine has that much memory free."
        )


def plan_time(work, params, what):
    """``(progress, predicted seconds)`` of a release, before the charge.

    ``max_time`` refuses a fit predicted to take longer (:func:`._timing.check_max_time`);
    ``verbose=None`` shows the progress when the prediction exceeds
    ``AUTO_PROGRESS_SECONDS``, ``verbose=1`` always, ``verbose=0`` never. The prediction
    is made from public sizes and the machine's speed on public inputs only.
    """
    predicted = check_max_time(work, params["max_time"], what)
    verbose = params["verbose"]
    if verbose == 0:
        return False, predicted
    if verbose is None and predicted_seconds(
            work, threshold=AUTO_PROGRESS_SECONDS) <= AUTO_PROGRESS_SECONDS:
        return False, predicted
    if predicted is None:
        predicted = predicted_seconds(work)
    return True, predicted


def fitting_routes(routes, limit):
    """The refusal's hint: which of ``routes`` (``(description, planned bytes)``, from
    parameters and public sizes) fit within ``limit``."""
    fit = [f"{what} (about {need / 2**30:.3g} GiB)" for what, need in routes if need <= limit]
    if fit:
        return " Routes within max_memory: " + "; ".join(fit) + "."
    return (" No other route fits within max_memory either (" + "; ".join(
        f"{what}: about {need / 2**30:.3g} GiB" for what, need in routes) + ").")


def _with_median_and_data(memory, params, n, n_features):
    """A release's plan with the private median (it runs first, its arrays freed
    before the statistics), a float64 copy of the validated data and 1 MiB of small
    arrays and Python objects (the group codes, the noise, the result)."""
    if uses_private_median(params["kernel"], params["kernel_params"]):
        memory = max(memory, median_memory_bytes(n))
    return memory + 16 * n * (n_features + 1) + 2**20


def warn_ignored(estimator, params, ignored):
    """Warn (``PrivacyLeakWarning``, at the user's line) for each parameter set away
    from its default that this fit ignores or overrides.

    ``ignored`` lists ``(name, why)``: ``why`` says what the fit does instead and how
    to avoid the warning, from parameters and public sizes only. Called in the plan,
    before the charge.
    """
    defaults = inspect.signature(type(estimator).__init__).parameters
    for name, why in ignored:
        value, default = params[name], defaults[name].default
        if value is default or (type(value) is type(default) and value == default):
            continue
        warn_leak(f"{type(estimator).__name__}: {name}={value!r} is ignored: {why}")


def _predicted(plan):
    if plan.predicted_seconds is None:
        return ""
    return f", predicted about {format_seconds(plan.predicted_seconds)}"


def _two_sample_error(message):
    return ValueError(f"{message} {_STACK_HINT}")


class DPMMDTest(BasePrivateTest):
    r"""Differentially private permutation MMD two-sample (and k-sample) test.

    Tests H0: all groups of rows of ``X`` (given by the labels ``y``) come
    from the same distribution, with the dpMMD test of Kim & Schrab [1]_: the
    plug-in (V-statistic) MMD on the observed labels and on ``n_permutations``
    random relabellings, each privatised by independent Laplace noise of
    scale :math:`2\Delta/\xi`, :math:`\xi = \varepsilon + \log(1/(1-\delta))`,
    and the rank p-value of the noisy observed statistic.

    Privacy: (``epsilon``, ``delta``)-DP for one fit (or one ``score``) under
    the neighbouring relation *replace one row of* ``X`` *within its group*
    (the group sizes, hence the labels' counts, are public). ``delta = 0``
    gives pure ``epsilon``-DP.

    **Released** (everything that leaves a fit): ``result_.pvalue`` and
    ``result_.reject`` (a function of it), ``gamma_`` (= ``result_.gamma``)
    with ``kernel_params={"gamma": "median"}``, and public quantities
    (``classes_``, the sizes behind ``sensitivity``, ``n_permutations``,
    ``noise_scale``...). The noisy observed statistic is *not* released: it
    shares its noise with the p-value, and the permutation theorem covers the
    p-value only. Joint argument: the bandwidth is an (``0.05 epsilon``)-DP
    exponential mechanism on the pooled rows (labels unused); the p-value is
    (``0.95 epsilon``, ``delta``)-DP given the bandwidth (Theorem 2 of [1]_);
    by sequential composition the pair is (``epsilon``, ``delta``)-DP. Without
    the median heuristic the permutation release gets all of ``epsilon``.

    Parameters
    ----------
    kernel : str, sklearn.gaussian_process.kernels.Kernel or callable, default="rbf"
        A name from ``sklearn.metrics.pairwise.PAIRWISE_KERNEL_FUNCTIONS``
        (rbf, laplacian, chi2 and cosine have a known bound; linear and
        polynomial need ``kernel_bound``; sigmoid and additive_chi2 are refused
        as not positive definite), a stationary scikit-learn Gaussian-process
        kernel (bound ``k(x, x)``; zero or non-finite hyperparameters are
        refused), or a callable ``kernel(X, Y, **kernel_params)`` returning the
        Gram matrix (needs ``kernel_bound``). A callable is *not* assumed
        positive definite: its values are mapped into
        ``[-kernel_bound, kernel_bound]`` (NaN to 0, then clipped) and the test
        privatises the squared MMD with a sensitivity valid for any kernel
        bounded by ``kernel_bound`` (see Notes; less power than the
        positive-definite rule). **Default: the bandwidth aggregate** (rbf or
        laplacian without a ``gamma``): the maximum over a public grid of 19
        bandwidths ``gamma = 2^k / n_features`` of centred statistics, one DP
        p-value, no extra privacy cost and no need to standardise the data
        (see ``skdptest/kernel/_bandwidth.py`` and doc/kernel_tests.md for the
        validity and sensitivity proofs); about 19 times the work of one
        bandwidth.
    kernel_params : dict, default=None
        Keyword arguments of the kernel (``gamma``, ``degree``, ... for named
        kernels; hyperparameters set on a copy of a GP kernel; keyword arguments
        of a callable). An explicit ``{"gamma": g}`` is the single-bandwidth
        test; ``{"gamma": None}`` the previous default ``1 / n_features``;
        ``{"gamma": "aggregate"}`` the default. ``{"gamma": "median"}`` (rbf,
        laplacian) asks for a
        *private* median heuristic: 5 % of ``epsilon`` buys an
        epsilon-DP median of the pooled pairwise distances (exponential
        mechanism over a public grid, labels unused), the rest the test; the
        total charged is still ``(epsilon, delta)``.
    kernel_bound : float, default=None
        Public bound :math:`\kappa` on ``k(x, x)`` (named and scikit-learn
        kernels: checked on the data's diagonal, a violation raises
        ``ValueError`` before any budget is charged) or on ``|k(x, x')|``
        (callables: enforced by clipping). At most ``2**200``.
    epsilon : float, default=1.0
        Privacy loss of one fit, > 0.
    delta : float, default=0.0
        Failure probability, in [0, 1).
    alpha : float, default=0.05
        Level of the test, in (0, 1).
    n_permutations : int, default=2000
        Number B of random relabellings, in [1, 10**6].
    max_memory : int, default=4 * 2**30
        Public limit, in bytes, on the planned peak memory of a release, an
        upper bound (see :func:`mmd_memory_bytes`; about 1 GiB at most with the
        default internal chunk sizes, more for huge N or many groups). A fit
        that would need more is refused before the budget is charged, naming
        the routes that fit.
    n_jobs : int, default=None
        Threads (joblib) over the bandwidths of the aggregate (BLAS capped at
        one thread per worker); -1 uses all cores. The release does not
        depend on it: every value is computed by the same calls. Set without
        the aggregate (or ``n_components``/``feature_map`` with
        ``method="exact"``, ``kernel_bound`` with ``method="features"``), it is
        ignored and raises :class:`~skdptest.PrivacyLeakWarning`.
    verbose : {0, 1} or None, default=None
        Progress on stderr (the predicted time, then the aggregate's bandwidths done,
        elapsed, ETA, and a hint on ``n_jobs``); nothing derived from the data.
        ``None`` shows it when the fit is predicted to take more than 10 s, 1 always,
        0 never. The prediction is made before the charge from public sizes (N, the
        number of features and groups, B, the route) and this machine's speed on
        public random inputs (measured once a minute, only when it decides).
    max_time : float, default=None
        Refuse, before the budget is charged, a fit predicted (as for ``verbose``) to
        take more than this many seconds; ``None``: no limit. The refusal names
        ``max_time`` and the predicted time.
    method : {"exact", "features"}, default="exact"
        ``"features"``: random Fourier features (rbf or laplacian ``kernel`` only;
        ``gamma`` numeric, ``"median"`` or, if absent, ``1 / n_features``).
        ``n_components`` frequencies are drawn from the generator (never from the
        data); ``phi(x) = D^{-1/2} [cos(w^T x), sin(w^T x)]`` has norm 1, so the feature
        kernel is positive definite with ``k(x, x) = 1`` and the sensitivity is the
        sqrt-MMD one with feature diameter ``2R`` (``R = 1 + 2^-16`` bounds every
        computed, quantised row exactly): ``2R / min(m, n)`` for two groups. All
        B + 1 statistics come from exact integer feature sums, in O(N D B) time and
        O(N D) memory plus one chunk of relabelling masks. Validity is exact
        (conditionally on the data-independent frequencies the test is a
        permutation test); only the power differs from the exact kernel's. See
        :mod:`skdptest.kernel._features`. **Dask input**: with ``"features"``, ``X``
        may be a dask array or dataframe (numeric) and ``y`` numpy, pandas or dask;
        the feature rows are computed and kept on the workers, which return exact
        integer sums only, and the release is the numpy input's, bit for bit (see
        :mod:`skdptest.kernel._distributed`). ``"exact"`` (and the private median
        bandwidth) refuse dask input with a ``TypeError`` (``ValueError``) before
        the charge.
    n_components : int, default=64
        Number D of random frequencies (2D features) with ``method="features"``,
        in [1, 2**14]; ignored otherwise.
    feature_map : {"fourier", "squared"}, default="fourier"
        With ``method="features"``: ``"fourier"``, the ``2 D`` random Fourier features
        ``phi``; ``"squared"``, the ``D (2 D + 1)`` features of ``phi (x) phi``, whose
        kernel ``(phi(x)^T phi(x'))^2`` is never negative, so the feature diameter is
        about ``sqrt(2)`` instead of 2 and the privacy noise ``sqrt(2)`` times
        smaller (frequencies drawn for ``gamma / 2``: the squared kernel
        approximates the same rbf or laplacian kernel). Costs ``D + 1/2`` times the
        features of ``"fourier"``: the choice for moderate N and small epsilon (see
        :func:`~skdptest.kernel._features.feature_shape`).
    budget : PrivacyBudget, default=None
        Ledger charged ``(epsilon, delta)`` by every ``fit`` and ``score``.
    random_state : None, int, RandomState instance or Generator, default=None
        Source of the relabellings and the noise. For tests and reproducible examples only: any
        value other than ``None`` raises :class:`~skdptest.FixedRandomStateWarning` (whoever holds
        the seed, the generator or a pickle of the estimator can replay the noise, and equal seeds
        correlate the noise of different fits). ``None`` draws fresh OS entropy and keeps nothing
        from which the noise could be regenerated.

    Attributes
    ----------
    result_ : PermutationTestResult
        The private result of the last fit (p-value, decision, public noise
        description).
    classes_ : ndarray of shape (n_groups,)
        Group labels (sorted; public); the first one is the "X sample" of MMD.
    gamma_ : float or None
        The privately chosen ``gamma`` with ``kernel_params={"gamma": "median"}``
        (itself a DP release, covered by the composition above), else None.
    gamma_grid_ : ndarray of shape (19,) or None
        The public bandwidth grid of the aggregate (a function of the kernel
        name and ``n_features`` only), else None. The release's ``method``
        then ends in ``" aggregate"`` and ``sensitivity`` is the aggregate's
        (the usual Delta plus the centring's share).
    n_features_in_ : int
        Number of features seen in ``fit``.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Feature names, when ``X`` is a DataFrame with string column names.

    See Also
    --------
    DPHSICTest : The private permutation independence test.

    Notes
    -----
    **Input.** ``y`` holds group labels: ``y`` must be discrete (a continuous
    ``y``, e.g. a second sample passed as ``y``, is refused), with at least
    two groups and at least two rows in every group. For two samples use
    :meth:`test_samples`, or stack them:
    ``X = np.vstack([X1, X2]); y = np.repeat([0, 1], [len(X1), len(X2)])``.
    ``X`` may be a dask array or dataframe with ``method="features"`` (see
    ``method``); the classes and group sizes are then counted per chunk on the
    workers, and with three or more groups the group codes (one byte per row) are
    gathered to the client, which draws the relabellings.

    **Two groups** (sizes m, n). The statistic is
    :math:`\mathrm{MMD}_b = \|\hat\mu_1 - \hat\mu_2\|_{\mathcal H} = \sqrt{v^\top K v}`
    with :math:`v = (1/m, \dots, 1/m, -1/n, \dots, -1/n)`. Replacing one row
    :math:`x` by :math:`x'` in a group of size :math:`n_g` moves that group's mean
    embedding by :math:`(\phi(x') - \phi(x))/n_g`, so by the triangle inequality
    :math:`\Delta = D / \min(m, n)` with the feature diameter
    :math:`D = \sup \|\phi(x) - \phi(x')\| = \sup \sqrt{k(x,x) + k(x',x') - 2k(x,x')}`.
    For a kernel with values in :math:`[0, \kappa]`, :math:`D = \sqrt{2\kappa}`
    (:math:`\kappa = 1`: :math:`\Delta = \sqrt 2/\min(m, n)`); for any positive
    definite kernel with :math:`k(x, x) \le \kappa`, :math:`D = 2\sqrt\kappa`.
    The bound is attained by two point masses at distance where
    :math:`k(x, x') = 0` with one point moved. Every permuted statistic is the
    same function of relabelled data with the same group sizes, so the same
    :math:`\Delta` holds for all B + 1 values.

    **G >= 3 groups** (sizes :math:`n_g`, :math:`N = \sum n_g`). The statistic is
    the kernel between-group dispersion
    :math:`T = \sqrt{\sum_g (n_g/N)\|\hat\mu_g - \hat\mu\|^2}`, :math:`\hat\mu` the
    pooled mean embedding. It is the norm of the vector
    :math:`(\sqrt{n_g/N}(\hat\mu_g - \hat\mu))_g`. Replacing a row of group h by
    a feature difference :math:`d` changes component h by
    :math:`\sqrt{n_h/N}\,d\,(1/n_h - 1/N)` and every other component by
    :math:`-\sqrt{n_g/N}\,d/N`; the squared norm of the change is
    :math:`\|d\|^2 (N - n_h)/(N^2 n_h)`, hence
    :math:`\Delta = (D/N)\sqrt{(N - n_{\min})/n_{\min}}`. For two groups
    :math:`T = \sqrt{mn}/N\cdot\mathrm{MMD}_b` and the two sensitivities agree,
    so both statistics give the same test.

    **Callable kernels** (not assumed positive definite; values in
    :math:`[-\kappa, \kappa]` by clipping). The square root is then not
    Lipschitz, so the squared statistics (the quadratic forms
    :math:`\sum_{jl} c_{jl} K_{jl}`) are privatised, with
    :math:`\Delta = 8\kappa/n_{\min} - 2\kappa/n_{\min}^2` (two groups) or
    :math:`8\kappa(N - n_{\min})/N^2` (k-sample): replacing row i changes row
    and column i of K by at most :math:`2\kappa` per entry (see
    :func:`mmd_squared_sensitivity`).

    **Floating point.** The noise is calibrated to
    :math:`\Delta + 2\eta`, with :math:`\eta` (``result_.abs_error``) a
    certified bound on the float64 rounding of each statistic computed from
    the Gram values (:func:`mmd_abs_error`): computed statistics on
    neighbouring data then differ by at most :math:`\Delta + 2\eta`.
    Statistics that are not finite are refused (no p-value is computed from a
    NaN comparison). Kernel parameters that give NaN (a zero length scale),
    bounds above ``2**200`` and GP kernels with :math:`k(x,x)` out of range are
    refused before the charge; the rbf kernel recomputes the rows of large
    norm (above ``2**40`` squared) from coordinate differences, so huge values
    do not overflow into NaN.

    **Computation.** All B + 1 statistics are :math:`\mathrm{diag}(V^\top K V)`
    of one coefficient matrix (two groups: each relabelling puts group 0 on
    the positions of the m smallest of N uniform random 32-bit keys, selected
    by ``np.partition``, with exact rejection of ties; more groups:
    ``Generator.permuted`` shuffles its rows); the kernel is evaluated in
    blocks, symmetrically (about half the work of the full product), and the
    N x N matrix is never held unless it fits in ``MAX_KERNEL_BYTES`` (256 MiB,
    N <= 5792: evaluated while the relabellings are drawn in a thread, then one
    triangular product per column chunk). The bandwidth aggregate holds the pooled
    distances instead (same limit): computed once per fit, one ``exp`` and one
    triangular product per bandwidth, the relabellings drawn once for all. With
    more than ``MANY_GROUPS`` (16) groups, each relabelling costs one sparse
    one-hot by kernel product instead (O(N^2) rather than O(G N^2)).
    Everything that can refuse the input (parameters, labels, kernel, memory)
    runs before the budget is charged.

    References
    ----------
    .. [1] I. Kim and A. Schrab, "Differentially Private Permutation Tests:
       Applications to Kernel Methods", arXiv:2310.19043, 2023.
    .. [2] A. Gretton, K. Borgwardt, M. Rasch, B. Schoelkopf and A. Smola,
       "A Kernel Two-Sample Test", JMLR 13, 2012.

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest import DPMMDTest
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(size=(200, 2)), rng.normal(1.0, size=(200, 2))])
    >>> groups = np.repeat(["a", "b"], 200)
    >>> result = DPMMDTest(epsilon=1.0, random_state=0).test(X, groups)
    >>> bool(result.reject)
    True
    >>> result.n_permutations
    2000
    """

    _requires_y = True

    _parameter_constraints = {
        "kernel": KERNEL_CONSTRAINT,
        "kernel_params": KERNEL_PARAMS_CONSTRAINT,
        "kernel_bound": [NoneValue(), Interval(Real, 0, None, closed="neither")],
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "delta": [Interval(Real, 0, 1, closed="left")],
        "alpha": [Interval(Real, 0, 1, closed="neither")],
        "n_permutations": [Interval(Integral, 1, MAX_PERMUTATIONS)],
        "max_memory": [Interval(Integral, 1, None)],
        "n_jobs": [NoneValue(), Interval(Integral, None, None)],
        "verbose": [NoneValue(), Interval(Integral, 0, 1)],
        "max_time": [NoneValue(), Interval(Real, 0, None, closed="neither")],
        "method": [Options("exact", "features")],
        "n_components": [Interval(Integral, 1, MAX_COMPONENTS)],
        "feature_map": [Options("fourier", "squared")],
        "budget": [NoneValue(), InstanceOf(PrivacyBudget)],
        "random_state": [RandomState()],
    }

    def __init__(self, *, kernel="rbf", kernel_params=None, kernel_bound=None, epsilon=1.0,
                 delta=0.0, alpha=0.05, n_permutations=2000, max_memory=DEFAULT_MAX_MEMORY,
                 n_jobs=None, verbose=None, max_time=None, method="exact", n_components=64,
                 feature_map="fourier", budget=None, random_state=None):
        self.kernel = kernel
        self.kernel_params = kernel_params
        self.kernel_bound = kernel_bound
        self.epsilon = epsilon
        self.delta = delta
        self.alpha = alpha
        self.n_permutations = n_permutations
        self.max_memory = max_memory
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.max_time = max_time
        self.method = method
        self.n_components = n_components
        self.feature_map = feature_map
        self.budget = budget
        self.random_state = random_state

    def _check_params(self, params):
        check_kernel_spec(params["kernel"], params["kernel_params"], params["kernel_bound"])
        if params["n_jobs"] == 0:
            raise InvalidParameterError("n_jobs must be None, a positive int or a negative "
                                        "int (joblib's convention), got 0.")
        return params

    def _validate_input(self, X, y, reset):
        if y is not None and np.ndim(y) == 2 and np.shape(y)[1] > 1:
            raise _two_sample_error(
                f"DPMMDTest takes group labels y of shape (n_samples,); got an array of "
                f"shape {np.shape(y)}, which looks like a second sample."
            )
        if is_dask(X):  # lazily: metadata only (finiteness and labels in the plan)
            return validate_dask_input(self, X, y, reset, labels=True)
        if is_dask(y):  # X in memory: the labels (N values) are brought to it
            y = y.compute()
        # the core's checks (numeric dtype, the library's refusals): any label dtype
        X, y = super()._validate_input(X, y, reset)
        return X.astype(np.float64, copy=False), y

    def _plan(self, params, X, y):
        labels = None
        if is_dask(X):
            refuse_dask("DPMMDTest", params["method"],
                        (("kernel_params", params["kernel_params"]),))
            # per-chunk distinct labels and counts from the workers (after their NaN
            # checks): the public classes and sizes; the labels' kind is their classes'
            labels = dask_labels(X, y)
            y = labels.classes
        kind = type_of_target(y)
        if kind == "unknown":
            raise ValueError(
                f"Unknown label type: DPMMDTest needs discrete group labels y (got an "
                f"array of dtype {np.asarray(y).dtype} that holds neither numbers nor "
                "strings)."
            )
        if kind not in ("binary", "multiclass"):
            raise _two_sample_error(
                f"DPMMDTest needs discrete group labels y; got {kind} values (a second "
                "sample or a continuous variable is not a grouping)."
            )
        if labels is None:
            classes, codes = np.unique(y, return_inverse=True)
            codes = codes.ravel()
        else:  # the per-row labels stay on the workers (codes: the lazy DaskLabels)
            classes, codes = labels.classes, labels
        if classes.size < 2:
            raise ValueError(
                f"DPMMDTest needs at least 2 groups in y; got {classes.size} class "
                f"({X.shape[0]} sample(s))."
            )
        sizes = np.bincount(codes) if labels is None else labels.sizes
        if sizes.min() < 2:
            raise _two_sample_error(
                f"DPMMDTest needs at least 2 rows in every group of y; the smallest of "
                f"the {classes.size} groups has {int(sizes.min())} row."
            )
        if params["method"] == "features":
            warn_ignored(self, params, [
                ("kernel_bound", "method='features' uses the feature kernel, bounded by 1 "
                 "(leave kernel_bound=None)."),
                ("n_jobs", "method='features' runs on the BLAS threads in force (leave "
                 "n_jobs=None)."),
            ])
            return self._features_plan(params, X, classes, codes, sizes)
        warn_ignored(self, params, [
            (name, "it applies to method='features' only (leave it at its default or set "
             "method='features').") for name in ("n_components", "feature_map")])
        if not uses_aggregate(params["kernel"], params["kernel_params"]):
            warn_ignored(self, params, [
                ("n_jobs", "it parallelises the bandwidth aggregate only (kernel_params "
                 "without 'gamma'); one bandwidth runs on the BLAS threads in force (leave "
                 "n_jobs=None).")])
        kernel = resolve_kernel(params["kernel"], params["kernel_params"],
                                params["kernel_bound"], X)
        squared = not kernel.positive_definite
        if squared:
            sensitivity = mmd_squared_sensitivity(sizes, kernel.kappa)
        else:
            sensitivity = mmd_sensitivity(sizes, kernel.diameter)
        n, n_groups = int(codes.size), int(sizes.size)
        if uses_aggregate(params["kernel"], params["kernel_params"]):
            memory = mmd_aggregate_memory_bytes(n, n_groups, params["n_permutations"],
                                                params["n_jobs"])
        else:
            memory = mmd_memory_bytes(n, n_groups, params["n_permutations"],
                                      eval_bytes=kernel_eval_bytes(params["kernel"]))
        memory = _with_median_and_data(memory, params, n, X.shape[1])
        hint = ""
        if memory > params["max_memory"]:  # the routes that fit (public sizes only)
            hint = fitting_routes([(
                "method='features' (random Fourier features, linear in N)",
                feature_mmd_memory_bytes(n, X.shape[1], 64, n_groups,
                                         params["n_permutations"])
                + 16 * n * (X.shape[1] + 1))], params["max_memory"])
        check_memory(memory, params["max_memory"],
                     f"DPMMDTest with N = {n} rows, {n_groups} groups and "
                     f"n_permutations = {params['n_permutations']}", hint)
        median = uses_private_median(params["kernel"], params["kernel_params"])
        noise_epsilon = params["epsilon"]
        if median:  # the bandwidth's share (an exponential mechanism) comes first
            noise_epsilon -= MEDIAN_EPSILON_SHARE * params["epsilon"]
        abs_error = mmd_abs_error(sizes, kernel.kappa, kernel.diameter, squared=squared)
        method = "dpMMD" if n_groups == 2 else "dpMMD k-sample"
        gammas = None
        if uses_aggregate(params["kernel"], params["kernel_params"]):
            # max over a public grid of centred statistics (see _bandwidth): the
            # sensitivity grows by the centring's share only, the error by its rounding
            gammas = bandwidth_grid(params["kernel"], X.shape[1])
            constants = mmd_centre_constants(sizes, kernel.kappa, kernel.nonnegative)
            sensitivity = aggregate_sensitivity(sensitivity, constants)
            abs_error += centre_abs_error(constants, trace_abs_error(n, kernel.kappa),
                                          2.0 * kernel.diameter)
            method += " aggregate"
        noise = plan_noise(sensitivity, abs_error, noise_epsilon, params["delta"])
        work = mmd_work(n, X.shape[1], n_groups, params["n_permutations"],
                        n_bandwidths=None if gammas is None else len(gammas), median=median)
        progress, predicted = plan_time(
            work, params, f"DPMMDTest ({method}) with N = {n} rows, {n_groups} groups and "
            f"n_permutations = {params['n_permutations']}")
        return _MMDPlan(
            classes=classes, codes=codes, sizes=sizes, kernel=kernel, median=median,
            squared=squared, sensitivity=sensitivity, abs_error=abs_error,
            noise_epsilon=noise_epsilon, noise=noise,
            memory_bytes=memory, method=method, gammas=gammas,
            progress=progress, predicted_seconds=predicted,
        )

    def _features_plan(self, params, X, classes, codes, sizes):
        # Random features (see _features): the feature kernel is positive definite, so
        # the sqrt-MMD sensitivity holds with the certified diameter of the computed rows
        # (feature_shape: 2R for "fourier", sqrt(2) R^2 + 2 eta for "squared").
        gamma = check_feature_kernel(params["kernel"], params["kernel_params"], X.shape[1])
        n, n_groups = int(codes.size), int(sizes.size)
        kind, D = params["feature_map"], params["n_components"]
        max_rows = max_exact_rows(kind)
        if n > max_rows:
            raise InvalidParameterError(
                f"method='features' with feature_map={kind!r} accepts at most {max_rows} "
                f"rows (exact integer sums); got N = {n}.")
        n_dims, _, diameter = feature_shape(D, kind)
        if is_dask(X):  # the client's share: masks, packed slices, returned sums
            memory = dask_mmd_memory_bytes(n, len(X.chunks[0]), n_dims, n_groups,
                                           params["n_permutations"])
        else:
            memory = _with_median_and_data(
                feature_mmd_memory_bytes(n, X.shape[1], D, n_groups,
                                         params["n_permutations"], kind=kind),
                params, n, X.shape[1])
        check_memory(memory, params["max_memory"],
                     f"DPMMDTest(method='features', n_components={D}, feature_map={kind!r}) "
                     f"with N = {n} rows ({n_dims} features per row)")
        median = uses_private_median(params["kernel"], params["kernel_params"])
        noise_epsilon = params["epsilon"]
        if median:
            noise_epsilon -= MEDIAN_EPSILON_SHARE * params["epsilon"]
        sensitivity = mmd_sensitivity(sizes, diameter)
        abs_error = feature_mmd_abs_error(D, n_groups, kind)
        noise = plan_noise(sensitivity, abs_error, noise_epsilon, params["delta"])
        progress, predicted = plan_time(
            mmd_work(n, X.shape[1], n_groups, params["n_permutations"], feature_dims=n_dims,
                     median=median), params,
            f"DPMMDTest(method='features', n_components={D}) with N = {n} rows and "
            f"n_permutations = {params['n_permutations']}")
        return _MMDPlan(
            classes=classes, codes=codes, sizes=sizes, kernel=None, median=median,
            squared=False, sensitivity=sensitivity, abs_error=abs_error,
            noise_epsilon=noise_epsilon, noise=noise,
            memory_bytes=memory, progress=progress, predicted_seconds=predicted,
            method=("dpMMD" if n_groups == 2 else "dpMMD k-sample")
            + (" features" if kind == "fourier" else " squared features"),
            features=(params["kernel"], gamma, D, kind),
        )

    def _features_release(self, prep, rng):
        # order of the draws: private bandwidth (if asked), frequencies, relabellings,
        # noise; the frequencies never see the data
        params, plan, X = prep.params, prep.plan, prep.X
        name, gamma, D, kind = plan.features
        progress = Progress(plan.progress, 1, "statistics")
        progress.message(f"dpMMD features: {params['n_permutations'] + 1} statistics on "
                         f"N = {X.shape[0]} rows" + _predicted(plan))
        released = None
        if plan.median:
            eps_bw = MEDIAN_EPSILON_SHARE * params["epsilon"]
            gamma = released = float(private_median_gamma(X, name, eps_bw, rng))
        omega = draw_frequencies(name, spectral_gamma(gamma, kind), X.shape[1], D, rng)
        if is_dask(X):  # feature rows on the workers; only exact sums come back
            stats = dask_feature_mmd_statistics(X, plan.codes, omega,
                                                params["n_permutations"], rng, kind=kind)
        else:
            stats = feature_mmd_statistics(make_features(X, omega, kind), plan.codes,
                                           params["n_permutations"], rng)
        return make_permutation_result(
            stats, plan.sensitivity, plan.abs_error, epsilon=params["epsilon"],
            delta=params["delta"], alpha=params["alpha"], n_samples=X.shape[0], rng=rng,
            noise_epsilon=plan.noise_epsilon, method=plan.method, statistic="sqrt",
            gamma=released,
        )

    def _release(self, prep, rng):
        params, plan, X = prep.params, prep.plan, prep.X
        if plan.features is not None:
            return self._features_release(prep, rng)
        kernel, gamma = plan.kernel, None
        if plan.median:
            # labels are not used: the bandwidth is invariant under relabelling
            eps_bw = MEDIAN_EPSILON_SHARE * params["epsilon"]
            gamma = private_median_gamma(X, params["kernel"], eps_bw, rng)
            kernel = kernel.with_gamma(gamma)
        if plan.gammas is not None:
            progress = Progress(plan.progress, len(plan.gammas), "bandwidths")
            progress.message(
                f"dpMMD aggregate: {len(plan.gammas)} bandwidths x "
                f"{params['n_permutations'] + 1} statistics on N = {X.shape[0]} rows"
                + _predicted(plan)
                + ("" if params["n_jobs"] not in (None, 1) else
                   "; n_jobs=-1 computes the bandwidths on all cores"))
            stats = mmd_aggregate_statistics(X, plan.codes, params["n_permutations"], rng,
                                             kernel, plan.gammas, n_jobs=params["n_jobs"],
                                             progress=progress, kernel_name=params["kernel"])
        else:
            progress = Progress(plan.progress, 1, "statistics")
            progress.message(
                f"dpMMD: {params['n_permutations'] + 1} statistics on N = {X.shape[0]} rows"
                + _predicted(plan)
                + ("; method='features' is linear-time for large N" if X.shape[0] > 20_000
                   else ""))
            stats = mmd_permutation_statistics(X, plan.codes, params["n_permutations"], rng,
                                               kernel, squared=plan.squared)
            progress.step()
        return make_permutation_result(
            stats, plan.sensitivity, plan.abs_error, epsilon=params["epsilon"],
            delta=params["delta"], alpha=params["alpha"], n_samples=X.shape[0], rng=rng,
            noise_epsilon=plan.noise_epsilon, method=plan.method,
            statistic="squared" if plan.squared else "sqrt",
            gamma=None if gamma is None else float(gamma),
        )

    def _fitted_attributes(self, prep, result):
        return {"classes_": prep.plan.classes, "gamma_": result.gamma,
                "gamma_grid_": prep.plan.gammas}

    def _noise_plan(self, prep):
        """What a fit noises (the grey-box audit hook, doc/contributing.md)."""
        shares = [MEDIAN_EPSILON_SHARE * prep.params["epsilon"]] if prep.plan.median else []
        return noise_plan(prep.plan, prep.params["delta"], shares)

    def _score_value(self, result):
        return -math.log(result.pvalue)

    def test_samples(self, X1, X2, *more):
        """Test whether two (or more) samples come from the same distribution.

        Stacks the samples, labels their rows ``0, 1, ...`` in order, fits
        (one charge of ``(epsilon, delta)``) and returns the result: the same
        release as ``fit(np.vstack([X1, X2, ...]), np.repeat([0, 1, ...],
        sizes))`` with the same ``random_state``. ``classes_`` is then
        ``[0, 1, ...]``.

        Parameters
        ----------
        X1, X2, *more : array-like of shape (n_i, n_features)
            The samples (at least two rows each, the same number of features).

        Returns
        -------
        result : PermutationTestResult
            The private result (also in ``result_``).

        Examples
        --------
        >>> import numpy as np
        >>> from skdptest import DPMMDTest
        >>> rng = np.random.default_rng(0)
        >>> X1, X2 = rng.normal(size=(100, 3)), rng.normal(0.5, size=(120, 3))
        >>> res = DPMMDTest(epsilon=2.0, random_state=0).test_samples(X1, X2)
        >>> bool(res.reject)
        True
        """
        if any(is_dask(s) for s in (X1, X2, *more)):  # stacked lazily, labelled 0, 1, ...
            return self.test(*stack_dask_samples((X1, X2, *more)))
        samples = []
        for i, sample in enumerate((X1, X2, *more)):
            arr = sample if hasattr(sample, "iloc") else np.asarray(sample)
            if np.ndim(arr) != 2:
                raise ValueError(
                    f"test_samples takes 2-D samples of shape (n_i, n_features); sample "
                    f"{i} has shape {np.shape(arr)} (reshape a single feature with "
                    "x.reshape(-1, 1))."
                )
            samples.append(arr)
        widths = {np.shape(s)[1] for s in samples}
        if len(widths) != 1:
            raise ValueError(
                f"test_samples needs the same number of features in every sample; got "
                f"{[np.shape(s)[1] for s in samples]}."
            )
        sizes = [np.shape(s)[0] for s in samples]
        if all(hasattr(s, "iloc") for s in samples):
            import pandas as pd  # only when the samples are DataFrames

            X = pd.concat(samples, ignore_index=True)
        else:
            X = np.vstack([np.asarray(s) for s in samples])
        return self.test(X, np.repeat(np.arange(len(samples)), sizes))
