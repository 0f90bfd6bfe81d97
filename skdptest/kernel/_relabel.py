"""Relabellings of dpMMD: uniform two-group masks, shuffled codes, coefficient chunks.

Every relabelling depends only on the public group sizes and the generator; the
estimator draws its coefficient matrices chunk by chunk, consuming the generator as
:func:`draw_assignments` does.
"""

from __future__ import annotations

import numpy as np

from .._threads import blas_threads, map_dynamic

__all__ = ["KEY16_MAX_ROWS", "draw_assignments"]

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
