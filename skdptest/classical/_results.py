"""Result of the everyday private tests (frozen, keyword-only)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .._results import TestResult

__all__ = [
    "BinomialTestResult",
    "BoundedMeanResult",
    "ChiSquareTestResult",
    "ClassicalTestResult",
]


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

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest import ClassicalTestResult, DPMannWhitneyTest
    >>> rng = np.random.default_rng(0)
    >>> X = np.r_[rng.normal(0, 1, 100), rng.normal(1, 1, 100)].reshape(-1, 1)
    >>> y = np.repeat([0, 1], 100)
    >>> result = DPMannWhitneyTest(epsilon=1.0, random_state=0).fit(X, y).result_
    >>> isinstance(result, ClassicalTestResult), result.alternative
    (True, 'two-sided')
    >>> 0.0 <= result.pvalue <= 1.0
    True
    """

    statistic: float | None
    pvalue: float
    alternative: str
    sensitivity: float

    _unpack = ("statistic", "pvalue")


@dataclass(frozen=True, kw_only=True)
class BinomialTestResult(ClassicalTestResult):
    """Result of :class:`~skdptest.DPBinomialTest`: the fields of
    :class:`ClassicalTestResult` (``statistic`` is the release Z = X + Tulap noise, a
    count) and two things computed from them.

    ``confidence_interval(confidence_level)`` inverts the test into an exact interval
    for the proportion; ``estimate`` and ``estimate_noise_sd`` describe the released
    point estimate Z / n and the noise in it alone. All are functions of Z and public
    quantities (n, ε): post-processing, no extra budget.

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest import DPBinomialTest
    >>> X = np.random.default_rng(0).binomial(1, 0.3, size=(1000, 1))
    >>> result = DPBinomialTest(epsilon=1.0).fit(X).result_
    >>> ci = result.confidence_interval()  # covers sampling and noise
    >>> result.estimate_noise_sd < ci.width / 10  # the noise alone: not a CI
    True
    """

    @property
    def estimate(self):
        """Z / n: the released proportion estimate (unbiased: the noise has mean 0; it
        may fall outside [0, 1])."""
        return self.statistic / self.n_samples

    @property
    def estimate_noise_sd(self):
        """Standard deviation of the privacy noise in :attr:`estimate`: sqrt(Var N) / n,
        N the Tulap noise. It ignores the sampling variation of the count, so
        ``estimate ± 2 * estimate_noise_sd`` is **not** a confidence interval for the
        proportion; use :meth:`confidence_interval`."""
        from ._interval import tulap_noise_variance
        from ._proportion import tulap_rate

        return math.sqrt(tulap_noise_variance(tulap_rate(self.epsilon))) / self.n_samples

    def confidence_interval(self, confidence_level=0.95):
        """Exact confidence interval for the proportion θ (sampling and noise together).

        The equal-tailed inversion of the two one-sided ε-DP UMP tests: θ_L solves
        P_θ(Z' >= Z) = α/2 and θ_U solves P_θ(Z' <= Z) = α/2, with α = 1 −
        ``confidence_level`` (Awan and Slavković 2020). Coverage is exactly
        ``confidence_level`` for every θ in (0, 1) at every n. The interval does not
        depend on the ``alternative`` that was tested: whether it excludes θ0 is the
        equal-tailed test at 1 − ``confidence_level``, which near the edge can differ
        from the two-sided unbiased test's decision.

        Parameters
        ----------
        confidence_level : float, default=0.95
            In (0, 1).

        Returns
        -------
        ConfidenceInterval
            ``low``, ``high`` in [0, 1]; ``covers="sampling and noise"``.
        """
        from ._interval import tulap_interval

        return tulap_interval(self.statistic, self.n_samples, self.epsilon,
                              confidence_level)


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

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest import ChiSquareTestResult, DPChiSquareTest
    >>> X = np.random.default_rng(0).integers(0, 3, size=(300, 1))
    >>> result = DPChiSquareTest(categories=[0, 1, 2], random_state=0).fit(X).result_
    >>> isinstance(result, ChiSquareTestResult), len(result.noisy_counts)
    (True, 3)
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
    design : {"one-sample", "paired", "two-sample"}
        Which test was run (public: whether ``y`` held pairs or labels).

    Notes
    -----
    ``confidence_interval(confidence_level)`` turns the release into a confidence
    interval for the mean (pairs: of x − y; two groups: of the difference of the group
    means), and ``statistic_noise_sd`` is the noise's own spread in ``statistic``; both
    are functions of the fields above (post-processing, no extra budget).

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest import BoundedMeanResult, DPBoundedMeanTest
    >>> X = np.random.default_rng(0).uniform(0.4, 1.0, size=(200, 1))
    >>> result = DPBoundedMeanTest(bounds=(0, 1), null_mean=0.5, random_state=0).fit(X).result_
    >>> isinstance(result, BoundedMeanResult), result.bounds
    (True, (0.0, 1.0))
    """

    bounds: tuple
    null_mean: float | None
    bet: float
    grid: float
    group_sizes: tuple | None
    design: str

    @property
    def statistic_noise_sd(self):
        """Standard deviation (nats) of the privacy noise in ``statistic``:
        h sqrt(2b)/(1 − b), b = e^{−rate}. The test releases no point estimate of the mean;
        this is the noise's accuracy of the released log-wealth only, ignoring the
        sampling, and **not** a confidence interval (use :meth:`confidence_interval`)."""
        from ._interval import mean_geometry

        rate = mean_geometry(self)[4]
        b = math.exp(-rate)
        return self.grid * math.sqrt(2.0 * b) / -math.expm1(-rate)

    def confidence_interval(self, confidence_level=0.95):
        """Confidence interval for the mean, valid at every n for every law on the
        bounds (sampling and noise together).

        The release was made at one null μ0 and cannot be re-run at another without
        the data; instead every candidate mean m gets two valid tests from the same
        release (an AM-GM bound on E[e^{S}] and a convex-chord bound on E[e^{−S}], S the
        log-wealth), and the interval is the set of m neither rejects (one-sided bets:
        α/2 each; two-sided bet: the chord test at α). Closed form; see
        ``skdptest/classical/_interval.py`` and doc/user_guide/intervals.md.

        Parameters
        ----------
        confidence_level : float, default=0.95
            In (0, 1).

        Returns
        -------
        ConfidenceInterval
            ``low``, ``high`` within the range of the parameter (the bounds; pairs and
            groups: (a − b, b − a)); ``covers="sampling and noise"``.
        """
        from ._interval import mean_interval

        return mean_interval(self, confidence_level)
