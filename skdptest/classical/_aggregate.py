"""DPSubsampleAggregateTest: any public test made ε-DP by subsample-and-aggregate."""

from __future__ import annotations

import functools
import math
import warnings
from numbers import Integral, Real

import numpy as np
from scipy import stats

from .._base import BasePrivateTest, check_numeric
from .._budget import PrivacyBudget
from .._noise import tulap
from .._params import (
    Callable,
    InstanceOf,
    Interval,
    InvalidParameterError,
    NoneValue,
    Options,
    RandomState,
)
from .._recorder import NoisedQuantity, NoisePlan, observe
from ._proportion import MAX_RATE, MIN_EPSILON, tulap_rate
from ._results import ClassicalTestResult
from ._tulap import binomial_log_pvalue, tulap_cdf

__all__ = ["DPSubsampleAggregateTest", "plan_subsets", "predicted_power"]

#: Inner levels α0 the planner tries.
INNER_ALPHAS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5)

#: The planner's simulations use this fixed seed: the plan is a function of public
#: inputs only (never of the data, nor of ``random_state``), and the same every time.
PLANNER_SEED = 20230723

_MAX_CANDIDATES = 32
_SMALLEST_FLOAT = 5e-324


def _default_test(*samples):
    """One sample: two-sided t-test of mean 0; two samples: Welch's two-sided t-test."""
    if len(samples) == 1:
        return stats.ttest_1samp(samples[0], 0.0)
    return stats.ttest_ind(samples[0], samples[1], equal_var=False)


