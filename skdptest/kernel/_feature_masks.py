"""Uniform random subsets of the rows as bit masks, and their exact feature sums.

The relabellings of feature dpMMD (:func:`subset_masks`, :class:`SubsetDraw`) and
the 0/1 sums of quantised feature rows over them (:func:`subset_sums`: one float32
product per 4096-row block for the 12-bit rows, two for finer rows; exact, so the
sums do not depend on BLAS, threads or blocks). Split from :mod:`._features`."""

from __future__ import annotations

import math
import threading

import numpy as np

from .._threads import blas_threads, limit_blas, map_dynamic
from ._feature_map import (
    MAX_KEY_BYTES,
)

__all__ = [
    "SubsetDraw",
    "subset_masks",
    "subset_sums",
]


# Relabelling keys: one byte per position, drawn in blocks of KEY_BLOCK positions (a
# constant, so the draws do not depend on how rows or positions are chunked).
KEY_BLOCK = 4096
# Rows of a float32 product block: |entry| <= 2^11 after the split of each feature into
# 2^12 hi + lo, so every partial sum of a 0/1 combination is an integer <= 2^23 (exact).
_SPLIT_ROWS = 4096
# Positions located at once when fixing the counts (packed bytes x rows of a sub-chunk).
_LOCATE_BYTES = 2**22
# Flipped rows of the memory plan's margin (the corrections were once gathered rows).
_GATHER_ROWS = 2**14
_POPCOUNT = np.array([bin(v).count("1") for v in range(256)], dtype=np.uint8)
# _SELECT[v, k]: bit offset (0 = most significant, np.packbits' order) of the k-th set bit of v
_SELECT = np.zeros((256, 8), dtype=np.int64)
for _v in range(256):
    _bits = [b for b in range(8) if (_v >> (7 - b)) & 1]
    _SELECT[_v, :len(_bits)] = _bits
del _v, _bits


