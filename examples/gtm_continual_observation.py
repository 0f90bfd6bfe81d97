"""Continual observation with GTM: re-release a private mean only when it goes stale.

A stream of values x_i ∈ [0, 1] arrives day by day (1000 people a day, each
contributing one value once); the mean drifts twice. We publish a private mean
of the last week and keep it as long as it is accurate. Each day t after a
release, the binary mechanism

    M_t = 1{ |Σ_{week before t} (x_i − published)| − n_t τ + Lap(1/ε_t) ≥ 0 }

(a noisy threshold query on a statistic of sensitivity 1) says whether the
published value is stale by more than τ. A
:class:`~skdptest.GeneralizedThresholdMechanism` search over M_{r+1}, M_{r+2},
… (r the day of the last release) finds the first stale day for a cost of ε_gtm
*whatever the number of days examined*; only then is a new mean released
(ε_rel) and a new search started. This is the reduction from continual
observation to batch releases sketched in the GTM abstract.

Privacy accounting (replace-one neighbours: one person's value changes): each
search is ε_gtm-DP, each release ε_rel-DP, and everything composes
sequentially in one :class:`~skdptest.PrivacyBudget` whose ledger is printed.
Re-releasing every day instead would cost 60 ε_rel.

The search is replayed on the whole stream, each M_t reading only the rows of
the days before t: GTM examines the days in order and stops at the first
acceptance, so this has the same law as running it online.

Run ``python examples/gtm_continual_observation.py``; with matplotlib
installed (the ``bench`` extra) it also saves
``gtm_continual_observation.png``.
"""

from __future__ import annotations

import sys

import numpy as np

from skdptest import GeneralizedThresholdMechanism, PrivacyBudget
from skdptest.threshold import NoisyThresholdQuery

N_DAYS, PER_DAY, WINDOW = 60, 1000, 7
TAU = 0.05  # staleness tolerance on the mean
EPS_GTM, EPS_REL = 0.25, 0.25
EPS_T = 0.1 * EPS_GTM  # ε_t of each daily staleness check


def make_stream(rng):
    """Day and value of each row; the mean moves at days 20 and 40."""
    means = np.where(np.arange(N_DAYS) < 20, 0.3, np.where(np.arange(N_DAYS) < 40, 0.45, 0.38))
    day = np.repeat(np.arange(N_DAYS), PER_DAY)
    x = np.clip(rng.normal(means[day], 0.15), 0.0, 1.0)
    return np.column_stack([day, x]), means


def window(X, t):
    """Values of the last WINDOW days before day t (days t−WINDOW … t−1)."""
    mask = (X[:, 0] >= t - WINDOW) & (X[:, 0] < t)
    return X[mask, 1]


class StaleBy:
    """|Σ_{window before t} (x − published)| − n τ: sensitivity 1 for x, published ∈ [0, 1]."""

    def __init__(self, t, published):
        self.t, self.published = t, published

    def __call__(self, X, y):
        w = window(X, self.t)
        return abs(float(np.sum(w - self.published))) - w.size * TAU


def release(X, t, rng, budget):
    """ε_rel-DP mean of the window before day t (Laplace, sensitivity 1/n)."""
    budget.spend(EPS_REL, label=f"release mean at day {t}")
    w = window(X, t)
    return float(np.clip((w.sum() + rng.laplace(0.0, 1.0 / EPS_REL)) / w.size, 0.0, 1.0))


def main(seed=0, plot=True):
    rng = np.random.default_rng(seed)
    X, _ = make_stream(rng)
    budget = PrivacyBudget(epsilon=10.0)
    t = WINDOW
    releases = [(t, release(X, t, rng, budget))]
    while t < N_DAYS:
        days = list(range(t + 1, N_DAYS + 1))
        mechs = [NoisyThresholdQuery(StaleBy(d, releases[-1][1]), 0.0, EPS_T) for d in days]
        gtm = GeneralizedThresholdMechanism(mechs, p_star=0.5, epsilon=EPS_GTM, budget=budget,
                                            random_state=rng.integers(2**32))
        stale = gtm.fit(X).result_.accepted  # first stale day (index), or None
        if stale is None:
            break
        t = days[stale]
        releases.append((t, release(X, t, rng, budget)))

    truth = [float(window(X, d).mean()) for d in range(WINDOW, N_DAYS + 1)]
    print("day  published  true weekly mean at that day")
    for d, v in releases:
        print(f"{d:3d}  {v:9.3f}  {truth[d - WINDOW]:9.3f}")
    spent = budget.spent[0]
    n_searches = sum(e.label.startswith("General") for e in budget.ledger)
    print(f"\n{len(releases)} releases, {n_searches}"
          f" GTM searches: epsilon spent {spent:.2f} (re-releasing daily would cost "
          f"{(N_DAYS - WINDOW + 1) * EPS_REL:.1f}).")
    print("ledger:")
    for e in budget.ledger:
        print(f"  {e.label:45s} eps={e.epsilon:g}")
    published = []
    for d in range(WINDOW, N_DAYS + 1):
        published.append([v for r, v in releases if r <= d][-1])
    stale = np.abs(np.array(published) - np.array(truth))
    print(f"max |published - true weekly mean| over days: {stale.max():.3f} (tau = {TAU})")

    if plot:
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("matplotlib is not installed (pip install skdptest[bench]): no plot.")
            return releases
        days = np.arange(WINDOW, N_DAYS + 1)
        fig, ax = plt.subplots(figsize=(8, 4))
        ax.plot(days, truth, color="0.6", label="true weekly mean (private)")
        ax.step(days, published, where="post", color="C0", label="published (ε-DP)")
        ax.scatter([r for r, _ in releases], [v for _, v in releases], color="C3", zorder=3,
                   label="releases")
        ax.fill_between(days, np.array(published) - TAU, np.array(published) + TAU,
                        step="post", alpha=0.15, color="C0", label="±τ")
        ax.set_xlabel("day")
        ax.set_ylabel("mean")
        ax.set_title(f"GTM-triggered releases: ε spent {spent:.2f}")
        ax.legend(loc="lower right", fontsize=8)
        fig.tight_layout()
        fig.savefig("gtm_continual_observation.png", dpi=120)
        print("saved gtm_continual_observation.png")
    return releases


if __name__ == "__main__":
    main(plot="--no-plot" not in sys.argv)
