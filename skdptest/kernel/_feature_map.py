"""Random Fourier feature maps for dpMMD and dpHSIC (``method="features"``), quantised.

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

import functools
import math

import numpy as np

from .._params import InvalidParameterError

__all__ = [
    "FEATURE_KERNELS",
    "FEATURE_RADIUS",
    "MAX_COMPONENTS",
    "check_feature_kernel",
    "FEATURE_MAPS",
    "draw_frequencies",
    "feature_map",
    "feature_shape",
    "fourier_bits",
    "make_features",
    "max_exact_rows",
    "spectral_gamma",
    "squared_feature_map",
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


@functools.lru_cache(maxsize=16)
def _upper_pairs(k):
    """The index pairs i <= j of ``k`` coordinates and their weights (1 on the diagonal,
    sqrt(2) off it), read-only and memoised: a map of a few rows would otherwise spend a
    third of its time rebuilding them."""
    iu, ju = np.triu_indices(k)
    weight = np.where(iu == ju, 1.0, math.sqrt(2.0))
    for a in (iu, ju, weight):
        a.setflags(write=False)
    return iu, ju, weight


def squared_feature_map(X, omega, block_rows=BLOCK_ROWS):
    """Quantised squared random features ``psi(x)`` (see :func:`feature_shape`).

    Float32 array of shape ``(N, D (2 D + 1))`` holding integers (times 2^-23);
    each row is a function of that row of ``X`` and of ``omega`` alone.
    """
    n = len(X)
    iu, ju, weight = _upper_pairs(2 * omega.shape[1])
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
