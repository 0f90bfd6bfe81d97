"""The cyclic group's FFT machinery, shared by dpHSIC and dpMMD.

A statistic that is a quadratic form ``T = sum_ij K_ij L_ij`` of a kernel matrix ``K``
and a relabelling matrix ``L`` (dpHSIC: the other marginal's Gram matrix; dpMMD: the
label products ``v_i v_j``) is computed for all n cyclic shifts ``s`` of the labels at
once: ``T_s = sum_ij K_ij L_{i+s, j+s}`` (indices mod n). With the cyclic diagonals
``a_d(i) = K_{i, i+d}`` and ``b_d(i) = L_{i, i+d}``, ``T_s = sum_d sum_i a_d(i) b_d(i + s)``:
one circular cross-correlation per diagonal, all shifts by FFT in ``O(n^2 log n)``.

For symmetric ``K`` and ``L`` diagonal ``n - d`` is diagonal ``d`` rotated by ``d``
(``a_{n-d}(i) = a_d(i - d)``, likewise ``b``), so it gives the same correlation: the
diagonals ``0 .. n // 2`` suffice, weighted 2 except ``d = 0`` (and ``d = n / 2`` for even
n), which halves the transforms (:func:`half_diagonal_weights`).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "SPECTRA_BLOCK",
    "cyclic_form_abs_error",
    "cyclic_forms",
    "diagonal_spectra",
    "half_diagonal_weights",
]

# Diagonals gathered (and transformed) at once: O(SPECTRA_BLOCK n) memory.
SPECTRA_BLOCK = 256
_U64 = 2.0**-53


def half_diagonal_weights(n):
    """Weights of the diagonals ``0 .. n // 2`` of a symmetric pair (see the module):
    1 for ``d = 0`` and, for even n, ``d = n / 2``; 2 for the others (exact floats)."""
    w = np.full(n // 2 + 1, 2.0)
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    return w


def diagonal_spectra(M, stop=None, *, start=0, block=SPECTRA_BLOCK, out=None):
    """``rfft`` of the cyclic diagonals ``d -> (M[i, (i + d) % n])_i``, ``start <= d < stop``.

    ``block`` diagonals at a time (each transform is of one row: the same values as one
    call on all of them): the gathered diagonals take ``8 block n`` bytes besides the
    ``(stop - start, n // 2 + 1)`` complex result (``out`` when given). Each diagonal is
    two slices (``np.diagonal`` views), copied exactly.
    """
    n = M.shape[0]
    stop = n if stop is None else stop
    if out is None:
        out = np.empty((stop - start, n // 2 + 1), dtype=np.complex128)
    rows = np.empty((min(block, stop - start), n))
    for d0 in range(start, stop, block):
        d1 = min(d0 + block, stop)
        for d in range(d0, d1):
            r = rows[d - d0]
            r[:n - d] = np.diagonal(M, d)
            r[n - d:] = np.diagonal(M, d - n)
        out[d0 - start:d1 - start] = np.fft.rfft(rows[:d1 - d0], axis=1)
    return out


def half_diagonals(M, out=None):
    """The cyclic diagonals ``0 .. n // 2`` of ``M`` as rows: ``out[d, i] = M[i, (i + d) % n]``
    (two ``np.diagonal`` slices each, copied exactly)."""
    n = M.shape[0]
    if out is None:
        out = np.empty((n // 2 + 1, n), dtype=M.dtype)
    for d in range(out.shape[0]):
        out[d, :n - d] = np.diagonal(M, d)
        out[d, n - d:] = np.diagonal(M, d - n)
    return out


def diagonal_forms(rows, n, weighted_spectra, *, block=SPECTRA_BLOCK, n_threads=1):
    """``T_s`` for s = 0 .. n - 1 from the diagonals ``0 .. n // 2`` of a symmetric ``K``.

    ``rows(d0, d1)`` returns those diagonals of ``K`` as rows (shape ``(d1 - d0, n)``, a
    fresh or scratch array it may overwrite); ``weighted_spectra`` the weighted spectra of
    ``L``'s (see :func:`cyclic_forms`). Blocks of ``block`` diagonals are transformed and
    their spectrum products summed (one ``einsum`` per block) on ``n_threads`` threads;
    the blocks' partial spectra and ``rows``' sums are then added in block order, so every
    value is the same whatever ``n_threads``. Returns ``(T, sums)``: ``sums[d]`` is the
    sum of diagonal d (for the trace terms).
    """
    from .._threads import map_dynamic

    half = n // 2 + 1
    starts = list(range(0, half, block))
    parts = [None] * len(starts)
    sums = np.empty(half)

    def one(k, _):
        d0 = starts[k]
        d1 = min(d0 + block, half)
        a = rows(d0, d1)
        sums[d0:d1] = a.sum(axis=1)
        fa = np.fft.rfft(a, axis=1)
        np.conjugate(fa, out=fa)
        parts[k] = np.einsum("ij,ij->j", fa, weighted_spectra[d0:d1])

    map_dynamic(one, [(k, None) for k in range(len(starts))], n_threads)
    spectrum = np.zeros(n // 2 + 1, dtype=np.complex128)
    for part in parts:  # block order
        spectrum += part
    return np.fft.irfft(spectrum, n=n), sums


def cyclic_forms(K, weighted_spectra, *, block=SPECTRA_BLOCK, n_threads=1):
    """``T_s = sum_ij K_ij L_{i+s, j+s}`` for s = 0 .. n - 1 (``K``, ``L`` symmetric).

    ``weighted_spectra``: :func:`diagonal_spectra` of ``L``'s diagonals ``0 .. n // 2``,
    each row multiplied by :func:`half_diagonal_weights` (computed once per fit, shared by
    every ``K``). :func:`diagonal_forms` on ``K``'s diagonals (the arithmetic of dpMMD's
    cyclic route, which forms the diagonals from distances instead).
    """
    n = K.shape[0]
    diagonals = half_diagonals(K)
    return diagonal_forms(lambda d0, d1: diagonals[d0:d1], n, weighted_spectra, block=block,
                          n_threads=n_threads)[0]


def fft_relative_error(n):
    """Normwise relative error of one float64 (i)rfft of length n, as dpHSIC's cyclic
    bound models it (``_hsic_bounds.hsic_abs_error``): ``10 (log2 n + 2) u`` covering
    pocketfft's radices and twiddle factors (Higham, Section 24.1)."""
    return 10.0 * (math.log2(max(n, 2)) + 2.0) * _U64


