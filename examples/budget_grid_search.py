"""What a grid search on private data costs, read from the privacy ledger.

``GridSearchCV`` fits and scores every candidate on every fold, then refits the
best one. Each fit and each score of a private test is a private release, so
2 candidates x 3 folds cost 2 * 2 * 3 + 1 = 13 releases. The ledger records all
of them, also when the folds run in joblib worker processes (``--n-jobs 2``).

Run: ``python examples/budget_grid_search.py [--n-jobs N]``
"""

import argparse
from collections import Counter

import numpy as np
from scipy import stats
from sklearn.model_selection import GridSearchCV

from skdptest import BudgetExceededError, PrivacyBudget, PrivateEValueTest


def main(n_jobs=1):
    # Synthetic stand-in for private data: 150 rows of 2 features, mean shifted from 0.
    X = np.random.default_rng(0).normal(0.4, 1.0, size=(150, 2))
    grid = {"epsilon": [0.5, 1.0]}
    n_folds = 3
    # The laws of one row under the null and the alternative (public choices, made
    # before the data are seen): no shift against a shift of 0.4 in both features.
    null = stats.multivariate_normal(np.zeros(2), np.eye(2))
    alternative = stats.multivariate_normal(np.full(2, 0.4), np.eye(2))

    budget = PrivacyBudget(epsilon=20.0)
    # random_state is left None: a fixed seed would be copied into every candidate and
    # fold, and equal seeds draw correlated noise (FixedRandomStateWarning says so).
    # error_score="raise": without it GridSearchCV would turn a refused spend
    # (BudgetExceededError) into a NaN score and carry on.
    search = GridSearchCV(
        PrivateEValueTest(null, alternative, budget=budget),
        grid,
        cv=n_folds,
        n_jobs=n_jobs,
        error_score="raise",
    )
    search.fit(X)

    n_candidates = len(grid["epsilon"])
    print(f"GridSearchCV: {n_candidates} candidates x {n_folds} folds, n_jobs={n_jobs}")
    print(f"  expected releases: 2 * {n_candidates} * {n_folds} + 1 = "
          f"{2 * n_candidates * n_folds + 1}")
    print(f"  recorded releases: {len(budget)}")
    for label, count in sorted(Counter(e.label for e in budget.ledger).items()):
        print(f"    {label}: {count}")
    eps_spent = budget.spent[0]
    print(f"  epsilon spent: {eps_spent:g} "
          f"(best candidate epsilon={search.best_params_['epsilon']:g})")
    print(f"  epsilon remaining: {budget.remaining[0]:g} of {budget.epsilon:g}")

    # The same search with a budget too small for it stops at the first refused release.
    small = PrivacyBudget(epsilon=5.0)
    try:
        GridSearchCV(
            PrivateEValueTest(null, alternative, budget=small), grid, cv=n_folds,
            error_score="raise",
        ).fit(X)
    except BudgetExceededError as exc:
        print(f"\nWith a total of epsilon=5: stopped after {len(small)} releases:\n  {exc}")
    return budget


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-jobs", type=int, default=1)
    main(parser.parse_args().n_jobs)
