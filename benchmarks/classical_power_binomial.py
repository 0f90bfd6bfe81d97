"""Power of DPBinomialTest and DPSubsampleAggregateTest at ε = 1, α = 0.05.

Part 1, the binomial test (power computed EXACTLY, not simulated): for each design the
smallest n with power >= 0.8 of

- DPBinomialTest one-sided (the ε-DP UMP test), from the p-value's rejection threshold
  of the release and Σ_x pmf_θ1(x) P(x + N >= c) — beside the UMP formula of Awan and
  Slavković, φ(x) = F(x − m) with E_θ0 φ = α (the two must agree), and checked by
  simulating fitted estimators at the n found;
- the non-private exact binomial test (scipy.stats.binomtest, not randomised) and the
  randomised UMP binomial test (the ε → ∞ limit);
- two-sided: the unbiased test of the release (this library) beside the UMPU test of
  the count, φ(x) = F(|x − k| − s) (not a function of one release: the power it would
  have, for reference).

Part 2, the test of tests (one-sample location, d = 0.4, N(d, 1) rows, default t-test
inner test): smallest n whose planned power (exact, from the noncentral t law) reaches
0.8, checked by simulating fitted estimators; the public t-test (noncentral t); the
published anchors (test of tests 200, public t-test 52; issue 19).

Run: python benchmarks/classical_power_binomial.py  (a few minutes on 2 cores); writes
benchmarks/results/classical_power_binomial.txt.
"""

from __future__ import annotations

import math
import time
import warnings
from pathlib import Path

import numpy as np
from scipy import optimize, stats

from skdptest import DPBinomialTest, DPSubsampleAggregateTest, FixedRandomStateWarning
from skdptest.classical._aggregate import plan_subsets
from skdptest.classical._proportion import tulap_rate
from skdptest.classical._tulap import _centre_of, binomial_pvalue, tulap_cdf

ALPHA, EPSILON, TARGET = 0.05, 1.0, 0.8
RATE = tulap_rate(EPSILON)
OUT = Path(__file__).parent / "results" / "classical_power_binomial.txt"


def dp_one_sided_power(n, theta0, theta1):
    """Exact power of the released test: threshold where the p-value equals α."""
    span = n + 80.0 / RATE + 10
    c = optimize.brentq(lambda z: binomial_pvalue(z, n, theta0, RATE, "greater") - ALPHA,
                        -span, span, xtol=1e-12)
    x = np.arange(n + 1)
    return float(np.sum(stats.binom.pmf(x, n, theta1) * tulap_cdf(x - c, RATE)))


def ump_formula_power(n, theta0, theta1):
    """Awan and Slavković's UMP test φ(x) = F(x − m), E_θ0 φ = α."""
    x = np.arange(n + 1)
    p0 = stats.binom.pmf(x, n, theta0)
    m = optimize.brentq(lambda s: np.sum(p0 * tulap_cdf(x - s, RATE)) - ALPHA,
                        -100, n + 100, xtol=1e-12)
    return float(np.sum(stats.binom.pmf(x, n, theta1) * tulap_cdf(x - m, RATE)))


def exact_binomial_power(n, theta0, theta1):
    """scipy's exact one-sided binomial test (not randomised)."""
    k = int(stats.binom.isf(ALPHA, n, theta0)) + 1  # smallest k with P0(X >= k) <= α
    while k > 0 and stats.binom.sf(k - 2, n, theta0) <= ALPHA:
        k -= 1
    while stats.binom.sf(k - 1, n, theta0) > ALPHA:
        k += 1
    return float(stats.binom.sf(k - 1, n, theta1))


def randomised_ump_power(n, theta0, theta1):
    k = int(stats.binom.isf(ALPHA, n, theta0))  # P0(X > k) <= α < P0(X >= k)
    while stats.binom.sf(k, n, theta0) > ALPHA:
        k += 1
    while k > 0 and stats.binom.sf(k - 1, n, theta0) <= ALPHA:
        k -= 1
    gamma = (ALPHA - stats.binom.sf(k, n, theta0)) / stats.binom.pmf(k, n, theta0)
    return float(stats.binom.sf(k, n, theta1) + gamma * stats.binom.pmf(k, n, theta1))


def dp_two_sided_power(n, theta0, theta1):
    span = n + 80.0 / RATE + 10
    centre = _centre_of(n, theta0, RATE)[0]

    def p(z):
        return binomial_pvalue(z, n, theta0, RATE, "two-sided") - ALPHA

    c1 = optimize.brentq(p, -span, centre, xtol=1e-10)
    c2 = optimize.brentq(p, centre, span, xtol=1e-10)
    x = np.arange(n + 1)
    pmf = stats.binom.pmf(x, n, theta1)
    return float(np.sum(pmf * (tulap_cdf(c1 - x, RATE) + tulap_cdf(x - c2, RATE))))


def folded_umpu_power(n, theta0, theta1):
    """UMPU of the count (Awan and Slavković 2020): φ(x) = F(|x − k| − s) with
    E_θ0 φ = α and E_θ0[(X − nθ0) φ] = 0."""
    x = np.arange(n + 1)
    p0, d = stats.binom.pmf(x, n, theta0), x - n * theta0

    def phi(k, s):
        return tulap_cdf(np.abs(x - k) - s, RATE)

    def s_of(k):
        return optimize.brentq(lambda s: np.sum(p0 * phi(k, s)) - ALPHA, -200, n + 200,
                               xtol=1e-12)

    k = optimize.brentq(lambda k: np.sum(p0 * d * phi(k, s_of(k))), n * theta0 - 3 * n ** 0.5
                        - 20, n * theta0 + 3 * n ** 0.5 + 20, xtol=1e-10)
    return float(np.sum(stats.binom.pmf(x, n, theta1) * phi(k, s_of(k))))


