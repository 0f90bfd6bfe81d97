"""Demo: ``python -m skdptest`` (or the ``skdptest-demo`` console script).

Simulates a small A/B test from the parameters embedded below (nothing is
downloaded), runs the private tests of this package on it, all charged to one
:class:`~skdptest.PrivacyBudget`, and prints each result and the ledger.

The random seeds are fixed so that the demo prints the same numbers every time.
That is for reproducibility only: a real release must use ``random_state=None``.
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats

import skdptest
from skdptest import PrivacyBudget

# A redesigned checkout page (variant B) is shown to 200 users. Historically 30 % of
# users convert; the redesign is worth shipping if it reaches 50 %. The simulation
# uses a true rate of 45 %. Variant A (old page) users are simulated for the
# two-sample and independence demos.
AB_TEST = {
    "baseline_rate": 0.30,  # H0: conversion rate of the old page (public, historical)
    "hoped_rate": 0.50,  # H1: the rate the redesign is hoped to reach
    "true_rate": 0.45,  # used only to simulate variant B
    "n_users": 200,  # per variant
    "minutes_mean": {"A": 3.0, "B": 3.6},  # time on page, log-normal medians (minutes)
    "minutes_sigma": 0.5,
    "seed": 2026,
}

#: ε of each release in the demo, and the total budget they are charged to.
EPSILON_PER_RELEASE = 1.0
TOTAL_EPSILON = 6.0


def simulate(params=AB_TEST):
    """Simulate the A/B data set: conversions of B, and log time on page of A and B.

    Returns
    -------
    converted_b : ndarray of shape (n_users, 1)
        0/1 conversions of the users who saw variant B.
    log_minutes : ndarray of shape (2 * n_users, 1)
        Log time on page, variant A then variant B.
    variant : ndarray of shape (2 * n_users,)
        ``"A"`` or ``"B"``.
    converted : ndarray of shape (2 * n_users,)
        0/1 conversions of all users (A at the baseline rate).
    """
    rng = np.random.default_rng(params["seed"])
    n = params["n_users"]
    converted_a = rng.binomial(1, params["baseline_rate"], size=n)
    converted_b = rng.binomial(1, params["true_rate"], size=n)
    log_minutes = np.concatenate(
        [
            np.log(params["minutes_mean"][v]) + params["minutes_sigma"] * rng.normal(size=n)
            for v in ("A", "B")
        ]
    )[:, None]
    variant = np.repeat(np.array(["A", "B"]), n)
    converted = np.concatenate([converted_a, converted_b])
    return converted_b[:, None].astype(float), log_minutes, variant, converted


def _print_ledger(budget):
    print("\nPrivacy ledger (basic sequential composition: the epsilons add up)")
    print(f"  {'#':>2}  {'release':<38} {'epsilon':>8} {'delta':>7}")
    for i, entry in enumerate(budget.ledger, 1):
        print(f"  {i:>2}  {entry.label:<38} {entry.epsilon:>8.3g} {entry.delta:>7.3g}")
    eps, delta = budget.spent
    left_eps, left_delta = budget.remaining
    print(f"  spent: epsilon={eps:.3g}, delta={delta:.3g}; "
          f"remaining: epsilon={left_eps:.3g}, delta={left_delta:.3g} "
          f"of epsilon={budget.epsilon:.3g}")


def main(argv=None):
    """Run the demo and print the results and the ledger; return 0."""
    parser = argparse.ArgumentParser(
        prog="python -m skdptest",
        description="Private A/B-test demo on simulated data (no download).",
    )
    parser.parse_args(argv)

    params = AB_TEST
    converted_b, log_minutes, variant, converted = simulate(params)
    budget = PrivacyBudget(epsilon=TOTAL_EPSILON)
    eps = EPSILON_PER_RELEASE
    print(f"skdptest {skdptest.__version__} demo: a private A/B test on simulated data")
    print(f"{params['n_users']} users per variant; privacy budget epsilon={TOTAL_EPSILON:g}, "
          f"each release epsilon={eps:g} (replace-one neighbours)\n")

    # 1. Did variant B convert at the baseline rate (H0) or at the hoped rate (H1)?
    test = skdptest.PrivateEValueTest(
        stats.bernoulli(params["baseline_rate"]),
        stats.bernoulli(params["hoped_rate"]),
        epsilon=eps,
        alpha=0.05,
        budget=budget,
        random_state=0,
    )
    result = test.test(converted_b)
    print(f"PrivateEValueTest: H0 rate {params['baseline_rate']:.2f} "
          f"vs H1 rate {params['hoped_rate']:.2f}")
    print(f"  e-value = {result.e_value:.4g} (log e-value {result.log_e_value:.3f} nats); "
          f"reject H0 at alpha={result.alpha:g} (e-value >= {1 / result.alpha:g}): "
          f"{result.reject}")

    # The other families, when this installation has them.
    if hasattr(skdptest, "PrivateEProcess"):
        # The same question asked as the users arrive, 20 a day; the stream stops at the
        # first decision (two-sided: reject H0, or reject H1 and so accept H0).
        proc = skdptest.PrivateEProcess(
            stats.bernoulli(params["baseline_rate"]),
            stats.bernoulli(params["hoped_rate"]),
            epsilon=eps,
            alpha=0.05,
            beta=0.05,
            budget=budget,
            random_state=0,
        )
        days = 0
        for start in range(0, len(converted_b), 20):
            days += 1
            proc.partial_fit(converted_b[start:start + 20])
            if proc.result_.decision != "continue":
                break
        r = proc.result_
        print("PrivateEProcess: the same question, users streamed 20 a day")
        print(f"  decision after day {days}: {r.decision} "
              f"({r.n_samples} users used, e-value {r.e_value:.4g})")
    if hasattr(skdptest, "DPMMDTest"):
        r = skdptest.DPMMDTest(
            epsilon=eps, n_permutations=500, budget=budget, random_state=0
        ).test(log_minutes, variant)
        print("DPMMDTest: is time on page distributed alike under A and B?")
        print(f"  p-value = {r.pvalue:.4g}; reject at alpha={r.alpha:g}: {r.reject}")
    if hasattr(skdptest, "DPHSICTest"):
        r = skdptest.DPHSICTest(
            epsilon=eps, n_permutations=500, budget=budget, random_state=0
        ).test(log_minutes, converted.astype(float))
        print("DPHSICTest: is conversion independent of time on page?")
        print(f"  p-value = {r.pvalue:.4g}; reject at alpha={r.alpha:g}: {r.reject}")
    if hasattr(skdptest, "GeneralizedThresholdMechanism"):
        gtm = skdptest.GeneralizedThresholdMechanism(
            epsilon=eps, budget=budget, random_state=0
        ).fit(np.exp(log_minutes))
        r = gtm.test()
        if r.accepted is None:
            print("GeneralizedThresholdMechanism: private median search found no grid point")
        else:
            c = gtm.mechanisms_[r.accepted].statistic.c
            print("GeneralizedThresholdMechanism: private search for the median time on page")
            print(f"  median <= {c:g} minutes (dyadic grid), after {r.n_examined} steps")

    _print_ledger(budget)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