def _gamma(k):
    return k * _U64 / (1.0 - k * _U64)


def cyclic_form_abs_error(n, norm_products, form_max, coefficient_rounding=0.0):
    """Certified bound on the float64 error of each ``T_s`` of :func:`cyclic_forms`.

    The matrices as given are taken as exact (the Gram values as evaluated; ``L``'s
    entries up to ``coefficient_rounding`` relative error each). ``norm_products``
    bounds ``sum_d ||a_d||_2 ||b_d||_2`` over all n diagonals and ``form_max`` bounds
    ``sum_ij |K_ij L_ij|`` (hence every ``|T_s|``). With ``e = fft_relative_error(n)``:

    - a forward transform within ``e ||A||_2`` is the exact transform of a diagonal moved
      by at most ``e ||a||_2``, which moves its correlation by at most ``e ||a|| ||b||`` at
      every shift: ``2 e`` for the two transforms;
    - the spectrum products and their sum over at most n diagonals (``gamma_{n+8}``
      relative per term) move ``T_s`` by at most ``gamma_{n+8} (1/n) sum_k |A_k| |B_k| <=
      gamma_{n+8} ||a|| ||b||`` per diagonal;
    - the inverse transform is within ``e ||T||_2 <= e sqrt(n) form_max`` of its exact value;
    - ``L``'s rounded entries move ``T_s`` by at most ``coefficient_rounding form_max``.

    Doubled as a safety factor (second-order terms and the model of pocketfft's error).
    """
    e = fft_relative_error(n)
    err = ((2.0 * e + _gamma(n + 8)) * norm_products
           + (e * math.sqrt(n) + coefficient_rounding) * form_max)
    return 2.0 * err
