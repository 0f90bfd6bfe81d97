"""Random Fourier feature statistics for dpMMD and dpHSIC (``method="features"``).

A shift-invariant kernel ``k(x, x') = E_w[cos(w^T (x - x'))]`` (rbf: ``w ~
N(0, 2 gamma I)``; laplacian ``exp(-gamma ||x - x'||_1)``: i.i.d. Cauchy(0, gamma)
coordinates) is replaced by the feature kernel ``k_phi(x, x') = phi(x)^T phi(x')``
with ``phi(x) = D^{-1/2} [cos(w_j^T x), sin(w_j^T x)]_{j=1..D}``: ``D`` frequencies
drawn from the generator, independently of the data. ``||phi(x)|| = 1`` exactly, so
``k_phi`` is a positive definite kernel with ``k_phi(x, x) = 1`` and the sqrt-MMD and
sqrt-HSIC sensitivities of the exact tests apply with feature diameter ``2 R``
(``R`` the certified bound on the norm of every *computed* feature row, below).

Float safety. Each computed row is a deterministic function of that row alone (and
of the public frequencies): the angles are formed elementwise (a fixed sequence of
correctly rounded multiplications and additions, no BLAS reduction whose order
could depend on the row's position), then cos/sin, then the row is *quantised* to
12-bit integers ``k = round(phi * 2^q)``, ``q = 11 + floor(log2(D) / 2)`` (so
``abs(k) <= 2^11``: :func:`fourier_bits`), stored times ``2^(23 - q)`` (integers,
exact in float32 and float64, on the common ``2^-23`` scale) and, if its exact
integer squared norm exceeds ``R^2 2^(2q)``, shrunk until it does not (an integer
check, so ``||phi_q|| <= R = 1 + 2^-10`` holds for every row whatever the accuracy
of cos/sin; rounding moves a unit row by less than ``sqrt(2) 2^-11``). The MMD sums
of integer rows over at most ``2^30`` rows are exact in float64 (every partial sum
is an integer below ``2^53``), so the sums do not depend on BLAS, threads, blocks or
chunks; only the last few operations round, which :func:`feature_mmd_abs_error`
bounds. The 12-bit rows make a 0/1 combination of 4096 of them exact in *one*
float32 product (:func:`subset_sums`). The squared map is built from rows on the
finer ``2^-23`` grid (``R = 1 + 2^-16``, ``fine=True``).

Why 2R and not sqrt(2). The feature kernel ``k_phi(x, x') = (1/D) sum_j cos(w_j^T (x -
x'))`` is not the kernel: over unbounded data it comes arbitrarily close to -1 (for
almost every draw of the frequencies, the flow ``t -> (w_j^T t mod 2 pi)_j`` is dense in
the D-torus by Kronecker's theorem, so all D cosines approach -1 together), hence
``sup ||phi(x) - phi(x')|| = 2``, attained in the limit: no certified diameter below 2
exists for ``phi``. The squared map ``psi = phi (x) phi`` (``feature_map="squared"``,
:func:`feature_shape`) has the kernel ``k_phi^2 >= 0`` and diameter about ``sqrt(2)``,
the exact rbf test's, at ``D (2 D + 1)`` coordinates per row.
"""

from __future__ import annotations

import math
import threading

import numpy as np

from .._params import InvalidParameterError
from .._threads import blas_threads, limit_blas, map_dynamic

__all__ = [
    "FEATURE_KERNELS",
    "FEATURE_RADIUS",
    "MAX_COMPONENTS",
    "check_feature_kernel",
    "FEATURE_MAPS",
    "draw_frequencies",
    "feature_hsic_abs_error",
    "feature_hsic_memory_bytes",
    "feature_hsic_statistics",
    "feature_map",
    "feature_shape",
    "fourier_bits",
    "make_features",
    "max_exact_rows",
    "spectral_gamma",
    "squared_feature_map",
    "feature_mmd_abs_error",
    "feature_mmd_memory_bytes",
    "feature_mmd_statistics",
    "group_feature_sums",
    "mmd_statistics_from_sums",
    "SubsetDraw",
    "subset_masks",
    "subset_sums",
]