def smallest_n(power, theta0, theta1, lo=5, hi=5000):
    n = lo
    while n <= hi:
        if power(n, theta0, theta1) >= TARGET:
            return n
        n += 1 if n < 200 else 5
    return None


def simulated_power(make_estimator, make_data, reps, seed):
    rng = np.random.default_rng(seed)
    hits = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FixedRandomStateWarning)
        for _ in range(reps):
            X = make_data(rng)
            hits += make_estimator(rng).fit(X).result_.reject
    p = hits / reps
    return p, math.sqrt(p * (1 - p) / reps)


def main():
    lines = []

    def say(text=""):
        print(text, flush=True)
        lines.append(text)

    start = time.time()
    say(f"DP binomial and test-of-tests power; epsilon = {EPSILON} (Tulap rate {RATE}), "
        f"alpha = {ALPHA}, target power {TARGET}")
    say()
    say("Part 1: one-sample proportion, exact power (n for 80 % power)")
    say(f"{'design':<26}{'DP UMP (ours)':>14}{'UMP formula':>12}{'exact binom':>12}"
        f"{'rand. UMP':>10}  check: power at n (exact / simulated ± SE)")
    for theta0, theta1 in ((0.5, 0.6), (0.3, 0.5), (0.1, 0.2), (0.9, 0.97)):
        n_dp = smallest_n(dp_one_sided_power, theta0, theta1)
        n_formula = smallest_n(ump_formula_power, theta0, theta1)
        n_exact = smallest_n(exact_binomial_power, theta0, theta1)
        n_rand = smallest_n(randomised_ump_power, theta0, theta1)
        exact = dp_one_sided_power(n_dp, theta0, theta1)
        assert abs(exact - ump_formula_power(n_dp, theta0, theta1)) < 1e-9
        sim, se = simulated_power(
            lambda rng, t=theta0: DPBinomialTest(null_proportion=t, alternative="greater",
                                                 random_state=rng),
            lambda rng, n=n_dp, t=theta1: rng.binomial(1, t, size=(n, 1)).astype(float),
            600, 1)
        say(f"{f'greater θ0={theta0} θ1={theta1}':<26}{n_dp:>14}{n_formula:>12}{n_exact:>12}"
            f"{n_rand:>10}  {exact:.4f} / {sim:.3f} ± {se:.3f}")
    say()
    say(f"{'two-sided design':<26}{'DP unbiased':>14}{'UMPU count':>12}{'power gap at n':>16}")
    for theta0, theta1 in ((0.5, 0.6), (0.3, 0.45)):
        n_dp = smallest_n(dp_two_sided_power, theta0, theta1)
        n_umpu = smallest_n(folded_umpu_power, theta0, theta1)
        gap = folded_umpu_power(n_dp, theta0, theta1) - dp_two_sided_power(n_dp, theta0,
                                                                             theta1)
        say(f"{f'θ0={theta0} θ1={theta1}':<26}{n_dp:>14}{n_umpu:>12}{gap:>16.4f}")
    say("(UMPU count: the power the count-domain UMPU test would have; it is not a function")
    say(" of one Tulap release, so no p-value of the release realises it.)")
    say()

    say("Part 2: test of tests, one-sample location d = 0.4, N(d, 1) rows, t-test inside")
    d = 0.4
    n = 40
    while plan_subsets(n, EPSILON, ALPHA, effect_size=d)[2] < TARGET:
        n += 5
    m, a0, planned = plan_subsets(n, EPSILON, ALPHA, effect_size=d)
    sim, se = simulated_power(
        lambda rng: DPSubsampleAggregateTest(effect_size=d, random_state=rng),
        lambda rng: rng.normal(d, 1.0, size=(n, 1)), 600, 2)
    sim200, se200 = simulated_power(
        lambda rng: DPSubsampleAggregateTest(effect_size=d, random_state=rng),
        lambda rng: rng.normal(d, 1.0, size=(200, 1)), 600, 3)
    n_t = 3
    while True:
        crit = stats.t.ppf(1 - ALPHA / 2, n_t - 1)
        nc = d * math.sqrt(n_t)
        if stats.nct.sf(crit, n_t - 1, nc) + stats.nct.cdf(-crit, n_t - 1, nc) >= TARGET:
            break
        n_t += 1
    say(f"{'method':<44}{'n for 80 %':>11}  notes")
    say(f"{'DPSubsampleAggregateTest (planned power)':<44}{n:>11}  m = {m}, alpha0 = {a0}, "
        f"planned {planned:.3f}, simulated {sim:.3f} ± {se:.3f}")
    say(f"{'  at n = 200 (the published anchor)':<44}{200:>11}  simulated power "
        f"{sim200:.3f} ± {se200:.3f}")
    say(f"{'public two-sided t-test (noncentral t)':<44}{n_t:>11}")
    say(f"{'published test of tests [issue 19]':<44}{200:>11}")
    say(f"{'published public t-test [issue 19]':<44}{52:>11}")
    say()
    say(f"run time {time.time() - start:.0f} s")
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
