"""dpMMD's cyclic aggregate without an N x N array (``"cyclic aggregate blocked"``).

The same test as :mod:`._route_mmd_cyclic` (the N cyclic shifts of the labels in one
random order of the rows, all 19 bandwidths, the same sensitivity and certified FFT
error), for the fits whose held route does not fit ``max_memory`` (with the defaults,
N above about 11 000). The held route forms the pooled distance matrix and keeps its
diagonals ``0 .. N // 2`` and the labels' diagonal spectra (about ``32 N^2`` bytes at
its peak); this one walks the diagonals block by block, in order, and keeps nothing of
size ``N^2``:

- a block of diagonals ``d0 .. d1`` of the distances is computed from the rows,
  ``D_{i, i+d} = sum_f (x_{i+d, f} - x_{i, f})^2`` (rbf; ``abs`` for laplacian), feature
  by feature: exactly symmetric (``(-a)^2 = a^2``), free of the expansion's cancellation,
  and overflowing only to ``inf`` (kernel value 0), never NaN;
- the block's label spectra are formed once and serve every bandwidth;
- each bandwidth evaluates its kernel on the block (``exp`` of the distances), sums it
  (the centring's trace terms) and adds the block's spectrum products to its running
  spectrum.

Blocks run on threads in waves and are added in block order, so every value is the same
whatever the thread count. Memory: ``O(N (b threads + 19))`` with ``b`` diagonals per
block; time ``O(N^2 (d + 19 log N))``, as the held route. The Gram values differ from the
held route's in their last bits (distances by differences, not by scikit-learn's
expansion), so the two routes' releases differ in low-order bits; the statistic, the
group of relabellings and every bound are the same.
"""

from __future__ import annotations

import numpy as np

from .._threads import blas_threads, map_dynamic
from ._bandwidth import mmd_centre
from ._cyclic import SPECTRA_BLOCK, half_diagonal_weights
from ._kernels import gram_from_distances
from ._relabel import _TWO_THREADS_MIN
from ._route_mmd_cyclic import MMDCyclicRoute, mmd_cyclic_work, ordered_rows

__all__ = [
    "MMDCyclicBlockedRoute",
    "blocked_block_size",
    "diagonal_distances",
    "mmd_cyclic_blocked_memory_bytes",
    "mmd_cyclic_blocked_statistics",
    "mmd_cyclic_blocked_work",
]

# Entries of one (b x N) block array: b = min(SPECTRA_BLOCK, _BLOCK_ENTRIES // N), >= 8.
_BLOCK_ENTRIES = 2**21


