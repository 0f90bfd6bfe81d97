"""dpHSIC's sensitivities and certified float64 error bound (public functions of n and
the kernels' bounds)."""

from __future__ import annotations

import math

__all__ = ["hsic_abs_error", "hsic_sensitivity", "hsic_squared_sensitivity"]

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
