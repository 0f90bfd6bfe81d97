"""dpHSIC's cyclic bandwidth aggregate by diagonal blocks: O(block n) memory per bandwidth.

The route of :class:`~skdptest.DPHSICTest` chosen automatically (from public n, the
numbers of features, the grids and ``max_memory``) when the in-memory cyclic aggregate
(:func:`~skdptest.kernel._hsic_aggregate.hsic_aggregate_statistics`), which holds the
diagonal spectra of every y Gram matrix (about ``152 n^2`` bytes for 19 bandwidths),
would exceed ``max_memory``; ``result_.method`` is then ``"dpHSIC cyclic aggregate
blocked"``.

The same statistic as the in-memory route: the rows in one uniformly random order (the
same draw), for every bandwidth pair ``T_s = sum_d sum_i a_d(i) b_d(i + s)`` with
``a_d(i) = (HKH)_{i, i+d}``, ``b_d(i) = L_{i, i+d}`` (indices mod n), by FFT. No n x n
matrix is formed: the kernel values of ``block`` cyclic diagonals at a time are computed
from the rows (two passes: the row means of every x Gram matrix, then the centred
diagonals, their spectra and the products of every pair), and only the ``n_x n_y``
accumulated spectra (``16 n_x n_y (n // 2 + 1)`` bytes) live through the fit.

Canonical values. Each kernel value is a function of its pair of rows only:
``exp_of_exponents(-gamma * dist(x_i, x_j))`` with ``dist`` the sum over the features, in
order, of ``(x_ik - x_jk)^2`` (rbf) or ``abs(x_ik - x_jk)`` (laplacian). Both passes
therefore see the same values and the matrices are exactly symmetric (so the row means
are the column means). The values differ from the in-memory route's in the last bits
(another evaluation of the same kernel); the statistic, its sensitivity and the certified
float64 error bound are the same: the bound (``hsic_abs_error(..., cyclic=True)`` plus the
centring terms) takes the evaluated values as the kernel's, holds for every order of the
sums over rows and diagonals (the ``+ n`` of its constant) and ``abs(K) <= 1`` holds (the
exponents are never positive). So the privacy analysis and validity are unchanged.
"""

from __future__ import annotations

import numpy as np

from .._threads import limit_blas
from ._bandwidth import hsic_centre, map_in_threads
from ._kernels import exp_of_exponents

__all__ = [
    "BLOCKED_KERNELS",
    "blocked_aggregate_memory_bytes",
    "blocked_aggregate_statistics",
    "choose_diagonal_block",
]

# Kernels the route evaluates from the rows (the aggregate's kernels).
BLOCKED_KERNELS = ("rbf", "laplacian")
# Diagonals per block: the largest of these whose plan fits within max_memory.
_BLOCKS = (32, 16, 8, 4, 2, 1)


def blocked_aggregate_memory_bytes(n_samples, n_x, n_y, block, workers=1):
    """Planned peak memory, in bytes, of :func:`blocked_aggregate_statistics` (an upper
    bound from public sizes; measured against it in ``tests/kernel/test_hsic_route.py``).

    With ``m = n // 2 + 1``, ``b = block`` and ``P = 16 n_x n_y m`` (the accumulated
    spectra of every pair, complex128): ``2 P`` (the accumulators and one block's matrix
    product), the spectra of one block for every bandwidth (``16 b m (n_x + n_y)``), the
    index array, distances and feature differences of one block (``32 b n``), per worker
    (``workers`` bandwidths at once) a kernel block, its centring and its transform
    (``48 b n``), the row means (``8 n (n_x + n_y)``), the last pair's inverse transform
    (``24 n``) and 1 MiB of small arrays.
    """
    n, b = int(n_samples), int(block)
    m = n // 2 + 1
    pairs = 16 * n_x * n_y * m
    return (2 * pairs + 16 * b * m * (n_x + n_y) + 32 * b * n + 48 * b * n * int(workers)
            + 8 * n * (n_x + n_y) + 24 * n + 2**20)


def choose_diagonal_block(n_samples, n_x, n_y, workers, max_memory):
    """The block (diagonals at a time) of the route: the largest of 32, 16, ..., 1 whose
    plan is at most ``max_memory`` (public); ``(block, bytes)``, block None if none fits."""
    for b in _BLOCKS:
        need = blocked_aggregate_memory_bytes(n_samples, n_x, n_y, b, workers)
        if need <= max_memory:
            return b, need
    return None, blocked_aggregate_memory_bytes(n_samples, n_x, n_y, 1, workers)


# A pass-2 block costs about this many pass-1 blocks per bandwidth (the kernel block
# again, its centring, spectrum and share of the pair products; from a profile at
# n = 1000 on the project's machine, 2.7, rounded up for the longer FFTs of larger n).
PASS2_WEIGHT = 3.0


def progress_units(n_x, n_y, n_blocks, progress):
    """``(pass-1, pass-2)`` progress units of one block, ``progress.total`` in all."""
    if progress is None:
        return 0, 0
    one = n_x
    two = PASS2_WEIGHT * (n_x + n_y)
    scale = progress.total / (n_blocks * (one + two))
    return one * scale, two * scale


def _distances(name, columns, idx):
    """``D[r, i] = dist(x_i, x_idx[r, i])``: a function of the two rows only, summed over
    the features in order (the canonical values, see the module notes)."""
    D = np.zeros(idx.shape)
    for col in columns:
        diff = col[idx]
        diff -= col
        if name == "rbf":
            diff *= diff
        else:
            np.abs(diff, out=diff)
        D += diff
    return D


def _kernel_block(D, gamma):
    T = np.multiply(D, -gamma)
    return exp_of_exponents(T)