def _pvalue_of(test, samples):
    """The p-value the public test returns on one subset; NaN when it raises, returns
    NaN or something that is not a p-value (a fixed public rule: no rejection). No
    warning or message of the inner test escapes."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            out = test(*samples)
            p = float(out.pvalue if hasattr(out, "pvalue") else out)
    except Exception:  # any failure of the user's test: no rejection, text dropped
        return math.nan
    return p if 0.0 <= p <= 1.0 else math.nan


def _split(X, y, design, classes):
    """The samples a subset gives the public test: one array, or one per group."""
    x = X[:, 0] if X.shape[1] == 1 else X
    if design == "one-sample":
        return (x,)
    return tuple(x[y == c] for c in classes)


@functools.lru_cache(maxsize=1024)
def _ump_threshold(m, inner_alpha, alpha, rate):
    """c with P_{α0}(Y + N >= c) = α, Y ~ Binomial(m, α0) (the UMP test's threshold).

    Memoised: a pure function of public numbers, and the planner asks for the same
    (m, α0) for every power it compares (and again for every plan at the same n).
    """
    from scipy import optimize

    x = np.arange(m + 1)
    pmf = stats.binom.pmf(x, m, inner_alpha)
    span = m + 60.0 / rate + 10.0

    def size(c):
        return float(np.sum(pmf * tulap_cdf(x - c, rate))) - alpha

    return optimize.brentq(size, -span, span, xtol=1e-10)


def predicted_power(m, inner_alpha, inner_power, alpha, rate):
    """Power of the Tulap binomial UMP test of θ <= α0 with m subsets when each subset
    rejects independently with probability ``inner_power`` (exact)."""
    c = _ump_threshold(m, inner_alpha, alpha, rate)
    x = np.arange(m + 1)
    return float(np.sum(stats.binom.pmf(x, m, inner_power) * tulap_cdf(x - c, rate)))


def _predicted_powers(m, tried, alpha, rate):
    """:func:`predicted_power` of every (α0, π) in ``tried`` at one m, the same floats:
    the binomial pmfs of all the π in one scipy call (elementwise, so each row is the
    pmf of its own call), whose fixed cost was most of a planner's time."""
    if not tried:
        return []
    x = np.arange(m + 1)
    pmfs = stats.binom.pmf(x, m, np.array([power for _, power in tried])[:, None])
    return [float(np.sum(pmf * tulap_cdf(x - _ump_threshold(m, a0, alpha, rate), rate)))
            for (a0, _), pmf in zip(tried, pmfs, strict=True)]


def _candidates(n, min_rows):
    """Numbers of subsets m with at least ``min_rows`` rows each: all of them for small
    n, else about 32 spread geometrically."""
    top = max(1, n // min_rows)
    if top <= _MAX_CANDIDATES:
        return list(range(1, top + 1))
    return sorted({int(round(v)) for v in np.geomspace(1, top, _MAX_CANDIDATES)})


def _t_test_power(design, effect_size):
    """Power of the default t-tests on the default normal shift model: noncentral t
    (exact for one sample; for two alternating groups the pooled t-test's, which Welch's
    test matches closely at equal variances: a planning figure only)."""
    def power(rows, a0):
        return _t_power(design, effect_size, rows, a0)
    return power


@functools.lru_cache(maxsize=4096)
def _t_power(design, effect_size, rows, a0):
    """:func:`_t_test_power`'s value, memoised (public numbers; a plan and its cached
    copy, or plans at nearby n, evaluate the same sizes)."""
    if design == "one-sample":
        df, nc = rows - 1, effect_size * math.sqrt(rows)
    else:
        n1, n2 = (rows + 1) // 2, rows // 2
        df, nc = rows - 2, effect_size / math.sqrt(1.0 / n1 + 1.0 / n2)
    crit = stats.t.ppf(1.0 - a0 / 2.0, df)
    return float(stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc))


def _normal_shift_data(design, effect_size):
    """Default synthetic alternative: N(d, 1) rows (one sample), or two alternating groups
    N(0, 1) and N(d, 1)."""
    def draw(n, rng):
        if design == "one-sample":
            return rng.normal(effect_size, 1.0, size=(n, 1)), None
        y = np.arange(n) % 2
        return (rng.normal(size=n) + effect_size * y).reshape(-1, 1), y
    return draw


_PLANS = {}


def _cached_plan(**kwargs):
    """:func:`plan_subsets`, memoised on its (public) inputs; callables by identity,
    kept alive with the entry so that an identity is never reused."""
    callables = tuple(kwargs[k] for k in ("inner_test", "synthetic_data", "power_function"))
    key = tuple((k, id(v) if callable(v) else v) for k, v in sorted(kwargs.items()))
    hit = _PLANS.get(key)
    if hit is None:
        if len(_PLANS) >= 64:
            _PLANS.pop(next(iter(_PLANS)))
        hit = _PLANS[key] = (callables, plan_subsets(**kwargs))
    return hit[1]


def plan_subsets(n, epsilon, alpha, *, inner_test=None, design="one-sample", effect_size=0.5,
                 synthetic_data=None, power_function=None, min_rows=2, n_draws=100,
                 n_subsets=None, inner_alphas=INNER_ALPHAS):
    """Choose (m, α0) maximising the predicted power, from public inputs only.

    For each candidate number of subsets m (each with about n/m rows) and inner level α0
    in :data:`INNER_ALPHAS`, the predicted power is that of the Tulap binomial UMP test
    of θ <= α0 on m trials when each subset rejects with the public test's power π at
    n/m rows and level α0 (:func:`predicted_power`). π comes from ``power_function(rows,
    α0)`` if given, else from simulating the public test on ``n_draws`` synthetic data
    sets per subset size drawn by ``synthetic_data(rows, rng)`` with the fixed seed
    :data:`PLANNER_SEED`; with the default t-tests and no synthetic data, from the
    noncentral t law of the normal shift model of ``effect_size``.
    ``n_subsets`` (an int) fixes m; ``inner_alphas`` restricts the levels tried.

    Returns
    -------
    (m, α0, predicted power) : tuple
    """
    test = _default_test if inner_test is None else inner_test
    rate = tulap_rate(epsilon)
    data = synthetic_data or _normal_shift_data(design, effect_size)
    if inner_test is None and synthetic_data is None and power_function is None:
        power_function = _t_test_power(design, effect_size)  # exact, no simulation
    min_rows = max(min_rows, 2 if design == "one-sample" else 4)
    best = (n_subsets or 1, inner_alphas[0], -1.0)
    rng = np.random.default_rng(PLANNER_SEED)
    for m in [n_subsets] if n_subsets else _candidates(n, min_rows):
        rows = n // m
        if power_function is not None:
            powers = [float(power_function(rows, a0)) for a0 in inner_alphas]
        else:
            pvals = np.empty(n_draws)
            for b in range(n_draws):
                Xs, ys = data(rows, rng)
                Xs = np.asarray(Xs, dtype=float).reshape(rows, -1)
                classes = None if ys is None else np.unique(ys)
                pvals[b] = _pvalue_of(test, _split(Xs, ys, design, classes))
            powers = [float(np.mean(pvals <= a0)) for a0 in inner_alphas]  # NaN: no
        # no signal at this size and level where power <= a0
        tried = [(a0, min(power, 1.0)) for a0, power in zip(inner_alphas, powers, strict=True)
                 if power > a0]
        for (a0, _), value in zip(tried, _predicted_powers(m, tried, alpha, rate),
                                  strict=True):
            if value > best[2] + 1e-12:
                best = (m, a0, value)
    return best


class DPSubsampleAggregateTest(BasePrivateTest):
    r"""Any public test made ε-DP: subsample and aggregate with an exact Tulap p-value
    ("test of tests", Kazan, Shi, Groce and Bray 2023).

    The rows are split at random (independently of the data) into m disjoint subsets of
    n/m rows; the public ``test`` runs on each at level α0; the number Y of subsets that
    reject is released as Y + Tulap noise, and the p-value is that of the ε-DP UMP test
    of H0: θ <= α0 for Y ~ Binomial(m, θ) (:class:`DPBinomialTest`'s one-sided p-value).

    Parameters
    ----------
    inner_test : callable or None, default=None
        The public test, called on one subset as ``test(x)`` (``design="one-sample"``)
        or ``test(x_0, x_1, ...)`` (one array per group, ``design="k-sample"``); each
        array is 1-D when X has one column, else 2-D. It returns a p-value or an object
        with a ``pvalue`` attribute (any ``scipy.stats`` test; fix its options with
        ``functools.partial``). A subset on which it raises or returns NaN or a value
        outside [0, 1] counts as no rejection (a fixed public rule; the exception's
        text is dropped). ``None``: two-sided one-sample t-test of mean 0, or Welch's
        t-test for two groups.
    design : {"one-sample", "k-sample"}, default="one-sample"
        How a subset is passed: its rows, or its rows split by the group labels y (the
        groups are the distinct values of y, public).
    n_subsets : "auto" or int, default="auto"
        m. ``"auto"``: the planner's choice (:func:`plan_subsets`).
    inner_alpha : "auto" or float, default="auto"
        α0 in (0, 1), the level each subset is tested at. ``"auto"``: the planner's.
    effect_size : float, default=0.5
        Effect the planner's default synthetic alternative assumes (a normal shift in
        standard deviations), used when neither ``synthetic_data`` nor
        ``power_function`` is given.
    synthetic_data : callable or None, default=None
        ``synthetic_data(n_rows, rng) -> (X, y)``: synthetic (public) data from the
        alternative you plan for; the planner runs ``test`` on it to predict the power
        of one subset.
    power_function : callable or None, default=None
        ``power_function(n_rows, alpha0) -> power`` of the public test on one subset,
        used by the planner instead of simulation.
    epsilon : float, default=1.0
        Privacy parameter ε > 0 (at least 2**-20) of one fit (or score).
    alpha : float, default=0.05
        Level of the test.
    budget : PrivacyBudget or None, default=None
        Charged ``(epsilon, 0)`` once per fit and once per score.
    random_state : None, int, RandomState instance or Generator, default=None
        Source of the split and the noise (a fixed value warns: tests only). For tests and
        reproducible examples only: any value other than ``None`` raises
        :class:`~skdptest.FixedRandomStateWarning` (whoever holds the seed, the generator or a
        pickle of the estimator can replay the noise, and equal seeds correlate the noise of
        different fits). ``None`` draws fresh OS entropy and keeps nothing from which the noise
        could be regenerated.

    Attributes
    ----------
    result_ : ClassicalTestResult
        ``statistic`` = Y + Tulap noise (the release), ``pvalue``, ``alternative`` =
        ``"greater"`` (the count test is one-sided: H0 θ <= α0), ``sensitivity`` = 1.
    n_subsets_ : int
        m used (public: a parameter or the planner's choice from public inputs).
    inner_alpha_ : float
        α0 used (public likewise).
    predicted_power_ : float or None
        The planner's predicted power (``None`` when m and α0 were both given).
    classes_ : ndarray or None
        Group labels (``design="k-sample"``), public.
    n_features_in_ : int
        Number of columns of X.
    privacy_spent_ : PrivacySpent
        What the last charge cost: ``epsilon``, ``delta`` and the privacy profile
        declared to the ledger. This estimator declares ``"pure"``: its release is
        ε-DP. It is not one continuous Laplace draw, so the
        ``"laplace"`` profile (a tighter zCDP) is not claimed; the ``"zcdp"`` and
        ``"rdp"`` accountants charge it as generic pure DP (see "Privacy profiles" in
        the privacy-budget guide).

    Notes
    -----
    **Hypothesis and validity.** Assumption: on a subset of n/m independent rows drawn
    under H0, the public test rejects at level α0 with probability <= α0 (it is valid at
    finite n for the data at hand: e.g. a t-test on normal data, a sign test, an exact
    rank test on continuous data). The subsets are disjoint and the rows independent,
    so under H0 Y is a sum of independent Bernoulli(π_j), π_j <= α0: stochastically at
    most Binomial(m, α0). The p-value P_{α0}(Y' + N >= z) is exact for Binomial(m, α0)
    and increases with θ, so P(p <= α) <= α at every n (= α when the inner test is
    exact). A failing subset counts as no rejection, which only lowers Y. If the
    inner test is not valid on the data (a t-test on small skewed samples), neither is
    this test: the private wrapper inherits the public test's validity.

    **Privacy.** Neighbours differ in one row (replace-one; n public; with
    ``design="k-sample"`` a row's group label may change too). The split is a random
    permutation of row positions drawn independently of the data, so the changed row
    lies in one subset and Y changes by at most 1 (sensitivity 1); Y + Tulap noise at
    rate ε is ε-DP (see :class:`DPBinomialTest`). m and α0 come from public inputs
    only. The planner simulates with a fixed seed, never with the data.

    **Planner.** Grid search over m (all values with >= 2 rows per subset, or about 32
    spread geometrically) and α0 in :data:`INNER_ALPHAS`, maximising the exact power
    of the count test when each subset rejects with the public test's (simulated or
    given) power — the planner of the paper. The default synthetic alternative is a
    normal shift of ``effect_size`` (one sample N(d, 1); two alternating groups
    N(0, 1), N(d, 1)); declare your own with ``synthetic_data`` or ``power_function``
    for another test or effect.

    **Running time.** The public test's running time on each subset is not controlled
    (it may depend on the data): a timing side channel this estimator cannot close.

    References
    ----------
    .. [1] Z. Kazan, K. Shi, A. Groce and A. Bray, "The test of tests: a framework for
       differentially private hypothesis testing", ICML 2023.
    .. [2] J. Awan and A. Slavković, "Differentially private uniformly most powerful
       tests for binomial data", NeurIPS 2018.

    Examples
    --------
    >>> import functools
    >>> import numpy as np
    >>> from scipy import stats
    >>> from skdptest import DPSubsampleAggregateTest
    >>> X = np.random.default_rng(0).normal(0.5, 1.0, size=(300, 1))
    >>> test = DPSubsampleAggregateTest(effect_size=0.4)  # t-test of mean 0 per subset
    >>> result = test.fit(X).test()
    >>> test.n_subsets_, test.inner_alpha_  # planned from n, ε, α and the effect only
    (10, 0.15)
    >>> result.reject  # doctest: +SKIP
    True

    Any scipy test, with its options fixed by ``functools.partial``:

    >>> wilcoxon = functools.partial(stats.wilcoxon, alternative="greater")
    >>> test = DPSubsampleAggregateTest(inner_test=wilcoxon, n_subsets=10,
    ...                                 inner_alpha=0.15)
    >>> 0.0 <= test.fit(X).test().pvalue <= 1.0
    True
    """

    _parameter_constraints = {
        "inner_test": [NoneValue(), Callable()],
        "design": [Options("one-sample", "k-sample")],
        "n_subsets": [Options("auto"), Interval(Integral, 1, None, closed="left")],
        "inner_alpha": [Options("auto"), Interval(Real, 0, 1, closed="neither")],
        "effect_size": [Interval(Real, 0, None, closed="neither")],
        "synthetic_data": [NoneValue(), Callable()],
        "power_function": [NoneValue(), Callable()],
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "alpha": [Interval(Real, 0, 1, closed="neither")],
        "budget": [NoneValue(), InstanceOf(PrivacyBudget)],
        "random_state": [RandomState()],
    }

    def __init__(self, *, inner_test=None, design="one-sample", n_subsets="auto",
                 inner_alpha="auto", effect_size=0.5, synthetic_data=None,
                 power_function=None, epsilon=1.0, alpha=0.05, budget=None,
                 random_state=None):
        self.inner_test = inner_test
        self.design = design
        self.n_subsets = n_subsets
        self.inner_alpha = inner_alpha
        self.effect_size = effect_size
        self.synthetic_data = synthetic_data
        self.power_function = power_function
        self.epsilon = epsilon
        self.alpha = alpha
        self.budget = budget
        self.random_state = random_state

    @property
    def _requires_y(self):
        return self.design == "k-sample"

    def _check_params(self, params):
        if params["epsilon"] < MIN_EPSILON:
            raise InvalidParameterError(
                "epsilon must be at least 2**-20 (the finest rate of the exact sampler).")
        return params

    def _validate_input(self, X, y, reset):
        X, y = super()._validate_input(X, y, reset)
        return check_numeric(X, "X").astype(np.float64, copy=False), y

    def _plan(self, params, X, y):
        n = X.shape[0]
        classes = None
        if params["design"] == "k-sample":
            classes = np.unique(y)
            if classes.size < 2:
                raise ValueError("design='k-sample' needs at least two groups in y.")
        m, a0, predicted = params["n_subsets"], params["inner_alpha"], None
        if m != "auto" and m > n:
            raise ValueError("n_subsets must be at most the number of rows.")
        if m == "auto" or a0 == "auto":
            if params["design"] == "k-sample" and params["synthetic_data"] is None and (
                    params["power_function"] is None and classes.size != 2):
                raise ValueError("the default synthetic alternative has two groups; pass "
                                 "synthetic_data or power_function for more groups.")
            m, a0, predicted = _cached_plan(
                n=n, epsilon=params["epsilon"], alpha=params["alpha"],
                inner_test=params["inner_test"],
                design=params["design"], effect_size=params["effect_size"],
                synthetic_data=params["synthetic_data"],
                power_function=params["power_function"],
                n_subsets=None if m == "auto" else m,
                inner_alphas=INNER_ALPHAS if a0 == "auto" else (a0,))
        return dict(m=int(m), inner_alpha=float(a0), predicted=predicted, classes=classes,
                    rate=tulap_rate(params["epsilon"]))

    def _release(self, prep, rng):
        params, plan = prep.params, prep.plan
        n, m, a0 = prep.n_samples, plan["m"], plan["inner_alpha"]
        test = _default_test if params["inner_test"] is None else params["inner_test"]
        order = rng.permutation(n)  # independent of the data: one row, one subset
        count = 0
        for rows in np.array_split(order, m):
            y = None if prep.y is None else np.asarray(prep.y)[rows]
            p = _pvalue_of(test, _split(prep.X[rows], y, params["design"], plan["classes"]))
            count += int(p <= a0)  # NaN compares False: no rejection
        observe("rejection count", count)  # grey-box audit (else a no-op)
        z = tulap(rng, plan["rate"], shift=count)
        pvalue = math.exp(binomial_log_pvalue(z, m, a0, plan["rate"], "greater"))
        return ClassicalTestResult(
            statistic=float(z), pvalue=pvalue, alternative="greater", sensitivity=1.0,
            reject=bool(pvalue <= params["alpha"]), alpha=params["alpha"],
            epsilon=params["epsilon"], delta=0.0, n_samples=n,
            method="DP subsample-and-aggregate (test of tests, Tulap)",
        )

    def _noise_plan(self, prep):
        """What a fit noises (the grey-box audit hook, doc/contributing.md): the number
        of rejecting subsets, sensitivity 1 (one row lies in one subset), by the discrete
        Laplace part of the Tulap noise at rate <= ε (capped at MAX_RATE, as the release
        is). The random split is not noise."""
        return NoisePlan((NoisedQuantity("rejection count", "discrete_laplace", 1.0,
                                         min(prep.params["epsilon"], MAX_RATE)),))

    def _fitted_attributes(self, prep, result):
        plan = prep.plan
        return {"n_subsets_": plan["m"], "inner_alpha_": plan["inner_alpha"],
                "predicted_power_": plan["predicted"], "classes_": plan["classes"]}

    def _score_value(self, result):
        return -math.log(max(result.pvalue, _SMALLEST_FLOAT))

