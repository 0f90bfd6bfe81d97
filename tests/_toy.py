"""Test helpers: a minimal private estimator and a worker for budget races.

Importable by worker processes (loky, multiprocessing spawn), which is why they
live in a module of their own rather than in a test file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from skdptest import BudgetExceededError
from skdptest._base import BasePrivateTest
from skdptest._noise import laplace
from skdptest._validation import check_alpha, check_epsilon, check_real


@dataclass(frozen=True)
class ToyResult:
    """Result of :class:`ToyMeanTest` (a private clipped mean)."""

    statistic: float
    reject: bool
    alpha: float
    epsilon: float
    delta: float
    n_samples: int
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

    def _check_params(self):
        check_epsilon(self.epsilon)
        check_real(self.bound, "bound", low=0.0, low_open=True)
        check_alpha(self.alpha)

    def _privacy_cost(self):
        return float(self.epsilon), 0.0

    def _noisy_mean(self, X, rng):
        n = X.shape[0]
        values = np.clip(X.mean(axis=1), -self.bound, self.bound)
        return float(values.mean() + laplace(rng, 2.0 * self.bound / (n * self.epsilon)))

    def _fit_private(self, X, y, rng):
        statistic = self._noisy_mean(X, rng)
        return ToyResult(
            statistic=statistic,
            reject=bool(statistic > 0),
            alpha=float(self.alpha),
            epsilon=float(self.epsilon),
            delta=0.0,
            n_samples=int(X.shape[0]),
        )

    def _score_private(self, X, y, rng):
        return self._noisy_mean(X, rng)


def race_spend(budget, step, n_tries, barrier, queue):
    """Try ``n_tries`` spends of ``step`` on ``budget``; report (recorded, refused)."""
    barrier.wait()
    recorded = refused = 0
    for _ in range(n_tries):
        try:
            budget.spend(step, label=f"race pid={os.getpid()}")
        except BudgetExceededError:
            refused += 1
        else:
            recorded += 1
    queue.put((recorded, refused))
