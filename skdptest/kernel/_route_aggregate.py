"""The dpMMD bandwidth aggregate's computation route (see ``_bandwidth`` for the test).

With the pooled distances held (N <= 5792 with the default limits) every bandwidth
costs one ``exp`` of the distances and one triangular product, the relabellings drawn
once for all; beyond, every bandwidth runs the single-bandwidth computation. Also the
public work model of every dpMMD route (:func:`mmd_work`, for ``max_time`` and the
automatic progress).
"""

from __future__ import annotations

import threading

import numpy as np

from .._threads import blas_threads, limit_blas, map_dynamic, run_in_threads
from . import _route_exact as _exact
from ._bandwidth import map_in_threads, mmd_centre, same_stream
from ._kernels import gram_distances, gram_from_distances
from ._relabel import _TWO_THREADS_MIN, _coefficient_columns, _MaskRows

__all__ = [
    "aggregate_holds_distances",
    "mmd_aggregate_memory_bytes",
    "mmd_aggregate_statistics",
    "mmd_work",
]

def mmd_aggregate_memory_bytes(n, n_groups, n_permutations, n_jobs=None, *, eval_bytes=16):
    """Planned peak memory, in bytes, of :func:`mmd_aggregate_statistics`.

    With the pooled distances held (:func:`aggregate_holds_distances`): the distances,
    one Gram buffer per concurrent bandwidth (``n_jobs``) and one more ``8 N^2`` for the
    distances' evaluation temporaries (then the ``exp`` masks), with the coefficient
    chunk of :func:`mmd_memory_bytes`. Otherwise :func:`mmd_memory_bytes`.
    """
    single = _exact.mmd_memory_bytes(n, n_groups, n_permutations, eval_bytes=eval_bytes)
    if not aggregate_holds_distances(n, n_groups, n_permutations):
        return single
    n_buffers = 1 if n_jobs is None or n_jobs == 1 else min(19, _joblib_workers(n_jobs))
    full = 8 * n * n
    kernel = max(2 * full, eval_bytes * n * n)
    return single - kernel + full * (2 + n_buffers)