# Kernels with a known spectral law (sklearn parametrisation, named kernels only).
FEATURE_KERNELS = ("rbf", "laplacian")
# Largest accepted n_components (D): 2 D features per row.
MAX_COMPONENTS = 2**14
# Scale: every feature array holds integers times 2^-_QBITS.
_QBITS = 23
# Fourier rows are 12-bit integers: abs(k) <= 2^_COARSE_BITS on the grid 2^-fourier_bits(D).
_COARSE_BITS = 11
# Public bound R on the norm of every computed fourier row. Rounding to the grid
# 2^-q, 2^q > 2^10 sqrt(D), moves a unit row by at most sqrt(2 D) 2^-(q + 1) <
# sqrt(2) 2^-11 < 2^-10.
FEATURE_RADIUS = 1.0 + 2.0**-10
# The squared map's rows phi on the 2^-23 grid: moved by at most sqrt(2 D) 2^-24 <=
# 2^-16 for D <= 2^15.
_FINE_RADIUS = 1.0 + 2.0**-16
# R^2 2^46 as an exact integer: (1 + 2^-16)^2 2^46 = 2^46 + 2^31 + 2^14.
_RADIUS2_INT = 2**46 + 2**31 + 2**14
# Rows per block of the feature map and of the masked sums.
BLOCK_ROWS = 4096
# Bytes of relabelling masks held at once: packed (1 bit a position) in memory, so at
# N = 10^6 one chunk holds 2147 relabellings and every block product has B + 1 rows up
# to B = 2146 (the shape does not degrade with N); bool (1 byte) for dask input.
MAX_MASK_BYTES = 256 * 2**20
# Bytes of relabelling keys drawn at once when the masks are formed (SubsetDraw.masks).
MAX_KEY_BYTES = 32 * 2**20
# Most rows whose integer sums stay exact in float64 (N 2^23 <= 2^53).
MAX_EXACT_ROWS = 2**30

_U = 2.0**-53


def check_feature_kernel(kernel, kernel_params, n_input):
    """The bandwidth of a ``method="features"`` kernel; refuse kernels without one.

    Returns ``gamma`` (float), or None for the private median (drawn in the
    release). Without a numeric ``gamma`` the data-independent ``1 / n_features``
    is used (the bandwidth aggregate of the exact test is not available here).

    Raises
    ------
    InvalidParameterError
        If ``kernel`` is not "rbf" or "laplacian", or ``gamma="aggregate"``.
    """
    if not (isinstance(kernel, str) and kernel in FEATURE_KERNELS):
        raise InvalidParameterError(
            f"method='features' needs kernel in {FEATURE_KERNELS} (a shift-invariant "
            f"kernel with a known spectral law); got kernel={kernel!r}. Use "
            "method='exact' for other kernels.")
    gamma = None if kernel_params is None else kernel_params.get("gamma")
    if gamma is None:
        return 1.0 / n_input
    if isinstance(gamma, str):
        if gamma == "median":
            return None
        raise InvalidParameterError(
            f"method='features' takes a numeric kernel_params['gamma'] or 'median'; got "
            f"{gamma!r} (the bandwidth aggregate needs method='exact').")
    return float(gamma)


def _gamma(k):
    return k * _U / (1.0 - k * _U)


def draw_frequencies(kernel, gamma, n_input, n_components, rng):
    """``D`` frequencies of the spectral law of ``kernel``, shape ``(d, D)``.

    Drawn from ``rng`` only (never from the data). rbf ``exp(-gamma ||t||^2)`` is the
    characteristic function of ``N(0, 2 gamma I)``; laplacian ``exp(-gamma ||t||_1)``
    the product of those of independent Cauchy(0, gamma) coordinates.
    """
    if kernel == "rbf":
        return rng.standard_normal((n_input, n_components)) * math.sqrt(2.0 * gamma)
    if kernel == "laplacian":
        return rng.standard_cauchy((n_input, n_components)) * gamma
    raise ValueError(f"no spectral law for kernel {kernel!r}; expected one of "
                     f"{FEATURE_KERNELS}.")


