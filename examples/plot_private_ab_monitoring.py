"""
==========================================================
Monitoring a private A/B conversion rate, anytime-valid
==========================================================

Two variants of a page are shown to disjoint users, who convert (1) or not (0). We
watch both conversion rates as users arrive, with a
:class:`~skdptest.PrivateConfidenceSequence` per arm: ε-DP for the whole stream
(replace-one neighbours; each user is in one arm, so the two arms together are ε-DP
too), and **time-uniform**: with probability at least 0.975 an arm's interval covers
its rate at every release time simultaneously, so we may look after every batch and
stop whenever we like without losing coverage (a fixed-n interval re-checked this way
would not keep its level).

With each arm at level 0.975, both cover together with probability at least 0.95
(union bound), and so does the interval for the difference B − A,
[lower_B − upper_A, upper_B − lower_A]. Intervals change only at the public batch
ends (10, 15, 22, ... 100, 147, ...: ratio 10^(1/6)); between ends the last one
stands. The data are simulated here; a real stream would use ``random_state=None``.
"""

import matplotlib.pyplot as plt
import numpy as np

from skdptest import PrivateConfidenceSequence

rng = np.random.default_rng(0)
rates = {"A": 0.10, "B": 0.16}
n_users, chunk = 3200, 100
arms = {name: PrivateConfidenceSequence(epsilon=1.0, confidence_level=0.975, random_state=i)
        for i, name in enumerate(rates)}

for _ in range(n_users // chunk):
    for name, cs in arms.items():
        cs.partial_fit(rng.binomial(1, rates[name], size=(chunk, 1)))

for name, cs in arms.items():
    lower, upper = cs.result_
    print(f"arm {name}: [{lower:.3f}, {upper:.3f}] after {cs.result_.n_samples} users "
          f"(true rate {rates[name]})")

# %%
# The released intervals over time, and the difference
# ----------------------------------------------------
# ``intervals_`` holds one row ``[t, lower, upper]`` per release. The difference's
# interval is formed at the release times the two arms share (the same public
# schedule).

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
for (name, cs), colour in zip(arms.items(), ["tab:blue", "tab:orange"], strict=True):
    iv = cs.intervals_
    ax1.fill_between(iv[:, 0], iv[:, 1], iv[:, 2], step="post", alpha=0.3, color=colour,
                     label=f"arm {name} (97.5 % CS)")
    ax1.axhline(rates[name], color=colour, ls="--", lw=1)
ax1.set_xscale("log")
ax1.set_xlabel("users per arm")
ax1.set_ylabel("conversion rate")
ax1.set_ylim(0, 0.5)
ax1.legend()

a, b = arms["A"].intervals_, arms["B"].intervals_
m = min(len(a), len(b))
t, diff_lo, diff_hi = a[:m, 0], b[:m, 1] - a[:m, 2], b[:m, 2] - a[:m, 1]
ax2.fill_between(t, diff_lo, diff_hi, step="post", alpha=0.3, color="tab:green",
                 label="B − A (95 % CS)")
ax2.axhline(rates["B"] - rates["A"], color="tab:green", ls="--", lw=1)
ax2.axhline(0.0, color="black", lw=0.8)
above = np.flatnonzero(diff_lo > 0)
if above.size:
    ax2.axvline(t[above[0]], color="grey", ls=":")
    print(f"B beats A from {int(t[above[0]])} users per arm on (the difference's "
          "interval excludes 0; valid at that data-dependent time)")
ax2.set_xscale("log")
ax2.set_xlabel("users per arm")
ax2.set_ylabel("difference of conversion rates")
ax2.legend()
fig.tight_layout()
plt.show()
