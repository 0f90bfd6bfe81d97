"""
Everyday private tests on a real data set
=========================================

The breast cancer data set shipped with scikit-learn (569 patients) stands in for private
clinical data. Three everyday questions, each answered by a private test whose p-value is
valid at finite n, all charged to one privacy budget:

1. a proportion: is the share of malignant tumours above 30 %? (``DPBinomialTest``)
2. a private A/B-style comparison: do malignant and benign tumours differ in texture?
   (``DPMannWhitneyTest``)
3. a contingency table: is a large radius (above a clinical cut fixed in advance)
   independent of the diagnosis? (``DPContingencyTest``)

The public (non-private) tests are shown beside them for comparison only: on real private
data they would be releases of their own.
"""

# %%
import warnings

import matplotlib.pyplot as plt
import numpy as np
from scipy import stats
from sklearn.datasets import load_breast_cancer

import skdptest as dp

data = load_breast_cancer(as_frame=True)
frame = data.frame
malignant = (frame["target"] == 0).to_numpy().astype(int)  # target 0 is malignant
texture = frame[["mean texture"]].to_numpy()
large = np.where(frame["mean radius"] > 15.0, "large", "small")  # a public cut, in mm
diagnosis = np.where(malignant == 1, "malignant", "benign")

budget = dp.PrivacyBudget(epsilon=3.0)  # the total ε for everything run on these rows

# %%
# 1. A proportion
# ---------------
# Exact private test of H0: θ ≤ 0.3 on the 0/1 column (Tulap noise, the uniformly most
# powerful ε-DP test).
prop = dp.DPBinomialTest(null_proportion=0.3, alternative="greater", epsilon=1.0,
                         budget=budget).test(malignant.reshape(-1, 1))
public = stats.binomtest(int(malignant.sum()), malignant.size, 0.3, alternative="greater")
print(f"private p = {prop.pvalue:.3g}   (public exact binomial p = {public.pvalue:.3g})")

# %%
# 2. A two-group comparison
# -------------------------
# Mann–Whitney with ties broken at random before ranking and public group sizes.
rank = dp.DPMannWhitneyTest(epsilon=1.0, budget=budget).test(texture, diagnosis)
public = stats.mannwhitneyu(texture[malignant == 1, 0], texture[malignant == 0, 0])
print(f"private p = {rank.pvalue:.3g}   (public Mann-Whitney p = {public.pvalue:.3g})")

# %%
# 3. A contingency table
# ----------------------
# Independence of two declared categorical variables; valid whatever the margins.
table = dp.DPContingencyTest(categories=(["small", "large"], ["benign", "malignant"]),
                             epsilon=1.0, budget=budget)
cont = table.test(np.column_stack([large, diagnosis]))
counts = np.array([[np.sum((large == a) & (diagnosis == b)) for b in ("benign", "malignant")]
                   for a in ("small", "large")])
public = stats.chi2_contingency(counts)
print(f"private p = {cont.pvalue:.3g}   (public chi-squared p = {public.pvalue:.3g})")
print(budget)  # three releases of ε = 1: the budget is spent

# %%
# What the noise costs
# --------------------
# Power against n for the texture comparison, simulated on synthetic data shaped like the
# public literature's (normal textures 2 units apart, sd 4): nothing is charged.
from skdptest.power import simulate_power  # noqa: E402


def two_groups(n, rng):
    y = np.repeat(["benign", "malignant"], n // 2)
    X = rng.normal(17.9, 4.0, size=(n, 1)) + 2.0 * (y == "malignant")[:, None]
    return X, y


with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)
    curve = simulate_power(dp.DPMannWhitneyTest(n_resamples=199), two_groups,
                           param_grid={"epsilon": [0.3, 1.0], "n_samples": [40, 80, 160, 320]},
                           n_repeats=40, random_state=0)
fig, ax = plt.subplots(figsize=(5, 3.5))
for eps, sub in curve.groupby("epsilon"):
    ax.plot(sub["n_samples"], sub["rejection_rate"], marker="o", label=f"ε = {eps:g}")
ax.set_xlabel("rows (both groups)")
ax.set_ylabel("power at α = 0.05")
ax.set_xscale("log")
ax.legend()
fig.tight_layout()
