"""Power of the private rank tests beside the public tests and the published anchors.

Sample size for 80 % power at ε = 1, α = 0.05 (issue 19, item 7):

- two groups, normal shift d = 0.5, two-sided: DPMannWhitneyTest (and its two-group
  twin, DPKruskalWallisTest) against scipy's Mann–Whitney; published DP: |KW| 100,
  DP Mann–Whitney 160 per group; target <= 80 per group; and one-sided (the second
  group larger: ``alternative="less"`` for the first);
- three groups, normal means 0, 0.35, 0.70 (steps of 0.35 SD): DPKruskalWallisTest
  against scipy's Kruskal–Wallis; published DP |KW| 123; target <= 123 per group;
- one sample, N(0.4, 1) against symmetry about 0 (d = 0.4), two-sided:
  DPWilcoxonTest against scipy's signed-rank test; published test of tests 200;
  target <= 104.

Method. For each n on a grid, R simulated data sets; the private statistic is
computed with the estimators' own functions (ties broken at random, exact integer
statistic, exact discrete Laplace noise at the estimator's rate) and compared with one
large simulated null release sample (B = 20000; the estimator draws a fresh B = 2000
sample per fit: same test with a finer p-value grid). The n for 80 % is interpolated
linearly between the grid points around 0.8. A spot check fits the estimator itself
(default B) at the solved n. Runtime: about four minutes on a shared two-core machine.

Run: ``python benchmarks/classical_power_rank.py`` (writes
benchmarks/results/classical_power_rank.txt).
"""

from __future__ import annotations

import pathlib
import sys
import time
import warnings
from functools import partial

import numpy as np
from scipy import stats

from skdptest import DPKruskalWallisTest, DPMannWhitneyTest, DPWilcoxonTest
from skdptest._noise import discrete_laplace
from skdptest.classical._rank import (
    kruskal_sensitivity,
    kruskal_twice_statistic,
    mann_whitney_sensitivity,
    mann_whitney_u,
    monte_carlo_pvalue,
    noise_rate,
    null_rank_sums,
    null_signed_rank,
    random_signs_and_magnitudes,
    signed_rank_sensitivity,
    signed_rank_statistic,
    tie_broken_ranks,
)

EPS, ALPHA, B, R = 1.0, 0.05, 20000, 2000


def _crossing(ns, powers, target=0.8):
    for (n0, p0), (n1, p1) in zip(zip(ns[:-1], powers[:-1], strict=True),
                                  zip(ns[1:], powers[1:], strict=True), strict=True):
        if p0 < target <= p1:
            return n0 + (target - p0) * (n1 - n0) / (p1 - p0)
    return float("nan")


def two_groups(n, rng, shifts):
    k = len(shifts)
    sizes = np.full(k, n)
    codes = np.repeat(np.arange(k), n)
    X = rng.normal(size=(R, k * n)) + np.repeat(shifts, n)[None, :]
    return sizes, codes, X


def mw_power(n, rng, alternative="two-sided"):
    sizes, codes, X = two_groups(n, rng, [0.0, 0.5])
    rate = noise_rate(EPS, mann_whitney_sensitivity(sizes))
    null = null_rank_sums(rng, sizes, B)[:, 0] - n * (n + 1) // 2
    null = null + discrete_laplace(rng, rate, size=B)
    noise = discrete_laplace(rng, rate, size=R)
    dp = pub = 0
    for r in range(R):
        u = mann_whitney_u(tie_broken_ranks(rng, X[r][:, None]), codes == 0) + noise[r]
        dp += monte_carlo_pvalue(u, null, alternative, n * n) <= ALPHA
    pub = np.mean(stats.mannwhitneyu(X[:, :n], X[:, n:], axis=1, alternative=alternative)
                  .pvalue <= ALPHA)
    return dp / R, pub


def kw_power(n, rng):
    sizes, codes, X = two_groups(n, rng, [0.0, 0.35, 0.70])
    rate = noise_rate(EPS, 2 * kruskal_sensitivity(sizes))
    sums = null_rank_sums(rng, sizes, B)
    null = np.abs(2 * sums - sizes * (3 * n + 1)).sum(axis=1)
    null = null + discrete_laplace(rng, rate, size=B)
    noise = discrete_laplace(rng, rate, size=R)
    dp = 0
    for r in range(R):
        t2 = kruskal_twice_statistic(tie_broken_ranks(rng, X[r][:, None]), codes, sizes)
        dp += monte_carlo_pvalue(t2 + noise[r], null, "greater") <= ALPHA
    pub = np.mean(stats.kruskal(X[:, :n], X[:, n:2 * n], X[:, 2 * n:], axis=1).pvalue
                  <= ALPHA)
    return dp / R, pub


