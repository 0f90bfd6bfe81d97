"""
=====================================================
Private e-process paths and stopping times vs DP-SPRT
=====================================================

A :class:`~skdptest.PrivateEProcess` watches a stream of 0/1 outcomes and stops as soon
as its released e-process crosses ``1 / alpha`` (reject the null P) or, in two-sided mode,
its e-process against the alternative crosses ``1 / beta`` (accept P). It is ε-DP for the
whole stream under replace-one neighbours, and anytime valid: under P the probability
that the path *ever* crosses ``1 / alpha`` is at most ``alpha`` (Ville's inequality).

We draw streams from P = Bernoulli(0.3) and Q = Bernoulli(0.6), plot the released
paths, and compare the stopping times under Q with those of DP-SPRT
(:class:`skdptest.baselines.DPSPRT`, Michel, Basu and Kaufmann), at the same ε and the
same error targets α = β = 0.025. The data are simulated here; a real stream would use
``random_state=None``.
"""

import matplotlib.pyplot as plt
import numpy as np
from scipy import stats

from skdptest import PrivateEProcess
from skdptest.baselines import DPSPRT

null, alternative = stats.bernoulli(0.3), stats.bernoulli(0.6)
epsilon, alpha, beta = 1.0, 0.025, 0.025
max_rows = 2000
rng = np.random.default_rng(0)


def run_eprocess(law, seed):
    """Fit a two-sided private e-process on one simulated stream drawn from ``law``."""
    X = law.rvs(size=(max_rows, 1), random_state=rng)
    est = PrivateEProcess(null, alternative, epsilon=epsilon, alpha=alpha, beta=beta,
                          random_state=seed)
    return est.fit(X).result_


# %%
# Released paths
# --------------
# The e-process is released at batch ends only (the batch sizes are a public schedule),
# so each path is a step function of the number of rows read. Under Q it climbs to
# log(1/α); under P it drifts down and the e-process against Q stops the stream.

fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
for ax, (name, law) in zip(axes, [("under Q (H1 true)", alternative),
                                  ("under P (H0 true)", null)], strict=True):
    for seed in range(20):
        r = run_eprocess(law, seed)
        colour = {"reject": "tab:red", "accept": "tab:blue"}.get(r.decision, "grey")
        ax.step((0, *r.batch_ends), (0.0, *r.log_e_process), where="post",
                color=colour, alpha=0.6)
    ax.axhline(np.log(1 / alpha), color="k", ls="--", label="log(1/α)")
    ax.set_title(f"log e-process against P, {name}")
    ax.set_xlabel("rows read")
axes[0].set_ylabel("released log e-value (nats)")
axes[0].legend(loc="upper left")
fig.tight_layout()

# %%
# Stopping times under Q
# ----------------------
# 200 streams each. The e-process batches its rows and spends its ε once for the whole
# stream; DP-SPRT adds fresh Laplace noise at every row and needs conservative boundaries,
# so it stops much later at the same ε.

n_runs = 200
ep = [run_eprocess(alternative, 1000 + i) for i in range(n_runs)]
ep_times = np.array([r.n_samples for r in ep])
ep_reject = np.mean([r.decision == "reject" for r in ep])

sprt = DPSPRT(null, alternative, epsilon=epsilon, alpha=alpha, beta=beta, random_state=0)
runs = sprt.simulate(n_runs, under="Q", max_samples=20_000, random_state=1)
sprt_times = np.asarray(runs.n_samples_used)
sprt_reject = np.mean(runs.decision == "reject")

fig, ax = plt.subplots(figsize=(6, 4))
for times, label in [(ep_times, "PrivateEProcess"), (sprt_times, "DP-SPRT")]:
    x = np.sort(times)
    ax.step(x, np.arange(1, len(x) + 1) / len(x), where="post",
            label=f"{label} (median {np.median(times):.0f} rows)")
ax.set_xscale("log")
ax.set_xlabel("stopping time (rows)")
ax.set_ylabel("ECDF")
ax.set_title(f"Stopping times under Q, ε = {epsilon:g}, α = β = {alpha:g}")
ax.legend()
fig.tight_layout()

print(f"PrivateEProcess: median stop {np.median(ep_times):.0f} rows, "
      f"rejected P in {ep_reject:.1%} of streams")
print(f"DP-SPRT:         median stop {np.median(sprt_times):.0f} rows, "
      f"rejected P in {sprt_reject:.1%} of streams")

plt.show()