class SubsetDraw:
    """Uniformly random ``m``-subsets of ``range(n)``, ``n_rows`` of them.

    Row ``r`` starts from i.i.d. Bernoulli(``t / 256``) selections, ``t =
    round(256 m / n)`` clipped to ``[1, 255]``: each position combines one bit of each
    of ``k <= 8`` random words (:meth:`bernoulli`; ``k = 1`` when ``t = 128``). The
    words of position block ``b`` (``KEY_BLOCK`` positions, fewer if ``n`` is small)
    and row ``r`` sit at a fixed offset of one PCG64 stream seeded from ``rng``
    (``advance``), so every row is the same whatever the chunks of rows and positions
    it is computed in and the threads that compute them. Then the count ``K_r`` is
    fixed to exactly ``m``: ``K_r - m`` uniformly random selected positions are
    unselected (or ``m - K_r`` unselected ones selected), their ranks drawn from the
    row's own words (:meth:`_ranks`).

    Law: the selections are i.i.d. and the correction is uniform among the selected
    (unselected) positions, so the law of a row is invariant under every
    permutation of the positions; it is supported on the m-subsets, on which the
    symmetric group acts transitively: it is the uniform law, exactly.

    The numpy path never forms the fixed masks: it multiplies the Bernoulli masks
    (float32, block by block) and corrects the sums by the rows it flips
    (:func:`subset_sums`); :meth:`masks` forms them (dask input, tests).
    """

    def __init__(self, n, m, n_rows, rng):
        self.n, self.m, self.n_rows = int(n), int(m), int(n_rows)
        # one generator for the count corrections, one for the keys, drawn in this order
        self.fix_rng = np.random.default_rng(int(rng.integers(2**63)))
        self._state = np.random.PCG64(int(rng.integers(2**63))).state
        self._rank_state = np.random.PCG64(int(rng.integers(2**63))).state
        t = min(255, max(1, round(256 * self.m / self.n)))
        self.threshold = np.uint8(t)  # P(selected) = t / 256 = (t / 2^(8 - k)) / 2^k
        self.n_bits = 8 - (t & -t).bit_length() + 1  # random bits per position
        self.digits = [(t >> (8 - j)) & 1 for j in range(1, self.n_bits + 1)]
        self.width = min(KEY_BLOCK, -(-self.n // 64) * 64)  # positions: whole words
        self.n_blocks = -(-self.n // self.width)
        # 32-bit rank draws per row (even): the threshold's bias plus 6 standard
        # deviations of the Bernoulli count, and room for repeats
        p = int(self.threshold) / 256
        bias = abs(self.n * p - self.m)
        self.rank_words = 2 * math.ceil((bias + 6 * math.sqrt(self.n * p * (1 - p)) + 16) / 2)
        self._next_row = 0

    def _ranks(self, counts, excess, r0):
        """Row-sorted ``(rows, ranks)``: for each row with ``e = excess != 0``, ``abs(e)``
        distinct ranks among its ``K`` selected positions (``e > 0``) or ``n - K``
        unselected ones, uniformly.

        Row ``r`` reads its own ``rank_words`` 32-bit words at a fixed offset of one
        stream: each word below ``floor(2^32 / P) P`` is a uniform rank ``word mod P``
        (``P`` the pool size), the others are skipped, and so are repeated ranks; the
        first ``abs(e)`` distinct ranks, in draw order, are a uniformly random
        ``abs(e)``-subset. A row whose words run out (the chance is below 10^-8 at
        6 standard deviations) draws its subset from ``fix_rng`` instead, in row order;
        the running-out event is invariant under relabelling the ranks, so the law
        stays uniform. Vectorised over rows; chunk-independent.
        """
        n_rows = counts.size
        need = np.abs(excess)
        pool = np.where(excess > 0, counts, self.n - counts).astype(np.int64)
        bg = np.random.PCG64()
        bg.state = self._rank_state
        bg.advance(r0 * (self.rank_words // 2))
        words = bg.random_raw(n_rows * (self.rank_words // 2)).view(np.uint32).reshape(
            n_rows, self.rank_words)
        # read a prefix of each row: abs(e) plus room for repeats and rejections
        take = np.minimum(self.rank_words, need + need * need // np.maximum(pool, 1) + 8)
        take[need == 0] = 0
        row = np.repeat(np.arange(n_rows), take)
        col = np.arange(row.size) - np.repeat(np.cumsum(take) - take, take)
        w = words[row, col].astype(np.int64)
        p = pool[row]
        ok = w < (2**32 // p) * p
        row, val = row[ok], w[ok] % p[ok]
        # first occurrences (a stable sort keeps the draw order among equal ranks)
        key = row * 2**32 + val
        order = np.argsort(key, kind="stable")
        first = np.ones(key.size, dtype=bool)
        first[order[1:]] = key[order[1:]] != key[order[:-1]]
        row, val = row[first], val[first]
        starts = np.searchsorted(row, np.arange(n_rows))
        nth = np.arange(row.size) - starts[row]
        keep = nth < need[row]
        row, val = row[keep], val[keep]
        got = np.bincount(row, minlength=n_rows)
        short = np.flatnonzero(got < need)
        if short.size:  # words ran out: these rows draw from fix_rng, in row order
            drop = np.isin(row, short)
            extra = [self.fix_rng.choice(int(pool[r]), size=int(need[r]), replace=False)
                     for r in short]
            row = np.concatenate([row[~drop], np.repeat(short, need[short])])
            val = np.concatenate([val[~drop], *extra])
            order = np.argsort(row, kind="stable")
            row, val = row[order], val[order]
        return row, val

    def block(self, b):
        """Positions ``[c0, c1)`` of key block ``b``."""
        c0 = b * self.width
        return c0, min(self.n, c0 + self.width)

    def bernoulli(self, b, r0, r1):
        """Packed selections (``np.packbits`` order, zero pad bits) of key block ``b``
        for rows ``r0 .. r1 - 1``: uint8, shape ``(r1 - r0, ceil(w / 8))``.

        With ``P(selected) = t / 256 = 0.d_1 d_2 .. d_k`` in binary (``k`` = ``n_bits``),
        each position takes one bit from each of ``k`` random words and combines them
        from the last digit up, ``X = r_j | X`` where ``d_j = 1`` and ``r_j & X`` where
        ``d_j = 0`` (``P(r | Y) = 1/2 + P(Y)/2``, ``P(r & Y) = P(Y)/2``): i.i.d.
        Bernoulli(``t / 256``) bits, exactly, 64 positions per operation.
        """
        n_words = self.width // 64
        per_row = self.n_bits * n_words
        bg = np.random.PCG64()
        bg.state = self._state
        bg.advance((b * self.n_rows + r0) * per_row)
        raw = bg.random_raw((r1 - r0) * per_row).reshape(r1 - r0, self.n_bits, n_words)
        x = np.zeros((r1 - r0, n_words), dtype=np.uint64)
        for j in range(self.n_bits - 1, -1, -1):
            if self.digits[j]:
                np.bitwise_or(raw[:, j], x, out=x)
            else:
                np.bitwise_and(raw[:, j], x, out=x)
        c0, c1 = self.block(b)
        w = c1 - c0
        packed = x.view(np.uint8)[:, :-(-w // 8)]
        if w % 8:  # positions past the block are not selected
            packed[:, -1] &= np.uint8((0xFF << (8 - w % 8)) & 0xFF)
        return packed
    def fixes(self, packed, counts, r0):
        """The positions whose selection flips in rows ``r0 ..`` (their packed masks).

        Must be called for consecutive row ranges from 0 (the correction generator is
        consumed in row order). Returns ``(rows, positions, signs)``, sorted by row:
        ``signs`` is -1 where a selected position is unselected, +1 where one is added.
        """
        if r0 != self._next_row:
            raise RuntimeError("count corrections must be drawn in row order")
        n_rows = packed.shape[0]
        self._next_row = r0 + n_rows
        counts = np.asarray(counts, dtype=np.int64)
        excess = counts - self.m
        all_rows, all_q = self._ranks(counts, excess, r0)
        rows, pos = [], []
        n_words = -(-packed.shape[1] // 8)
        step = max(1, _LOCATE_BYTES // (8 * n_words))
        for s0 in range(0, n_rows, step):
            s1 = min(n_rows, s0 + step)
            i0, i1 = np.searchsorted(all_rows, [s0, s1])
            if i1 == i0:
                continue
            local, q = all_rows[i0:i1] - s0, all_q[i0:i1].copy()
            # the rows' bits in 64-bit words (zero pad bytes); inverted rows count the
            # unselected positions (their pad bits come after every position)
            sub = np.zeros((s1 - s0, 8 * n_words), dtype=np.uint8)
            sub[:, :packed.shape[1]] = packed[s0:s1]
            invert = excess[s0:s1] < 0
            sub[invert] = ~sub[invert]
            cum = np.cumsum(_popcount_words(sub), axis=1)
            # rows stacked into one increasing sequence: row i's counts + i (n + 64)
            shift = np.arange(s1 - s0, dtype=np.int64) * (self.n + 64)
            cum += shift[:, None]
            flat = np.searchsorted(cum.ravel(), q + shift[local], side="right")
            word = flat - local * n_words
            octets = sub.view(np.uint64).ravel()[flat].view(np.uint8).reshape(-1, 8)
            # rank within that word, then the byte of that word, then the bit of the byte
            q -= cum.ravel()[flat] - shift[local] - _popcount_words(octets).ravel()
            ends = np.cumsum(_POPCOUNT[octets], axis=1, dtype=np.int64)
            byte = (ends <= q[:, None]).sum(axis=1)
            q -= np.where(byte > 0, ends[np.arange(q.size), np.maximum(byte - 1, 0)], 0)
            bit = _SELECT[octets[np.arange(q.size), byte], q]
            rows.append(local + s0)
            pos.append(64 * word + 8 * byte + bit)
        if not rows:
            return _EMPTY, _EMPTY, _EMPTY
        rows, pos = np.concatenate(rows), np.concatenate(pos)
        signs = np.where(excess[rows] > 0, -1.0, 1.0)
        return rows, pos, signs

    def masks(self, r0, r1):
        """The fixed masks of rows ``r0 .. r1 - 1``: bool, shape ``(r1 - r0, n)``."""
        packed = np.empty((r1 - r0, -(-self.n // 8)), dtype=np.uint8)
        step = max(1, MAX_KEY_BYTES // self.width)  # rows of random words held at once
        for b in range(self.n_blocks):
            c0 = self.block(b)[0] // 8
            for a0 in range(r0, r1, step):
                a1 = min(r1, a0 + step)
                pk = self.bernoulli(b, a0, a1)
                packed[a0 - r0:a1 - r0, c0:c0 + pk.shape[1]] = pk
        rows, pos, _ = self.fixes(packed, _popcount_rows(packed), r0)
        out = np.unpackbits(packed, axis=1, count=self.n).view(bool)
        out[rows, pos] ^= True
        return out


_EMPTY = np.empty(0, dtype=np.int64)


def _popcount_words(octets):
    """Set bits of each group of 8 bytes (the last axis, a multiple of 8): int64."""
    if hasattr(np, "bitwise_count"):  # numpy >= 2.0
        words = np.ascontiguousarray(octets).view(np.uint64)
        return np.bitwise_count(words).astype(np.int64)
    return _POPCOUNT[octets].reshape(*octets.shape[:-1], -1, 8).sum(axis=-1, dtype=np.int64)


def subset_masks(n, m, n_rows, rng):
    """``n_rows`` uniformly random ``m``-subsets of ``range(n)`` as boolean masks.

    The masks of :class:`SubsetDraw` (``SubsetDraw(n, m, n_rows, rng).masks(0,
    n_rows)``): the relabellings :func:`feature_mmd_statistics` sums for a generator
    in the same state.
    """
    return SubsetDraw(n, m, n_rows, rng).masks(0, n_rows)


def _split(F, out=None):
    """``F = 2^12 hi + lo`` as one float32 array ``[hi, lo]``: abs(hi), abs(lo) <= 2^11.

    Every step is exact: scaling by a power of two, rounding to an integer, and the
    difference of two integers below 2^24.
    """
    F = np.asarray(F, dtype=np.float32)
    c = F.shape[1]
    if out is None:
        out = np.empty((F.shape[0], 2 * c), dtype=np.float32)
    hi, lo = out[:, :c], out[:, c:]
    np.multiply(F, np.float32(2.0**-12), out=hi)
    np.rint(hi, out=hi)
    np.multiply(hi, np.float32(-(2.0**12)), out=lo)
    lo += F
    return out


def _popcount_rows(packed):
    """Set bits of each row of a uint8 array (int64)."""
    if hasattr(np, "bitwise_count"):  # numpy >= 2.0
        return np.bitwise_count(packed).sum(axis=1, dtype=np.int64)
    return _POPCOUNT[packed].sum(axis=1, dtype=np.int64)


def _join(P, n_cols):
    """float64 ``2^12 hi + lo`` of a product with a split block (exact integers)."""
    return P[:, :n_cols].astype(np.float64) * 2.0**12 + P[:, n_cols:]


def subset_sums(F, draw, r0, r1, n_threads=None, *, coarse=False):
    """``masks @ F`` for rows ``r0 .. r1 - 1`` of ``draw`` (float64, exact integers).

    Two passes over the key blocks. First the Bernoulli selections of every block,
    packed (1 bit a position) and counted; the count fix (:meth:`SubsetDraw.fixes`)
    then flips its positions' bits in place, so that ``packed`` holds the fixed
    masks. Then each block of fixed masks is unpacked to float32 and multiplied with
    the split block of features (products 0 or an integer of magnitude at most 2^11,
    partial sums at most 2^23: exact whatever BLAS does) or, with ``coarse=True``
    (``F`` from :func:`feature_map`: 12-bit integers ``abs(k) <= 2^11`` times one
    power of two, ``2^(23 - q)``), with ``F`` itself, in one product of half the
    columns: every partial sum is an integer ``abs(K) <= 2^23`` times ``2^(23 - q)``,
    exact in float32 whatever BLAS does. The key blocks are shared by ``n_threads``
    threads (default: the BLAS thread count in force), each with single-threaded BLAS
    and its own exact partial sums (float64, integers below 2^53), so the result does
    not depend on the thread count.
    Memory: the packed masks of the rows and one block per thread.
    """
    n_rows, n_cols = r1 - r0, F.shape[1]
    if n_threads is None:
        n_threads = blas_threads()
    # tasks: key blocks times slabs of rows (few blocks: split the rows too, so that
    # every thread has work; the keys do not depend on the split)
    slabs = max(1, min(-(-4 * n_threads // draw.n_blocks), n_rows // 256))
    edges = [r0 + (n_rows * i) // slabs for i in range(slabs + 1)]
    tasks = [(b, a0, a1) for b in range(draw.n_blocks)
             for a0, a1 in zip(edges[:-1], edges[1:], strict=True) if a1 > a0]
    n_threads = max(1, min(int(n_threads), len(tasks)))
    packed = np.empty((n_rows, -(-draw.n // 8)), dtype=np.uint8)
    counts = np.zeros((n_threads, n_rows), dtype=np.int64)
    parts = np.zeros((n_threads, n_rows, n_cols))
    slab = max(a1 - a0 for _, a0, a1 in tasks)
    free = [(k, np.empty((slab, draw.width), dtype=np.float32),
             None if coarse else
             np.empty((min(draw.width, _SPLIT_ROWS), 2 * n_cols), dtype=np.float32))
            for k in range(n_threads)]
    lock = threading.Lock()

    def with_slot(task):
        def run(b, a0, a1):
            with lock:
                slot = free.pop()
            try:
                c0, c1 = draw.block(b)
                task(slot, b, c0, c1, a0, a1, slice(a0 - r0, a1 - r0))
            finally:
                with lock:
                    free.append(slot)
        return run

    def bernoulli(slot, b, c0, c1, a0, a1, rows):
        pk = draw.bernoulli(b, a0, a1)
        packed[rows, c0 // 8:c0 // 8 + pk.shape[1]] = pk
        counts[slot[0], rows] += _popcount_rows(pk)

    def product(slot, b, c0, c1, a0, a1, rows):
        k, maskf, split = slot
        w = c1 - c0
        sel = np.unpackbits(packed[rows, c0 // 8:c0 // 8 + -(-w // 8)], axis=1,
                            count=w)  # 0/1 bytes of the fixed masks
        maskf = maskf[:a1 - a0, :w]
        maskf[...] = sel
        for s0 in range(0, w, _SPLIT_ROWS):
            s1 = min(w, s0 + _SPLIT_ROWS)
            if coarse:  # 12-bit rows: one float32 product, exact
                parts[k, rows] += maskf[:, s0:s1] @ F[c0 + s0:c0 + s1]
                continue
            S = _split(F[c0 + s0:c0 + s1], split[:s1 - s0])
            parts[k, rows] += _join(maskf[:, s0:s1] @ S, n_cols)

    with limit_blas():
        # the Bernoulli selections, packed; then the count fix flips bits in place
        # (ranks drawn in row order, see SubsetDraw.fixes), so that the products
        # below multiply the fixed masks (no rows gathered and added afterwards)
        map_dynamic(with_slot(bernoulli), tasks, n_threads)
        rows, pos, _ = draw.fixes(packed, counts.sum(axis=0), r0)
        # (row, position) pairs are distinct; two may share a byte: ufunc.at
        np.bitwise_xor.at(packed, (rows, pos >> 3),
                          (np.uint8(0x80) >> (pos & 7).astype(np.uint8)))
        map_dynamic(with_slot(product), tasks, n_threads)
    return parts.sum(axis=0)  # exact integers: any order


def _masked_sums(F, masks, block_rows=_SPLIT_ROWS, *, coarse=False):
    """``masks @ F`` in float64, exact (integer features, integer partial sums).

    Blocks of at most ``_SPLIT_ROWS`` rows in float32 against the split features
    (:func:`_split`): every product is 0 or an integer of magnitude at most 2^11 and
    every partial sum an integer of magnitude at most 2^23, so BLAS's order of
    summation (blocking, threads, FMA) does not change any bit of the result.
    ``coarse=True`` (12-bit fourier rows, :func:`subset_sums`): ``F`` itself, one
    product, exact for the same reason.
    """
    n_cols = F.shape[1]
    out = np.zeros((masks.shape[0], n_cols))
    step = max(1, min(block_rows, _SPLIT_ROWS))
    block = np.empty((masks.shape[0], min(step, F.shape[0])), dtype=np.float32)
    for r0 in range(0, F.shape[0], step):
        r1 = min(r0 + step, F.shape[0])
        mb = block[:, :r1 - r0]
        mb[...] = masks[:, r0:r1]  # bool -> float32 into a reused buffer
        if coarse:
            out += mb @ F[r0:r1]
        else:
            out += _join(mb @ _split(F[r0:r1]), n_cols)
    return out


def _chunk_columns(n, n_masks_per_column, max_mask_bytes):
    return max(1, int(max_mask_bytes // max(1, n * n_masks_per_column)))
