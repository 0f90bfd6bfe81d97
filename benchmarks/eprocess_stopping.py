"""Stopping times of two-sided sequential tests: the DP-SPRT paper's table.

P = Bernoulli(0.3) against Q = Bernoulli(q), two-sided at α = β = 0.025: each
run draws a stream from P (correct decision "accept") or from Q (correct
decision "reject") and records the stopping time and the decision. Printed for
each (q, ε): N50 and N90 (median and 90 % quantile of the stopping time) under
Q and under P, the empirical error rates (reject under P, accept under Q, with
counts), and the number of runs that had not stopped after ``--max-samples``
rows. Methods:

- skdptest ``PrivateEProcess`` with its defaults (two-sided: ``beta=0.025``);
- skdptest ``PrivateEProcess(schedule="paper", rho=3)`` (the paper's Algorithm 1);
- ``skdptest.baselines.DPSPRT`` (Laplace OutsideInterval on the LLR scale);
- the authors' library ``dpsprt`` (plain ``dp_sprt_laplace``), if installed;
- Wald's SPRT (non-private, boundaries log β and log 1/α);

and, for reference, the first-order scale log(1/α)/R_ε(Q‖P) and the figures
reported in the e-process paper (two-sided, ρ = 3, 100 runs).

Run ``python benchmarks/eprocess_stopping.py`` (200 runs per row and hypothesis,
about a minute per row on one core; the saved table in
``benchmarks/results/eprocess_stopping.txt`` uses ``--runs 1000``).

References: Michel, Basu, Kaufmann, "DP-SPRT: Differentially Private Sequential
Probability Ratio Tests", AISTATS 2026, arXiv:2508.06377.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np
from scipy import stats

import skdptest
from skdptest import optimal_rate
from skdptest.baselines import DPSPRT, SPRT

P0 = 0.3
ROWS = [(0.5, 1.0), (0.5, 2.0), (0.6, 1.0), (0.6, 2.0), (0.7, 0.5), (0.7, 1.0)]
# Two-sided N50/N90 reported by the e-process paper: (DP-SPRT, theirs).
PAPER = {
    (0.5, 1.0): ((480, 860), (290, 510)),
    (0.5, 2.0): ((260, 460), (155, 270)),
    (0.6, 1.0): ((210, 380), (120, 215)),
    (0.6, 2.0): ((115, 205), (68, 120)),
    (0.7, 0.5): ((240, 420), (145, 250)),
    (0.7, 1.0): ((110, 195), (62, 110)),
}


class Runs:
    """Stopping times and decisions of n runs under one hypothesis."""

    def __init__(self, times, decisions):
        self.times = np.asarray(times, dtype=float)
        self.decisions = np.asarray(decisions)

    def quantiles(self):
        return np.quantile(self.times, 0.5), np.quantile(self.times, 0.9)

    def count(self, what):
        return int(np.sum(self.decisions == what))


# ----------------------------------------------------------------------- methods
def run_eprocess(P, Q, mu, eps, alpha, n_runs, max_samples, seed, **kwargs):
    """Feed PrivateEProcess a Bernoulli(mu) stream in growing chunks until it decides."""
    rng = np.random.default_rng(seed)
    seeds = rng.integers(2**32, size=n_runs)
    times, decisions = [], []
    for s in seeds:
        est = skdptest.PrivateEProcess(P, Q, epsilon=eps, alpha=alpha, beta=alpha,
                                       max_samples=max_samples, random_state=int(s),
                                       **kwargs)
        fed, chunk = 0, 256
        while True:
            size = min(chunk, max_samples - fed)
            x = rng.binomial(1, mu, size=(size, 1))
            (est.fit if fed == 0 else est.partial_fit)(x)
            fed += size
            res = est.result_
            if res.decision != "continue" or fed >= max_samples:
                break
            chunk *= 2
        times.append(res.n_samples)
        decisions.append(res.decision)
    return Runs(times, decisions)


def run_baseline(cls, under, P, Q, eps, alpha, n_runs, max_samples, seed):
    kwargs = {} if cls is SPRT else {"epsilon": eps}
    ss = np.random.SeedSequence(seed).spawn(2)
    test = cls(P, Q, alpha=alpha, beta=alpha, random_state=np.random.default_rng(ss[0]),
               **kwargs)
    out = test.simulate(n_runs, under, max_samples, random_state=np.random.default_rng(ss[1]))
    return Runs(out.n_samples_used, out.decision)


def run_dpsprt_library(mu, q, eps, alpha, n_runs, max_samples, seed):
    from dpsprt.core.algorithms import dp_sprt_laplace

    rng = np.random.default_rng(seed)
    names = {1: "reject", -1: "accept", 0: "continue"}
    times, decisions = [], []
    for _ in range(n_runs):
        data = rng.binomial(1, mu, size=max_samples)
        d, t, _ = dp_sprt_laplace(data, P0, q, alpha, alpha, eps,
                                  random_seed=int(rng.integers(2**31)))
        times.append(t)
        decisions.append(names[int(d)])
    return Runs(times, decisions)


def have_eprocess():
    return hasattr(skdptest, "PrivateEProcess")


def have_dpsprt():
    try:
        import dpsprt  # noqa: F401
    except ImportError:
        return False
    return True


# ----------------------------------------------------------------------- table
def row_methods(q, eps, alpha, n, m):
    """(name, fn(under, seed) -> Runs) for the available methods of one row."""
    P, Q = stats.bernoulli(P0), stats.bernoulli(q)
    mean = {"P": P0, "Q": q}
    methods = []
    if have_eprocess():
        methods += [
            ("skdptest PrivateEProcess default", lambda u, s: run_eprocess(
                P, Q, mean[u], eps, alpha, n, m, s)),
            ("skdptest PrivateEProcess rho=3", lambda u, s: run_eprocess(
                P, Q, mean[u], eps, alpha, n, m, s, schedule="paper", rho=3.0)),
        ]
    else:
        methods += [("skdptest PrivateEProcess default", None),
                    ("skdptest PrivateEProcess rho=3", None)]
    methods.append(("skdptest baselines.DPSPRT", lambda u, s: run_baseline(
        DPSPRT, u, P, Q, eps, alpha, n, m, s)))
    if have_dpsprt():
        methods.append(("dpsprt 1.2 DP-SPRT (plain)", lambda u, s: run_dpsprt_library(
            mean[u], q, eps, alpha, n, m, s)))
    methods.append(("SPRT (non-private)", lambda u, s: run_baseline(
        SPRT, u, P, Q, eps, alpha, n, m, s)))
    return methods


def fmt_runs(r_q, r_p, n_runs):
    if r_q is None:
        return "pending (not available)"
    q50, q90 = r_q.quantiles()
    p50, p90 = r_p.quantiles()
    e_p, e_q = r_p.count("reject"), r_q.count("accept")
    cont = r_p.count("continue") + r_q.count("continue")
    return (f"{q50:6.0f} {q90:6.0f} | {p50:6.0f} {p90:6.0f} | "
            f"{e_p / n_runs:6.3f} ({e_p:>3d}) {e_q / n_runs:6.3f} ({e_q:>3d}) | {cont:4d}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200,
                        help="runs per row and hypothesis (the saved table uses 1000)")
    parser.add_argument("--alpha", type=float, default=0.025, help="alpha = beta")
    parser.add_argument("--max-samples", type=int, default=20000, help="stream length")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--rows", type=str, default=None,
                        help="subset of rows, e.g. '0.5:1,0.7:0.5'")
    args = parser.parse_args(argv)
    n, alpha, m = args.runs, args.alpha, args.max_samples
    rows = ROWS if args.rows is None else [
        tuple(float(v) for v in r.split(":")) for r in args.rows.split(",")]

    print(f"# Two-sided stopping times, P = Bernoulli({P0}) vs Q = Bernoulli(q), "
          f"alpha = beta = {alpha}, {n} runs per row and hypothesis, streams of {m} rows")
    print("# N50/N90 = median / 90% quantile of the stopping time; err|P = P(reject | P), "
          "err|Q = P(accept | Q) (counts in brackets); cont = runs not stopped")
    print(f"# skdptest {skdptest.__version__}; dpsprt "
          f"{'installed' if have_dpsprt() else 'NOT installed'}; PrivateEProcess "
          f"{'available' if have_eprocess() else 'pending'}")
    header = (f"{'method':<34} {'N50|Q':>6} {'N90|Q':>6} | {'N50|P':>6} {'N90|P':>6} | "
              f"{'err|P':>12} {'err|Q':>12} | cont")
    ss = np.random.SeedSequence(args.seed)
    t_start = time.time()
    for (q, eps), row_ss in zip(rows, ss.spawn(len(rows)), strict=True):
        P, Q = stats.bernoulli(P0), stats.bernoulli(q)
        rate = optimal_rate(P, Q, eps).rate
        print()
        print(f"## q = {q}, eps = {eps}:  R_eps(Q||P) = {rate:.6f},  "
              f"log(1/alpha)/R_eps = {math.log(1 / alpha) / rate:.1f}")
        print(header)
        seeds = iter(row_ss.generate_state(12))
        methods = row_methods(q, eps, alpha, n, m)
        for name, fn in methods:
            t0 = time.time()
            s_q, s_p = int(next(seeds)), int(next(seeds))
            if fn is None:
                print(f"{name:<34} pending (not available yet)")
                continue
            r_q, r_p = fn("Q", s_q), fn("P", s_p)
            print(f"{name:<34} {fmt_runs(r_q, r_p, n)}   [{time.time() - t0:.0f}s]")
            sys.stdout.flush()
        if not have_dpsprt():
            print(f"{'dpsprt 1.2 DP-SPRT (plain)':<34} not installed")
        (d50, d90), (o50, o90) = PAPER.get((q, eps), ((math.nan,) * 2, (math.nan,) * 2))
        print(f"{'paper: DP-SPRT (reported)':<34} {d50:6.0f} {d90:6.0f}")
        print(f"{'paper: e-process rho=3 (reported)':<34} {o50:6.0f} {o90:6.0f}")
        print(f"{'scale log(1/alpha)/R_eps':<34} {math.log(1 / alpha) / rate:6.1f}")
    print(f"\n# total time {time.time() - t_start:.0f}s")


if __name__ == "__main__":
    main()
