"""dpHSIC's in-memory FFT routes: one bandwidth pair over all n cyclic shifts, and the
bandwidth aggregate (cyclic, or over random permutations) holding its Gram matrices or
their diagonal spectra. The aggregate beyond 1 GiB runs by diagonal blocks instead
(:mod:`._hsic_blocked`)."""

from __future__ import annotations

import numpy as np

from .._threads import limit_blas
from . import _hsic_traces as _traces
from ._bandwidth import hsic_centre, map_in_threads
from ._hsic_traces import _stat, draw_permutations, permutation_traces
from ._kernels import EVAL_BYTES_NAMED

__all__ = ["hsic_aggregate_memory_bytes", "hsic_aggregate_statistics",
           "hsic_cyclic_statistics"]

# Diagonals gathered at once for their spectra (the aggregate's cyclic path).
_SPECTRA_BLOCK = 256
def hsic_aggregate_memory_bytes(n_samples, n_permutations, n_x, n_y, *, cyclic,
                                workers=1, eval_bytes=EVAL_BYTES_NAMED):
    """Planned peak memory, in bytes, of :func:`hsic_aggregate_statistics`: an upper
    bound from public sizes (measured against it in ``tests/kernel/test_memory.py``).

    ``n_x`` and ``n_y`` bandwidths per side, ``workers`` x bandwidths computed at once
    (``n_jobs``), ``eval_bytes`` the peak bytes per entry of one kernel evaluation
    (:func:`~._kernels.kernel_eval_bytes`). With ``M = 8 n^2`` (one n x n float64
    matrix), ``S = 16 n (n // 2 + 1)`` (the complex spectra of one matrix's diagonals)
    and ``T = 64 n b`` (the gathered diagonals of one block of ``b`` diagonals, their
    index arrays and transforms):

    - cyclic: the y spectra (``n_y S``), then per worker the larger of a kernel
      evaluation and an x Gram matrix with its spectra (``M + S + T``);
    - permutations: the permutations (int32, ``4 n (B + 1)``), the y Gram matrices
      (``n_y M``), per worker the larger of a kernel evaluation and an x Gram matrix
      (``M``) plus the permutation threads' gathers (8 threads, or one below
      ``_traces._THREADS_MIN_WORK``, of ``16 max(2^16, n) + 8 n`` bytes);

    plus the statistics (``8 (B + 1)`` per pair and worker) and 1 MiB of small arrays.
    The y side is computed first, one matrix at a time, within the same bound.
    """
    n, B = int(n_samples), int(n_permutations)
    M, evaluation = 8 * n * n, int(eval_bytes) * n * n
    if cyclic:
        B = n - 1
        S = 16 * n * (n // 2 + 1)
        per_worker = max(evaluation, M + S + 64 * n * _SPECTRA_BLOCK)
        held = n_y * S
    else:
        threads = 8 if float(n) * n * (B + 1) >= _traces._THREADS_MIN_WORK else 1
        per_worker = max(evaluation, M) + threads * (16 * max(_traces._GATHER_ELEMENTS, n) + 8 * n)
        held = n_y * M + 4 * n * (B + 1)
    small = 8 * (B + 1) * (n_y + 2) * (workers + 1) + 2**20
    return held + workers * per_worker + small


def _double_centre(K):
    """``H K H`` with ``H = I - 11^T / n`` (O(n^2), no matrix product)."""
    row = K.mean(axis=0)
    Kc = K - row
    Kc -= row[:, None]
    Kc += row.mean()
    return Kc


def hsic_cyclic_statistics(X, Y, rng, kernel_x, kernel_y, block=256, squared=False):
    """``sqrt(HSIC_b)`` for all n cyclic re-pairings, observed first.

    The rows are first put in a uniformly random order (data independent),
    then ``y`` is shifted cyclically: ``T_s = sum_ij Kc_ij L_{i+s, j+s}``
    (indices mod n) for s = 0 .. n - 1. With ``a_d(i) = Kc_{i, i+d}`` and
    ``b_d(i) = L_{i, i+d}``, ``T_s = sum_d sum_i a_d(i) b_d(i + s)``: one circular
    cross-correlation per diagonal, all by FFT in O(n^2 log n), ``block``
    diagonals at a time.

    Returns
    -------
    statistics : ndarray of shape (n,)
    """
    n = len(X)
    order = rng.permutation(n)
    X, Y = X[order], Y[order]
    Kc = _double_centre(kernel_x(X))
    L = kernel_y(Y)
    rows = np.arange(n)
    spectrum = np.zeros(n // 2 + 1, dtype=np.complex128)
    for d0 in range(0, n, block):
        cols = (rows[None, :] + np.arange(d0, min(d0 + block, n))[:, None]) % n
        fa = np.fft.rfft(Kc[rows[None, :], cols], axis=1)
        fb = np.fft.rfft(L[rows[None, :], cols], axis=1)
        spectrum += np.einsum("ij,ij->j", np.conj(fa), fb)
    traces = np.fft.irfft(spectrum, n=n)
    return _stat(traces, n, squared)


def _centred_gram(kernel, data, centre=True):
    """``(HKH, tr(K) - 1^T K 1 / n)`` of one marginal's Gram matrix (BLAS on one
    thread, as in :func:`_gram_tile`); ``centre=False``: ``(None, trace)``.

    ``HKH`` is formed in place (the operations of :func:`_double_centre`, the same
    values): one n x n matrix held, not two.
    """
    with limit_blas():
        K = kernel(data)
    trace = float(np.trace(K)) - float(K.sum()) / len(data)
    if not centre:
        return None, trace
    row = K.mean(axis=0)
    K -= row
    K -= row[:, None]
    K += row.mean()
    return K, trace


def _diagonal_spectra(M, block=_SPECTRA_BLOCK):
    """``rfft`` of every cyclic diagonal ``d -> (M[i, i + d])_i`` of ``M`` (n x n).

    ``block`` diagonals at a time (each transform is of one row: the same values as
    one call on all of them), so that the gathered diagonals and their index arrays
    take ``O(block n)`` memory besides the ``(n, n // 2 + 1)`` complex result.
    """
    n = M.shape[0]
    rows = np.arange(n)
    out = np.empty((n, n // 2 + 1), dtype=np.complex128)
    for d0 in range(0, n, block):
        d1 = min(d0 + block, n)
        out[d0:d1] = np.fft.rfft(M[rows[None, :], (rows[None, :] + rows[d0:d1, None]) % n],
                                 axis=1)
    return out


def hsic_aggregate_statistics(X, Y, n_permutations, rng, kernel_x, kernel_y, gammas_x,
                              gammas_y, *, cyclic=False, n_jobs=None, progress=None):
    """The B + 1 statistics of the dpHSIC bandwidth aggregate (see ``_bandwidth``).

    For every pair of the public grids (``None`` in a grid: the kernel as given) the
    statistics ``s_b = sqrt(HSIC_b)`` with the SAME re-pairings (random permutations
    drawn once, or all n cyclic shifts of one random order), minus the re-pairing
    invariant ``h = sqrt(max(tr(HKH) tr(HLH) / ((n - 1) n^2), f))``; returns their
    maximum over the pairs, for each b. The x bandwidths are computed on ``n_jobs``
    threads; every value is computed by the same calls whatever ``n_jobs``.
    Permutations: each pair costs one :func:`permutation_traces` (float64). Cyclic:
    the diagonal spectra of every centred x Gram matrix and every y Gram matrix are
    computed once; a pair costs one sum of n spectrum products.

    Returns
    -------
    statistics : ndarray of shape (B + 1,) (B = n - 1 when ``cyclic``)
    """
    n = len(X)
    kxs = [kernel_x if g is None else kernel_x.with_gamma(g) for g in gammas_x]
    kys = [kernel_y if g is None else kernel_y.with_gamma(g) for g in gammas_y]
    nonneg = (kernel_x.nonnegative, kernel_y.nonnegative)
    kappas = (kernel_x.kappa, kernel_y.kappa)
    if cyclic:
        order = rng.permutation(n)  # as hsic_cyclic_statistics
        X, Y = X[order], Y[order]
    else:
        perms = draw_permutations(n, n_permutations, rng)
    # one y Gram matrix at a time: its trace term, then what the pairs read (the
    # matrix, or its diagonal spectra); see aggregate_memory_bytes
    traces_y = [_centred_gram(k, Y, centre=False)[1] for k in kys]
    if cyclic:
        ys = [_diagonal_spectra(k(Y)) for k in kys]
    else:
        ys = [np.ascontiguousarray(k(Y)) for k in kys]

    def one(i):
        Kc, tx = _centred_gram(kxs[i], X)
        if cyclic:
            fa = _diagonal_spectra(Kc)
            del Kc  # only its spectra are read from here
            np.conjugate(fa, out=fa)
        out = []
        for L, ty in zip(ys, traces_y, strict=True):
            if cyclic:
                traces = np.fft.irfft(np.einsum("ij,ij->j", fa, L), n=n)
            else:
                traces = permutation_traces(np.ascontiguousarray(Kc), L, perms,
                                            backend="numpy")
            h, _ = hsic_centre(tx, ty, n, kappas, nonneg)
            out.append(_stat(traces, n) - h)
        if progress is not None:
            progress.step()
        return np.max(np.vstack(out), axis=0)

    parts = map_in_threads(one, list(range(len(kxs))), n_jobs)
    return np.max(np.vstack(parts), axis=0)
