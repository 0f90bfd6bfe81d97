"""Feature dpMMD and dpHSIC statistics, their certified rounding bounds and memory plans.

The B + 1 statistics from the exact feature sums (:func:`feature_mmd_statistics`,
:func:`feature_hsic_statistics`), the bound on their float64 rounding
(:func:`feature_mmd_abs_error`, :func:`feature_hsic_abs_error`) and the planned
peak memory. Split from :mod:`._features`."""

from __future__ import annotations

import math

import numpy as np

from .._threads import blas_threads
from ._feature_map import (
    _QBITS,
    _SQUARED_BLOCK_ELEMENTS,
    _U,
    BLOCK_ROWS,
    MAX_MASK_BYTES,
    _gamma,
    feature_shape,
)
from ._feature_masks import (
    _GATHER_ROWS,
    _LOCATE_BYTES,
    _SPLIT_ROWS,
    KEY_BLOCK,
    SubsetDraw,
    _chunk_columns,
    _masked_sums,
    subset_sums,
)

__all__ = [
    "feature_hsic_abs_error",
    "feature_hsic_memory_bytes",
    "feature_hsic_statistics",
    "feature_mmd_abs_error",
    "feature_mmd_memory_bytes",
    "feature_mmd_statistics",
    "group_feature_sums",
    "mmd_statistics_from_sums",
]


def group_feature_sums(F, codes, n_groups, block_rows=BLOCK_ROWS):
    """Sums of the quantised feature rows of each group, shape ``(n_groups, 2 D)``.

    Integer rows, so every partial sum is an integer below ``2^53``: the float64 sums
    are exact, whatever the order, the blocks or the chunks they are formed in (a
    dask worker's chunk sums added on the client give the same bits as one pass).
    """
    codes = np.asarray(codes)
    out = np.zeros((n_groups, F.shape[1]))
    for r0 in range(0, F.shape[0], block_rows):
        c = codes[r0:r0 + block_rows]
        order = np.argsort(c, kind="stable")
        sorted_codes = c[order]
        starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])
        block = F[r0:r0 + block_rows].astype(np.float64)[order]
        out[sorted_codes[starts]] += np.add.reduceat(block, starts, axis=0)
    return out


def feature_mmd_statistics(F, codes, n_permutations, rng, *, max_mask_bytes=None,
                           block_rows=BLOCK_ROWS, kind=None):
    """The B + 1 MMD statistics (observed first) of quantised feature rows ``F``.

    ``kind``: the map ``F`` was made with (:func:`make_features`). ``"fourier"``
    rows are 12-bit integers times a power of two, summed by one float32 product per
    block; ``None`` (any integer rows below 2^24, e.g. ``"squared"``) splits each row
    in two products. Both sums are exact: the statistics are the same bits.

    Two groups: ``||mu_S - mu_rest||`` with S the smaller group (observed, then
    uniform relabellings, :func:`subset_masks`); G >= 3 groups:
    ``sqrt(sum_g (n_g / N) ||mu_g - mu||^2)`` with relabellings by Fisher-Yates
    (``Generator.permuted``, one row per relabelling). Group sums are exact
    integers (see the module notes); the statistics' rounding is bounded by
    :func:`feature_mmd_abs_error`. Memory: ``F`` plus one chunk of masks.

    Returns
    -------
    statistics : ndarray of shape (n_permutations + 1,)
    """
    codes = np.asarray(codes)
    sizes = np.bincount(codes)
    group_sums = group_feature_sums(F, codes, sizes.size, block_rows)
    coarse = kind == "fourier"
    return mmd_statistics_from_sums(
        lambda masks: _masked_sums(F, masks, block_rows, coarse=coarse), group_sums,
        sizes, n_permutations, rng, codes=codes, max_mask_bytes=max_mask_bytes,
        subset_sums=lambda draw, r0, r1: subset_sums(F, draw, r0, r1, coarse=coarse))


