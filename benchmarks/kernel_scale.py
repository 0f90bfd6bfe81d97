"""Tests at scale: random-feature dpMMD (``method="features"``) against the exact dpMMD.

Three tables, printed and saved to ``benchmarks/results/kernel_scale.txt``:

1. ``speed``: wall time and peak resident memory (``ru_maxrss`` of a fresh worker
   process per configuration, so each peak is its own; ``base`` is the worker's RSS
   after imports and data generation) of one fit, d = 10, B = 2000, for N from 10^3
   up to 10^6 (features) and where it fits (exact).
2. ``level``: type-I error of the feature test under H0 (two Student-t(3) samples) at
   d in {1, 10, 100, 200}, with its binomial standard error; target level <= alpha + 2 SE.
3. ``power``: rejection rate of the feature test (fourier map, D in {64, 128, 256} by
   default; ``--power-squared``: the ``feature_map="squared"`` map too) and of the exact
   test on the same data sets at N = 2000 (mean shift), paired: each mode's power and SE,
   the difference features - exact with its paired SE and 95 % interval
   (:func:`power_table`); ``--power`` runs it alone and appends it.

Usage::

    python benchmarks/kernel_scale.py --quick            # small sizes only
    python benchmarks/kernel_scale.py                    # full tables
    python benchmarks/kernel_scale.py --speed-only --features-sizes 1000000
    python benchmarks/kernel_scale.py --hsic 2000:2000 4000:2000 20000:200   # appends
    python benchmarks/kernel_scale.py --power 1 10 1e6 --power-reps 400   # appends
    python benchmarks/kernel_scale.py --power 1 0.3 10 1e6 --power-components 256 \
        --power-squared 16 32 64 --no-rt2      # fourier vs squared feature maps
    python benchmarks/kernel_scale.py --power 1 1e6 --power-reps 150 --power-fine 64 \
        --out benchmarks/results/kernel_features_power.txt   # 12-bit vs 2^-23 rows

4. ``--hsic``: the blocked exact dpHSIC (one fit per (n, B), fresh worker each), with the
   planned ``hsic_memory_bytes`` next to the measured peak; appended to the results file.
5. ``--dask [N ...]``: features dpMMD (d = 10, B = 2000, D = 64) on a 2-worker dask
   LocalCluster, the data generated on the workers (``dask.array.random``): wall time,
   the client's peak RSS (and its planned share, ``dask_mmd_memory_bytes``), each
   worker's peak RSS; appended to the results file.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def _hsic_worker(spec):
    # exact dpHSIC, single bandwidth, random permutations (the blocked path), 2 GiB limit
    import numpy as np

    from skdptest import DPHSICTest

    rng = np.random.default_rng(0)
    n = spec["n"]
    X = rng.normal(size=(n, 2))
    y = X[:, 0] * 0.05 + rng.normal(size=n)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    est = DPHSICTest(kernel_params={"gamma": 0.5}, y_kernel_params={"gamma": 1.0},
                     cyclic=False, n_permutations=spec["B"], max_memory=2 * 2**30,
                     random_state=0)
    t = time.perf_counter()
    res = est.fit(X, y).result_
    wall = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"wall": wall, "peak_mb": peak, "base_mb": base, "pvalue": res.pvalue}))


def _dask_worker(spec):
    # features dpMMD on a 2-worker LocalCluster; the data are generated on the workers
    # (dask.array.random), so this client process never holds them
    import dask.array as da
    import distributed

    from skdptest import DPMMDTest

    n, d, chunk = spec["n"], spec["d"], spec["chunk"]
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        X = da.random.default_rng(0).normal(size=(n, d), chunks=(chunk, d))
        rows = da.arange(n, chunks=chunk)
        X = X + 0.05 * (rows >= n // 2)[:, None] * np.eye(d)[0]
        y = (rows >= n // 2).astype(np.int8)
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        est = DPMMDTest(method="features", n_components=spec["D"],
                        kernel_params={"gamma": 1.0 / d}, n_permutations=spec["B"],
                        max_memory=64 * 2**30, random_state=0)
        t = time.perf_counter()
        res = est.fit(X, y).result_
        wall = time.perf_counter() - t
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        workers = client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
        plan = est._prepare(X, y, reset=False).plan.memory_bytes / 2**20
    print(json.dumps({"wall": wall, "peak_mb": peak, "base_mb": base, "pvalue": res.pvalue,
                      "workers_mb": sorted(v / 1024.0 for v in workers.values()),
                      "plan_mb": plan, "chunks": -(-n // chunk)}))


def run_dask(n, d=10, B=2000, D=64, chunk=50_000):
    spec = json.dumps({"test": "dask", "n": n, "d": d, "B": B, "D": D, "chunk": chunk})
    out = subprocess.run([sys.executable, __file__, "--worker", spec], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _worker(spec):
    import numpy as np

    from skdptest import DPMMDTest

    if spec.get("test") == "hsic":
        _hsic_worker(spec)
        return
    if spec.get("test") == "dask":
        _dask_worker(spec)
        return

    rng = np.random.default_rng(0)
    n, d = spec["n"], spec["d"]
    X = rng.normal(size=(n, d))
    X[n // 2:, 0] += 0.05
    y = np.repeat([0, 1], [n // 2, n - n // 2])
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    kw = {"kernel_params": {"gamma": 1.0 / d}, "n_permutations": spec["B"],
          "max_memory": 64 * 2**30, "random_state": 0, "method": spec["method"]}
    if spec["method"] == "features":
        kw["n_components"] = spec["D"]
    t = time.perf_counter()
    res = DPMMDTest(**kw).fit(X, y).result_
    wall = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"wall": wall, "peak_mb": peak, "base_mb": base,
                      "pvalue": res.pvalue}))


def run_speed(method, n, d=10, B=2000, D=64):
    spec = json.dumps({"method": method, "n": n, "d": d, "B": B, "D": D})
    out = subprocess.run([sys.executable, __file__, "--worker", spec], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_hsic(n, B, backend=None):
    spec = json.dumps({"test": "hsic", "n": n, "B": B})
    env = dict(os.environ)
    if backend is not None:
        env["SKDPTEST_HSIC_BACKEND"] = backend
    out = subprocess.run([sys.executable, __file__, "--worker", spec], capture_output=True,
                         text=True, check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def hsic_table(sizes, emit):
    """Blocked exact dpHSIC: time, peak RSS and the planned estimate per (n, B)."""
    from skdptest.kernel._hsic import hsic_memory_bytes

    emit("## exact dpHSIC (blocked, float32 L + certified float64 refinement), d = 2, "
         "rbf, cyclic=False, max_memory = 2 GiB")
    emit(f"{'n':>7} {'B':>6} {'time s':>9} {'peak MB':>9} {'base MB':>9} {'plan MB':>9}")
    for n, B in sizes:
        r = run_hsic(n, B)
        plan = hsic_memory_bytes(n, B) / 2**20
        emit(f"{n:>7} {B:>6} {r['wall']:>9.2f} {r['peak_mb']:>9.0f} {r['base_mb']:>9.0f} "
             f"{plan:>9.0f}")


def rejection_rate(make_est, sampler, reps, seed):
    rng = np.random.default_rng(seed)
    hits = 0
    for rep in range(reps):
        X, y = sampler(rng)
        hits += make_est(rep).decision(X, y)
    p = hits / reps
    return p, (p * (1 - p) / reps) ** 0.5


# epsilon standing for "no privacy": the Laplace scale is then ~1e-9, far below the
# spread of the permuted statistics, so the rejection rate is the non-private power
NONPRIVATE_EPS = 1e6


@contextlib.contextmanager
def _fine_fourier_grid():
    """The fourier feature test as it was before its rows became 12-bit integers
    (issue 20, item 4): rows on the 2^-23 grid (``feature_map(fine=True)``, R = 1 +
    2^-16, sensitivity 2R/m with that R), summed by two split float32 products. Every
    draw is the same, so a fit under this context and the shipped fit with the same
    ``random_state`` differ only by the quantisation: a paired comparison."""
    from skdptest.kernel import _features as feat

    saved = (feat.feature_map, feat.subset_sums, feat._masked_sums, feat.FEATURE_RADIUS)
    fmap, ssum, msum = saved[:3]

    def feature_map(X, omega, block_rows=feat.BLOCK_ROWS, *, fine=False):
        return fmap(X, omega, block_rows, fine=True)

    def subset_sums(F, draw, r0, r1, n_threads=None, *, coarse=False):
        return ssum(F, draw, r0, r1, n_threads, coarse=False)

    def masked_sums(F, masks, block_rows=feat._SPLIT_ROWS, *, coarse=False):
        return msum(F, masks, block_rows, coarse=False)

    feat.feature_map, feat.subset_sums, feat._masked_sums = feature_map, subset_sums, masked_sums
    feat.FEATURE_RADIUS = feat._FINE_RADIUS
    try:
        yield
    finally:
        (feat.feature_map, feat.subset_sums, feat._masked_sums, feat.FEATURE_RADIUS) = saved


def _power_configs(epsilons, components, squared=(), rt2=True, fine=()):
    # (eps of the row's group, label, method, D, feature map, epsilon actually used).
    # "squared D=..." rows run feature_map="squared" (psi = phi (x) phi, D (2D + 1)
    # coordinates, never-negative kernel, diameter ~sqrt(2) instead of 2R). The extra
    # rows "features at eps * sqrt(2)" (rt2=True) run the shipped fourier feature test
    # with a larger epsilon: its Laplace scale 2 * (2R/m) / (sqrt(2) eps) then equals the
    # exact test's 2 * (sqrt(2)/m) / eps up to R = 1 + 2^-16 and the rounding terms, which
    # isolates the loss due to the fourier test's larger sensitivity (2R vs sqrt(2)).
    configs = []
    for eps in epsilons:
        configs.append((eps, "exact", "exact", None, None, eps))
        configs.extend((eps, f"features D={D}", "features", D, "fourier", eps)
                       for D in components)
        configs.extend((eps, f"squared D={D}", "features", D, "squared", eps)
                       for D in squared)
        if rt2 and eps < NONPRIVATE_EPS:
            configs.extend((eps, f"feat. D={D} eps*rt2", "features", D, "fourier",
                            eps * 2 ** 0.5) for D in components)
        # "fine": the fourier test on the 2^-23 grid (before the 12-bit rows)
        configs.extend((eps, f"feat. D={D} 2^-23 grid", "features", D, "fine", eps)
                       for D in fine)
    return configs


def _commit():
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True, cwd=HERE)
    return out.stdout.strip() or "unknown"


def _load():
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def power_table(emit, reps, epsilons, components=(64, 128, 256), n=2000, d=5, shift=0.1,
                gamma=0.2, B=199, seed=123, alpha=0.05, squared=(), rt2=True, fine=()):
    """Paired power of the feature dpMMD against the exact dpMMD on the same data sets.

    Each repetition draws one data set (``n / 2`` rows N(0, I_d) against ``n / 2``
    rows N(shift * 1, I_d), from ``default_rng([seed, rep])``) and runs every mode and
    epsilon on it, each estimator seeded with ``random_state=rep`` (its relabellings
    and noise are independent of the data draw). Reported per mode: the power and its
    binomial SE; against the exact test at the same epsilon: the paired difference
    ``features - exact``, its SE (sample sd of the per-repetition differences over
    sqrt(reps)), the 95 % normal interval and the discordant counts (features only /
    exact only). "within 0.05" is judged on the interval: its lower end >= -0.05.

    Parameters
    ----------
    emit : callable
        Prints and records one line.
    reps : int
        Number of data sets.
    epsilons : sequence of float
        Privacy levels; ``NONPRIVATE_EPS`` (1e6) stands for the non-private test.
    components : sequence of int, default=(64, 128, 256)
        Numbers D of random frequencies of the fourier feature test (2 D features).
    squared : sequence of int, default=()
        Numbers D of the ``feature_map="squared"`` test (``D (2 D + 1)`` features;
        frequencies drawn for gamma / 2, so it approximates the same rbf kernel).
    rt2 : bool, default=True
        Add the diagnostic rows "fourier features at epsilon * sqrt(2)".
    fine : sequence of int, default=()
        D of rows "fourier features on the 2^-23 grid" (:func:`_fine_fourier_grid`, the
        test before its rows became 12-bit integers), each also compared, paired, with
        the shipped fourier row of the same D.
    n, d, shift, gamma, B, seed, alpha
        Rows, dimension, mean shift on every coordinate, the pinned rbf bandwidth (both
        modes), permutations, data seed and level.

    Returns
    -------
    decisions : dict
        ``(eps, label) -> bool array of shape (reps,)``.
    """
    from skdptest import DPMMDTest

    configs = _power_configs(epsilons, components, squared, rt2, fine)
    y = np.repeat([0, 1], [n // 2, n - n // 2])
    hits = {(e, label): np.zeros(reps, dtype=bool) for e, label, *_ in configs}
    t0 = time.perf_counter()
    for rep in range(reps):
        rng = np.random.default_rng([seed, rep])
        X = rng.normal(size=(n, d))
        X[n // 2:] += shift
        for e, label, method, D, kind, eps in configs:
            kw = {"n_components": D, "feature_map": kind} if D else {}
            grid = contextlib.nullcontext()
            if kind == "fine":
                kw["feature_map"], grid = "fourier", _fine_fourier_grid()
            est = DPMMDTest(method=method, epsilon=eps, alpha=alpha, n_permutations=B,
                            kernel_params={"gamma": gamma}, random_state=rep, **kw)
            with grid:
                hits[(e, label)][rep] = est.decision(X, y)
        if (rep + 1) % 50 == 0 or rep + 1 in (1, 5):  # early reps: the per-rep time
            print(f"  [{rep + 1}/{reps} reps, {time.perf_counter() - t0:.0f} s]", flush=True)
    emit(f"\n## power (paired): N = {n} ({n // 2} + {n - n // 2}), d = {d}, mean shift "
         f"{shift} on every coordinate, rbf gamma = {gamma} pinned (both modes), B = {B}, "
         f"alpha = {alpha}, {reps} reps, the same data set for every mode and epsilon in a "
         f"rep (data seed [{seed}, rep], random_state = rep)")
    emit(f"  eps = {NONPRIVATE_EPS:g} is the non-private power; 'features': fourier map (2 D "
         "features); 'squared': feature_map='squared' (D (2 D + 1) features)"
         + ("; 'eps*rt2': the fourier feature test run at epsilon * sqrt(2), whose noise "
            "scale equals the exact test's at epsilon" if rt2 else ""))
    emit(f"{'eps':>7} {'mode':>20} {'power':>7} {'SE':>6} {'diff':>7} {'pairSE':>7} "
         f"{'95% interval':>17} {'f/e only':>9} {'>= -0.05':>8}")
    for e, label, *_ in configs:
        h = hits[(e, label)]
        p = h.mean()
        row = f"{e:>7g} {label:>20} {p:>7.3f} {(p * (1 - p) / reps) ** 0.5:>6.3f}"
        if label != "exact":
            diff = h.astype(float) - hits[(e, "exact")]
            m, se = diff.mean(), diff.std(ddof=1) / reps ** 0.5
            lo, hi = m - 1.96 * se, m + 1.96 * se
            row += (f" {m:>+7.3f} {se:>7.3f} [{lo:>+7.3f},{hi:>+7.3f}] "
                    f"{int((diff > 0).sum()):>4}/{int((diff < 0).sum()):<4} "
                    f"{str(bool(lo >= -0.05)):>8}")
        emit(row)
    for e, label, _, D, kind, _ in configs:
        if kind == "fine":  # the same fits on the two grids, paired
            diff = hits[(e, f"features D={D}")].astype(float) - hits[(e, label)]
            emit(f"  eps = {e:g}, D = {D}: 12-bit rows {hits[(e, f'features D={D}')].mean():.3f}"
                 f" against the 2^-23 grid {hits[(e, label)].mean():.3f}: paired difference "
                 f"{diff.mean():+.3f} (discordant {int((diff > 0).sum())}/"
                 f"{int((diff < 0).sum())} of {reps})")
    emit(f"  ({reps} reps in {time.perf_counter() - t0:.0f} s)")
    return hits


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--speed-only", action="store_true")
    ap.add_argument("--features-sizes", type=int, nargs="*")
    ap.add_argument("--exact-sizes", type=int, nargs="*")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--hsic", type=str, nargs="*",
                    help="exact dpHSIC only: n:B pairs, e.g. 2000:2000 20000:200")
    ap.add_argument("--power", type=float, nargs="*",
                    help="paired power table only, at these epsilons (1e6: non-private); "
                         "appended to the results file")
    ap.add_argument("--power-reps", type=int, default=400)
    ap.add_argument("--power-components", type=int, nargs="*", default=[64, 128, 256],
                    help="D of the fourier feature rows of the power table")
    ap.add_argument("--power-squared", type=int, nargs="*", default=[],
                    help="D of the feature_map='squared' rows of the power table")
    ap.add_argument("--power-fine", type=int, nargs="*", default=[],
                    help="D of rows 'fourier features on the 2^-23 grid' (the test before "
                         "its rows became 12-bit integers), compared paired")
    ap.add_argument("--no-rt2", action="store_true",
                    help="drop the diagnostic 'fourier features at eps * sqrt(2)' rows")
    ap.add_argument("--dask", type=int, nargs="*",
                    help="features dpMMD on a 2-worker dask LocalCluster at these N (data "
                         "generated on the workers); appended to the results file")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "kernel_scale.txt"))
    args = ap.parse_args(argv)
    if args.worker:
        _worker(json.loads(args.worker))
        return
    from skdptest import DPMMDTest

    lines = [f"# kernel_scale.py {' '.join(argv or sys.argv[1:])}  (cores: {os.cpu_count()})"]

    def emit(s=""):
        print(s, flush=True)
        lines.append(s)

    if args.power is not None:
        # header: what was run, where and on what commit (timings are not reported)
        lines[0] += f"; {time.strftime('%Y-%m-%d %H:%M')}, commit {_commit()}"
        emit(f"# load average before: {_load()}")
        power_table(emit, args.power_reps, args.power or (1.0, 10.0, NONPRIVATE_EPS),
                    components=args.power_components, squared=args.power_squared,
                    rt2=not args.no_rt2, fine=args.power_fine)
        emit(f"# load average after: {_load()}")
        with open(args.out, "a") as fh:
            fh.write("\n" + "\n".join(lines) + "\n")
        return

    if args.dask is not None:
        lines[0] += f"; {time.strftime('%Y-%m-%d %H:%M')}, commit {_commit()}"
        emit(f"# load average before: {_load()}")
        emit("## features dpMMD, dask input: 2-worker LocalCluster (processes, 1 thread each), "
             "d = 10, B = 2000, D = 64, chunks of 50 000 rows")
        emit(f"{'N':>9} {'time s':>9} {'client MB':>10} {'base MB':>9} {'plan MB':>9} "
             f"{'workers peak MB':>18}")
        for n in args.dask or [1_000_000]:
            r = run_dask(n)
            emit(f"{n:>9} {r['wall']:>9.2f} {r['peak_mb']:>10.0f} {r['base_mb']:>9.0f} "
                 f"{r['plan_mb']:>9.0f} {' / '.join(f'{w:.0f}' for w in r['workers_mb']):>18}")
        emit(f"# load average after: {_load()}")
        with open(args.out, "a") as fh:
            fh.write("\n" + "\n".join(lines) + "\n")
        return

    if args.hsic is not None:
        pairs = [tuple(int(v) for v in p.split(":")) for p in args.hsic] or [
            (2000, 2000), (4000, 2000), (20000, 200)]
        hsic_table(pairs, emit)
        with open(args.out, "a") as fh:
            fh.write("\n" + "\n".join(lines) + "\n")
        return

    fsizes = args.features_sizes or ([1000, 10000] if args.quick
                                     else [1000, 10000, 100000, 1000000])
    esizes = args.exact_sizes if args.exact_sizes is not None else (
        [1000] if args.quick else [1000, 10000])
    emit("## speed: one fit, d = 10, B = 2000 (features: D = 64)")
    emit(f"{'mode':>10} {'N':>9} {'time s':>9} {'peak MB':>9} {'base MB':>9}")
    for method, sizes in (("features", fsizes), ("exact", esizes)):
        for n in sizes:
            r = run_speed(method, n)
            emit(f"{method:>10} {n:>9} {r['wall']:>9.2f} {r['peak_mb']:>9.0f} "
                 f"{r['base_mb']:>9.0f}")
    if not args.speed_only:
        reps = args.reps
        emit(f"\n## level: H0 (Student-t(3) samples, N = 200, 80/120), alpha = 0.05, "
             f"B = 199, D = 64, eps = 1, {reps} reps")
        emit(f"{'d':>5} {'level':>7} {'SE':>7} {'<= a+2SE':>9}")
        for d in (1, 10, 100, 200):
            def sample(rng, d=d):
                return rng.standard_t(3, size=(200, d)), np.repeat([0, 1], [80, 120])

            def make(rep):
                return DPMMDTest(method="features", n_components=64, epsilon=1.0,
                                 n_permutations=199, random_state=rep)
            p, se = rejection_rate(make, sample, reps, d)
            emit(f"{d:>5} {p:>7.3f} {se:>7.3f} {str(p <= 0.05 + 2 * se):>9}")
        power_table(emit, max(reps // 2, 1), (1.0, 10.0))
    with open(args.out, "w") as fh:
        fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
