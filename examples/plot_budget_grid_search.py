"""
=========================================
The privacy cost of a grid search
=========================================

``GridSearchCV`` fits and scores every candidate on every fold, then refits the best
one. Each fit and each ``score`` of a private test is a private release, so a search over
2 candidates and 3 folds costs 2 × 2 × 3 + 1 = 13 releases. A shared
:class:`~skdptest.PrivacyBudget` records all of them, also those made by the clones
that ``GridSearchCV`` creates, and refuses the release that would exceed the total.

The command-line version, ``examples/budget_grid_search.py``, prints the same ledger and
can run the folds in worker processes (``--n-jobs 2``).
"""

from collections import Counter

import matplotlib.pyplot as plt
import numpy as np
from scipy import stats
from sklearn.model_selection import GridSearchCV

from skdptest import BudgetExceededError, PrivacyBudget, PrivateEValueTest

# Synthetic stand-in for private data: 150 people's 0/1 outcomes.
X = np.random.default_rng(0).binomial(1, 0.45, size=(150, 1))
grid = {"epsilon": [0.5, 1.0]}
# The laws of one row under the null and the alternative (public choices).
null, alternative = stats.bernoulli(0.3), stats.bernoulli(0.5)

# %%
# The ledger of one search
# ------------------------
# ``error_score="raise"``: without it GridSearchCV would turn a refused spend into a NaN
# score and carry on. ``random_state`` is left ``None``: ``GridSearchCV`` copies a fixed
# seed into every candidate and fold, and equal seeds draw correlated noise.

budget = PrivacyBudget(epsilon=20.0)
search = GridSearchCV(PrivateEValueTest(null, alternative, budget=budget), grid, cv=3,
                      error_score="raise")
search.fit(X)
print(f"recorded releases: {len(budget)} (expected 2 * 2 * 3 + 1 = 13)")
for label, count in sorted(Counter(e.label for e in budget.ledger).items()):
    print(f"  {label}: {count}")
print(f"epsilon spent {budget.spent[0]:g} of {budget.epsilon:g}; "
      f"best epsilon {search.best_params_['epsilon']:g}")

# %%
# Cumulative ε, release by release
# --------------------------------
# The spends add up (basic sequential composition): the search cost 2 × 3 × (0.5 + 1)
# for the folds plus the refit of the best candidate.

spent = np.cumsum([e.epsilon for e in budget.ledger])
kinds = [e.label.rsplit(".", 1)[-1] for e in budget.ledger]
fig, ax = plt.subplots(figsize=(7, 4))
ax.step(np.arange(1, len(spent) + 1), spent, where="post", color="k", lw=1)
for kind, marker in [("fit", "o"), ("score", "s")]:
    idx = [i for i, k in enumerate(kinds) if k == kind]
    ax.plot(np.array(idx) + 1, spent[idx], marker, label=kind)
ax.axhline(budget.epsilon, color="tab:red", ls="--", label="total ε of the budget")
ax.set_xlabel("release number (ledger order)")
ax.set_ylabel("cumulative ε")
ax.set_title("GridSearchCV, 2 candidates × 3 folds")
ax.legend()
fig.tight_layout()

# %%
# A budget too small for the search
# ---------------------------------
# The search stops at the first refused release; nothing is computed for it.

small = PrivacyBudget(epsilon=5.0)
try:
    GridSearchCV(PrivateEValueTest(null, alternative, budget=small), grid,
                 cv=3, error_score="raise").fit(X)
except BudgetExceededError as exc:
    print(f"with a total of epsilon=5: stopped after {len(small)} releases "
          f"(spent {small.spent[0]:g}): {exc}")
plt.show()
