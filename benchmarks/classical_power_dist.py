"""Power of the private distribution and contingency tests beside the public tests.

Sample size (rows in all) for 80 % power at ε = 1, α = 0.05, two-sided, on standard
alternatives (issue 19, item 7; the issue gives no published anchor for these tests):

- two-sample KS, N(0, 1) against N(0.5, 1), equal groups (d = 0.5): DPKolmogorovSmirnovTest
  against scipy.stats.ks_2samp;
- KS goodness of fit to N(0, 1), data N(0.3, 1): DPKolmogorovSmirnovTest(null=norm())
  against scipy.stats.kstest;
- χ² goodness of fit, 4 categories, null uniform, truth (0.3, 0.3, 0.2, 0.2) (Cohen's
  w = 0.2): DPChiSquareTest against scipy.stats.chisquare;
- independence of two binary variables, P(V = U) = 0.6 with uniform margins (w = 0.2):
  DPContingencyTest against scipy.stats.chi2_contingency (no continuity correction).

Method: ``skdptest.power.solve_n`` on the estimators themselves (n_resamples = 199,
200 simulated data sets per n, doubling then bisection to 5 %); the public tests by the
same search (400 data sets per n). Monte Carlo error of each n: a few percent.

Run: ``python benchmarks/classical_power_dist.py`` (writes
benchmarks/results/classical_power_dist.txt). Runtime: a few minutes on two cores.
"""

from __future__ import annotations

import pathlib
import time
import warnings

import numpy as np
from scipy import stats

from skdptest import (
    DPChiSquareTest,
    DPContingencyTest,
    DPKolmogorovSmirnovTest,
    FixedRandomStateWarning,
)
from skdptest.power import solve_n

EPS, ALPHA, TARGET = 1.0, 0.05, 0.8
PROBS = np.array([0.3, 0.3, 0.2, 0.2])


def two_sample(n, rng):
    half = n // 2
    X = np.r_[rng.normal(size=half), rng.normal(0.5, size=n - half)].reshape(-1, 1)
    return X, np.repeat([0, 1], [half, n - half])


def gof(n, rng):
    return rng.normal(0.3, size=(n, 1)), None


def categories(n, rng):
    return rng.choice(4, p=PROBS, size=(n, 1)).astype(float), None


def pairs(n, rng):
    u = rng.integers(0, 2, size=n)
    v = np.where(rng.random(n) < 0.6, u, 1 - u)
    return np.c_[u, v].astype(float), None


def public_pvalue(kind, X, y):
    if kind == "ks2":
        return stats.ks_2samp(X[y == 0, 0], X[y == 1, 0]).pvalue
    if kind == "ks1":
        return stats.kstest(X[:, 0], "norm").pvalue
    if kind == "chi2":
        return stats.chisquare(np.bincount(X[:, 0].astype(int), minlength=4)).pvalue
    table = np.zeros((2, 2))
    np.add.at(table, (X[:, 0].astype(int), X[:, 1].astype(int)), 1)
    if np.any(table.sum(0) == 0) or np.any(table.sum(1) == 0):
        return 1.0
    return stats.chi2_contingency(table, correction=False).pvalue


def public_n(kind, maker, reps=400, seed=0):
    def power(n):
        rng = np.random.default_rng(seed)
        return np.mean([public_pvalue(kind, *maker(n, rng)) <= ALPHA for _ in range(reps)])

    lo, hi = 4, 8
    while power(hi) < TARGET:
        lo, hi = hi, hi * 2
    while hi - lo > max(1, 0.05 * hi):
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if power(mid) >= TARGET else (mid, hi)
    return hi


CASES = [
    ("two-sample KS, d = 0.5", "ks2", DPKolmogorovSmirnovTest(n_resamples=199), two_sample),
    ("KS goodness of fit, N(0.3, 1) vs N(0, 1)", "ks1",
     DPKolmogorovSmirnovTest(stats.norm(), n_resamples=199), gof),
    ("chi2 goodness of fit, 4 cells, w = 0.2", "chi2",
     DPChiSquareTest(categories=[0, 1, 2, 3], n_resamples=199), categories),
    ("2x2 independence, w = 0.2", "table",
     DPContingencyTest(categories=([0, 1], [0, 1]), n_resamples=199), pairs),
]


def main():
    warnings.simplefilter("ignore", FixedRandomStateWarning)
    lines = [f"Rows (in all) for 80 % power, epsilon = {EPS}, alpha = {ALPHA}, two-sided",
             f"{'alternative':44s} {'DP test':>9s} {'public':>8s} {'ratio':>6s} {'power':>6s}"]
    start = time.time()
    for name, kind, est, maker in CASES:
        sol = solve_n(est, maker, TARGET, n_min=10, n_max=200_000, params={"epsilon": EPS},
                      n_repeats=200, random_state=0)
        pub = public_n(kind, maker)
        lines.append(f"{name:44s} {sol.value:9d} {pub:8d} {sol.value / pub:6.2f} "
                     f"{sol.power:6.3f}")
        print(lines[-1], flush=True)
    lines.append(f"(runtime {time.time() - start:.0f} s; n_resamples = 199, 200 data sets "
                 "per n for the DP tests, 400 for the public tests)")
    text = "\n".join(lines) + "\n"
    print(text)
    out = pathlib.Path(__file__).parent / "results" / "classical_power_dist.txt"
    out.write_text(text)


if __name__ == "__main__":
    main()
