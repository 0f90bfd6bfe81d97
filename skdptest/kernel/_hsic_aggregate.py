"""dpHSIC's in-memory FFT routes: one bandwidth pair over all n cyclic shifts, and the
bandwidth aggregate (cyclic, or over random permutations) holding its Gram matrices or
their diagonal spectra. The aggregate beyond 1 GiB runs by diagonal blocks instead
(:mod:`._hsic_blocked`)."""

from __future__ import annotations

import contextlib
import threading

import numpy as np

from .._threads import blas_threads, limit_blas
from . import _hsic_traces as _traces
from ._bandwidth import hsic_centre, map_in_threads
from ._cyclic import SPECTRA_BLOCK, diagonal_spectra
from ._hsic_traces import (
    _stat,
    draw_permutations,
    inverse_permutations,
    stacked_permutation_traces,
)
from ._kernels import EVAL_BYTES_NAMED, gram_distances, gram_from_distances

__all__ = ["hsic_aggregate_memory_bytes", "hsic_aggregate_statistics",
           "hsic_cyclic_statistics"]

# Diagonals gathered at once for their spectra (the aggregate's cyclic path).
_SPECTRA_BLOCK = SPECTRA_BLOCK  # (_cyclic)
# Up to this n the diagonals are read from one doubled copy (16 n^2 <= 64 n _SPECTRA_BLOCK).
_DOUBLED_MAX = 1024
# Kernels whose Gram matrices the aggregate forms from distances computed once.
_SHARED_METRICS = ("rbf", "laplacian")


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

    - cyclic: the y spectra (``n_y S``) and, up to n = 1024, the x distances (``M``;
      beyond, each x Gram matrix is evaluated from the rows), then per worker the
      larger of a kernel evaluation and an x Gram matrix with its spectra (``M + S +
      T``; up to n = 1024 the diagonals are read from a doubled copy, ``2 M <= T``);
    - permutations: the inverse permutations (``20 n (B + 1)`` while they are formed from
      the int32 draw), the y Gram matrices (``n_y M``) and the x distances (``M``), per
      worker the larger of a kernel evaluation and an x Gram matrix (``M``) plus the
      gathers of :func:`~._hsic_traces.stacked_permutation_traces` (8 threads, or one
      below ``_traces._THREADS_MIN_WORK``, of at most ``16 max(2^19, n) + 8 n`` bytes:
      ``_traces.stacked_gather_bytes``);

    plus the statistics (four arrays of ``8 (B + 1)`` per pair and worker: the traces,
    their maps and the maxima) and 1 MiB of small arrays.
    The y side is computed first, one matrix at a time (with the y distances in place of
    the x ones), within the same bound.
    """
    n, B = int(n_samples), int(n_permutations)
    M, evaluation = 8 * n * n, int(eval_bytes) * n * n
    if cyclic:
        B = n - 1
        S = 16 * n * (n // 2 + 1)
        per_worker = max(evaluation, M + S + 64 * n * _SPECTRA_BLOCK)
        held = n_y * S + (M if n <= _DOUBLED_MAX else 0)
    else:
        threads = 8 if float(n) * n * (B + 1) >= _traces._THREADS_MIN_WORK else 1
        per_worker = max(evaluation, M) + threads * _traces.stacked_gather_bytes(n, B + 1)
        held = n_y * M + M + 20 * n * (B + 1)
    small = 32 * (B + 1) * (n_y + 2) * (workers + 1) + 2**20
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
    """``rfft`` of every cyclic diagonal ``d -> (M[i, i + d])_i`` of ``M`` (n x n):
    :func:`._cyclic.diagonal_spectra` (``block`` diagonals at a time, ``O(block n)``
    memory besides the ``(n, n // 2 + 1)`` complex result)."""
    return diagonal_spectra(M, block=block)


def _grams(kernel, gammas, data, share=True):
    """``gram(i, out=None)``: the Gram matrix of bandwidth ``gammas[i]`` (``None``: the kernel
    as given) of ``data``, and the bytes it holds between calls.

    Named rbf and laplacian kernels (grid entries only): the distances once
    (:func:`~._kernels.gram_distances`), then one ``exp`` per bandwidth into ``out``
    (:func:`~._kernels.gram_from_distances`: the kernel's own values, bit for bit).
    Otherwise (or ``share=False``) the kernel is evaluated (BLAS on one thread) and
    ``out`` is not used.
    """
    if share and kernel.metric in _SHARED_METRICS and all(g is not None for g in gammas):
        with limit_blas():
            D = gram_distances(kernel.metric, data)

        def gram(i, out=None):
            return gram_from_distances(D, gammas[i], np.empty_like(D) if out is None else out)

        return gram
    kernels = [kernel if g is None else kernel.with_gamma(g) for g in gammas]

    def gram(i, out=None):
        with limit_blas():
            return np.ascontiguousarray(kernels[i](data))

    return gram


class _Buffers(threading.local):
    """Arrays kept per thread for one aggregate call (the same sizes for every x
    bandwidth: fresh pages for each would cost more than the arithmetic at small n)."""

    def get(self, name, shape, dtype):
        shape = tuple(shape) if isinstance(shape, tuple) else (int(shape),)
        arrays = self.__dict__.setdefault("arrays", {})
        a = arrays.get(name)
        if a is None or a.shape != shape or a.dtype != np.dtype(dtype):
            a = arrays[name] = np.empty(shape, dtype)
        return a


def _trace_term(K):
    """``tr(K) - 1^T K 1 / n`` (as :func:`_centred_gram`)."""
    return float(np.trace(K)) - float(K.sum()) / K.shape[0]


def _centre_in_place(K):
    """``H K H`` in place (the operations of :func:`_double_centre`, the same values)."""
    row = K.mean(axis=0)
    K -= row
    K -= row[:, None]
    K += row.mean()
    return K


def _all_diagonal_spectra(M, buffers=None, out=None):
    """:func:`_diagonal_spectra` of ``M``, the same values: for ``n <= _DOUBLED_MAX`` the
    diagonals are read through one strided view of ``[M, M]`` (``16 n^2`` bytes, within
    the ``64 n _SPECTRA_BLOCK`` the plan gives the gathered diagonals) and transformed by
    one call (each transform is of one row), else gathered by blocks. ``buffers``
    (:class:`_Buffers`) keeps the doubled copy and, without ``out``, the result."""
    n = M.shape[0]
    if n > _DOUBLED_MAX:
        spectra = _diagonal_spectra(M)
        if out is not None:
            out[...] = spectra
            return out
        return spectra
    get = buffers.get if buffers is not None else (lambda name, shape, dtype:
                                                     np.empty(shape, dtype))
    doubled = get("doubled", (n, 2 * n), np.float64)
    doubled[:, :n] = M
    doubled[:, n:] = M
    # diagonals[d, i] = M[i, (i + d) % n] = doubled[i, i + d]: offset i (2n + 1) + d
    diagonals = np.lib.stride_tricks.as_strided(
        doubled, shape=(n, n), strides=(doubled.itemsize, (2 * n + 1) * doubled.itemsize),
        writeable=False)
    if out is None:
        out = get("spectra", (n, n // 2 + 1), np.complex128)
    # out: C order (numpy returns a strided input's transforms in Fortran order)
    return np.fft.rfft(diagonals, axis=1, out=out)


def hsic_aggregate_statistics(X, Y, n_permutations, rng, kernel_x, kernel_y, gammas_x,
                              gammas_y, *, cyclic=False, n_jobs=None, progress=None):
    """The B + 1 statistics of the dpHSIC bandwidth aggregate (see ``_bandwidth``).

    For every pair of the public grids (``None`` in a grid: the kernel as given) the
    statistics ``s_b = sqrt(HSIC_b)`` with the SAME re-pairings (random permutations
    drawn once, or all n cyclic shifts of one random order), minus the re-pairing
    invariant ``h = sqrt(max(tr(HKH) tr(HLH) / ((n - 1) n^2), f))``; returns their
    maximum over the pairs, for each b. The x bandwidths are computed on ``n_jobs``
    threads; every value is computed by the same calls whatever ``n_jobs``.

    Each side's distances are computed once (named rbf and laplacian kernels), each
    Gram matrix by one ``exp`` of them (see :func:`_grams`); each y Gram matrix is
    evaluated once (its trace term, then what the pairs read). Permutations: each x
    bandwidth costs one :func:`stacked_permutation_traces` against the stack of y Gram
    matrices (float64, the certified rounding chain). Cyclic: the diagonal spectra of
    every centred x Gram matrix and every y Gram matrix are computed once; an x
    bandwidth costs one sum of spectrum products against all y spectra (one ``einsum``:
    the values of one ``einsum`` per pair, bit for bit) and the inverse transforms.

    Returns
    -------
    statistics : ndarray of shape (B + 1,) (B = n - 1 when ``cyclic``)
    """
    serial = n_jobs is None or n_jobs == 1 or len(gammas_x) <= 1  # as map_in_threads
    # serial: BLAS held on one thread once for the whole computation (the values are
    # the same; entering threadpoolctl's limit is not free, so once rather than per
    # call), the permutation threads sized by the count found before
    threads = blas_threads() if serial else None
    with limit_blas() if serial else contextlib.nullcontext():
        return _aggregate(X, Y, n_permutations, rng, kernel_x, kernel_y, gammas_x, gammas_y,
                          cyclic, n_jobs, progress, threads)


def _aggregate(X, Y, n_permutations, rng, kernel_x, kernel_y, gammas_x, gammas_y, cyclic,
               n_jobs, progress, threads):
    n = len(X)
    nonneg = (kernel_x.nonnegative, kernel_y.nonnegative)
    kappas = (kernel_x.kappa, kernel_y.kappa)
    if cyclic:
        order = rng.permutation(n)  # as hsic_cyclic_statistics
        X, Y = X[order], Y[order]
    else:
        inverse = inverse_permutations(draw_permutations(n, n_permutations, rng))
    buffers = _Buffers()  # per thread: the x bandwidths' arrays, reused
    # the y side first: one Gram matrix at a time, its trace term, then what the pairs
    # read (the matrix, or its diagonal spectra); see hsic_aggregate_memory_bytes
    gram_y = _grams(kernel_y, gammas_y, Y)
    n_y = len(gammas_y)
    traces_y = []
    if cyclic:
        ys = np.empty((n_y, n, n // 2 + 1), dtype=np.complex128)
        for i in range(n_y):
            L = gram_y(i, buffers.get("gram", (n, n), np.float64))
            traces_y.append(_trace_term(L))
            _all_diagonal_spectra(L, buffers, out=ys[i])
        del L
    else:
        ys = np.empty((n_y, n, n))
        for i in range(n_y):
            L = gram_y(i, ys[i])
            if L is not ys[i]:
                ys[i] = L
            traces_y.append(_trace_term(ys[i]))
        del L
    del gram_y  # the y distances
    if threads is None:  # n_jobs workers: this thread's arrays are not theirs
        buffers.__dict__.clear()
    # the x distances are held through the x bandwidths: planned up to _DOUBLED_MAX on
    # the cyclic path (beyond it each x Gram matrix is evaluated, as the plan says)
    gram_x = _grams(kernel_x, gammas_x, X, share=not cyclic or n <= _DOUBLED_MAX)

    def one(i):
        K = gram_x(i, buffers.get("gram", (n, n), np.float64))
        tx = _trace_term(K)
        Kc = _centre_in_place(K)
        if cyclic:
            fa = _all_diagonal_spectra(Kc, buffers)
            np.conjugate(fa, out=fa)
            traces = np.fft.irfft(np.einsum("ij,yij->yj", fa, ys), n=n, axis=1)
        else:
            traces = stacked_permutation_traces(Kc, ys, inverse, threads, buffers)
        h = np.array([[hsic_centre(tx, ty, n, kappas, nonneg)[0]] for ty in traces_y])
        stats = _stat(traces, n) - h
        if progress is not None:
            progress.step()
        return np.max(stats, axis=0)

    parts = map_in_threads(one, list(range(len(gammas_x))), n_jobs)
    return np.max(np.vstack(parts), axis=0)
