"""dpHSIC's permutation traces ``sum_ij K~_ij L[p_i, p_j]``: the permutations, the
numpy and (optional) numba backends of the blocked exact path (:mod:`._hsic_exact`), and
the stacked traces of the aggregate over random permutations (:mod:`._hsic_aggregate`:
one gather of K~ per chunk of inverse permutations, one matrix product for every y
bandwidth)."""

from __future__ import annotations

import contextlib
import os

import numpy as np

from .._threads import blas_threads, limit_blas, run_in_threads

__all__ = ["draw_permutations", "inverse_permutations", "permutation_traces",
           "stacked_permutation_traces"]

# Elements of the gathered kernel values held at once by the numpy backend:
# small enough (512 KiB) for the column gather to read cache-resident rows.
_GATHER_ELEMENTS = 2**16
# The numpy backend uses threads when n^2 * (B + 1) reaches this.
_THREADS_MIN_WORK = 5e7
# Gathered kernel values held at once (per thread) by stacked_permutation_traces: 4 MiB,
# enough permutations per matrix product that it is not bound by reading the stack.
_STACK_ELEMENTS = 2**19
# Use the optional numba backend ("auto") when n^2 * (B + 1) reaches this
# (below it, loading the cached kernel, or compiling it once, costs more than
# it saves).
_NUMBA_MIN_WORK = 1e9
# Optional accelerator, imported on first need (importing numba costs about
# 0.4 s and 50 MB); plain numpy is the default-installable path.
_NOT_LOADED = object()
_numba = _NOT_LOADED
_numba_trace_kernel = None
_PRECISIONS = ("auto", "float32", "float64")


def _load_numba():
    global _numba
    if _numba is _NOT_LOADED:
        try:
            import numba
        except ImportError:  # pragma: no cover - depends on the environment
            numba = None
        _numba = numba
    return _numba


def draw_permutations(n, n_permutations, rng):
    """Row 0 the identity, rows 1..B independent uniform permutations of 0..n-1.

    One Fisher-Yates shuffle per row (``Generator.permuted``), no sorting.
    """
    dtype = np.int32 if n < 2**31 else np.int64
    out = np.empty((n_permutations + 1, n), dtype=dtype)
    out[:] = np.arange(n, dtype=dtype)
    rng.permuted(out[1:], axis=1, out=out[1:])
    return out


def inverse_permutations(perms):
    """``q`` with ``q[b, perms[b, i]] = i`` (intp): the inverse of every row."""
    out = np.empty(perms.shape, dtype=np.intp)
    np.put_along_axis(out, perms.astype(np.intp),
                      np.broadcast_to(np.arange(perms.shape[1], dtype=np.intp), perms.shape),
                      axis=1)
    return out


