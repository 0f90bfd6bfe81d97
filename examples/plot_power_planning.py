"""
Planning ε and n before touching private data
=============================================

Every fit on private data is charged to the privacy budget, so ε and the number of
rows must be chosen *before* the private data are read. This example plans a study
on synthetic data only, with :mod:`skdptest.power`; nothing is charged.

1. The exact power of the e-value test on a Bernoulli pair (``evalue_power``): no
   simulation, the sum over the law of the release, and the smallest n reaching 80 %
   power at each ε (``evalue_solve_n``).
2. The same power by simulation of the estimator itself (``simulate_power``), which
   agrees with the exact figure within its Monte Carlo error.
3. The simulated power of the two-sample ``DPMMDTest`` over a grid of (ε, n), the
   way to plan any of the tests, and its plot (``plot_power``).

Run: ``python examples/plot_power_planning.py`` (about 10-20 s; the plot needs
matplotlib and is skipped without it).
"""

import numpy as np
from scipy import stats

from skdptest import DPMMDTest, PrivateEValueTest
from skdptest.power import evalue_power, evalue_solve_n, plot_power, simulate_power

# %%
# 1. Exact power of the e-value test
# ----------------------------------
# H0: a row is Bernoulli(0.3); H1: Bernoulli(0.4). ``statistic="exact"`` releases the
# count plus discrete Laplace noise and returns the likelihood ratio of that release;
# its power P_Q(E >= 1/α) is a finite sum, computed from the laws alone.
null, alternative = stats.bernoulli(0.3), stats.bernoulli(0.4)
print("exact power at alpha = 0.05")
print("   n   eps=0.25  eps=0.5  eps=1  eps=2")
for n in (100, 200, 400, 800):
    row = [evalue_power(null, alternative, n, eps) for eps in (0.25, 0.5, 1.0, 2.0)]
    print(f"{n:4d}   " + "   ".join(f"{p:6.3f}" for p in row))
for eps in (0.25, 0.5, 1.0, 2.0):
    n = evalue_solve_n(null, alternative, eps, power=0.8).value
    print(f"smallest n with 80 % power at eps = {eps}: {n}")

# %%
# 2. The same number by simulation
# --------------------------------
# ``simulate_power`` fits copies of the estimator on synthetic draws; the estimator's
# own budget (none here) would never be charged.


def bernoulli_rows(n, rng):
    """n synthetic rows from the alternative (y is None: a one-sample test)."""
    return rng.binomial(1, 0.4, size=(n, 1)), None


test = PrivateEValueTest(null, alternative, statistic="exact")
table = simulate_power(test, bernoulli_rows, param_grid={"n_samples": [200],
                                                         "epsilon": [1.0]},
                       n_repeats=1000, random_state=0)
simulated = table["rejection_rate"].iloc[0]
print(f"\nn = 200, eps = 1: exact {evalue_power(null, alternative, 200, 1.0):.3f}, "
      f"simulated {simulated:.3f} ± {table['se'].iloc[0]:.3f} (1000 fits)")

# %%
# 3. Any test: simulated power over a grid
# ----------------------------------------
# Two groups of equal size whose means differ by 0.6 standard deviations. The grid
# key ``n_samples`` goes to the generator, ``epsilon`` to the estimator.


def two_groups(n, rng):
    y = np.arange(n) % 2
    return rng.normal(size=(n, 1)) + 0.6 * y[:, None], y


mmd = DPMMDTest(n_permutations=99, kernel_params={"gamma": 0.5})
grid = {"n_samples": [40, 80, 160], "epsilon": [0.5, 2.0]}
power_table = simulate_power(mmd, two_groups, param_grid=grid, n_repeats=60,
                             random_state=0, verbose=1)
print(power_table[["n_samples", "epsilon", "rejection_rate", "ci_low", "ci_high"]])

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("matplotlib is not installed: no plot")
else:
    ax = plot_power(power_table, x="n_samples", hue="epsilon", target=0.8)
    ax.set_title("dpMMD: simulated power (60 fits per point)")
    plt.show()
