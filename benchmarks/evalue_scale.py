"""Cost per row of the e-value tests at scale.

Prints three tables (saved in ``benchmarks/results/evalue_scale.txt``):

1. ``PrivateEValueTest(bernoulli(0.3), bernoulli(0.6)).fit`` on n Bernoulli(0.6) rows,
   float64 and int64: time of the first fit (plans the bet for this n) and of later
   fits (plan memoised), in units of one ``X.sum()`` pass over the same array, and the
   peak memory of a fit (tracemalloc) relative to the data's size.
2. ``PrivateEProcess.partial_fit`` fed one row at a time: rows per second, next to the
   authors' ``dpsprt`` ``DPSPRT.add_sample`` (plain Laplace DP-SPRT) when installed.
3. ``PrivateEValueTest`` on dask input through a 2-worker ``LocalCluster``: the rows are
   generated lazily on the workers (``dask.array.random``), never on the client; the
   same e-value as the numpy path for the same seed is checked at a size numpy holds,
   then the large size is timed with the workers' peak resident memory.

Usage: ``python benchmarks/evalue_scale.py [--sizes 1e5,1e6,1e7] [--dask-check 1e7]
[--dask-n 1e8] [--no-dask]``. Timings are wall-clock medians on a shared machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import tracemalloc

import numpy as np
from scipy import stats

import skdptest
from skdptest import PrivateEProcess, PrivateEValueTest

LAWS = (stats.bernoulli(0.3), stats.bernoulli(0.6))


def _times(func, repeat):
    """(min, median) wall time of ``func``: the minimum is the cost with the least
    interference from other processes on the shared machine, the median what a user
    sees."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        func()
        times.append(time.perf_counter() - t)
    return min(times), statistics.median(times)


def fit_table(sizes, repeat=15):
    """Fit time in passes and peak memory, per size and dtype."""
    print("## 1. PrivateEValueTest.fit, Bernoulli(0.3) vs Bernoulli(0.6), rows ~ Bernoulli(0.6)")
    print(f"pass = one X.sum(); fit = later fits (plan memoised); min and median of {repeat}"
          "; fit/pass = min/min; peak = tracemalloc peak of one fit / X.nbytes")
    print(f"{'n':>10} {'dtype':>8} {'pass ms':>9} {'1st fit ms':>11} {'fit ms min':>11} "
          f"{'fit ms med':>11} {'fit/pass':>9} {'peak/data':>10}")
    for n in sizes:
        for dtype in (np.float64, np.int64):
            X = (np.random.default_rng(n).random((n, 1)) < 0.6).astype(dtype)
            one = _times(X.sum, 3 * repeat)[0]
            est = PrivateEValueTest(*LAWS, epsilon=1.0, random_state=0)
            t = time.perf_counter()
            est.fit(X)
            first = time.perf_counter() - t
            fit, med = _times(lambda est=est, X=X: est.fit(X), repeat)
            tracemalloc.start()
            est.fit(X)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            print(f"{n:>10.0e} {np.dtype(dtype).name:>8} {one * 1e3:>9.3f} {first * 1e3:>11.1f} "
                  f"{fit * 1e3:>11.2f} {med * 1e3:>11.2f} {fit / one:>9.1f} "
                  f"{peak / X.nbytes:>10.3f}")
    print()


def _dpsprt_rate(rows):
    try:
        import dpsprt
    except ImportError:
        return None
    xs = [int(v) for v in rows[:, 0]]
    test = dpsprt.DPSPRT(0.3, 0.6, 1e-12, 1e-12, 1.0, random_seed=0)  # no early stop
    t = time.perf_counter()
    for x in xs:
        test.add_sample(x)
    return len(xs) / (time.perf_counter() - t)


def _stream_rate(rows, **kw):
    """Rows/s of one-row partial_fit on a second stream (the first plans the batches)."""
    for _ in range(2):
        # α (and β) = 1e-300: no decision, so every row goes into a batch
        proc = PrivateEProcess(*LAWS, epsilon=1.0, alpha=1e-300, random_state=0, **kw)
        proc.partial_fit(rows[:1])
        t = time.perf_counter()
        for i in range(1, rows.shape[0]):
            proc.partial_fit(rows[i:i + 1])
        rate = (rows.shape[0] - 1) / (time.perf_counter() - t)
    return rate, proc.result_.n_samples