def mmd_work(n, n_features, n_groups, n_permutations, *, n_bandwidths=None,
             feature_dims=None, median=False):
    """The work of a dpMMD release, in the units of :class:`._timing.MachineRates`.

    A public function of the sizes and the route: ``tri`` counts ``N^2`` per column of
    the triangular forms (the symmetric blocking ``(1 + 1/n_blocks)`` times that, the
    sparse many-groups products twice), ``exp`` counts Gram entries evaluated (a
    distance entry costs ``1 + n_features / 8`` of them), ``mask`` the relabelling
    entries drawn (shuffles of three or more groups four times); ``n`` sizes the
    calibration of :func:`._timing.machine_rates`. ``n_bandwidths``: the
    aggregate; ``feature_dims``: ``method="features"`` with that many feature columns.
    The counts were checked against the default aggregate's calls (N = 500 to 4000).
    """
    n_stats = n_permutations + 1
    ksample = n_groups > 2
    mask = float(n) * n_stats * (4 if ksample else 1)
    dist = float(n) * n * (1 + n_features / 8.0)
    work = {"mask": mask, "exp": dist * 2 if median else 0.0, "tri": 0.0}
    work["n"] = float(n)  # the calibration's size (the products' rows)
    if feature_dims is not None:
        # O(N D B): the feature sums of every relabelling, float32 products of the
        # selections (half the time of the float64 units, 2 flops per multiply-add),
        # two-group selections drawn and counted as packed bits (a quarter of the
        # mask units; CPU predicted 0.95-1.25x of the fit at N = 2e4 and 1e5)
        work["tri"] += 1.0 * n * feature_dims * n_stats
        work["exp"] += 4.0 * n * feature_dims
        if not ksample:
            work["mask"] = mask / 4
        return work
    cols = n_groups * n_stats + 1 if ksample else n_stats
    per_chunk = max(1, int(_exact.MAX_COLUMN_BYTES // (8 * n * (n_groups if ksample else 1))))
    n_chunks = -(-n_stats // per_chunk)
    held = 8 * n * n <= _exact.MAX_KERNEL_BYTES
    many = ksample and n_groups > _exact.MANY_GROUPS and held
    blocks = len(_exact._block_edges(n)) - 1
    if many:
        one_tri, one_exp = 2.0 * n * n * n_stats, dist
    elif held:
        one_tri, one_exp = float(n) * n * cols, dist
    else:
        # the blocks' products and their reductions (about a quarter more), each block
        # evaluated by the kernel (distances, clamp, exp: about twice a distance entry);
        # profiled at N = 8000, one bandwidth
        one_tri = 1.25 * (1 + 1 / blocks) * float(n) * n * cols
        one_exp = 2.0 * dist * n_chunks
    if n_bandwidths is None:
        work["tri"] += one_tri
        work["exp"] += one_exp
    elif aggregate_holds_distances(n, n_groups, n_permutations):
        passes = 1 if n_chunks == 1 else n_chunks
        work["tri"] += n_bandwidths * float(n) * n * cols
        work["exp"] += dist + n_bandwidths * float(n) * n * passes
    else:  # every bandwidth on its own, with the centring's blocked trace
        work["tri"] += n_bandwidths * one_tri
        work["exp"] += n_bandwidths * (one_exp + dist)
    return work


def aggregate_holds_distances(n, n_groups, n_permutations, *, max_kernel_bytes=None):
    """Whether the aggregate holds the pooled distances (a public function of the sizes).

    Held when ``8 N^2 <= max_kernel_bytes`` (``MAX_KERNEL_BYTES``, 256 MiB: N <= 5792) and
    the groups are at most ``MANY_GROUPS``; otherwise every bandwidth runs the
    single-bandwidth computation on its own copy of the generator.
    """
    if max_kernel_bytes is None:
        max_kernel_bytes = _exact.MAX_KERNEL_BYTES
    return 8 * n * n <= max_kernel_bytes and not (n_groups > 2 and n_groups > _exact.MANY_GROUPS)


def _gram_and_trace(D, gamma, out):
    """The Gram matrix ``exp(-gamma D)`` into ``out`` and ``tr(K) - 1^T K 1 / N``.

    The ``exp`` runs in fixed blocks of ``BLOCK_ROWS`` rows taken by :func:`blas_threads`
    threads (numpy's ufuncs release the GIL); each block's sum and trace are kept per
    block and added in block order, so the values do not depend on the thread count.
    """
    n = D.shape[0]
    starts = list(range(0, n, _exact.BLOCK_ROWS))
    sums, traces = np.empty(len(starts)), np.empty(len(starts))

    def block(i, _):
        r0 = starts[i]
        r1 = min(r0 + _exact.BLOCK_ROWS, n)
        Kb = gram_from_distances(D, gamma, out, rows=(r0, r1))
        traces[i] = float(np.trace(Kb, offset=r0))
        sums[i] = float(Kb.sum())

    n_threads = 1 if n * n < _TWO_THREADS_MIN else blas_threads()
    map_dynamic(block, [(i, None) for i in range(len(starts))], n_threads)
    trace = total = 0.0
    for t, s_ in zip(traces, sums, strict=True):  # the order of _exact._trace_hkh's blocks
        trace += t
        total += s_
    return out, trace - total / n


def mmd_aggregate_statistics(X, codes, n_permutations, rng, kernel, gammas, *, n_jobs=None,
                             progress=None, kernel_name=None, max_kernel_bytes=None):
    """The B + 1 statistics of the bandwidth aggregate (see ``_bandwidth``).

    For every ``gamma`` of the public grid: the statistics ``s_b`` of
    :func:`mmd_permutation_statistics` with the SAME relabellings, minus the
    relabelling-invariant centring ``h = sqrt(max(c, f))``. Returns the maximum over
    the grid, for each b.

    When the pooled distances fit (:func:`aggregate_holds_distances`; ``kernel_name``
    "rbf" or "laplacian", the named kernel of ``kernel``) they are computed once (while
    the relabellings are drawn, in a thread), the relabellings are drawn once and shared
    by every bandwidth, and each bandwidth costs one ``exp`` of the distances (its Gram
    matrix, bit for bit the kernel's, see ``_kernels.gram_from_distances``), whose sum
    and trace give the centring, and one triangular product per column chunk
    (several chunks: chunk by chunk, the Gram matrices recomputed for each). Otherwise
    each bandwidth reads its own copy of ``rng`` in the same state. Either way ``rng``
    ends where one pass leaves it, and the relabellings are those of one
    single-bandwidth test. Bandwidths are computed on ``n_jobs`` threads; every value
    is computed by the same calls whatever ``n_jobs``.

    Returns
    -------
    statistics : ndarray of shape (n_permutations + 1,)
    """
    codes = np.asarray(codes)
    sizes = np.bincount(codes)
    n, n_groups = codes.size, sizes.size
    ksample = n_groups > 2
    n_stats = n_permutations + 1
    if kernel_name in ("rbf", "laplacian") and aggregate_holds_distances(
            n, n_groups, n_permutations, max_kernel_bytes=max_kernel_bytes):
        return _aggregate_held(X, codes, sizes, n_stats, rng, kernel, gammas, kernel_name,
                               n_jobs, progress)
    copies = same_stream(rng, len(gammas))

    def one(i):
        k = kernel.with_gamma(gammas[i])
        stats = _exact.mmd_permutation_statistics(X, codes, n_permutations, copies[i], k,
                                           ksample=ksample,
                                           max_kernel_bytes=max_kernel_bytes)
        h, _ = mmd_centre(_exact._trace_hkh(X, k), sizes, kernel.kappa, kernel.nonnegative)
        if progress is not None:
            progress.step()
        return stats - h

    parts = map_in_threads(one, list(range(len(gammas))), n_jobs)
    rng.bit_generator.state = copies[0].bit_generator.state
    return np.max(np.vstack(parts), axis=0)


def _aggregate_held(X, codes, sizes, n_stats, rng, kernel, gammas, name, n_jobs, progress):
    """:func:`mmd_aggregate_statistics` with the pooled distances held."""
    n, n_groups = codes.size, sizes.size
    ksample = n_groups > 2
    per_chunk = max(1, int(_exact.MAX_COLUMN_BYTES // (8 * n * (n_groups if ksample else 1))))
    columns, n_chunks, finish, col_sq = _coefficient_columns(codes, sizes, n_stats, ksample,
                                                             per_chunk, rng)
    cs = col_sq if kernel.unit_diagonal else None

    def distances():
        with limit_blas():  # as held_kernel: the same values, no spinning BLAS workers
            return gram_distances(name, X)

    if n * n < _TWO_THREADS_MIN:  # too small to gain from a worker (~0.2 ms to hand over)
        first, D = next(columns), distances()
    else:
        first, D = run_in_threads([lambda: next(columns), distances])
    n_gammas = len(gammas)
    centres = [None] * n_gammas
    parts = [[] for _ in range(n_gammas)]
    # one Gram buffer per concurrent bandwidth (n_jobs threads take them in turn)
    n_buffers = 1 if n_jobs is None or n_jobs == 1 else min(n_gammas, _joblib_workers(n_jobs))
    buffers = [np.empty((n, n)) for _ in range(n_buffers)]
    free = list(range(n_buffers))
    lock = threading.Lock()

    def chunk_forms(V):
        V = [_filled_once(W) for W in V]

        def one(i):
            with lock:
                slot = free.pop()
            try:
                K, trace = _gram_and_trace(D, gammas[i], buffers[slot])
                if centres[i] is None:
                    centres[i] = mmd_centre(trace, sizes, kernel.kappa,
                                            kernel.nonnegative)[0]
                parts[i].append(np.concatenate([_exact.triangular_quadratic_forms(K, W, cs)
                                                for W in V]))
            finally:
                with lock:
                    free.append(slot)
            if progress is not None and n_chunks <= 1 + ksample:
                progress.step()

        map_in_threads(one, list(range(n_gammas)), n_jobs)

    if n_chunks <= 1 + ksample:  # one pass (k-sample: the pooled column and one chunk)
        chunk_forms([first, *columns])
    else:
        chunk_forms([first])
        for V in columns:
            chunk_forms([V])
        if progress is not None:
            progress.step(n_gammas)
    buffers = D = None  # freed before the final reductions
    stats = [np.sqrt(np.maximum(finish(np.concatenate(p)), 0.0)) - centres[i]
             for i, p in enumerate(parts)]
    return np.max(np.vstack(stats), axis=0)


# Coefficient chunks up to this many float64 bytes are filled from their masks once per
# fit (within the plan's 1 MiB of small arrays), not twice per bandwidth.
_FILL_ONCE_BYTES = 2**20


def _filled_once(W):
    """The two-group coefficient rows ``W`` as the float64 ``(N, C)`` matrix every
    bandwidth reads (the same values as its masks give) when small, else ``W``.

    Why: each bandwidth's triangular product reads the coefficients twice; filling them
    from the masks (a multiply-add pass each time) cost more than the product at small N.
    """
    if isinstance(W, _MaskRows) and 8 * W.masks.size <= _FILL_ONCE_BYTES:
        return W.dense().T
    return W


def _joblib_workers(n_jobs):
    """Threads joblib runs for ``n_jobs`` (its convention: -1 all cores, -2 all but one)."""
    from joblib import effective_n_jobs

    return max(1, int(effective_n_jobs(n_jobs)))
