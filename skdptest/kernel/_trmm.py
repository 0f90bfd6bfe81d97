"""The unit-triangular kernel product of exact dpMMD, on threads that hold no GIL.

:func:`trmm_rows` computes, in place, ``P[c] <- (U + I) P[c]`` for every row ``c``
of a C-ordered block ``P``, where ``U`` is the strict upper triangle of ``K.T`` (the
values of ``K``'s strict lower triangle; ``K``'s upper triangle and diagonal are
never read). It is BLAS ``dtrmm`` (``N^2`` flops per row, half of a general
product), called through scipy's public Cython BLAS (``scipy.linalg.cython_blas``)
with ``ctypes``, which releases the GIL. :func:`map_row_blocks` runs a function
over blocks of rows on several Python threads, each calling a single-threaded BLAS.

Why not BLAS's own threads: pip's numpy and scipy wheels each ship an OpenBLAS
whose idle worker threads spin for ~0.1 s after every multi-threaded call, so in
back-to-back fits the previous fit's workers took a core from the next fit's
relabelling draws (N = 1000: a fit 1.2-1.35x one ``K @ V`` product). Single-threaded
calls wake no BLAS worker. The threads are the library's kept workers
(``skdptest/_threads.py``), as many as the BLAS thread count in force. Block edges are
multiples of :data:`ROW_ALIGN` rows: OpenBLAS's kernels treat a call's last few rows
(fewer than a register block) apart, so a row's value depends on its position
modulo the register block, which aligned edges keep the same whatever the number of
threads (tested). Without the Cython BLAS entry point, scipy's ``dtrmm`` wrapper
computes the same product (holding the GIL, on BLAS's own threads).
"""

from __future__ import annotations

import ctypes
import re

import numpy as np
from scipy.linalg import blas as _blas

from .._threads import blas_threads, limit_blas, run_in_threads

__all__ = ["map_row_blocks", "row_blocks", "trmm_rows"]

# Block edges are multiples of this many rows (a multiple of the usual BLAS
# register-block widths 2, 4, 6, 8, 12, 16, 24). One block per thread: every dtrmm
# call packs the triangle again (measured: 192-row blocks cost 10 % more).
ROW_ALIGN = 48
# Below this many rows per thread the work stays on one thread.
MIN_ROWS_PER_THREAD = 2 * ROW_ALIGN

_CACHE = {}
# scipy.linalg.cython_blas.dtrmm: LP64 (32-bit integers), Fortran by-reference arguments,
# its double type a typedef (``__pyx_t_..._d``) or ``double``.
_SIGNATURE = re.compile(
    rb"void \(char \*, char \*, char \*, char \*, int \*, int \*, (double|\w+_d) \*, "
    rb"\1 \*, int \*, \1 \*, int \*\)")


def _dtrmm():
    if "dtrmm" not in _CACHE:
        _CACHE["dtrmm"] = _load_dtrmm()
    return _CACHE["dtrmm"]


def _load_dtrmm():
    try:
        from scipy.linalg import cython_blas

        capsule = cython_blas.__pyx_capi__["dtrmm"]
        api = ctypes.pythonapi
        api.PyCapsule_GetName.restype = ctypes.c_char_p
        api.PyCapsule_GetName.argtypes = [ctypes.py_object]
        api.PyCapsule_GetPointer.restype = ctypes.c_void_p
        api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
        name = api.PyCapsule_GetName(capsule)
        if not _SIGNATURE.fullmatch(name):  # pragma: no cover - another build's signature
            return None
        pointer = api.PyCapsule_GetPointer(capsule, name)
    except Exception:  # pragma: no cover - no Cython BLAS: scipy's wrapper instead
        return None
    c_int_p, c_double_p = ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_double)
    # Fortran calling convention: every argument by reference. A CFUNCTYPE call
    # releases the GIL.
    prototype = ctypes.CFUNCTYPE(None, *([ctypes.c_char_p] * 4), c_int_p, c_int_p,
                                 c_double_p, ctypes.c_void_p, c_int_p, ctypes.c_void_p,
                                 c_int_p)
    return prototype(pointer)


def _checked(a, name):
    if not (a.dtype == np.float64 and a.flags.c_contiguous and a.ndim == 2):
        raise ValueError(f"{name} must be a C-ordered 2-D float64 array")


def trmm_rows(K, P):
    """``P[c] <- (U + I) P[c]`` in place for every row of ``P`` (see the module docstring).

    Called under :func:`limit_blas` (as :func:`map_row_blocks` does), it is one
    single-threaded BLAS call that holds no GIL.

    Parameters
    ----------
    K : ndarray of shape (N, N), float64, C-ordered
    P : ndarray of shape (C, N), float64, C-ordered (written)
    """
    _checked(K, "K")
    _checked(P, "P")
    n = K.shape[0]
    if K.shape[1] != n or P.shape[1] != n:
        raise ValueError("K must be square and P must have as many columns as K")
    if P.shape[0] == 0 or n == 0:
        return
    dtrmm = _dtrmm()
    if dtrmm is None:  # pragma: no cover - scipy without the Cython BLAS
        P[...] = _blas.dtrmm(1.0, K.T, P.T, lower=0, diag=1).T
        return
    # K C-ordered is K.T Fortran-ordered (lda = N); the rows of P are the columns of
    # a Fortran (N, C) matrix. dtrmm(side L, upper, no transpose, unit diagonal).
    m, cols, lda = ctypes.c_int(n), ctypes.c_int(P.shape[0]), ctypes.c_int(n)
    one = ctypes.c_double(1.0)
    dtrmm(b"L", b"U", b"N", b"U", ctypes.byref(m), ctypes.byref(cols), ctypes.byref(one),
          K.ctypes.data, ctypes.byref(lda), P.ctypes.data, ctypes.byref(lda))


def row_blocks(n_rows, n_threads):
    """At most ``n_threads`` contiguous blocks of rows, of (nearly) equal size, with
    edges at multiples of ROW_ALIGN; one block below MIN_ROWS_PER_THREAD rows each."""
    n_threads = max(1, min(n_threads, n_rows // MIN_ROWS_PER_THREAD))
    units = -(-n_rows // ROW_ALIGN)
    edges = [min(n_rows, ROW_ALIGN * ((units * t) // n_threads)) for t in range(n_threads + 1)]
    edges[-1] = n_rows
    return [(a, b) for a, b in zip(edges[:-1], edges[1:], strict=True) if b > a]


def map_row_blocks(func, n_rows, *, n_threads=None):
    """``func(r0, r1)`` for every block of :func:`row_blocks`, each on its own thread
    (``n_threads``, default :func:`blas_threads`), with every BLAS on one thread.

    Without the GIL-free entry point (:func:`trmm_rows` then holds the GIL), one
    block on the calling thread, BLAS keeping its own threads.
    """
    if _dtrmm() is None:  # pragma: no cover - scipy without the Cython BLAS
        func(0, n_rows)
        return
    blocks = row_blocks(n_rows, blas_threads() if n_threads is None else n_threads)
    with limit_blas():
        run_in_threads([lambda b=b: func(*b) for b in blocks])