def fourier_bits(n_components):
    """``q = 11 + floor(log2(D) / 2)``: the fourier rows' grid ``2^-q``.

    ``abs(phi_j) <= D^{-1/2}`` and ``2^q <= 2^11 sqrt(D)``, so every quantised
    coordinate is an integer ``abs(k) <= 2^11`` on that grid; ``2^q > 2^10 sqrt(D)``,
    so the rounding moves a unit row by less than ``sqrt(2) 2^-11``.
    """
    return _COARSE_BITS + (int(n_components).bit_length() - 1) // 2


def feature_map(X, omega, block_rows=BLOCK_ROWS, *, fine=False):
    """Quantised random Fourier features: integer-valued float32 array ``(N, 2 D)``.

    Row i is ``2^(23 - q) round(2^q D^{-1/2} [cos(theta), sin(theta)])``, ``q =``
    :func:`fourier_bits` ``(D)`` (``q = 23`` with ``fine=True``: the squared map's
    rows), with ``theta_j = sum_k x_ik omega_kj`` summed in the order k = 0 .. d - 1
    (elementwise, no reduction kernel): a function of row i alone. The value of the
    feature row is this times ``2^-23``; its norm is at most ``FEATURE_RADIUS``
    (``1 + 2^-16`` with ``fine=True``; exact integer check and shrink, see the module
    notes).
    """
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    n_comp = omega.shape[1]
    bits = _QBITS if fine else min(_QBITS, fourier_bits(n_comp))
    limit = 2**_QBITS if fine else 2**_COARSE_BITS
    if fine:
        radius2 = _RADIUS2_INT
    else:  # R^2 2^(2q), R = 1 + 2^-10: an exact integer for q >= 10
        radius2 = 2**(2 * bits) + 2**(2 * bits - 9) + 2**(2 * bits - 20)
    scale = math.sqrt(1.0 / n_comp) * 2.0**bits
    out = np.empty((n, 2 * n_comp), dtype=np.float32)
    for r0 in range(0, n, block_rows):
        xb = X[r0:r0 + block_rows]
        theta = xb[:, :1] * omega[0]
        for k in range(1, d):
            theta += xb[:, k:k + 1] * omega[k]
        q = np.empty((len(xb), 2 * n_comp))
        np.cos(theta, out=q[:, :n_comp])
        np.sin(theta, out=q[:, n_comp:])
        # NaN (an inf angle) maps to 0: a function of the row, norm still <= R
        q = np.nan_to_num(q * scale, nan=0.0)
        k_int = np.clip(np.rint(q), -limit, limit).astype(np.int64)
        # times 2^(23 - q): exact (at most 12 significant bits, or 24 with fine=True)
        out[r0:r0 + len(xb)] = _shrink_rows(k_int, radius2) * 2**(_QBITS - bits)
    return out


# Feature maps: "fourier" (phi, 2 D coordinates) or "squared" (psi = phi (x) phi).
FEATURE_MAPS = ("fourier", "squared")
# Elements of one block of the squared map's float64 temporaries.
_SQUARED_BLOCK_ELEMENTS = 2**20


def feature_shape(n_components, kind="fourier"):
    """``(n_dims, radius, diameter)`` of a feature map with ``D = n_components``.

    ``"fourier"``: ``2 D`` coordinates, ``||phi_q|| <= R`` for every computed row
    (``R = FEATURE_RADIUS = 1 + 2^-10``, 12-bit rows, exact integer check), diameter
    ``2 R`` (the feature kernel takes values down to -1 over unbounded data).

    ``"squared"``: ``psi(x)``, the upper triangle of ``phi_q(x) phi_q(x)^T``
    (``phi_q`` on the ``2^-23`` grid, ``feature_map(..., fine=True)``, so ``R = 1 +
    2^-16`` here; off-diagonal entries times sqrt 2), ``M = D (2 D + 1)`` coordinates, so that
    ``<psi(x), psi(x')> = (phi_q(x)^T phi_q(x'))^2 >= 0`` exactly (before the
    quantisation of psi). With the exact psi, ``||psi|| = ||phi_q||^2 <= R^2`` and
    ``||psi(x) - psi(x')||^2 = ||psi||^2 + ||psi'||^2 - 2 (phi_q^T phi_q')^2 <= 2 R^4``.
    Each computed coordinate is within ``e = 2^-24 + 2^-52`` of the exact one (a
    product of two 23-bit-scaled integers, exact in float64; one rounding of the
    factor sqrt 2; round to the 2^-23 grid), so every computed row is within
    ``eta = e sqrt(M)`` of its exact value: radius ``R^2 + eta`` and, by the
    triangle inequality, diameter ``sqrt(2) R^2 + 2 eta`` (about ``sqrt(2)``, against
    ``2`` for "fourier": the sensitivity of the feature MMD and HSIC statistics is
    ``sqrt(2)`` smaller per side).
    """
    d = int(n_components)
    if kind == "fourier":
        return 2 * d, FEATURE_RADIUS, 2.0 * FEATURE_RADIUS
    r = _FINE_RADIUS
    if kind == "squared":
        m = d * (2 * d + 1)
        eta = (2.0**-24 + 2.0**-52) * math.sqrt(m) * (1 + 2.0**-40)
        return m, r * r + eta, math.sqrt(2.0) * (1 + 2.0**-50) * r * r + 2.0 * eta
    raise ValueError(f"feature_map must be one of {FEATURE_MAPS}; got {kind!r}.")


