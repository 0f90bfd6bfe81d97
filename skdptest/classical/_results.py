"""Result of the everyday private tests (frozen, keyword-only)."""

from __future__ import annotations

from dataclasses import dataclass

from .._results import TestResult

__all__ = ["BoundedMeanResult", "ChiSquareTestResult", "ClassicalTestResult"]


@dataclass(frozen=True, kw_only=True)
class ClassicalTestResult(TestResult):
    """Result of an everyday private test (proportion, rank, distribution, mean).

    Every field is a private release, a function of the release alone (so covered
    by the same ε), or public (parameters, sizes).

    Attributes
    ----------
    reject : bool
        Whether ``pvalue <= alpha`` (a function of the p-value).
    alpha : float
        Level of the test.
    epsilon : float
        ε spent by the release.
    delta : float
        δ spent (0 for the pure ε-DP tests of this family).
    n_samples : int
        Number of rows (public).
    method : str
        Name of the procedure.
    statistic : float or None
        The private release: the noisy statistic (the statistic plus noise
        calibrated to its sensitivity); the p-value is a function of it and of
        public quantities only. ``None`` for the tests that release their p-value
        only (DP permutation p-values, whose noisy statistics are not released).
    pvalue : float
        Valid p-value of the null hypothesis, computed from ``statistic``
        (exact or Monte Carlo-exact; each estimator's docstring says which).
    alternative : str
        ``"two-sided"``, ``"greater"`` or ``"less"`` (public).
    sensitivity : float
        Global sensitivity of the statistic under the estimator's
        neighbouring relation (public).
    """

    statistic: float | None
    pvalue: float
    alternative: str
    sensitivity: float

    _unpack = ("statistic", "pvalue")


@dataclass(frozen=True, kw_only=True)
class ChiSquareTestResult(ClassicalTestResult):
    """Result of :class:`~skdptest.DPChiSquareTest`: the fields of
    :class:`ClassicalTestResult` plus the released noisy counts.

    Attributes
    ----------
    noisy_counts : tuple of int
        The private release: each declared category's count plus independent exact
        discrete Laplace noise (rate ε/2; the count vector has L1 sensitivity 2), in
        the order of the declared categories. ``statistic`` (Pearson's χ² on these
        counts), ``pvalue`` and ``reject`` are functions of them and of data-independent
        Monte Carlo draws, so all fields together cost ε.
    """

    noisy_counts: tuple


@dataclass(frozen=True, kw_only=True)
class BoundedMeanResult(ClassicalTestResult):
    """Result of :class:`~skdptest.DPBoundedMeanTest`: the fields of
    :class:`ClassicalTestResult` plus its public plan.

    ``statistic`` is the private release: the noisy log-wealth bound h (T + Z) in nats
    (an integer number of grid steps times ``grid``); ``pvalue`` and ``reject`` are
    functions of it; ``sensitivity`` is in nats (grid steps times ``grid``). The fields
    below are public (parameters, group sizes, and a plan computed from them), so all
    fields together cost ε.

    Attributes
    ----------
    bounds : tuple of (float, float)
        The declared bounds (a, b).
    null_mean : float or None
        μ0 of a one-sample or paired test; ``None`` for two groups.
    bet : float
        The stake λ per unit of the centred value.
    grid : float
        h, the power-of-two grid of the release (nats per step).
    group_sizes : tuple of (int, int) or None
        Sizes of the two groups (public), in the order of ``classes_``; ``None`` for
        one sample or pairs.
    """

    bounds: tuple
    null_mean: float | None
    bet: float
    grid: float
    group_sizes: tuple | None
