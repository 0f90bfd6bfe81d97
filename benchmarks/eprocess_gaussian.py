"""Stopping times of two-sided private e-processes on Gaussian streams.

P = N(0, 1) against Q = N(mu, 1), two-sided at alpha = beta = 0.025: each run
feeds ``PrivateEProcess`` a stream from Q (correct decision "reject") or from P
(correct decision "accept") until it decides. Printed for each (mu, epsilon):
N50 and N90 (median and 90 % quantile of the stopping time) under Q and under P,
the error counts, and the time of the first fit (which computes the public null
laws of every batch size used; later fits reuse them) for

- ``statistic="auto"`` (for continuous laws: the merged optimal statistic, the
  two directions at epsilon/2 each), and
- ``statistic="exact"`` (lattice-quantised log E* + two-sided geometric noise,
  its exact likelihood ratio; one release serves both directions at full
  epsilon).

Run ``python benchmarks/eprocess_gaussian.py`` (``--runs 300`` by default; the
saved table in ``benchmarks/results/eprocess_gaussian.txt``).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import stats

from skdptest import PrivateEProcess
from skdptest.evalue._cache import _PLANS

ROWS = [(0.5, 1.0), (0.5, 0.5), (0.25, 1.0)]
ALPHA = 0.025


def run(statistic, mu, eps, under, n_runs, max_samples, seed):
    """Stopping times and decisions of ``n_runs`` streams from N(under, 1)."""
    P, Q = stats.norm(0, 1), stats.norm(mu, 1)
    rng = np.random.default_rng(seed)
    times, decisions = [], []
    for s in rng.integers(2**32, size=n_runs):
        est = PrivateEProcess(P, Q, statistic=statistic, epsilon=eps, alpha=ALPHA, beta=ALPHA,
                              max_samples=max_samples, random_state=int(s))
        res = est.fit(rng.normal(under, 1.0, size=(max_samples, 1))).result_
        times.append(res.n_samples)
        decisions.append(res.decision)
    return np.asarray(times, float), np.asarray(decisions)


def first_fit_seconds(statistic, mu, eps, max_samples):
    """Wall time of one fit on a stream from Q with no public laws cached."""
    _PLANS.clear()
    P, Q = stats.norm(0, 1), stats.norm(mu, 1)
    x = np.random.default_rng(0).normal(mu, 1.0, size=(max_samples, 1))
    t0 = time.perf_counter()
    PrivateEProcess(P, Q, statistic=statistic, epsilon=eps, alpha=ALPHA, beta=ALPHA,
                    max_samples=max_samples, random_state=0).fit(x)
    return time.perf_counter() - t0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args(argv)
    print(f"# two-sided, alpha = beta = {ALPHA}, {args.runs} runs per row, method and "
          "hypothesis; errors: reject under P / accept under Q")
    head = (f"{'mu':>5} {'eps':>4} {'statistic':>9} | {'N50 Q':>6} {'N90 Q':>6} | "
            f"{'N50 P':>6} {'N90 P':>6} | {'err P':>6} {'err Q':>6} | {'1st fit s':>9}")
    print(head)
    print("-" * len(head))
    for mu, eps in ROWS:
        max_samples = int(60 / mu**2)
        for statistic in ("auto", "exact"):
            tq, dq = run(statistic, mu, eps, mu, args.runs, max_samples, args.seed)
            tp, dp = run(statistic, mu, eps, 0.0, args.runs, max_samples, args.seed + 1)
            first = first_fit_seconds(statistic, mu, eps, max_samples)
            print(f"{mu:5.2f} {eps:4.1f} {statistic:>9} | {np.median(tq):6.0f} "
                  f"{np.quantile(tq, 0.9):6.0f} | {np.median(tp):6.0f} "
                  f"{np.quantile(tp, 0.9):6.0f} | {np.mean(dp == 'reject'):6.3f} "
                  f"{np.mean(dq == 'accept'):6.3f} | {first:9.2f}", flush=True)


if __name__ == "__main__":
    main()