def max_exact_rows(kind="fourier"):
    """Most rows whose integer feature sums stay exact in float64: ``2^30`` (fourier,
    ``|k| <= 2^23``), ``2^29`` (squared: a diagonal coordinate reaches ``R^2 2^23``)."""
    return MAX_EXACT_ROWS if kind == "fourier" else MAX_EXACT_ROWS // 2


def spectral_gamma(gamma, kind="fourier"):
    """The bandwidth whose frequencies are drawn: ``gamma / 2`` for "squared" (the
    squared feature kernel approximates ``k_{gamma/2}^2 = k_gamma`` for rbf and
    laplacian), ``gamma`` for "fourier"."""
    return gamma / 2.0 if kind == "squared" else gamma


def make_features(X, omega, kind="fourier"):
    """Quantised feature rows of ``X`` (float32, integer multiples of 2^-23)."""
    if kind == "squared":
        return squared_feature_map(X, omega)
    return feature_map(X, omega)


def squared_feature_map(X, omega, block_rows=BLOCK_ROWS):
    """Quantised squared random features ``psi(x)`` (see :func:`feature_shape`).

    Float32 array of shape ``(N, D (2 D + 1))`` holding integers (times 2^-23);
    each row is a function of that row of ``X`` and of ``omega`` alone.
    """
    n = len(X)
    k = 2 * omega.shape[1]
    iu, ju = np.triu_indices(k)
    weight = np.where(iu == ju, 1.0, math.sqrt(2.0))
    out = np.empty((n, iu.size), dtype=np.float32)
    step = max(1, min(block_rows, _SQUARED_BLOCK_ELEMENTS // iu.size))
    for r0 in range(0, n, block_rows):
        P = feature_map(X[r0:r0 + block_rows], omega, fine=True).astype(np.float64)
        P *= 2.0**-_QBITS
        for s0 in range(0, len(P), step):
            p = P[s0:s0 + step]
            psi = p[:, iu] * p[:, ju]  # exact: products of 23-bit-scaled integers
            psi *= weight
            psi *= 2.0**_QBITS
            out[r0 + s0:r0 + s0 + len(p)] = np.rint(psi)
    return out


def _shrink_rows(k_int, radius2=_RADIUS2_INT):
    """Shrink every integer row with ``sum k^2 > radius2`` (``R^2 2^(2q)``, an exact
    integer) until it is within (exact integer arithmetic)."""
    norms = np.einsum("ij,ij->i", k_int, k_int)  # int64: at most 2D 2^46 < 2^63
    for i in np.flatnonzero(norms > radius2):  # never seen with a faithful libm
        row = k_int[i]
        # one exact integer rescale by floor(2^20 sqrt(radius2 / |k|^2)) / 2^20 ...
        ratio = math.isqrt(radius2 * 2**40 // int(norms[i]))
        row = np.sign(row) * ((np.abs(row) * ratio) // 2**20)
        while int(np.dot(row, row)) > radius2:  # ... then small steps if needed
            # towards zero: every nonzero |k| strictly decreases, so this ends
            row = np.sign(row) * ((np.abs(row) * (2**20 - 1)) // 2**20)
        k_int[i] = row
    return k_int


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
