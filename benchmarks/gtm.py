"""Benchmark of GTM-R on the main grid of gtm.md, side by side with LT-style baselines.

Grid: θ = 1, γ = 1.5 (``approximation``), β = 0.1 (``failure_probability``),
ε ∈ {0.5, 1, 2}, ε_t/ε ∈ {0.02, 0.05, 0.1, 0.25}, p* ∈ {0.01, 0.1, 0.5, 0.9, 0.99};
T = 20 mechanisms.

Streams (mechanisms with closed-form p_t, simulated exactly in law by Poisson
splitting, see ``skdptest.threshold._gtm._simulate_search``):

- *null*: p_t = p̄_t for every t (the hardest stream that must be rejected):
  the false-stop rate must be ≤ β;
- *step*: p_t = p̄_t before t* = 10, then p_t = p* (change at t*): detection
  detection delay (output − t*, over runs that accept at or after t*), misses
  (t* reached but not accepted), and the total evaluations Σ N_t (median, 95th
  percentile).

Every figure of GTM depends on ε only through ε_t/ε (the noise means scale as
1/ε), so the three ε blocks of the table are independent replications.

Columns:

- ``p̄_T``: GTM's rejection level at t = T (exact, δ_t = 0);
  ``LT19 ref`` = p*(β²/T)^{12 ε_t/ε} and ``CLN ref`` = p*β/T are the analytic
  reference lines of the rejection levels of LT19 and CLN+23;
- ``fs``/``miss``/``delay``/``ΣN med``/``ΣN p95``: GTM's measured figures;
- ``const fs``/``const miss``/``const ΣM med``: the same figures with
  ``work="constant"`` (every examined step runs its public M_t evaluations;
  ``ΣM`` = Σ_{t ≤ output} M_t is a function of the output);
- ``bound``: Σ_{t ≤ t*} of the high-probability rate bound
  (``gtm_evaluation_bound``), and ``abstract``:
  Σ_{t ≤ t*} ln(t/β)/(γ − 1)² · max(Λ_t/p*, 1/(1 − p*)) (the abstract's
  O(·) without its constant);
- ``seqLT``: the sequential LT-style tester (LT19 Algorithm 1 on each M_t with
  γ = p*β), run on its own null/step streams at its level p*β²/T: false stops,
  misses and median/95th percentile of its total runs. It is only approximately
  DP (pure loss ≈ 19 ε_t over 10 steps, see ``sequential_lt_privacy``).

Usage::

    python benchmarks/gtm.py            # 2000 repetitions per cell (a few minutes)
    python benchmarks/gtm.py --reps 300 # quick look
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from skdptest.baselines import (
    cln23_reference_p_bar,
    lt19_acceptance_probability,
    lt19_reference_p_bar,
)
from skdptest.threshold import gtm_evaluation_bound, gtm_lambda, gtm_p_bar
from skdptest.threshold._gtm import _simulate_search

THETA, GAMMA, BETA = 1.0, 1.5, 0.1
EPSILONS = (0.5, 1.0, 2.0)
RATIOS = (0.02, 0.05, 0.1, 0.25)
P_STARS = (0.01, 0.1, 0.5, 0.9, 0.99)
T, T_STAR = 20, 10


def gtm_cell(eps, ratio, p_star, reps, rng):
    eps_t = ratio * eps
    kw = dict(epsilon=eps, failure_probability=BETA, approximation=GAMMA, theta=THETA)
    p_bar = [max(gtm_p_bar(t + 1, eps_t, p_star, exact=True, **kw), 0.0) for t in range(T)]
    sim = dict(p_stars=[p_star] * T, epsilons=[eps_t] * T, deltas=[0.0] * T, n_reps=reps,
               rng=rng, **kw)
    acc_null, _ = _simulate_search(p_bar, **sim)
    step = p_bar[:T_STAR - 1] + [p_star] * (T - T_STAR + 1)
    acc, runs = _simulate_search(step, **sim)
    # constant-work mode on the same streams: public M_t evaluations per examined step
    acc_c_null, _ = _simulate_search(p_bar, work="constant", **sim)
    acc_c, work_c = _simulate_search(step, work="constant", **sim)
    t_star = T_STAR - 1  # 0-based
    detected = acc >= t_star
    bound = sum(gtm_evaluation_bound(t, eps_t, p_star, **kw) for t in range(1, T_STAR + 1))
    abstract = sum(
        math.log(t / BETA) / (GAMMA - 1) ** 2
        * max(gtm_lambda(t, eps_t, epsilon=eps, failure_probability=BETA, theta=THETA)
              / p_star,
              1 / (1 - p_star))
        for t in range(1, T_STAR + 1)
    )
    return {
        "p_bar_T": p_bar[-1],
        "fs": float(np.mean(acc_null >= 0)),
        "fs_step": float(np.mean((acc >= 0) & (acc < t_star))),
        "miss": float(np.mean((acc > t_star) | (acc < 0))),
        "delay": float(np.mean(acc[detected] - t_star)) if detected.any() else math.nan,
        "runs_med": float(np.median(runs)),
        "runs_p95": float(np.quantile(runs, 0.95)),
        "bound": bound,
        "abstract": abstract,
        "const_fs": float(np.mean(acc_c_null >= 0)),
        "const_miss": float(np.mean((acc_c > t_star) | (acc_c < 0))),
        "const_work_med": float(np.median(work_c)),
    }


def seq_lt_cell(p_star, reps, rng):
    """Sequential LT tester on its null and step streams (exact simulation)."""
    gamma = p_star * BETA
    p_bar = p_star * BETA**2 / T

    def simulate(p):
        p = np.asarray(p)
        a = lt19_acceptance_probability(p, gamma)
        stop = p + gamma * (1 - p)  # per-run probability that Algorithm 1 halts
        out = np.full(reps, -1)
        runs = np.zeros(reps)
        active = np.ones(reps, dtype=bool)
        for t in range(len(p)):
            idx = np.flatnonzero(active)
            runs[idx] += rng.geometric(stop[t], size=idx.size)
            hit = idx[rng.random(idx.size) < a[t]]
            out[hit] = t
            active[hit] = False
        return out, runs

    null, _ = simulate([p_bar] * T)
    out, runs = simulate([p_bar] * (T_STAR - 1) + [p_star] * (T - T_STAR + 1))
    return {
        "fs": float(np.mean(null >= 0)),
        "miss": float(np.mean((out > T_STAR - 1) | (out < 0))),
        "runs_med": float(np.median(runs)),
        "runs_p95": float(np.quantile(runs, 0.95)),
        "p_bar": p_bar,
    }


def fmt(x):
    if isinstance(x, float) and (x == 0 or math.isnan(x)):
        return f"{x:g}"
    if isinstance(x, float) and (abs(x) >= 1e4 or abs(x) < 1e-2):
        return f"{x:.2e}"
    return f"{x:.3g}" if isinstance(x, float) else str(x)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=2000, help="repetitions per cell")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    start = time.time()
    head = ["eps", "eps_t/eps", "p*", "p̄_T", "LT19 ref", "CLN ref", "fs", "miss", "delay",
            "ΣN med", "ΣN p95", "bound", "abstract", "const fs", "const miss", "const ΣM med",
            "seqLT fs", "seqLT miss", "seqLT ΣN med", "seqLT ΣN p95"]
    print(f"GTM-R main grid: theta={THETA}, approximation={GAMMA}, "
          f"failure_probability={BETA}, T={T}, "
          f"t*={T_STAR}, {args.reps} repetitions per cell\n")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    seq_cache = {}
    for eps in EPSILONS:
        for ratio in RATIOS:
            for p_star in P_STARS:
                g = gtm_cell(eps, ratio, p_star, args.reps, rng)
                if p_star not in seq_cache:
                    seq_cache[p_star] = seq_lt_cell(p_star, args.reps, rng)
                s = seq_cache[p_star]
                row = [eps, ratio, p_star, g["p_bar_T"],
                       lt19_reference_p_bar(T, p_star, BETA, ratio * eps, eps),
                       cln23_reference_p_bar(T, p_star, BETA), g["fs"], g["miss"],
                       g["delay"], g["runs_med"], g["runs_p95"], g["bound"], g["abstract"],
                       g["const_fs"], g["const_miss"], g["const_work_med"], s["fs"],
                       s["miss"], s["runs_med"], s["runs_p95"]]
                print("| " + " | ".join(fmt(float(v)) for v in row) + " |", flush=True)
    print(f"\nsequential LT level p*β²/T; its pure privacy loss is not bounded by ε "
          f"(approximately DP only). Elapsed {time.time() - start:.0f} s.")


if __name__ == "__main__":
    main()