def _stacked_blocks(n, n_perm):
    """``(rows, chunk)`` of :func:`stacked_permutation_traces`: rows of a block (``R n <=
    max(2^16, n)``) and permutations gathered at once (``chunk R n <= max(2^19, R n)``)."""
    rows = max(1, min(n, _GATHER_ELEMENTS // n))
    return rows, max(1, min(n_perm, _STACK_ELEMENTS // (rows * n)))


def stacked_gather_bytes(n, n_perm):
    """Peak bytes of one thread's gather in :func:`stacked_permutation_traces` (the
    gathered values and their index array, 8 bytes each, and the block's products)."""
    rows, chunk = _stacked_blocks(n, n_perm)
    return 16 * chunk * rows * n + 8 * n


def _stacked_chunk(flat, Ls, inverse, rows, chunk, out, buffers=None):
    """:func:`stacked_permutation_traces` for one chunk of permutations (``out`` rows).

    The index array and the gathered values go to two buffers of ``chunk R n``
    entries, from ``buffers`` (kept between calls: fresh pages cost more than the
    gather at small n) or allocated here once."""
    n_y, n = Ls.shape[0], Ls.shape[1]
    n_perm = inverse.shape[0]
    size = min(chunk, n_perm) * min(rows, n) * n
    get = buffers.get if buffers is not None else (lambda name, k, dtype: np.empty(k, dtype))
    idx_buf, g_buf = get("index", size, np.intp), get("gather", size, np.float64)
    for c0 in range(0, n_perm, chunk):
        q = inverse[c0:c0 + chunk]
        c = len(q)
        for r0 in range(0, n, rows):
            r1 = min(r0 + rows, n)
            k = c * (r1 - r0) * n
            # G[c, a, j] = Kc[q_c(a), q_c(j)] for the block's rows a: one gather
            idx = idx_buf[:k].reshape(c, r1 - r0, n)
            np.add(q[:, r0:r1, None] * n, q[:, None, :], out=idx)
            # mode="clip": no buffered copy of out (mode="raise" makes one); every index
            # is in range (entries of inverse permutations)
            G = np.take(flat, idx_buf[:k], out=g_buf[:k], mode="clip")
            part = Ls[:, r0:r1, :].reshape(n_y, -1) @ G.reshape(c, -1).T
            out[:, c0:c0 + c] += part


def stacked_permutation_traces(Kc, Ls, inverse, threads=None, buffers=None):
    """``T[y, b] = sum_ij Kc_ij Ls[y][p_b(i), p_b(j)]`` for a stack of y Gram matrices.

    ``inverse`` holds the inverse permutations (:func:`inverse_permutations`): with
    ``q = p_b^-1``, ``T[y, b] = sum_ab Kc[q_a, q_b] Ls[y][a, b]``, the same products
    summed in another order. For blocks of ``R = max(1, 2^16 // n)`` rows of ``Ls`` and
    chunks of permutations, ``Kc`` is gathered once (one ``take`` with a (chunk, R, n)
    index array) and every y bandwidth's traces come from one matrix product, on one
    BLAS thread (the values do not depend on the thread count). Each trace is a sum over
    at most ``n / R`` blocks of dot products of at most ``R n <= max(2^16, n)`` terms:
    the rounding chain of ``hsic_abs_error`` (``2^16 + 2n + 8``) covers every summation
    order of them. Chunks of permutations run on as many threads as the BLAS thread count
    in force (as :func:`permutation_traces`; ``threads``: that count, read by a caller
    that already holds BLAS on one thread), the same chunks whatever their number.
    ``buffers``: an object whose ``get(name, size, dtype)`` returns a kept 1-D array
    (the serial path's gather buffers, reused between calls).

    Returns
    -------
    traces : ndarray of shape (n_y, n_permutations)
    """
    n = Kc.shape[0]
    n_y, n_perm = Ls.shape[0], inverse.shape[0]
    rows, chunk = _stacked_blocks(n, n_perm)
    out = np.zeros((n_y, n_perm))
    flat = np.ascontiguousarray(Kc).ravel()
    work = float(n) * n * n_perm
    if threads is None:
        threads = blas_threads()
    n_threads = min(threads, 8) if work >= _THREADS_MIN_WORK else 1
    # chunk boundaries first (fixed by n and B), then split between the threads
    starts = list(range(0, n_perm, chunk))
    with limit_blas():
        if n_threads == 1 or len(starts) == 1:
            _stacked_chunk(flat, Ls, inverse, rows, chunk, out, buffers)
            return out
        groups = [g for g in np.array_split(np.array(starts), n_threads) if len(g)]
        bounds = [(int(g[0]), min(int(g[-1]) + chunk, n_perm)) for g in groups]
        run_in_threads([lambda a=a, b=b: _stacked_chunk(flat, Ls, inverse[a:b], rows, chunk,
                                                        out[:, a:b])
                        for a, b in bounds])
    return out


def _traces_numpy(Kc, L, perms):
    """``sum_ij Kc_ij L[p_i, p_j]`` for every row ``p`` of ``perms`` (numpy).

    Per permutation and block of rows: copy the rows of ``L`` (sequential),
    gather their columns while they are cache resident (blocks of 512 KiB:
    about 5x faster than whole-matrix gathers at n = 4000), then one dot
    product.
    """
    n = Kc.shape[0]
    out = np.empty(perms.shape[0])
    rows = max(1, _GATHER_ELEMENTS // n)
    for b, p in enumerate(perms):
        p = p.astype(np.intp)  # once, not at every take
        total = 0.0
        for start in range(0, n, rows):
            G = L.take(p[start:start + rows], axis=0).take(p, axis=1)
            # einsum, not BLAS ddot: no thread start-up per call
            total += np.einsum("ij,ij->", Kc[start:start + rows], G)
        out[b] = total
    return out


def _get_trace_kernel():  # pragma: no cover - needs numba
    global _numba_trace_kernel
    if _numba_trace_kernel is None:
        numba = _load_numba()
        njit, prange = numba.njit, numba.prange

        @njit(parallel=True, fastmath=True, cache=True)
        def block_traces(Kt, L, perms, start, acc):
            # acc[b] += sum over the block's rows i = start + r of
            # 2 sum_{j<i} Kt[r, j] L[p_i, p_j] + Kt[r, i] L[p_i, p_i]  (K~ and L symmetric:
            # one triangle). One source for every caller: the whole matrix (start = 0,
            # float64 L: the aggregate's exact path) or row blocks of K~ against the
            # float32 copy of L (the blocked path: half the memory traffic; the product
            # of two float32 values is exact in float64). Groups of 8 permutations share
            # each row of K~; the row of L is first copied (a sequential stream) into a
            # cache-resident buffer of L's dtype, then gathered (random reads straight
            # from L are latency-bound), except for the first rows, which gather so few
            # entries that the copy costs more. Every product is formed and summed in
            # float64; any summation order is covered by the error bounds (fastmath may
            # reassociate).
            n_perm, n = perms.shape
            n_groups = (n_perm + 7) // 8
            direct = n // 16
            for grp in prange(n_groups):
                b0 = 8 * grp
                b1 = min(b0 + 8, n_perm)
                buf = np.empty_like(L[0])
                for r in range(Kt.shape[0]):
                    i = start + r
                    Ki = Kt[r]
                    for b in range(b0, b1):
                        p = perms[b]
                        row = L[p[i]]
                        s = 0.0
                        if i < direct:
                            for j in range(i):
                                s += np.float64(Ki[j]) * np.float64(row[p[j]])
                        else:
                            for j in range(n):
                                buf[j] = row[j]
                            for j in range(i):
                                s += np.float64(Ki[j]) * np.float64(buf[p[j]])
                        acc[b] += 2.0 * s + np.float64(Ki[i]) * np.float64(row[p[i]])

        _numba_trace_kernel = block_traces
    return _numba_trace_kernel


@contextlib.contextmanager
def _numba_threads():  # pragma: no cover - needs numba
    """numba's parallel loops on at most the BLAS thread count in force (so that
    ``threadpoolctl.threadpool_limits`` caps them too); restored afterwards."""
    numba = _load_numba()
    before = numba.get_num_threads()
    numba.set_num_threads(max(1, min(blas_threads(), numba.config.NUMBA_NUM_THREADS)))
    try:
        yield
    finally:
        numba.set_num_threads(before)


def _resolve_backend(backend, work):
    if backend == "auto":
        backend = os.environ.get("SKDPTEST_HSIC_BACKEND", "auto")
    if backend == "auto":
        if work >= _NUMBA_MIN_WORK and _load_numba() is not None:
            return "numba"
        return "numpy"
    if backend == "numba" and _load_numba() is None:
        raise ImportError("backend='numba' needs the optional dependency numba.")
    if backend not in ("numpy", "numba"):
        raise ValueError(f"backend must be 'auto', 'numpy' or 'numba', got {backend!r}.")
    return backend


def permutation_traces(Kc, L, perms, backend="auto"):
    """``T_b = sum_ij Kc_ij L[p_b(i), p_b(j)]`` for each permutation ``p_b``.

    Exact: since ``Kc = H K H`` is doubly centred, ``tr(Kc H L_p H) = tr(Kc L_p)``,
    so only one of the two kernel matrices needs centring.
    """
    n = Kc.shape[0]
    work = float(n) * n * perms.shape[0]
    backend = _resolve_backend(backend, work)
    if backend == "numba":  # pragma: no cover - needs numba
        acc = np.zeros(perms.shape[0])
        with _numba_threads():
            _get_trace_kernel()(np.ascontiguousarray(Kc), np.ascontiguousarray(L),
                                np.ascontiguousarray(perms, dtype=np.int32), 0, acc)
        return acc
    n_threads = min(blas_threads(), 8) if work >= _THREADS_MIN_WORK else 1
    if n_threads == 1:
        return _traces_numpy(Kc, L, perms)
    # numpy's take and einsum release the GIL: threads over permutations, as many as
    # the BLAS thread count in force (threadpoolctl caps both).
    return np.concatenate(run_in_threads([lambda c=c: _traces_numpy(Kc, L, c)
                                          for c in np.array_split(perms, n_threads)]))


def _resolve_precision(precision):
    if precision == "auto":
        precision = os.environ.get("SKDPTEST_HSIC_PRECISION", "auto")
    if precision not in _PRECISIONS:
        raise ValueError(
            f"precision must be 'auto', 'float32' or 'float64', got {precision!r}."
        )
    return "float32" if precision == "auto" else precision


def _stat(traces, n, squared=False):
    # both maps are monotone in floating point (enclosures carry over)
    if squared:
        return traces / (float(n) * n)
    return np.sqrt(np.maximum(traces, 0.0)) / n
