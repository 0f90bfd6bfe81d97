"""Random-feature dpMMD on all N rows against the exact dpMMD at equal wall time.

Issue 13, target (b): at N >= 20 000 the linear-time test (``method="features"``) should
have more power than the exact O(N^2) test given the same wall time, i.e. the exact test
run on the largest subsample N' it can process in the time the feature test needs for
all N rows.

Setting: d = 5, two equal groups (N/2 rows N(0, I) against N/2 rows N(shift * 1, I)),
rbf with ``gamma`` pinned at 0.2 in both modes (one bandwidth, no aggregate),
B = 199 relabellings, epsilon = 1, alpha = 0.05.

For every N:

1. timing, in one process and interleaved (the machine is shared, so the feature fits
   and the exact fits alternate in rounds and medians of ``--timing-repeats`` are
   reported; one warm-up fit of each mode first): the feature test on all N rows
   (D in ``--components``) and the exact test on N' rows for N' on a grid (ascending;
   the grid stops after the first N' slower than twice the slowest feature fit);
2. N'(D) = the largest grid N' whose median exact time is <= the feature test's median
   time with D components;
3. power, paired, over ``--reps`` data sets: the feature test on all N rows against the
   exact test on N'(D) rows of the same data set: the first N'/2 rows of each group,
   which are a uniformly random balanced subsample since the rows are i.i.d. Per data
   set the estimators are seeded with the repetition number; the mean fit times over
   the repetitions are reported too (a second, interleaved timing);
4. one exact fit on all N rows (time only), for scale.

The mean shift is chosen per N so that the feature test's power lies in (0.3, 0.9);
``--calibrate`` prints the power of both feature tests at a few shifts (few reps) to
choose it. The load average is printed before and after each N, and the header has the
date, the command and the commit.

Usage::

    python benchmarks/kernel_equal_time.py                       # N = 20 000 and 50 000
    python benchmarks/kernel_equal_time.py --sizes 20000 --reps 50 --out /tmp/t.txt
    python benchmarks/kernel_equal_time.py --calibrate --sizes 20000 --shifts 0.02 0.03
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from kernel_scale import _commit, _load  # the same header fields as kernel_scale.py

HERE = os.path.dirname(os.path.abspath(__file__))
D_FEATURES = 5
GAMMA = 0.2
GRID = (500, 1000, 1500, 2000, 3000, 4000, 6000, 8000, 10000, 12000, 14000, 16000, 20000,
        24000, 28000, 32000, 40000)
# mean shift per N (on every coordinate), from --calibrate (see the results file)
DEFAULT_SHIFTS = {20000: 0.025, 50000: 0.016}


def sample(n, shift, seed):
    """Two equal groups, N(0, I_d) and N(shift * 1, I_d), rows i.i.d. within a group."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, D_FEATURES))
    X[n // 2:] += shift
    return X, np.repeat([0, 1], [n // 2, n - n // 2])


def subsample(X, n_sub):
    """First ``n_sub / 2`` rows of each group (a random balanced subsample: rows i.i.d.)."""
    n, h = X.shape[0], n_sub // 2
    rows = np.r_[0:h, n // 2:n // 2 + h]
    return X[rows], np.repeat([0, 1], h)


def make(method, D, eps, B, rep):
    from skdptest import DPMMDTest

    kw = {"n_components": D} if method == "features" else {}
    # max_memory raised for the one exact fit on all N rows (time only, for scale)
    return DPMMDTest(method=method, epsilon=eps, n_permutations=B,
                     kernel_params={"gamma": GAMMA}, max_memory=16 * 2**30,
                     random_state=rep, **kw)


def timed_decision(est, X, y):
    t = time.perf_counter()
    reject = est.decision(X, y)
    return reject, time.perf_counter() - t


def timing(X, y, components, grid, eps, B, repeats):
    """Median fit times: features on all rows, exact on the grid, interleaved in rounds."""
    n = X.shape[0]
    # warm-up (imports, first BLAS calls, allocator) outside the timings
    timed_decision(make("features", components[0], eps, B, 0), *subsample(X, 2000))
    timed_decision(make("exact", None, eps, B, 0), *subsample(X, 500))
    feat = {D: [timed_decision(make("features", D, eps, B, 0), X, y)[1]] for D in components}
    # first pass over the grid decides where it stops
    exact, limit = {}, 2.0 * max(v[0] for v in feat.values())
    for m in grid:
        if m > n:
            break
        exact[m] = [timed_decision(make("exact", None, eps, B, 0), *subsample(X, m))[1]]
        if exact[m][0] > limit:
            break
    for r in range(1, repeats):  # further rounds, features and exact alternating
        for D in components:
            feat[D].append(timed_decision(make("features", D, eps, B, r), X, y)[1])
        for m in exact:
            exact[m].append(timed_decision(make("exact", None, eps, B, r),
                                           *subsample(X, m))[1])
    return ({D: float(np.median(v)) for D, v in feat.items()},
            {m: float(np.median(v)) for m, v in exact.items()})


def calibrate(args, emit):
    emit(f"## calibration: power of the feature test on all N rows, eps = {args.eps}, "
         f"B = {args.B}, {args.calibrate_reps} reps per shift (data seeds [9, N, rep])")
    emit(f"{'N':>7} {'shift':>7} " + " ".join(f"{'D=' + str(D):>7}" for D in args.components))
    for n in args.sizes:
        for shift in args.shifts:
            hits = {D: 0 for D in args.components}
            for rep in range(args.calibrate_reps):
                X, y = sample(n, shift, [9, n, rep])
                for D in args.components:
                    hits[D] += make("features", D, args.eps, args.B, rep).decision(X, y)
            emit(f"{n:>7} {shift:>7.4f} " + " ".join(
                f"{hits[D] / args.calibrate_reps:>7.2f}" for D in args.components))


def equal_time(args, emit):
    table = []
    for n in args.sizes:
        shift = args.shift if args.shift is not None else DEFAULT_SHIFTS[n]
        reps = args.reps if n < 50000 else min(args.reps, args.reps_large)
        emit(f"\n## N = {n}: shift {shift} on every coordinate, load average before: "
             f"{_load()}")
        X, y = sample(n, shift, [7, n, 10**6])  # timing data set (not one of the reps)
        t_feat, t_exact = timing(X, y, args.components, args.grid, args.eps, args.B,
                                 args.timing_repeats)
        emit(f"timing (median of {args.timing_repeats}, interleaved): features " + ", ".join(
            f"D={D}: {t:.3f} s" for D, t in t_feat.items()))
        emit("  exact on N' rows: " + ", ".join(f"{m}: {t:.3f}" for m, t in t_exact.items()))
        n_sub = {}
        for D, t in t_feat.items():
            ok = [m for m, te in t_exact.items() if te <= t]
            n_sub[D] = max(ok) if ok else None
        emit("  N'(D) = largest grid N' with t_exact(N') <= t_features(D): " + ", ".join(
            f"D={D}: {n_sub[D]}" for D in args.components))
        # paired power: one data set per rep, features on all rows, exact on N'(D) rows
        hits = {(k, D): np.zeros(reps, dtype=bool) for k in ("f", "e")
                for D in args.components}
        times = {(k, D): [] for k in ("f", "e") for D in args.components}
        t0 = time.perf_counter()
        for rep in range(reps):
            Xr, yr = sample(n, shift, [7, n, rep])
            for D in args.components:
                hits[("f", D)][rep], t = timed_decision(
                    make("features", D, args.eps, args.B, rep), Xr, yr)
                times[("f", D)].append(t)
                if n_sub[D] is None:
                    continue
                hits[("e", D)][rep], t = timed_decision(
                    make("exact", None, args.eps, args.B, rep), *subsample(Xr, n_sub[D]))
                times[("e", D)].append(t)
            if (rep + 1) % 25 == 0:
                print(f"  [N = {n}: {rep + 1}/{reps} reps, {time.perf_counter() - t0:.0f} s]",
                      flush=True)
        emit(f"  power: {reps} reps in {time.perf_counter() - t0:.0f} s "
             f"(data seeds [7, {n}, rep], random_state = rep)")
        for D in args.components:
            if n_sub[D] is None:
                continue
            f, e = hits[("f", D)], hits[("e", D)]
            diff = f.astype(float) - e
            se = diff.std(ddof=1) / reps ** 0.5
            table.append((n, D, t_feat[D], n_sub[D], t_exact[n_sub[D]], f.mean(), e.mean(),
                          diff.mean(), se, reps, np.mean(times[("f", D)]),
                          np.mean(times[("e", D)])))
        t_all = None
        if not args.no_full_exact:
            _, t_all = timed_decision(make("exact", None, args.eps, args.B, 0), X, y)
        emit(f"  exact dpMMD on all N = {n} rows (one fit, time only): "
             + ("not run" if t_all is None else f"{t_all:.2f} s")
             + f"; load average after: {_load()}")
    emit(f"\n## equal time: eps = {args.eps}, B = {args.B}, gamma = {GAMMA}, d = "
         f"{D_FEATURES}; t = median fit time (s) of the timing rounds; mean t over the "
         "power reps in brackets; diff = power features - power exact(N'), paired")
    emit(f"{'N':>6} {'D':>4} {'t_feat':>13} {'N_prime':>7} {'t_exact':>13} {'pow_f':>6} "
         f"{'pow_e':>6} {'diff':>7} {'SE':>6} {'95% interval':>17} {'reps':>5}")
    for n, D, tf, m, te, pf, pe, dm, se, reps, tfr, ter in table:
        emit(f"{n:>6} {D:>4} {tf:>5.3f} [{tfr:>5.3f}] {m:>7} {te:>5.3f} [{ter:>5.3f}] "
             f"{pf:>6.3f} {pe:>6.3f} {dm:>+7.3f} {se:>6.3f} "
             f"[{dm - 1.96 * se:>+7.3f},{dm + 1.96 * se:>+7.3f}] {reps:>5}")
    return table


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[20000, 50000])
    ap.add_argument("--components", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--grid", type=int, nargs="+", default=list(GRID))
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--reps-large", type=int, default=200,
                    help="reps at N >= 50 000 (at most --reps)")
    ap.add_argument("--timing-repeats", type=int, default=3)
    ap.add_argument("--shift", type=float, default=None,
                    help="mean shift for every N (default: DEFAULT_SHIFTS per N)")
    ap.add_argument("--eps", type=float, default=1.0)
    ap.add_argument("--B", type=int, default=199)
    ap.add_argument("--no-full-exact", action="store_true")
    ap.add_argument("--calibrate", action="store_true")
    ap.add_argument("--shifts", type=float, nargs="+", default=[0.02, 0.03, 0.04])
    ap.add_argument("--calibrate-reps", type=int, default=20)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "kernel_equal_time.txt"))
    args = ap.parse_args(argv)
    cmd = " ".join(argv if argv is not None else sys.argv[1:])
    lines = [f"# kernel_equal_time.py {cmd}  ({time.strftime('%Y-%m-%d %H:%M')}, commit "
             f"{_commit()}, cores: {os.cpu_count()}, load average at start: {_load()})"]

    def emit(s=""):
        print(s, flush=True)
        lines.append(s)

    print(lines[0], flush=True)
    if args.calibrate:
        calibrate(args, emit)
    else:
        equal_time(args, emit)
    emit(f"# load average at end: {_load()}")
    with open(args.out, "a") as fh:  # append: earlier runs stay in the file
        fh.write("\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