def mmd_statistics_from_sums(masked_sums, group_sums, sizes, n_permutations, rng, *,
                             codes=None, max_mask_bytes=None, subset_sums=None):
    """The B + 1 feature MMD statistics from exact integer feature sums.

    The relabellings are drawn here, from ``rng``, in chunks of at most
    ``max_mask_bytes`` of boolean masks, exactly as :func:`feature_mmd_statistics`
    draws them; ``masked_sums(masks)`` returns ``masks @ F`` (float64, exact
    integers) for a ``(rows, N)`` boolean array, wherever ``F`` lives (in memory, or
    in chunks on dask workers, see ``_distributed``). Every value is a function of
    the exact sums and the draws only, so both give the same statistics, bit for bit.

    Parameters
    ----------
    masked_sums : callable
        ``masks -> masks @ F`` (exact).
    group_sums : ndarray of shape (G, 2 D)
        Exact feature sums of the observed groups (:func:`group_feature_sums`).
    sizes : ndarray of shape (G,)
        Group sizes (public).
    n_permutations : int
    rng : numpy.random.Generator
    codes : ndarray of shape (N,), optional
        The observed group codes; needed for G >= 3 (the relabellings shuffle them).
    max_mask_bytes : int, optional
    subset_sums : callable, optional
        Two groups: ``(draw, r0, r1) -> masks @ F`` for relabellings ``r0 .. r1 - 1``
        of the :class:`SubsetDraw` ``draw`` (:func:`subset_sums` in memory, in chunks
        of ``max_mask_bytes`` of packed masks); by default ``masked_sums`` of
        ``draw.masks(r0, r1)`` (``max_mask_bytes`` of boolean masks at a time).

    Returns
    -------
    statistics : ndarray of shape (n_permutations + 1,)
    """
    if max_mask_bytes is None:
        max_mask_bytes = MAX_MASK_BYTES
    sizes = np.asarray(sizes)
    n = int(sizes.sum())
    n_groups = sizes.size
    n_stats = n_permutations + 1
    total = group_sums.sum(axis=0)  # exact integers
    out = np.empty(n_stats)

    def sums(masks):
        if masks.shape[0] == 0:
            return np.empty((0, group_sums.shape[1]))
        return masked_sums(masks)

    if n_groups == 2:
        small = int(np.argmin(sizes))
        p, q = int(sizes[small]), n - int(sizes[small])
        inv_p, inv_q = 1.0 / p, 1.0 / q
        draw = SubsetDraw(n, p, n_permutations, rng)
        if subset_sums is None:  # the fixed masks, max_mask_bytes of bool at a time
            per = _chunk_columns(n, 1, max_mask_bytes)

            def subset_sums(draw, r0, r1):
                return sums(draw.masks(r0, r1))
        else:  # packed masks (1 bit a position), max_mask_bytes at a time
            per = _chunk_columns(n, 0.125, max_mask_bytes)
        for start in range(0, n_stats, per):
            rows = min(per, n_stats - start)
            first = 1 if start == 0 else 0
            # relabelling r (0-based) is statistic r + 1
            u_s = subset_sums(draw, start - 1 + first, start + rows - 1)
            if first:  # the observed smaller group's sums lead the first chunk
                u_s = np.concatenate([group_sums[small][None], u_s])
            s = u_s * inv_p - (total - u_s) * inv_q  # total - u_s: exact integers
            out[start:start + rows] = np.sqrt(np.einsum("ij,ij->i", s, s))
    else:
        weights = sizes / n
        inv = 1.0 / sizes.astype(np.float64)
        mean = total * (1.0 / n)
        template = np.asarray(codes).astype(np.int8 if n_groups < 128 else np.int32)
        groups = np.arange(n_groups - 1)
        per = _chunk_columns(n, n_groups - 1, max_mask_bytes)
        for start in range(0, n_stats, per):
            rows = min(per, n_stats - start)
            first = 1 if start == 0 else 0
            assign = np.empty((rows - first, n), dtype=template.dtype)
            assign[:] = template
            rng.permuted(assign, axis=1, out=assign)
            masks = (assign[:, None, :] == groups[None, :, None]).reshape(-1, n)
            u = sums(masks).reshape(rows - first, n_groups - 1, group_sums.shape[1])
            if first:  # the observed groups' sums lead the first chunk
                u = np.concatenate([group_sums[None, :n_groups - 1], u])
            last = total - u.sum(axis=1)  # exact integers
            u = np.concatenate([u, last[:, None, :]], axis=1)
            w = u * inv[None, :, None] - mean
            t2 = np.einsum("bgj,bgj,g->b", w, w, weights)
            out[start:start + rows] = np.sqrt(t2)
    return out * 2.0**-_QBITS


def feature_mmd_abs_error(n_components, n_groups, kind="fourier"):
    """Certified bound on the float64 error of each feature MMD statistic.

    The group sums ``U`` are exact (integers). Then, in units of 2^-23 (an exact
    scaling): each centred group mean ``w_g = U_g fl(1/n_g) - c`` (two groups:
    ``U_S/p - U_rest/q``) is within ``8 u R`` in norm of its exact value (two
    roundings of each of two products of norm at most R, the reciprocal, one
    subtraction); the weighted squared norm over ``2 D G`` terms and the square
    root add a relative ``gamma_{2DG+G+8} + 2u`` of a statistic at most 2R. Doubled
    as a safety factor. ``kind="squared"``: ``M = D (2 D + 1)`` coordinates in place
    of ``2 D`` and its radius (:func:`feature_shape`).
    """
    n_dims, r, _ = feature_shape(n_components, kind)
    k = int(n_dims) * int(n_groups) + int(n_groups) + 8
    return 2.0 * (8 * _U * r + (_gamma(k) + 2 * _U) * 3 * r)


