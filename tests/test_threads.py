"""The library's worker threads (skdptest/_threads.py)."""

import multiprocessing
import threading

import pytest
from threadpoolctl import threadpool_limits

from skdptest import _threads
from skdptest.kernel._mmd import _in_row_blocks
from skdptest.kernel._trmm import map_row_blocks


def test_blas_thread_limit_caps_the_threads():
    seen = set()
    lock = threading.Lock()

    def record(r0, r1):
        with lock:
            seen.add(threading.get_ident())

    with threadpool_limits(1, "blas"):
        assert _threads.blas_threads() == 1
        map_row_blocks(record, 10_000)
        _in_row_blocks(record, 10_000, 1_000)
    assert seen == {threading.get_ident()}
    with threadpool_limits(2, "blas"):
        assert _threads.blas_threads() == 2
        seen.clear()
        map_row_blocks(record, 10_000)
        assert len(seen) == 2


def test_run_in_threads_keeps_order_propagates_errors_and_nests():
    assert _threads.run_in_threads([lambda i=i: i * i for i in range(5)]) == [0, 1, 4, 9, 16]
    assert _threads.run_in_threads([]) == []

    def boom():
        raise RuntimeError("worker failed")

    with pytest.raises(RuntimeError, match="worker failed"):
        _threads.run_in_threads([lambda: 1, boom])
    with pytest.raises(RuntimeError, match="worker failed"):
        _threads.run_in_threads([boom, lambda: 1])

    # tasks that themselves split work: inside a worker everything runs inline,
    # so a worker never waits for a queued task (no deadlock, one worker or many)
    def nested(k):
        return sum(_threads.run_in_threads([lambda j=j: j + k for j in range(4)]))

    assert _threads.run_in_threads([lambda k=k: nested(k) for k in range(6)]) == [
        6 + 4 * k for k in range(6)]

    seen = []
    _threads.map_dynamic(lambda a, b: seen.append((a, b)), [(0, 1), (1, 2), (2, 3)], 3)
    assert sorted(seen) == [(0, 1), (1, 2), (2, 3)]


def _child(queue):
    queue.put(_threads.run_in_threads([lambda: 1, lambda: 2, lambda: 3]))


def test_a_forked_child_gets_its_own_worker_threads():
    _threads.run_in_threads([lambda: 0, lambda: 0])  # the parent's executor exists
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(queue,))
    proc.start()
    proc.join(60)
    assert proc.exitcode == 0
    assert queue.get(timeout=5) == [1, 2, 3]


def test_overlapping_blas_limits_restore_the_original_counts():
    # Two fits in user threads whose limits overlap and end out of order: the counts
    # in force before the first are back after the last (BLAS never left on 1 thread).
    with threadpool_limits(2, "blas"):
        first, second = _threads.limit_blas(), _threads.limit_blas()
        first.__enter__()
        assert _threads.blas_threads() == 1
        second.__enter__()
        first.__exit__(None, None, None)
        assert _threads.blas_threads() == 1  # the second still holds the limit
        second.__exit__(None, None, None)
        assert _threads.blas_threads() == 2
        # from real threads, interleaved
        barrier = threading.Barrier(3)

        def hold():
            with _threads.limit_blas():
                barrier.wait()
                barrier.wait()

        workers = [threading.Thread(target=hold) for _ in range(3)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        assert _threads.blas_threads() == 2


def test_a_limit_set_on_a_kept_worker_does_not_disable_later_limits():
    # threadpoolctl >= 3.8 gives OpenBLAS's shared pool to the first thread that sets it;
    # a kept worker never exits, so a limit first set there used to leave every later limit
    # of the main thread without effect (dpMMD's values then depended on the thread count).
    before = _threads.blas_threads()

    def on_worker():
        with _threads.limit_blas():
            return _threads.blas_threads()

    worker = threading.Thread(target=lambda: results.append(on_worker()))
    results = []
    worker.start()
    worker.join()
    kept = _threads._executor(1).submit(on_worker).result()  # a kept, live worker
    assert results == [1] and kept == 1
    with _threads.limit_blas():
        assert _threads.blas_threads() == 1
    assert _threads.blas_threads() == before