def wilcoxon_power(n, rng):
    X = rng.normal(0.4, 1.0, size=(R, n))
    rate = noise_rate(EPS, signed_rank_sensitivity(n))
    null = null_signed_rank(rng, n, B) + discrete_laplace(rng, rate, size=B)
    noise = discrete_laplace(rng, rate, size=R)
    dp = 0
    for r in range(R):
        positive, mags = random_signs_and_magnitudes(rng, X[r][:, None])
        w = signed_rank_statistic(tie_broken_ranks(rng, mags), positive) + noise[r]
        dp += monte_carlo_pvalue(w, null, "two-sided", n * (n + 1) // 2) <= ALPHA
    pub = np.mean(stats.wilcoxon(X, axis=1).pvalue <= ALPHA)
    return dp / R, pub


def spot_check(make_test, make_data, n, reps, rng):
    rejections = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(reps):
            X, y = make_data(n, rng)
            rejections += make_test().fit(X, y).decision()
    return rejections / reps


SETTINGS = [
    ("two groups d=0.5, two-sided", "DPMannWhitneyTest", mw_power,
     range(50, 101, 5), "per group", "|KW| 100, DP MW 160", "<= 80",
     lambda: DPMannWhitneyTest(epsilon=EPS),
     lambda n, rng: (np.concatenate([rng.normal(size=n), rng.normal(0.5, 1, n)])[:, None],
                     np.repeat([0, 1], n))),
    ("two groups d=0.5, one-sided", "DPMannWhitneyTest", partial(mw_power, alternative="less"),
     range(40, 91, 5), "per group", "(prototype: 63)", "-",
     lambda: DPMannWhitneyTest(epsilon=EPS, alternative="less"),
     lambda n, rng: (np.concatenate([rng.normal(size=n), rng.normal(0.5, 1, n)])[:, None],
                     np.repeat([0, 1], n))),
    ("three groups, means 0/0.35/0.70", "DPKruskalWallisTest", kw_power,
     range(30, 91, 5), "per group", "|KW| 123", "<= 123",
     lambda: DPKruskalWallisTest(epsilon=EPS),
     lambda n, rng: ((rng.normal(size=3 * n) + np.repeat([0, 0.35, 0.7], n))[:, None],
                     np.repeat([0, 1, 2], n))),
    ("one sample d=0.4, two-sided", "DPWilcoxonTest", wilcoxon_power,
     range(50, 111, 5), "rows", "test of tests 200", "<= 104",
     lambda: DPWilcoxonTest(epsilon=EPS),
     lambda n, rng: (rng.normal(0.4, 1.0, size=(n, 1)), None)),
]


def main(out=pathlib.Path(__file__).parent / "results" / "classical_power_rank.txt"):
    rng = np.random.default_rng(20261201)
    lines = [f"Rank tests: n for 80 % power at eps = {EPS}, alpha = {ALPHA} "
             f"(R = {R} data sets per n, null sample B = {B})", ""]
    header = (f"{'setting':34s} {'DP test':20s} {'DP n':>6s} {'public n':>9s} "
              f"{'published DP':>22s} {'target':>7s}  spot check (estimator, 400 fits)")
    lines += [header, "-" * len(header)]
    detail = []
    start = time.perf_counter()
    for (label, name, power, grid, unit, anchor, target, make_test, make_data) in SETTINGS:
        grid = list(grid)
        dp, pub = zip(*(power(n, rng) for n in grid), strict=True)
        n_dp, n_pub = _crossing(grid, dp), _crossing(grid, pub)
        n_spot = int(round(n_dp))
        spot = spot_check(make_test, make_data, n_spot, 400, rng)
        lines.append(f"{label:34s} {name:20s} {n_dp:6.1f} {n_pub:9.1f} {anchor:>22s} "
                     f"{target:>7s}  power {spot:.3f} at n = {n_spot} ({unit})")
        detail.append(f"{label}: n ({unit}) | DP power | public power")
        detail += [f"  {n:4d} | {a:.3f} | {b:.3f}" for n, a, b in zip(grid, dp, pub, strict=True)]
    lines += ["", "Power by n:"] + detail
    lines += ["", f"runtime {time.perf_counter() - start:.0f} s"]
    text = "\n".join(lines) + "\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
