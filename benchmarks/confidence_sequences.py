"""Widths and coverage of the private confidence sequence, beside non-private anchors.

Bernoulli(p) streams, α = 0.05. For each stream the rows are drawn once; every
method sees the same rows:

- skdptest ``PrivateConfidenceSequence`` at ε ∈ {0.1, 1, 8 (noise negligible)},
  default and ``horizon=10**4``: the width of the interval *reported* at t (the
  running intersection at the last batch end <= t; batches end at every power of
  ten, or at the horizon), computed by the estimator's own inversion
  (``_Plan.interval``) on the noisy batch counts that the estimator releases (count
  of the batch's rows + exact discrete Laplace noise);
- a non-private Bernoulli confidence sequence: the uniform-prior (beta-binomial)
  mixture, {p : B(S+1, t−S+1) / (p^S (1−p)^(t−S)) < 1/α}, evaluated at every t;
- the fixed-n Wald interval p̂ ± 1.96 sqrt(p̂(1−p̂)/t) (not time-uniform).

Also printed: how much is lost between batch ends (the width at t = 9999, still the
interval of the end at 6813, against the width at the end t = 10^4; the non-private
CS is evaluated at every t), and time-uniform coverage over 10^4
steps (``--coverage N`` streams per setting; a stream misses when the leaf of the
true mean is excluded at some release, which over-counts the misses of the
reported interval; see tests/evalue/test_confseq.py), with a mutant that ignores
the noise in the inversion.

Run ``python benchmarks/confidence_sequences.py`` (20 streams per width row, a few
minutes on one core); the saved table in
``benchmarks/results/confidence_sequences.txt`` states its own arguments.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy import optimize, special

from skdptest._noise import discrete_laplace
from skdptest.evalue._confseq import _Plan, batch_ends
from skdptest.evalue._csbounds import MassCache, leaf_excluded

#: 9999: the interval in force just before the batch end at 10^4 (released at 6813):
#: against t = 10^4 it shows what is lost between batch ends.
TIMES = (100, 1000, 9999, 10_000)


def private_widths(rows, eps, horizon, alpha=0.05, rng=None):
    """Widths reported at TIMES (running intersection at the last end <= t), and the
    width at 0.999 x each end against the width at that end (loss between ends)."""
    params = {"bounds": (0.0, 1.0), "epsilon": eps, "confidence_level": 1 - alpha,
              "horizon": horizon}
    plan = _Plan(params)
    ends = []
    for e in plan.ends():
        if e > rows.size:
            break
        ends.append(e)
    ns = np.diff([0] + ends)
    counts = np.add.reduceat(rows[:ends[-1]], np.r_[0, ends[:-1]])
    ys = counts + discrete_laplace(rng, plan.rate, size=counts.size)
    cache, lo, hi, path = MassCache(), 0.0, 1.0, []
    for k in range(len(ends)):
        a, b = plan.interval(ys[:k + 1], ns[:k + 1], cache)
        new_lo, new_hi = max(lo, a), min(hi, b)
        lo, hi = (new_lo, new_hi) if new_lo <= new_hi else (a, b)
        path.append((ends[k], lo, hi))
    out = []
    for t in TIMES:
        last = [w for w in path if w[0] <= t]
        out.append(last[-1][2] - last[-1][1] if last else 1.0)
    return out


def mixture_cs_width(s, t, alpha=0.05):
    """Non-private uniform-prior mixture CS width at count s of t rows."""
    log_n = special.betaln(s + 1, t - s + 1)

    def g(p):
        return log_n - (special.xlogy(s, p) + special.xlog1py(t - s, -p)) - math.log(1 / alpha)

    mle = s / t
    lo = 0.0 if g(max(mle, 1e-300)) >= 0 or g(1e-300) < 0 else \
        optimize.brentq(g, 1e-300, max(mle, 1e-300))
    hi = 1.0 if g(1 - 1e-16) < 0 else optimize.brentq(g, min(mle, 1 - 1e-16), 1 - 1e-16)
    return hi - lo


def wald_width(s, t):
    p = s / t
    return 2 * 1.959964 * math.sqrt(p * (1 - p) / t)


def coverage(p, eps, streams, seed, mutant=False, horizon=10_000, alpha=0.05):
    params = {"bounds": (0.0, 1.0), "epsilon": eps, "confidence_level": 1 - alpha,
              "horizon": None}
    plan = _Plan(params)
    rng = np.random.default_rng(seed)
    ends = []
    for e in batch_ends(plan.rate):
        if e > horizon:
            break
        ends.append(e)
    ns = np.diff([0] + ends)
    S = rng.binomial(ns, p, size=(streams, ns.size))
    Y = S + discrete_laplace(rng, plan.rate, size=S.shape)
    inv_rate = 30.0 if mutant else plan.rate
    miss = 0
    for i in range(streams):
        cache = MassCache()
        for k in range(1, ns.size + 1):
            if leaf_excluded(Y[i, :k], ns[:k], inv_rate, alpha, plan.prior, p, cache):
                miss += 1
                break
    return miss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", type=int, default=20)
    ap.add_argument("--coverage", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    p = 0.3
    rng = np.random.default_rng(args.seed)
    data = rng.binomial(1, p, size=(args.streams, max(TIMES)))
    print(f"# Bernoulli(p = {p}), alpha = 0.05, {args.streams} streams (same rows for every "
          "method); mean width at t (sd of the mean in brackets)")
    print(f"{'method':42s}" + "".join(f"{'t=' + str(t):>18s}" for t in TIMES))

    def row(name, widths, secs=None):
        w = np.asarray(widths)
        m, se = w.mean(axis=0), w.std(axis=0, ddof=1) / math.sqrt(len(w))
        cells = "".join(f"{mi:>11.4f} ({si:.4f})" for mi, si in zip(m, se, strict=True))
        print(f"{name:42s}{cells}" + (f"   [{secs:.0f}s]" if secs is not None else ""),
              flush=True)

    cum = np.cumsum(data, axis=1)
    row("non-private mixture CS (uniform prior)",
        [[mixture_cs_width(int(c[t - 1]), t) for t in TIMES] for c in cum])
    row("non-private Wald (fixed n, not uniform)",
        [[wald_width(int(c[t - 1]), t) for t in TIMES] for c in cum])
    for eps in (8.0, 1.0, 0.1):
        for horizon in (None, 10_000):
            t0 = time.time()
            noise_rng = np.random.default_rng(args.seed + 1)
            widths = [private_widths(x, eps, horizon, rng=noise_rng) for x in data]
            row(f"PrivateConfidenceSequence eps={eps:g} h={horizon}", widths,
                time.time() - t0)
    if args.coverage:
        print(f"\n# Time-uniform coverage over 10^4 steps, {args.coverage} streams per "
              "setting (miss = leaf of the true mean excluded at some release)")
        for eps in (1.0, 0.1):
            for pp in (0.01, 0.3, 0.5):
                t0 = time.time()
                m = coverage(pp, eps, args.coverage, args.seed + 7)
                f = m / args.coverage
                se = math.sqrt(0.05 * 0.95 / args.coverage)
                print(f"p={pp:<5g} eps={eps:<4g} miss rate {f:.4f} ({m}/{args.coverage}); "
                      f"alpha + 2 SE = {0.05 + 2 * se:.4f}   [{time.time() - t0:.0f}s]",
                      flush=True)
        m = coverage(0.3, 0.1, min(args.coverage, 200), args.seed + 9, mutant=True)
        print(f"mutant (noise ignored in the inversion) p=0.3 eps=0.1: miss rate "
              f"{m / min(args.coverage, 200):.3f}")


if __name__ == "__main__":
    main()