def blocked_block_size(n):
    """Diagonals per block for N rows (public): at most ``SPECTRA_BLOCK``, about
    ``2^21`` entries per block array, at least 8."""
    return int(max(8, min(SPECTRA_BLOCK, _BLOCK_ENTRIES // max(int(n), 1))))


def _threads(n, n_jobs):
    if n_jobs is not None and n_jobs != 1:
        from joblib import effective_n_jobs

        return max(1, int(effective_n_jobs(n_jobs)))
    return blas_threads() if float(n) * n >= _TWO_THREADS_MIN else 1


def diagonal_distances(X, idx, kernel_name, out):
    """The distances ``out[k, i] = dist(X[i], X[idx[k, i]])`` (``idx[k, i] = (i + d0 + k)
    % N``): squared euclidean for ``"rbf"``, l1 for ``"laplacian"``, summed feature by
    feature from coordinate differences (exactly symmetric; ``inf`` on overflow)."""
    out[...] = 0.0
    diff = np.empty(out.shape)
    with np.errstate(over="ignore", invalid="ignore"):
        for f in range(X.shape[1]):
            col = X[:, f]
            np.take(col, idx, out=diff)
            diff -= col
            if kernel_name == "laplacian":
                np.abs(diff, out=diff)
            else:
                np.multiply(diff, diff, out=diff)
            out += diff
    return out


def _block(X, codes, C, d0, d1, gammas, kernel_name, weights):
    """One block of diagonals: per bandwidth, the block's spectrum products (summed over
    the block) and the diagonals' sums."""
    n = X.shape[0]
    h = n // 2 + 1
    idx = np.arange(d0, d1)[:, None] + np.arange(n)[None, :]
    np.remainder(idx, n, out=idx)
    labels = np.fft.rfft(C[codes[None, :], codes[idx]], axis=1)
    labels *= weights[d0:d1, None]
    dist = diagonal_distances(X, idx, kernel_name, np.empty((d1 - d0, n)))
    del idx
    parts = np.empty((len(gammas), h), dtype=np.complex128)
    sums = np.empty((len(gammas), d1 - d0))
    rows = np.empty_like(dist)
    for g, gamma in enumerate(gammas):
        gram_from_distances(dist, gamma, rows)
        sums[g] = rows.sum(axis=1)
        fa = np.fft.rfft(rows, axis=1)
        np.conjugate(fa, out=fa)
        parts[g] = np.einsum("ij,ij->j", fa, labels)
    return parts, sums


def mmd_cyclic_blocked_statistics(X, codes, rng, kernel, gammas, kernel_name, *,
                                  n_jobs=None, progress=None, forms=False, block=None):
    """The N statistics of the cyclic bandwidth aggregate (observed first), by blocks.

    The same definition as :func:`._route_mmd_cyclic.mmd_cyclic_statistics` (``rng``
    draws one order of the rows, ``rng.permutation(N)``, nothing else; per bandwidth the
    N shifted statistics minus the centring; their maximum over the grid), the Gram
    values from :func:`diagonal_distances`. ``block`` diagonals at a time (default
    :func:`blocked_block_size`), on ``n_jobs`` threads (the BLAS thread count in force
    when serial), added in block order. ``forms=True`` returns the quadratic forms
    ``T_s`` of each bandwidth instead (shape ``(len(gammas), N)``; for tests).

    Returns
    -------
    statistics : ndarray of shape (N,)
    """
    X, codes, sizes, C = ordered_rows(X, codes, rng)
    X = np.ascontiguousarray(X, dtype=np.float64)
    n = codes.size
    half = n // 2 + 1
    weights = half_diagonal_weights(n)
    b = blocked_block_size(n) if block is None else int(block)
    starts = list(range(0, half, b))
    threads = _threads(n, n_jobs)
    spectra = np.zeros((len(gammas), half), dtype=np.complex128)
    sums = np.empty((len(gammas), half))
    for w0 in range(0, len(starts), threads):  # a wave: one block per thread
        wave = starts[w0:w0 + threads]
        done = [None] * len(wave)

        def one(k, _, wave=wave, done=done):
            d0 = wave[k]
            done[k] = _block(X, codes, C, d0, min(d0 + b, half), gammas, kernel_name,
                             weights)

        map_dynamic(one, [(k, None) for k in range(len(wave))], threads)
        for d0, (parts, block_sums) in zip(wave, done, strict=True):  # block order
            spectra += parts
            sums[:, d0:d0 + block_sums.shape[1]] = block_sums
        if progress is not None:
            progress.step(len(wave))
    T = np.fft.irfft(spectra, n=n, axis=1)
    if forms:
        return T
    out = np.empty((len(gammas), n))
    for g in range(len(gammas)):  # the centring as the held route's (the grid's kappa)
        trace = float(sums[g, 0]) - float(np.dot(weights, sums[g])) / n
        h = mmd_centre(trace, sizes, kernel.kappa, kernel.nonnegative)[0]
        out[g] = np.sqrt(np.maximum(T[g], 0.0)) - h
    return np.max(out, axis=0)


def mmd_cyclic_blocked_memory_bytes(n, n_gammas=19, n_jobs=None, *, threads=None):
    """Planned peak memory, in bytes, of :func:`mmd_cyclic_blocked_statistics` (an upper
    bound, beside the rows: their ordered copy is within the plan's two copies of the
    data, :func:`._testbase.with_median_and_data`): per thread one block (``b``
    diagonals: indices, distances, differences, kernel rows, their and the labels'
    spectra, the gathered labels: ``72 N b``) and its per-bandwidth products and sums
    (``16 G (N / 2 + 1) + 8 G b``); the bandwidths' running spectra, sums, forms and
    statistics (``16 G (N / 2 + 1) + 24 G N``) and 1 MiB of small arrays."""
    n = int(n)
    h = n // 2 + 1
    b = blocked_block_size(n)
    if threads is None:
        threads = _threads(n, n_jobs)
    per_thread = 72 * n * b + 16 * n_gammas * h + 8 * n_gammas * b
    return int(threads) * per_thread + 16 * n_gammas * h + 24 * n_gammas * n + 2**20


def mmd_cyclic_blocked_work(n, n_features, n_gammas):
    """The work of a blocked cyclic release (:class:`._timing.MachineRates` units): the
    held route's (:func:`._route_mmd_cyclic.mmd_cyclic_work`). The distances' diagonals
    from coordinate differences cost about what the held route's distance matrix and
    diagonal copies cost (the same CPU time at N = 4000, d = 2:
    benchmarks/results/kernel_scale.txt)."""
    return mmd_cyclic_work(n, n_features, n_gammas)


class MMDCyclicBlockedRoute(MMDCyclicRoute):
    """dpMMD's cyclic bandwidth aggregate by blocks of diagonals
    (``" cyclic aggregate blocked"``): no ``N x N`` array."""

    name = "cyclic aggregate blocked"

    def memory(self, params, n, n_groups):
        return mmd_cyclic_blocked_memory_bytes(n, 19, params["n_jobs"])

    def work(self, n, n_features, n_groups, params, gammas, median):
        return mmd_cyclic_blocked_work(n, n_features, len(gammas))

    def adjust(self, params, X, sizes, kernel, sensitivity, abs_error, method):
        gammas, sensitivity, abs_error, method = super().adjust(
            params, X, sizes, kernel, sensitivity, abs_error, method)
        return gammas, sensitivity, abs_error, method + " blocked"

    steps = "blocks of diagonals"
    compute = staticmethod(mmd_cyclic_blocked_statistics)

    def n_steps(self, plan, n):
        return -(-(n // 2 + 1) // blocked_block_size(n))
