"""Test helpers: a minimal private estimator and a worker for budget races.

Importable by worker processes (loky, multiprocessing spawn), which is why they
live in a module of their own rather than in a test file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from numbers import Real

import numpy as np

from skdptest import BudgetExceededError, PrivacyBudget
from skdptest._base import BasePrivateTest
from skdptest._noise import laplace
from skdptest._params import InstanceOf, Interval, NoneValue, RandomState
from skdptest._results import TestResult


@dataclass(frozen=True, kw_only=True)
class ToyResult(TestResult):
    """Result of :class:`ToyMeanTest` (a private clipped mean)."""

    statistic: float
    method: str = "ToyMeanTest"


class ToyMeanTest(BasePrivateTest):
    """Laplace-noised mean of the row means clipped to [-bound, bound].

    Replace-one sensitivity of the mean of n clipped values is 2·bound/n, so the
    Laplace scale 2·bound/(n·ε) makes each release ε-DP. The decision
    (``statistic > 0``) is a toy, not a calibrated test: this class exists only
    to exercise the estimator contract and the budget.
    """

    def __init__(self, *, epsilon=1.0, bound=1.0, alpha=0.05, budget=None, random_state=None):
        self.epsilon = epsilon
        self.bound = bound
        self.alpha = alpha
        self.budget = budget
        self.random_state = random_state

    _parameter_constraints = {
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "bound": [Interval(Real, 0, None, closed="neither")],
        "alpha": [Interval(Real, 0, 1, closed="neither")],
        "budget": [NoneValue(), InstanceOf(PrivacyBudget)],
        "random_state": [RandomState()],
    }

    def _release(self, prep, rng):
        p, X = prep.params, prep.X
        n = X.shape[0]
        values = np.clip(X.mean(axis=1), -p["bound"], p["bound"])
        statistic = float(values.mean() + laplace(rng, 2.0 * p["bound"] / (n * p["epsilon"])))
        return ToyResult(statistic=statistic, reject=bool(statistic > 0), alpha=p["alpha"],
                         epsilon=p["epsilon"], delta=0.0, n_samples=n)

    def _score_value(self, result):
        return result.statistic


def try_spend(budget, step):
    """Spend ``step`` on ``budget`` under a label naming this process: whether it was
    recorded (False: refused, over the limit)."""
    try:
        budget.spend(step, label=f"race pid={os.getpid()}")
    except BudgetExceededError:
        return False
    return True


def race_spend(budget, step, n_tries, barrier, queue):
    """Try ``n_tries`` spends of ``step`` on ``budget``; report (recorded, refused)."""
    barrier.wait()
    recorded = sum(try_spend(budget, step) for _ in range(n_tries))
    queue.put((recorded, n_tries - recorded))
