"""Wall time and peak memory of DPMMDTest / DPHSICTest, next to the machine's
float64 matrix-product rate measured in the same run.

Every configuration runs in a fresh worker process, so its peak resident set
size (``ru_maxrss``) is its own; ``base`` is the worker's RSS after imports and
data generation, before the test runs.

For dpMMD the reference is one float64 product ``K @ V`` with K of shape
N x N and V of shape N x (B + 1) (what ``diag(V^T K V)`` costs when done
naively), timed in its own worker right after each dpMMD run (the machine is
shared, so runs alternate and medians of ``--repeats`` are reported; both
are warmed up on 100 rows first, and for N <= 2000 each worker reports the
median of 9 in-process runs);
``ratio`` is dpMMD time / product time of back-to-back runs, ``spaced ratio`` the
same for runs after 0.25 s idle (see ``_timed``; the issue-13 target is <= 1.1 at
N = 1000 and 2000), and the
product's GFLOP/s is the machine's float64 rate in that run.

For dpHSIC, ``backend`` says which permutation kernel ran: ``numpy``,
``numba`` (the default when the optional dependency is importable: float32
copies of the kernel matrices streamed, certified error bounds, undecided
comparisons recomputed in float64, same release as float64) or ``numba-f64``
(the same compiled kernel on the float64 matrices, reported next to it by
default); the numba times include no JIT compilation: a warm-up call on small
data runs first; ``cyclic`` is ``DPHSICTest(cyclic=True)``, all n cyclic
shifts by FFT, B = n - 1.

Usage::

    python benchmarks/kernel_speed.py                 # full tables
    python benchmarks/kernel_speed.py --quick         # N in {1000, 2000}
    python benchmarks/kernel_speed.py --hsic-sizes 1000 2000 4000 --backend numba numba-f64

The default ``DPMMDTest`` (the 19-bandwidth aggregate) is timed after each size's
single-bandwidth rows, in products ``K @ V`` of the same run (``--skip-default`` skips it).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

# One bandwidth (gamma = 1 / n_features): the timed exact paths. The default for rbf without
# gamma is the 19-bandwidth aggregate (kernel/_bandwidth.py), about 19x this work.
SINGLE = {"kernel_params": {"gamma": None}}
SINGLE_XY = {**SINGLE, "y_kernel_params": {"gamma": None}}


def _rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _current_rss_mb():
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _inner(n):
    # sub-second runs are noisy (+-10 %): median of 9 in-process runs for N <= 2000
    return 9 if n <= 2000 else 1


def _timed(func, n):
    """Medians of back-to-back runs and of runs after 0.25 s idle (``spaced``).

    Why both: pip's numpy and scipy wheels each ship an OpenBLAS whose idle worker
    threads keep spinning for ~0.1 s after a multi-threaded call, and threads that
    sleep take time to wake. Back to back, a call may find spinning workers (its own
    library's: the product; none since dpMMD calls single-threaded BLAS on its own
    kept threads); after 0.25 s idle everything starts cold. The product is timed
    the same two ways.
    """
    import numpy as np

    walls, spaced = [], []
    for _ in range(_inner(n)):
        t0 = time.perf_counter()
        func()
        walls.append(time.perf_counter() - t0)
    for _ in range(_inner(n)):
        time.sleep(0.25)
        t0 = time.perf_counter()
        func()
        spaced.append(time.perf_counter() - t0)
    return float(np.median(walls)), float(np.median(spaced))


def worker(kind, n, d, n_perm, backend):
    import numpy as np

    rng = np.random.default_rng(0)
    if kind == "gemm":
        K = rng.random((n, n))
        V = rng.random((n, n_perm + 1))
        K[:100, :100] @ V[:100, :100]  # warm-up: BLAS threads started
        base = _current_rss_mb()
        c0 = time.process_time()
        wall, spaced = _timed(lambda: K @ V, n)
        runs = 2 * _inner(n) if n <= 2000 else 2
        return {"wall": wall, "spaced": spaced, "peak_mb": _rss_mb(), "base_mb": base,
                "cpu": (time.process_time() - c0) / runs,
                "gflops": 2.0 * n * n * (n_perm + 1) / wall / 1e9}
    if kind == "mmd":
        from skdptest import DPMMDTest

        X = rng.normal(size=(n, d))
        y = np.repeat([0, 1], [n // 2, n - n // 2])
        est = DPMMDTest(n_permutations=n_perm, random_state=0, **SINGLE)
        # warm-up on 100 other rows (imports, BLAS threads), as for the product
        DPMMDTest(n_permutations=20, random_state=1, **SINGLE).fit(rng.normal(size=(100, d)),
                                                         np.repeat([0, 1], 50))
        base = _current_rss_mb()
        wall, spaced = _timed(lambda: est.fit(X, y), n)
        return {"wall": wall, "spaced": spaced, "peak_mb": _rss_mb(), "base_mb": base}
    if kind == "mmd_default":
        # the default DPMMDTest (the 19-bandwidth aggregate); one timed fit after a
        # warm-up (median of 3 for N <= 2000)
        from skdptest import DPMMDTest

        X = rng.normal(size=(n, d))
        y = np.repeat([0, 1], [n // 2, n - n // 2])
        # backend "random": cyclic=False (B random relabellings); else the default route
        kw = {"cyclic": False} if backend == "random" else {}
        DPMMDTest(n_permutations=20, random_state=1, **kw).fit(
            rng.normal(size=(100, d)), np.repeat([0, 1], 50))
        base = _current_rss_mb()
        walls, cpus = [], []
        for _ in range(3 if n <= 2000 else 1):
            t0, c0 = time.perf_counter(), time.process_time()
            est = DPMMDTest(n_permutations=n_perm, random_state=0, **kw).fit(X, y)
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        return {"wall": float(np.median(walls)), "cpu": float(np.median(cpus)),
                "peak_mb": _rss_mb(), "base_mb": base, "method": est.result_.method}
    if kind == "hsic_cyclic":
        from skdptest import DPHSICTest

        X = rng.normal(size=(n, d))
        y = X[:, 0] + rng.normal(size=n)
        base = _current_rss_mb()
        t0 = time.perf_counter()
        DPHSICTest(cyclic=True, random_state=0, **SINGLE_XY).fit(X, y)
        wall = time.perf_counter() - t0
        return {"wall": wall, "peak_mb": _rss_mb(), "base_mb": base, "backend": "cyclic"}
    if kind == "hsic":
        if backend == "numba-f64":
            os.environ["SKDPTEST_HSIC_BACKEND"] = "numba"
            os.environ["SKDPTEST_HSIC_PRECISION"] = "float64"
        elif backend != "auto":
            os.environ["SKDPTEST_HSIC_BACKEND"] = backend
        import skdptest.kernel._hsic as hsic_mod
        import skdptest.kernel._hsic_traces as traces_mod
        from skdptest import DPHSICTest

        X = rng.normal(size=(n, d))
        y = X[:, 0] + rng.normal(size=n)
        used = hsic_mod._resolve_backend("auto", float(n) * n * (n_perm + 1))
        if used == "numba":  # compile (or load) outside the timing
            traces_mod._NUMBA_MIN_WORK = 0
            DPHSICTest(n_permutations=2000, random_state=0, cyclic=False,
                       **SINGLE_XY).fit(X[:100], y[:100])
            if hsic_mod._resolve_precision("auto") == "float64":
                used = "numba-f64"
        base = _current_rss_mb()
        est = DPHSICTest(n_permutations=n_perm, random_state=0, cyclic=False, **SINGLE_XY)
        t0 = time.perf_counter()
        est.fit(X, y)
        wall = time.perf_counter() - t0
        return {"wall": wall, "peak_mb": _rss_mb(), "base_mb": base, "backend": used}
    raise ValueError(kind)


def run(kind, n, d, n_perm, backend="auto"):
    cmd = [sys.executable, __file__, "--worker", kind, str(n), str(d), str(n_perm), backend]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _default_rows(args, B):
    """The default DPMMDTest in products K @ V: wall and CPU ratios of the same run."""
    d = args.dims[0]
    print(f"\ndefault DPMMDTest, two equal groups, d = {d}, against the float64 product "
          "K @ V (N x N by N x (B + 1)); products = dpMMD time / product time (wall: "
          "medians of runs alternated with the product's; CPU: process time, all threads)")
    print("|     N | route | wall s | product wall s | products (wall) | CPU s | "
          "product CPU s | products (CPU) | peak MB |")
    print("|------:|:------|-------:|---------------:|----------------:|------:|"
          "--------------:|---------------:|--------:|")
    for n in args.sizes:
        for backend in (["auto", "random"] if args.with_random else ["auto"]):
            runs, gemms = [], []
            for _ in range(args.repeats):
                gemms.append(run("gemm", n, 0, B))
                runs.append(run("mmd_default", n, d, B, backend))
            gemms.append(run("gemm", n, 0, B))
            r = sorted(runs, key=lambda x: x["wall"])[len(runs) // 2]
            g = sorted(gemms, key=lambda x: x["wall"])[len(gemms) // 2]
            gc = sorted(x["cpu"] for x in gemms)[len(gemms) // 2]
            rc = sorted(x["cpu"] for x in runs)[len(runs) // 2]
            print(f"| {n:5d} | {r['method']} | {r['wall']:6.2f} | {g['wall']:14.3f} | "
                  f"{r['wall'] / g['wall']:15.2f} | {rc:5.2f} | {gc:13.3f} | "
                  f"{rc / gc:14.2f} | {r['peak_mb']:7.0f} |", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", nargs=5, help=argparse.SUPPRESS)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 4000, 8000])
    parser.add_argument("--dims", type=int, nargs="+", default=[2, 50])
    parser.add_argument("--hsic-sizes", type=int, nargs="+", default=[1000, 2000, 4000])
    parser.add_argument("--hsic-dims", type=int, nargs="+", default=[2])
    parser.add_argument("--permutations", type=int, default=2000)
    parser.add_argument("--backend", nargs="+", default=None,
                        choices=["auto", "numpy", "numba", "numba-f64"],
                        help="dpHSIC backends, one row each (default: auto, plus "
                             "numba-f64 when numba is importable)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="dpMMD runs (each followed by a product run); medians")
    parser.add_argument("--cyclic", action="store_true",
                        help="also time DPHSICTest(cyclic=True) (all n shifts, by FFT)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--skip-mmd", action="store_true")
    parser.add_argument("--skip-hsic", action="store_true")
    parser.add_argument("--skip-default", action="store_true",
                        help="do not time the default dpMMD (the bandwidth aggregate)")
    parser.add_argument("--default-only", action="store_true",
                        help="only the default dpMMD rows against the product (wall and "
                             "CPU), at --sizes with the first of --dims")
    parser.add_argument("--with-random", action="store_true",
                        help="with --default-only: also DPMMDTest(cyclic=False)")
    args = parser.parse_args()
    if args.worker:
        kind, n, d, b, backend = args.worker
        print(json.dumps(worker(kind, int(n), int(d), int(b), backend)))
        return
    if args.quick:
        args.sizes, args.hsic_sizes = [1000, 2000], [500, 1000]
    B = args.permutations
    import skdptest

    print(f"B = {B}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}, "
          f"skdptest from {os.path.dirname(skdptest.__file__)}")
    if args.default_only:
        _default_rows(args, B)
        return
    if not args.skip_mmd:
        print("\ndpMMD (pooled N, two equal groups, rbf kernel, float64)")
        print("|     N |  d | dpMMD s | product s | ratio | spaced ratio | product GFLOP/s | "
              "peak MB | base MB |")
        print("|------:|---:|--------:|----------:|------:|-------------:|----------------:|"
              "--------:|--------:|")
        defaults = []
        for n in args.sizes:
            gemms = []
            for d in args.dims:
                # alternate dpMMD and the reference product, median of `repeats`
                runs = []
                for _ in range(args.repeats):
                    runs.append(run("mmd", n, d, B))
                    gemms.append(run("gemm", n, 0, B))
                mmd = sorted(runs, key=lambda r: r["wall"])[len(runs) // 2]
                gemm = sorted(gemms, key=lambda r: r["wall"])[len(gemms) // 2]
                spaced = mmd["spaced"] / gemm["spaced"]
                print(f"| {n:5d} | {d:2d} | {mmd['wall']:7.3f} | {gemm['wall']:9.3f} | "
                      f"{mmd['wall'] / gemm['wall']:5.2f} | {spaced:12.2f} | "
                      f"{gemm['gflops']:15.1f} | "
                      f"{mmd['peak_mb']:7.0f} | {mmd['base_mb']:7.0f} |", flush=True)
                if not args.skip_default:
                    agg = run("mmd_default", n, d, B)
                    gemms.append(run("gemm", n, 0, B))
                    gemm = sorted(gemms, key=lambda r: r["wall"])[len(gemms) // 2]
                    defaults.append((n, d, agg, gemm))
        if defaults:
            print("\ndefault DPMMDTest (19-bandwidth aggregate), in products K @ V of the "
                  "same run (median product of the rows above and one after it)")
            print("|     N |  d | default s | product s | products | peak MB | base MB |")
            print("|------:|---:|----------:|----------:|---------:|--------:|--------:|")
            for n, d, agg, gemm in defaults:
                print(f"| {n:5d} | {d:2d} | {agg['wall']:9.2f} | {gemm['wall']:9.3f} | "
                      f"{agg['wall'] / gemm['wall']:8.2f} | {agg['peak_mb']:7.0f} | "
                      f"{agg['base_mb']:7.0f} |", flush=True)
    if not args.skip_hsic:
        backends = args.backend
        if backends is None:
            try:
                import numba  # noqa: F401
                backends = ["auto", "numba-f64"]
            except ImportError:
                backends = ["auto"]
        print("\ndpHSIC (n pairs, rbf kernels, exact permutations; numba: certified "
              "float32, same release as float64)")
        print("|     n |  d |   backend | dpHSIC s | peak MB | base MB |")
        print("|------:|---:|----------:|---------:|--------:|--------:|")
        for n in args.hsic_sizes:
            for d in args.hsic_dims:
                jobs = [("hsic", b) for b in backends]
                if args.cyclic:
                    jobs.append(("hsic_cyclic", "auto"))
                for kind, backend in jobs:
                    r = run(kind, n, d, B, backend)
                    print(f"| {n:5d} | {d:2d} | {r['backend']:>9} | {r['wall']:8.2f} | "
                          f"{r['peak_mb']:7.0f} | {r['base_mb']:7.0f} |", flush=True)


if __name__ == "__main__":
    main()
