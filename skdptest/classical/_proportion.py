"""DPBinomialTest: the exact ε-DP test of a proportion (Tulap noise, UMP / unbiased)."""

from __future__ import annotations

import math
from numbers import Real

import numpy as np

from .._base import BasePrivateTest, check_numeric
from .._budget import PrivacyBudget
from .._noise import quantise_rate, tulap
from .._params import InstanceOf, Interval, InvalidParameterError, NoneValue, Options, RandomState
from .._recorder import NoisedQuantity, NoisePlan, observe
from ._results import BinomialTestResult
from ._tulap import binomial_log_pvalue

__all__ = ["DPBinomialTest", "MAX_RATE", "tulap_rate"]

#: Largest Tulap rate used (2**9): the noise is then e^{−512} ≈ 1e-223 away from the
#: non-private randomised test, and a larger ε only removes noise that no float sees.
#: Above it the release is computed at this rate (MAX_RATE-DP, hence ε-DP) and the
#: budget is still charged the ε asked for.
MAX_RATE = 512.0

#: Smallest ε accepted: the exact sampler's rates are multiples of 2**-20.
MIN_EPSILON = 2.0**-20

_SMALLEST_FLOAT = 5e-324


def tulap_rate(epsilon):
    """The rate of the Tulap noise for ε: ε rounded down onto the exact sampler's grid
    (multiples of 2**-20), at most :data:`MAX_RATE`. Rounding down only adds noise."""
    return quantise_rate(min(float(epsilon), MAX_RATE))