def stream_table(n=20000):
    print("## 2. One row at a time: PrivateEProcess.partial_fit vs dpsprt add_sample")
    print(f"{n} Bernoulli(0.45) rows, alpha (beta) = 1e-300: no decision, every row is used "
          "(dpsprt at 1e-12); second stream (batch plans memoised); best of 3 runs")
    rows = (np.random.default_rng(1).random((n, 1)) < 0.45).astype(float)
    print(f"{'method':<48} {'rows/s':>10} {'rows in batches':>16}")
    results = [
        ("PrivateEProcess statistic='auto' (exact count)", lambda: _stream_rate(rows)),
        ("PrivateEProcess statistic='auto', beta (2-sided)",
         lambda: _stream_rate(rows, beta=1e-300)),
        ("PrivateEProcess statistic='optimal' (merged E*)",
         lambda: _stream_rate(rows, statistic="optimal")),
    ]
    for name, run in results:
        best = max((run() for _ in range(3)), key=lambda r: r[0])
        print(f"{name:<48} {best[0]:>10.0f} {best[1]:>16}")
    theirs = [r for r in (_dpsprt_rate(rows) for _ in range(3)) if r is not None]
    if theirs:
        print(f"{'dpsprt DPSPRT.add_sample (Laplace DP-SPRT)':<48} {max(theirs):>10.0f} "
              f"{'-':>16}")
    else:
        print("dpsprt not installed: no comparison")
    print()


def _lazy_rows(n, chunk, seed):
    import dask.array as da

    rng = da.random.default_rng(seed)
    return (rng.random((n, 1), chunks=(chunk, 1)) < 0.6).astype(np.float64)


def _worker_peak_mb():
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def dask_table(check_n, big_n, chunk):
    try:
        import distributed
    except ImportError:
        print("## 3. dask: distributed not installed, skipped")
        return
    print("## 3. PrivateEValueTest on dask input, 2-worker LocalCluster "
          "(1 thread each, memory_limit 4 GB)")
    print(f"rows generated lazily on the workers (dask.array.random), chunks of {chunk:.0e} "
          "rows, float64")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  memory_limit="4GB", dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        if check_n:
            lazy = _lazy_rows(check_n, chunk, 123)
            X = lazy.compute()  # the only client-side copy: for the equality check
            ref = PrivateEValueTest(*LAWS, random_state=7).fit(X).result_
            del X
            got = PrivateEValueTest(*LAWS, random_state=7).fit(lazy).result_
            print(f"n = {check_n:.0e}: dask result == numpy result (same seed): {got == ref} "
                  f"(log E = {got.log_e_value!r})")
        lazy = _lazy_rows(big_n, chunk, 321)
        est = PrivateEValueTest(*LAWS, random_state=7)
        t = time.perf_counter()
        est.fit(lazy)
        wall = time.perf_counter() - t
        peaks = client.run(_worker_peak_mb)
        print(f"n = {big_n:.0e}: fit {wall:.1f} s wall ({wall / big_n * 1e9:.1f} ns/row, "
              "two passes: support check in the plan, integer sums in the release); "
              f"log E = {est.result_.log_e_value:.6g}; worker peak RSS "
              f"{', '.join(f'{v:.0f}' for v in peaks.values())} MB")
    print()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1e5,1e6,1e7")
    parser.add_argument("--stream-rows", type=float, default=2e4)
    parser.add_argument("--dask-check", type=float, default=1e7)
    parser.add_argument("--dask-n", type=float, default=1e8)
    parser.add_argument("--chunk", type=float, default=1e7)
    parser.add_argument("--no-dask", action="store_true")
    args = parser.parse_args(argv)
    import dask  # noqa: F401 - version line only

    print(f"# skdptest {skdptest.__version__}, numpy {np.__version__}, python "
          f"{sys.version.split()[0]}; shared 2-core machine, wall-clock")
    fit_table([int(float(s)) for s in args.sizes.split(",")])
    stream_table(int(args.stream_rows))
    if not args.no_dask:
        dask_table(int(args.dask_check), int(args.dask_n), int(args.chunk))


if __name__ == "__main__":
    main()