def blocked_aggregate_statistics(X, Y, rng, side_x, side_y, kappas, nonnegative, *, block,
                                 n_jobs=None, progress=None):
    """The n statistics of the cyclic dpHSIC aggregate, ``block`` diagonals at a time.

    Parameters
    ----------
    X, Y : ndarray of shape (n, d_x), (n, d_y)
    rng : numpy.random.Generator
        Draws the random order of the rows (one ``permutation``, as the in-memory route).
    side_x, side_y : (name, gammas)
        The kernel name ("rbf" or "laplacian") and the public bandwidths of each side
        (one value for a side with a fixed kernel).
    kappas, nonnegative : pairs
        The kernels' public bounds (for the centring terms).
    block : int
        Diagonals per block (:func:`choose_diagonal_block`); the values of the
        statistics do not depend on it beyond the certified rounding bound.
    n_jobs : int, default=None
        Threads over the bandwidths of a block (joblib); each value is computed by the
        same calls whatever ``n_jobs``.
    progress : HSICProgress, default=None
        Stepped once per block and pass, by the block's share of the predicted work
        (``progress.total`` units in all: a pass-1 block costs ``n_x`` kernel blocks,
        a pass-2 block about ``PASS2_WEIGHT`` times as much per bandwidth).

    Returns
    -------
    statistics : ndarray of shape (n,)
        ``max`` over the pairs of ``sqrt(max(T_s, 0)) / n - h``, observed (s = 0) first.
    """
    # BLAS (the stacked products) on one thread: the values do not depend on the thread
    # count, and no OpenBLAS worker spins through the element-wise stages
    with limit_blas():
        return _statistics(X, Y, rng, side_x, side_y, kappas, nonnegative, block, n_jobs,
                           progress)


def _statistics(X, Y, rng, side_x, side_y, kappas, nonnegative, block, n_jobs, progress):
    n = len(X)
    order = rng.permutation(n)  # the in-memory route's draw
    X, Y = X[order], Y[order]
    sides = []
    for (name, gammas), data in ((side_x, X), (side_y, Y)):
        cols = [np.ascontiguousarray(data[:, k]) for k in range(data.shape[1])]
        sides.append((name, [float(g) for g in gammas], cols))
    (name_x, gx, cols_x), (name_y, gy, cols_y) = sides
    rows = np.arange(n)
    blocks = [(d0, min(d0 + block, n)) for d0 in range(0, n, block)]
    units = progress_units(len(gx), len(gy), len(blocks), progress)

    # pass 1: row sums (= column sums: exact symmetry) of every x Gram matrix (the y
    # matrices are not centred: their sums are taken in pass 2)
    sums = [np.zeros((len(gx), n)), np.zeros((len(gy), n))]
    diag = [np.zeros(len(gx)), np.zeros(len(gy))]

    def row_sums(k, D, s, gammas, first):
        K = _kernel_block(D, gammas[k])
        sums[s][k] += K.sum(axis=0)
        if first:  # the block of diagonal 0 (row 0 of the block)
            diag[s][k] = float(K[0].sum())
        return K

    for d0, d1 in blocks:
        idx = (rows[None, :] + rows[d0:d1, None]) % n
        Dx = _distances(name_x, cols_x, idx)

        def x_sums(k, Dx=Dx, first=d0 == 0):
            row_sums(k, Dx, 0, gx, first)

        map_in_threads(x_sums, list(range(len(gx))), n_jobs)
        del Dx, idx
        if progress is not None:
            progress.step(units[0])
    means = sums[0] / n
    grand = means.mean(axis=1)

    # pass 2: centred x diagonals and y diagonals, their spectra, every pair's products
    m = n // 2 + 1
    FA = np.empty((m, len(gx), block), dtype=np.complex128)
    FB = np.empty((m, block, len(gy)), dtype=np.complex128)
    acc = np.zeros((m, len(gx), len(gy)), dtype=np.complex128)
    prod = np.empty_like(acc)
    for d0, d1 in blocks:
        b = d1 - d0
        idx = (rows[None, :] + rows[d0:d1, None]) % n
        Dx = _distances(name_x, cols_x, idx)

        def x_spectra(k, Dx=Dx, idx=idx, b=b):
            K = _kernel_block(Dx, gx[k])
            mk = means[k]
            K -= mk[idx]  # the operations of _double_centre: - m_j, - m_i, + g
            K -= mk
            K += grand[k]
            FA[:, k, :b] = np.conj(np.fft.rfft(K, axis=1)).T

        map_in_threads(x_spectra, list(range(len(gx))), n_jobs)
        del Dx
        Dy = _distances(name_y, cols_y, idx)

        def y_spectra(k, Dy=Dy, b=b, first=d0 == 0):
            L = row_sums(k, Dy, 1, gy, first)
            FB[:, :b, k] = np.fft.rfft(L, axis=1).T

        map_in_threads(y_spectra, list(range(len(gy))), n_jobs)
        del Dy, idx
        np.matmul(FA[:, :, :b], FB[:, :b, :], out=prod)
        acc += prod
        if progress is not None:
            progress.step(units[1])
    FA = FB = prod = None  # freed before the inverse transforms
    traces = [[diag[s][k] - float(sums[s][k].sum()) / n for k in range(len(sums[s]))]
              for s in range(2)]
    best = np.full(n, -np.inf)
    for i, tx in enumerate(traces[0]):
        for j, ty in enumerate(traces[1]):
            t = np.fft.irfft(acc[:, i, j], n=n)
            h, _ = hsic_centre(tx, ty, n, kappas, nonnegative)
            np.maximum(best, np.sqrt(np.maximum(t, 0.0)) / n - h, out=best)
    return best