class DPBinomialTest(BasePrivateTest):
    r"""Exact ε-DP test of a proportion: is P(row = 1) equal to (above, below) θ0?

    The count X of ones among the n rows is released as Z = X + N, N ~ Tulap(0,
    e^{−ε}, 0) (Awan and Slavković 2018): N = G₁ − G₂ + U with G₁, G₂ iid geometric and
    U uniform on (−1/2, 1/2), drawn exactly (:func:`skdptest._noise.tulap`). The p-value
    is a function of Z and public quantities (n, θ0, ε) only, computed exactly.

    Parameters
    ----------
    null_proportion : float, default=0.5
        θ0 in [0, 1], the proportion of ones under the null.
    alternative : {"two-sided", "greater", "less"}, default="two-sided"
        ``"greater"``: H0: θ <= θ0 against θ > θ0, p = P_θ0(Z' >= Z), the uniformly
        most powerful ε-DP test (Awan and Slavković 2018). ``"less"``: H0: θ >= θ0,
        p = P_θ0(Z' <= Z), UMP likewise. ``"two-sided"``: H0: θ = θ0, the unbiased test of
        the release: reject when Z <= c1 or Z >= c2 with size α and zero derivative of
        the power at θ0 (the conditions of a UMPU test); see Notes. For θ0 = 0 (or 1)
        the two-sided test is the one-sided test of the only possible side.
    epsilon : float, default=1.0
        Privacy parameter ε > 0 of one fit (or one score); at least 2**-20. The noise
        rate is ε rounded down onto multiples of 2**-20 and capped at 512 (the release
        is then a little noisier than ε asks, never less).
    alpha : float, default=0.05
        Level of the test, in (0, 1).
    budget : PrivacyBudget or None, default=None
        Budget charged ``(epsilon, 0)`` once per fit and once per score.
    random_state : None, int, RandomState instance or Generator, default=None
        Source of the noise. For tests and reproducible examples only: any value other than
        ``None`` raises :class:`~skdptest.FixedRandomStateWarning` (whoever holds the seed, the
        generator or a pickle of the estimator can replay the noise, and equal seeds correlate the
        noise of different fits). ``None`` draws fresh OS entropy and keeps nothing from which the
        noise could be regenerated.

    Attributes
    ----------
    result_ : BinomialTestResult
        ``statistic`` is the release Z (a float: the private count plus Tulap noise),
        ``pvalue`` the exact p-value, ``alternative`` and ``sensitivity`` = 1 public.
    n_features_in_ : int
        Number of columns of X (1).
    privacy_spent_ : PrivacySpent
        What the last charge cost: ``epsilon``, ``delta`` and the privacy profile
        declared to the ledger. This estimator declares ``"pure"``: its release is
        ε-DP. It is not one continuous Laplace draw, so the
        ``"laplace"`` profile (a tighter zCDP) is not claimed; the ``"zcdp"`` and
        ``"rdp"`` accountants charge it as generic pure DP (see "Privacy profiles" in
        the privacy-budget guide).

    Notes
    -----
    **Data and hypothesis.** X is one column of 0/1 values, n rows (n is public), taken
    as n independent Bernoulli(θ) draws, i.e. X ~ Binomial(n, θ). Any other value is
    refused before the charge (the message says what kind of value, never how many).

    **Privacy.** Neighbouring data sets differ in one row (replace-one, n public). The
    count has sensitivity 1; the Tulap density is a step function with
    f(t)/f(t ± 1) <= e^ε everywhere, so Z is ε-DP (δ = 0). The float Z is a
    deterministic function of the integer X + G₁ − G₂ (ε-DP) and of the data-independent
    U: no floating-point leak. Everything else in the result is public or a function of Z.

    **Validity.** Exact at every n: the one-sided p-values are P_θ0(Z' >= z) and
    P_θ0(Z' <= z), summed over all n + 1 counts in closed form; Z is continuous, so
    P_θ0(p <= α) = α, and for θ on the null side < α (the binomial family has a
    monotone likelihood ratio, preserved by the log-concave Tulap kernel). Two-sided:
    with h(c) = E_θ0[(X − nθ0) 1{Z' <= c}], p(z) = P_θ0(Z' >= max(z, c')) +
    P_θ0(Z' <= min(z, c')), c' the point across the minimum of h with h(c') = h(z);
    these rejection regions are nested in α, so P_θ0(p <= α) = α.

    **Optimality.** The one-sided tests are the ε-DP UMP tests (every ε-DP test of the
    count is at most as powerful). The UMPU test of Awan and Slavković (2020) as a
    function of the count, φ(x) = F(abs(x − k) − s), is not the law of any function of one
    Tulap release (its deconvolution by the discrete Laplace law is negative at the
    kink), so no p-value of Z can realise it; the two-sided test here is the unbiased
    test of Z satisfying the same two conditions; in the benchmark designs its power is
    within 5e-5 of the count-domain UMPU's at the n giving 80 % power (same n;
    benchmarks/classical_power_binomial.py).

    **Confidence interval.** ``result_.confidence_interval(confidence_level)`` inverts
    the two one-sided UMP tests (equal-tailed, Awan and Slavković 2020): an exact
    interval for θ, coverage exactly ``confidence_level`` for θ in (0, 1), computed
    from Z and n only (no extra budget). ``result_.estimate`` (Z / n) and
    ``result_.estimate_noise_sd`` describe the noise alone and are not a confidence
    interval (doc/user_guide/intervals.md).

    The running time depends on n and on Z only (the p-value's root search), never on
    the data beyond the release.

    References
    ----------
    .. [1] J. Awan and A. Slavković, "Differentially private uniformly most powerful
       tests for binomial data", NeurIPS 2018.
    .. [2] J. Awan and A. Slavković, "Differentially private inference for binomial
       data", Journal of Privacy and Confidentiality 10(1), 2020.

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest import DPBinomialTest
    >>> X = np.random.default_rng(0).binomial(1, 0.45, size=(500, 1))
    >>> test = DPBinomialTest(null_proportion=0.3, alternative="greater", epsilon=1.0)
    >>> result = test.fit(X).test()
    >>> 0.0 <= result.pvalue <= 1.0, result.sensitivity
    (True, 1.0)
    >>> result.reject  # doctest: +SKIP
    True
    >>> ci = result.confidence_interval(0.95)
    >>> 0.0 <= ci.low <= ci.high <= 1.0, ci.covers
    (True, 'sampling and noise')
    """

    _parameter_constraints = {
        "null_proportion": [Interval(Real, 0, 1, closed="both")],
        "alternative": [Options("two-sided", "greater", "less")],
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "alpha": [Interval(Real, 0, 1, closed="neither")],
        "budget": [NoneValue(), InstanceOf(PrivacyBudget)],
        "random_state": [RandomState()],
    }

    def __init__(self, *, null_proportion=0.5, alternative="two-sided", epsilon=1.0,
                 alpha=0.05, budget=None, random_state=None):
        self.null_proportion = null_proportion
        self.alternative = alternative
        self.epsilon = epsilon
        self.alpha = alpha
        self.budget = budget
        self.random_state = random_state

    def _check_params(self, params):
        if params["epsilon"] < MIN_EPSILON:
            raise InvalidParameterError(
                "epsilon must be at least 2**-20 (the finest rate of the exact sampler).")
        return params

    def _validate_input(self, X, y, reset):
        X, y = super()._validate_input(X, y, reset)
        X = check_numeric(X, "X")
        if X.shape[1] != 1:
            raise ValueError("DPBinomialTest needs X with exactly one column of 0/1 values.")
        return X, y

    def _plan(self, params, X, y):
        if not np.all((X == 0) | (X == 1)):  # the kind of problem only: no count, no value
            raise ValueError("X must hold only the values 0 and 1 (one Bernoulli draw per "
                             "row); found another value.")
        return tulap_rate(params["epsilon"])

    def _release(self, prep, rng):
        params, rate, n = prep.params, prep.plan, prep.n_samples
        count = int(np.count_nonzero(prep.X[:, 0]))
        observe("count", count)  # grey-box audit (else a no-op)
        z = tulap(rng, rate, shift=count)
        log_p = binomial_log_pvalue(z, n, params["null_proportion"], rate,
                                    params["alternative"])
        pvalue = math.exp(log_p)
        return BinomialTestResult(
            statistic=float(z), pvalue=pvalue, alternative=params["alternative"],
            sensitivity=1.0, reject=bool(pvalue <= params["alpha"]), alpha=params["alpha"],
            epsilon=params["epsilon"], delta=0.0, n_samples=n,
            method="DP binomial test (Tulap)",
        )

    def _noise_plan(self, prep):
        """What a fit noises (the grey-box audit hook, doc/contributing.md): the count of
        ones, sensitivity 1, by the discrete Laplace part of the Tulap noise at rate <= ε
        (capped at MAX_RATE, as the release is; the uniform part is data-independent)."""
        return NoisePlan((NoisedQuantity("count", "discrete_laplace", 1.0,
                                         min(prep.params["epsilon"], MAX_RATE)),))

    def _score_value(self, result):
        # −log p; a p-value that underflows to 0 scores as the smallest float's.
        return -math.log(max(result.pvalue, _SMALLEST_FLOAT))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # One column of 0/1 values, not a numeric 2-D array: scikit-learn's generic checks
        # (float matrices) do not apply; tests/test_common.py runs the contract's checks.
        tags.input_tags.two_d_array = False
        return tags
