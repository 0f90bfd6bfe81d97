"""Speed of repeated e-value fits: plans cached by the laws' values, the fused release.

Three measurements (issue 20, item 5), on a Gaussian pair P = N(0, 1), Q = N(0.5, 1):

1. fresh-object fits at n = 10: ``PrivateEValueTest(stats.norm(0, 1), stats.norm(0.5,
   1)).fit(X)`` with new law objects every time (the plan cache is keyed by the laws'
   values): the first (cold) fit, then the median over ``--fits`` fits of the fit call
   alone and of the fit with the construction of the two laws (scipy's ``freeze``
   alone costs about a millisecond); the same with reused law objects; and the time
   per fit of ``skdptest.power.simulate_power`` (which clones the estimator, i.e.
   deep-copies the laws, every repeat);
2. a fit at ``--rows`` rows (default 10^7), in units of ``x.sum()`` on the same array
   (medians of CPU times: the machine is shared), next to the unfused reference
   computation of the same release integer (the log-ratio twice, whole-array
   temporaries: the computation before this change) and to the costs of ``np.expm1``
   and ``np.log1p`` alone, which the merged release pays per row (they are computed
   exactly as before, so that the release is bit-identical);
3. peak temporaries during that fit (``tracemalloc``: numpy reports its buffers) as a
   multiple of the data's size.

0. (issue 20, "Defaults that scale": fresh plans) the CPU time of a fresh plan (statistic,
   bet or clip, grid noise; plan cache emptied) and of a fresh fit, for the Gaussian and
   Bernoulli pairs of the docs at n = 10, 1000, 10 000 and ε = 0.1, 1, 10, with the
   planned bet and clip range.

Section 2 also gives the floor of an exact merged release: ``np.expm1`` and
``np.log1p`` (and, for comparison, ``np.exp`` and ``np.log``) in place on chunks of
2^14 rows of the same data, as the fused release computes them.

Run ``python benchmarks/evalue_speed.py`` (``--rows 1e6`` for a quick look); the saved
table is ``benchmarks/results/evalue_speed.txt``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import tracemalloc
import warnings

import numpy as np
from scipy import stats

from skdptest import PrivateEValueTest
from skdptest.evalue import _cache
from skdptest.evalue._evalue import merged_plan, resolve_statistic
from skdptest.evalue._merge import _log_merge, fused_integer_sum, row_integer_sum
from skdptest.evalue._rows import check_finite
from skdptest.power import simulate_power


def laws():
    return stats.norm(0, 1), stats.norm(0.5, 1)


def fit(null, alt, X, seed=0):
    return PrivateEValueTest(null, alt, random_state=seed).fit(X)


def small_fits(n_fits):
    """Median wall and CPU seconds of fits at n = 10 (see the module docstring)."""
    X = np.random.default_rng(0).normal(0.5, 1.0, size=(10, 1))
    _cache._PLANS.clear()
    t0 = time.perf_counter()
    fit(*laws(), X)
    out = {"first fit, empty cache (plans the laws)": ([time.perf_counter() - t0], [])}
    fresh, with_laws, reused = ([], []), ([], []), ([], [])
    P, Q = laws()
    for i in range(n_fits):
        c0, t0 = time.process_time(), time.perf_counter()
        null, alt = laws()
        c1, t1 = time.process_time(), time.perf_counter()
        fit(null, alt, X, i)
        c2, t2 = time.process_time(), time.perf_counter()
        fit(P, Q, X, i)
        c3, t3 = time.process_time(), time.perf_counter()
        for (wall, cpu), w, c in ((fresh, t2 - t1, c2 - c1), (with_laws, t2 - t0, c2 - c0),
                                  (reused, t3 - t2, c3 - c2)):
            wall.append(w)
            cpu.append(c)
    out["fresh law objects, fit call"] = fresh
    out["fresh law objects, with stats.norm(...) x 2"] = with_laws
    out["reused law objects"] = reused
    c0, t0 = time.process_time(), time.perf_counter()
    table = simulate_power(PrivateEValueTest(*laws()),
                           lambda n, rng: (rng.normal(0.5, 1.0, size=(n, 1)), None),
                           n_samples=10, n_repeats=n_fits, random_state=0)
    assert len(table) == 1
    out["simulate_power (clone per repeat), mean"] = (
        [(time.perf_counter() - t0) / n_fits], [(time.process_time() - c0) / n_fits])
    return {k: (statistics.median(w), statistics.median(c) if c else None)
            for k, (w, c) in out.items()}


def fresh_plans(repeats):
    """{(laws, n, ε): (plan CPU s, fit CPU s, bet, clip)}, minima over ``repeats``
    with the plan cache emptied before each."""
    cases = [("N(0,1) vs N(0.5,1)", stats.norm(0, 1), stats.norm(0.5, 1)),
             ("Bern(0.3) vs Bern(0.7)", stats.bernoulli(0.3), stats.bernoulli(0.7))]
    out = {}
    for name, p, q in cases:
        for n in (10, 1000, 10_000):
            X = np.zeros((n, 1))
            for eps in (0.1, 1.0, 10.0):
                t_plan, t_fit = [], []
                for _ in range(repeats):
                    _cache._PLANS.clear()
                    c0 = time.process_time()
                    laws_, stat = resolve_statistic({"null": p, "alternative": q,
                                                     "statistic": "optimal",
                                                     "epsilon": eps}, 1)
                    plan = merged_plan("auto", laws_, stat, n, eps)
                    t_plan.append(time.process_time() - c0)
                    _cache._PLANS.clear()
                    c0 = time.process_time()
                    PrivateEValueTest(p, q, epsilon=eps, random_state=0).fit(X)
                    t_fit.append(time.process_time() - c0)
                out[(name, n, eps)] = (min(t_plan), min(t_fit), plan.bet, plan.clip)
    return out


def chunked_inplace(col, op, chunk=1 << 14):
    """CPU seconds of ``op(buffer)`` on every chunk of ``col`` (copied into a reused
    buffer first; the copies' own time is subtracted)."""
    buf = np.empty(chunk)

    def run(apply):
        for start in range(0, col.size, chunk):
            b = buf[:min(chunk, col.size - start)]
            np.copyto(b, col[start:start + chunk])
            if apply:
                op(b)

    return median_time(lambda: run(True), 3) - median_time(lambda: run(False), 3)


def median_time(func, repeats):
    """Median CPU seconds of ``func()`` (CPU time: less disturbed than wall time by the
    other processes of a shared machine)."""
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        func()
        times.append(time.process_time() - t0)
    return statistics.median(times)


def reference_integer(X, plan):
    """The release integer as computed before (log-ratio in the plan's check and again
    in the release, whole-array temporaries)."""
    plan.laws.log_ratio(check_finite(X))
    return row_integer_sum(_log_merge(plan.stat.log_e(plan.laws.log_ratio(X)), plan.bet),
                           plan.noise)


def peak_ratio(func, nbytes):
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    func()
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak / nbytes


def big_fit(rows, repeats):
    x = np.random.default_rng(1).normal(0.25, 1.0, size=(rows, 1))
    laws_, stat = resolve_statistic({"null": laws()[0], "alternative": laws()[1],
                                     "statistic": "optimal", "epsilon": 1.0}, 1)
    plan = merged_plan("auto", laws_, stat, rows, 1.0)
    fit(*laws(), x)  # plan once (public, cached)
    unit = median_time(x.sum, 9)
    t_fit = median_time(lambda: fit(*laws(), x), repeats)
    t_ref = median_time(lambda: reference_integer(x, plan), repeats)
    fused = fused_integer_sum(x, plan.laws, plan.stat, plan.bet, plan.noise)
    assert fused == reference_integer(x, plan)  # the same release integer
    t_unmerged = median_time(
        lambda: fused_integer_sum(x, plan.laws, plan.stat, 1.0, plan.noise), repeats)
    col = x[:, 0]
    t_expm1 = median_time(lambda: np.expm1(col), 3)
    t_log1p = median_time(lambda: np.log1p(col * 0.5), 3) - median_time(lambda: col * 0.5, 3)
    # the floor: in place on cache-resident chunks, as the fused release runs them
    # (log1p and log of abs(x), no NaN path; the abs is subtracted)
    floor = {name: chunked_inplace(col, op) for name, op in (
        ("expm1", lambda b: np.expm1(b, out=b)),
        ("log1p", lambda b: np.log1p(np.abs(b, out=b), out=b)),
        ("exp", lambda b: np.exp(b, out=b)),
        ("log", lambda b: np.log(np.abs(b, out=b), out=b)),
        ("abs", lambda b: np.abs(b, out=b)))}
    for name in ("log1p", "log"):
        floor[name] -= floor["abs"]
    mem_fit = peak_ratio(lambda: fit(*laws(), x), x.nbytes)
    mem_ref = peak_ratio(lambda: reference_integer(x, plan), x.nbytes)
    return dict(unit=unit, fit=t_fit, ref=t_ref, unmerged=t_unmerged, expm1=t_expm1,
                log1p=t_log1p, mem_fit=mem_fit, mem_ref=mem_ref, bet=plan.bet, floor=floor)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fits", type=int, default=200)
    parser.add_argument("--rows", type=float, default=1e7)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # FixedRandomStateWarning: seeds for timing only
    print(f"# evalue_speed.py --fits {args.fits} --rows {args.rows:g}; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    print(f"\n0. Fresh plans (cache emptied; minimum CPU of {args.repeats})")
    print("| laws | n | ε | plan CPU ms | fit CPU ms | bet | clip range |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for (name, n, eps), (tp, tf, bet, clip) in fresh_plans(args.repeats).items():
        print(f"| {name} | {n} | {eps:g} | {1e3 * tp:.1f} | {1e3 * tf:.1f} | {bet:.6f} | "
              f"{clip:.5f} |")
    small = small_fits(args.fits)
    print(f"\n1. Gaussian fit at n = 10 (median over {args.fits} fits after the first)")
    print("| case | wall ms per fit | CPU ms per fit |")
    print("|---|---:|---:|")
    for case, (wall, cpu) in small.items():
        print(f"| {case} | {1e3 * wall:.2f} | "
              f"{'' if cpu is None else f'{1e3 * cpu:.2f}'} |")
    r = big_fit(int(args.rows), args.repeats)
    u = r["unit"]
    print(f"\n2.-3. Gaussian fit at {int(args.rows):,} rows (bet {r['bet']:.6f}); "
          f"x.sum() = {1e3 * u:.1f} ms CPU (medians of CPU times)")
    print("| computation | CPU s | x.sum() passes | peak temporaries / data |")
    print("|---|---:|---:|---:|")
    print(f"| fit (fused release) | {r['fit']:.3f} | {r['fit'] / u:.1f} | "
          f"{r['mem_fit']:.2f} |")
    print(f"| reference release integer (before) | {r['ref']:.3f} | {r['ref'] / u:.1f} | "
          f"{r['mem_ref']:.2f} |")
    print(f"| fused integer sum at bet 1 (no merge) | {r['unmerged']:.3f} | "
          f"{r['unmerged'] / u:.1f} | |")
    print(f"| np.expm1 alone | {r['expm1']:.3f} | {r['expm1'] / u:.1f} | |")
    print(f"| np.log1p alone | {r['log1p']:.3f} | {r['log1p'] / u:.1f} | |")
    f = r["floor"]
    for name in ("expm1", "log1p", "exp", "log"):
        print(f"| np.{name} in place, chunks of 2^14 | {f[name]:.3f} | {f[name] / u:.1f} | |")
    merged = f["expm1"] + f["log1p"]
    print(f"| floor of the exact merged release: np.expm1 + np.log1p in place | "
          f"{merged:.3f} | {merged / u:.1f} | |")


if __name__ == "__main__":
    main()
