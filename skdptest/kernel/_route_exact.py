"""Exact dpMMD statistics: sensitivities, certified rounding, memory, the quadratic forms.

The B + 1 statistics are ``diag(V^T K V)`` of one coefficient matrix ``V`` (the
relabellings of :mod:`._relabel`): one triangular product per column chunk when the
kernel matrix is held, symmetric kernel blocks on the fly otherwise (see
:class:`~skdptest.DPMMDTest`, Notes).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import sparse

from .._threads import limit_blas, run_in_threads
from ._relabel import (
    _TWO_THREADS_MIN,
    _coefficient_columns,
    _DenseRows,
    _in_row_blocks,  # noqa: F401 - re-exported for _relabel's users
    _MaskRows,
    _permuted_rows,
    _smallest_int_dtype,
)
from ._trmm import map_row_blocks, trmm_rows

__all__ = [
    "column_quadratic_forms",
    "held_kernel",
    "mmd_abs_error",
    "mmd_memory_bytes",
    "mmd_permutation_statistics",
    "mmd_sensitivity",
    "mmd_squared_sensitivity",
    "triangular_quadratic_forms",
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
        if n * n < _TWO_THREADS_MIN:  # too small to gain from a worker (~0.2 ms to hand over)
            V = next(columns)
            return triangular_quadratic_forms(held_kernel(X, kernel), V, col_sq)
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
        # C-ordered float rows are read in place (the same layout as the scratch rows)
        held = isinstance(rows, _DenseRows) and rows.M.flags.c_contiguous
        scratch = None if held else np.empty((min(_REDUCE_ROWS, r1 - r0), K.shape[0]))
        for s0 in range(r0, r1, _REDUCE_ROWS):
            s1 = min(s0 + _REDUCE_ROWS, r1)
            Mb = rows.M[s0:s1] if held else rows.block(s0, s1, out=scratch[:s1 - s0])
            Pb, out = P[s0:s1], q[s0:s1]
            out[...] = (Mb[:, None, :] @ Pb[:, :, None])[:, 0, 0]
            out *= 2.0
            if unit:  # unit diagonal (rbf, laplacian): one product per matrix
                out += (d[0] - 2.0) * col_sq
            else:
                out += np.einsum("ij,ij,j->i", Mb, Mb, d_minus_2)

    # Small products stay on the calling thread: handing a block to a worker costs about
    # 0.2 ms of CPU, more than it takes off (the values do not depend on the blocks).
    if float(rows.n_rows) * K.shape[0] ** 2 < _TWO_THREADS_MIN_FLOPS:
        map_row_blocks(block, rows.n_rows, n_threads=1)
    else:
        map_row_blocks(block, rows.n_rows)
    return q


# Below this many multiply-adds (rows x N^2) the triangular product runs on one thread.
_TWO_THREADS_MIN_FLOPS = 2**24


# Rows per piece of the final reduction: few numpy calls per thread (threads making
# many small calls contend for the GIL: 32-row pieces were measurably slower).
_REDUCE_ROWS = 512


def _kernel_block(X, kernel, edges, i, j):
    rows = X[edges[i]:edges[i + 1]]
    if i == j:
        return kernel(rows)
    return kernel(rows, X[edges[j]:edges[j + 1]])


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