def feature_mmd_memory_bytes(n, n_input, n_components, n_groups, n_permutations,
                             max_mask_bytes=None, block_rows=BLOCK_ROWS, kind="fourier",
                             n_threads=None):
    """Estimated peak memory, in bytes, of a feature dpMMD release (X not counted).

    The float32 features (``4 N M`` bytes, ``M`` features per row), one block of the
    feature map (angles and float64/int64 temporaries, at most ``128 block D``; 66
    measured), the B + 1 statistics with their noise, and the relabellings:

    - two groups (:func:`subset_sums`): one chunk of packed masks (1 bit per entry),
      per thread (``n_threads``, default the BLAS thread count) one key block (keys,
      bool and float32 masks: 6 bytes per entry, its packed copy, the split features,
      the float32 product and the thread's float64 partial sums), and the count
      corrections: the rank words (``SubsetDraw.rank_words`` 32-bit words per row),
      112 bytes per flipped position of the chunk (drawn ranks and their sort, rows,
      positions, signs), the located sub-chunk (3 bytes per packed byte and about 320
      bytes per flipped position) and a margin of 12 bytes per feature of 2^14 rows; the
      flips of ``r`` rows are planned at ``r (n / 512 + s) + 8 s sqrt(r) + 16``, ``s =
      sqrt(n) / 2`` (the threshold's bias, the mean absolute deviation of a Bernoulli
      count, at most ``s``, and 8 standard deviations of the total);
    - more groups: int8 labels and bool masks (3 bytes per entry), a float32 block of
      masks, the split features and the products.

    ``kind="squared"``: ``M = D (2 D + 1)`` float32 coordinates per row and the
    squared map's float64 block temporaries.
    """
    if max_mask_bytes is None:
        max_mask_bytes = MAX_MASK_BYTES
    n_dims = feature_shape(n_components, kind)[0]
    split = 4 * 3 * min(n, _SPLIT_ROWS) * 2 * n_dims  # hi, lo and [hi, lo]
    if n_groups == 2:
        per = min(_chunk_columns(n, 0.125, max_mask_bytes), n_permutations)
        width = min(KEY_BLOCK, -(-n // 8) * 8)
        threads = blas_threads() if n_threads is None else int(n_threads)
        threads = max(1, min(threads, -(-n // width)))
        n_bytes = -(-n // 8)
        block = (6 * per * width + 2 * per * (width // 8 + 1) + split
                 + per * n_dims * (8 + 16 + 8))  # product, its join, the partial sums
        step = min(per, max(1, _LOCATE_BYTES // (8 * (-(-n_bytes // 8)))))
        flips, located = _planned_flips(n, per), _planned_flips(n, step)
        rank_words = n / 512 + 3 * math.sqrt(n) + 18  # SubsetDraw.rank_words, at most
        fixes = (3 * step * 8 * (-(-n_bytes // 8)) + 4 * per * rank_words + 112 * flips
                 + 320 * located + min(_GATHER_ROWS, flips) * n_dims * 12
                 + 3 * per * n_dims * 8)
        chunk = per * n_bytes + threads * block + fixes
    else:
        n_masks = n_groups - 1
        per = min(_chunk_columns(n, n_masks, max_mask_bytes), n_permutations + 1)
        rows = n_masks * per
        step = min(n, block_rows, _SPLIT_ROWS)
        chunk = (3 * n * rows + 4 * step * rows + split
                 + rows * n_dims * (8 + 16 + 8) + 8 * min(n, block_rows) * 2 * n_dims)
    feature_block = 128 * min(n, block_rows) * n_components + _squared_block_bytes(
        n, n_components, kind, block_rows)
    return 4 * n * n_dims + max(chunk, feature_block) + 64 * (n_permutations + 1)


def _planned_flips(n, rows):
    # count corrections of `rows` relabellings (see feature_mmd_memory_bytes)
    sd = math.sqrt(n) / 2
    return rows * (n / 512 + sd) + 8 * sd * math.sqrt(rows) + 16


def _squared_block_bytes(n, n_components, kind, block_rows=BLOCK_ROWS):
    # the squared map's float64 temporaries: its block of phi rows, psi and a product
    if kind != "squared":
        return 0
    n_dims = feature_shape(n_components, kind)[0]
    step = max(1, min(block_rows, _SQUARED_BLOCK_ELEMENTS // n_dims))
    return 16 * min(n, block_rows) * n_components + 24 * min(n, step) * n_dims


def feature_hsic_statistics(F, G, n_permutations, rng, *, max_perm_bytes=None):
    """The B + 1 feature ``sqrt(HSIC_b)`` statistics: ``||C_pi||_F``, observed first.

    ``C_pi = (1/n) sum_i (phi_i - phi_bar)(psi_{pi(i)} - psi_bar)^T`` is the
    empirical cross-covariance of the feature rows (exactly ``sqrt(HSIC_b)`` of
    the kernels ``k_phi``, ``l_psi``). One ``(2Dx x n) (n x 2Dy)`` product per
    permutation, with the same shapes and operands whatever the chunking, so a
    permutation's value does not depend on the others; the permutations are drawn
    ``chunk`` at a time by Fisher-Yates (``Generator.permuted`` along the rows, the
    same stream as one row at a time), ``max_perm_bytes`` of int64 indices at once.
    """
    if max_perm_bytes is None:
        max_perm_bytes = MAX_MASK_BYTES
    n = F.shape[0]
    A_t = np.ascontiguousarray(F.astype(np.float64).T)
    Bm = G.astype(np.float64)
    inv_n = 1.0 / n
    outer = np.outer(A_t.sum(axis=1) * inv_n, Bm.sum(axis=0) * inv_n)
    n_stats = n_permutations + 1
    out = np.empty(n_stats)
    per = _chunk_columns(n, 8, max_perm_bytes)
    scale = 2.0 ** (-2 * _QBITS)
    for start in range(0, n_stats, per):
        rows = min(per, n_stats - start)
        perms = np.empty((rows, n), dtype=np.int64)
        perms[:] = np.arange(n)
        first = 1 if start == 0 else 0
        rng.permuted(perms[first:], axis=1, out=perms[first:])
        for k in range(rows):
            C = (A_t @ Bm[perms[k]]) * inv_n - outer
            out[start + k] = math.sqrt(float(np.einsum("ij,ij->", C, C)))
    return out * scale


def feature_hsic_abs_error(n, n_components_x, n_components_y, kind="fourier"):
    """Certified bound on the float64 error of each feature ``sqrt(HSIC_b)``.

    In units of 2^-46 (exact scaling), rows of norm at most R: the product over n
    rows is within ``gamma_n sum_i ||a_i|| ||b_i|| <= gamma_n n R^2`` (Frobenius),
    so ``/ n`` within ``(gamma_n + u) R^2``; each column sum likewise, so the outer
    product of the means within ``(2 gamma_n + 4u) R^2 + ...``; the subtraction
    ``u`` of at most ``2 R^2``. The Frobenius norm over ``4 Dx Dy`` terms and the
    square root add a relative ``gamma_{4DxDy+4} + 2u`` of at most ``2 R^2``.
    Doubled as a safety factor. ``kind="squared"``: ``M = D (2 D + 1)`` coordinates
    per side in place of ``2 D`` and the radius of :func:`feature_shape`.
    """
    mx, rx, _ = feature_shape(n_components_x, kind)
    my, ry, _ = feature_shape(n_components_y, kind)
    r2 = max(rx, ry) ** 2
    g = _gamma(int(n) + 8)
    k = int(mx) * int(my) + 4
    return 2.0 * (8 * (g + 4 * _U) * r2 + (_gamma(k) + 2 * _U) * 3 * r2)


def feature_hsic_memory_bytes(n, n_components_x, n_components_y, n_permutations,
                              max_perm_bytes=None, kind="fourier"):
    """Estimated peak memory, in bytes, of a feature dpHSIC release (X, y not counted).

    float32 features and their float64 copies (``24 n D`` per side), one block of
    the feature map (``128 block D``), one gathered copy of the y features, one chunk
    of permutations (int64), the cross-covariance, the B + 1 statistics and noise.
    """
    if max_perm_bytes is None:
        max_perm_bytes = MAX_MASK_BYTES
    per_chunk = 8 * n * _chunk_columns(n, 8, max_perm_bytes)
    mx = feature_shape(n_components_x, kind)[0]
    my = feature_shape(n_components_y, kind)[0]
    big = max(n_components_x, n_components_y)
    return (12 * n * (mx + my) + 8 * n * my
            + 128 * min(n, BLOCK_ROWS) * big + _squared_block_bytes(n, big, kind)
            + 8 * mx * my + per_chunk
            + 64 * (n_permutations + 1))
