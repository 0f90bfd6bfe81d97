"""Worker threads of the library, sized by the BLAS thread count in force.

Work that splits across threads (the dpMMD triangular product, relabelling draws,
permutation traces) runs on threads kept by this module, as many as
:func:`blas_threads` (threadpoolctl's view of the BLAS libraries), so that
``threadpoolctl.threadpool_limits`` caps it as it caps BLAS; never
``os.cpu_count()``. Parallelism a user asks for is ``n_jobs`` through joblib.

Why kept threads: a dpMMD fit at N = 1000 lasts ~35 ms, and threads started afresh on
an idle machine cost it ~7 ms. Why :func:`limit_blas`: pip's numpy and scipy wheels
each ship an OpenBLAS whose worker threads spin for ~0.1 s after every
multi-threaded call, taking cores from whatever threaded stage follows.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
from concurrent.futures import ThreadPoolExecutor, wait

__all__ = ["blas_threads", "limit_blas", "map_dynamic", "run_in_threads"]

_CACHE = {}


def _controller():
    if "controller" not in _CACHE:
        from threadpoolctl import ThreadpoolController

        _CACHE["controller"] = ThreadpoolController()
    return _CACHE["controller"]


_LIMIT = {"depth": 0, "original": None}
_LIMIT_LOCK = threading.Lock()


@contextlib.contextmanager
def limit_blas():
    """Context manager: every BLAS library on one thread (threadpoolctl).

    The setting is process-wide, so overlapping uses (fits in several user threads)
    share one limit: the first to enter sets it, the last to leave restores the
    counts found by the first. (Nested threadpoolctl limits restored out of order
    would leave BLAS on one thread for good.)

    Why not ``ThreadpoolController.limit``: it reads every library's full ``info()``
    on each call (60 us; dpMMD's small fits enter this limit once per bandwidth). The
    BLAS controllers, found once, are read and set directly: the same counts set and
    restored on the same libraries.
    """
    with _LIMIT_LOCK:
        if _LIMIT["depth"] == 0:
            _free_openblas_control()
            libs = _blas_controllers()
            _LIMIT["original"] = [lib.get_num_threads() for lib in libs]
            for lib in libs:
                lib.set_num_threads(1)
        _LIMIT["depth"] += 1
    try:
        yield
    finally:
        with _LIMIT_LOCK:
            _LIMIT["depth"] -= 1
            if _LIMIT["depth"] == 0:
                _free_openblas_control()
                for lib, count in zip(_blas_controllers(), _LIMIT["original"], strict=True):
                    if count is not None:
                        lib.set_num_threads(count)
                _LIMIT["original"] = None
                _free_openblas_control()


def _blas_controllers():
    """threadpoolctl's controllers of the BLAS libraries (found once, as the controller)."""
    if "blas" not in _CACHE:
        _CACHE["blas"] = tuple(_controller().select(user_api="blas").lib_controllers)
    return _CACHE["blas"]


def _free_openblas_control():
    """Let the calling thread change OpenBLAS's thread count.

    threadpoolctl >= 3.8 gives OpenBLAS's process-wide pool to one "controlling"
    thread, the first to set it, until that thread's paired ``with`` block ends; the
    others' changes are silently dropped. This module's limits are shared by every
    thread and serialised under ``_LIMIT_LOCK``, and the thread that set one may be a
    kept worker that never exits: without this, the first limit set on a worker left
    every later limit of the main thread without effect, and dpMMD's values depended
    on the thread count.
    """
    if "clear" not in _CACHE:
        import threadpoolctl

        controller = getattr(threadpoolctl, "OpenBLASController", None)
        _CACHE["clear"] = getattr(controller, "clear_controlling_thread", None)
    clear = _CACHE["clear"]
    if clear is not None:
        clear(force=True)


def blas_threads():
    """The smallest BLAS thread count in force (1 when none is found)."""
    counts = [lib.get_num_threads() for lib in _blas_controllers()]
    return max(1, min((c for c in counts if c is not None), default=1))


_POOL = {"pid": None, "executor": None, "size": 0}
_POOL_LOCK = threading.Lock()
_IN_WORKER = threading.local()


def _executor(n_workers):
    """The module's worker threads (at least ``n_workers``), kept between calls (why:
    see the module docstring; measured after 0.25 s idle: 30 ms against 23 ms for the
    dpMMD triangular product at N = 1000). A forked child gets its own executor (its
    parent's threads do not exist there)."""
    with _POOL_LOCK:
        if _POOL["pid"] != os.getpid() or _POOL["size"] < n_workers:
            old = _POOL["executor"] if _POOL["pid"] == os.getpid() else None
            _POOL.update(pid=os.getpid(), size=n_workers, executor=ThreadPoolExecutor(
                n_workers, thread_name_prefix="skdptest-blas", initializer=_mark_worker))
            if old is not None:
                old.shutdown(wait=False)
        return _POOL["executor"]


def _mark_worker():
    _IN_WORKER.active = True


def run_in_threads(tasks):
    """Run the zero-argument callables ``tasks``: the first on the calling thread, the
    others on the module's worker threads; return their results in order.

    Called from a worker thread, every task runs there, in order (a worker never
    waits for another: no deadlock whatever the nesting). Exceptions propagate.
    """
    tasks = list(tasks)
    if len(tasks) <= 1 or getattr(_IN_WORKER, "active", False):
        return [task() for task in tasks]
    # Each task runs in a copy of the caller's context, so numpy's error state (a context
    # variable: "ignore" after the charge) holds on the workers too.
    executor = _executor(len(tasks) - 1)
    futures = [executor.submit(contextvars.copy_context().run, task) for task in tasks[1:]]
    try:
        first = tasks[0]()
    finally:
        wait(futures)  # all done before anything is raised or returned
    return [first, *(f.result() for f in futures)]


def map_dynamic(func, blocks, n_threads):
    """``func(*block)`` for every block, taken in turn by ``n_threads`` threads (the
    calling one and the module's workers): a worker still busy with an earlier task
    joins when it is done, so none waits idle while blocks remain."""
    blocks = iter(blocks)
    lock = threading.Lock()

    def take_in_turn():
        while True:
            with lock:
                block = next(blocks, None)
            if block is None:
                return
            func(*block)

    run_in_threads([take_in_turn] * max(1, n_threads))
