"""PrivateEValueTest: the batch ε-DP e-value for a simple null P against Q."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from numbers import Integral, Real
from types import MappingProxyType
from typing import Any

import numpy as np
from scipy import stats

from .._base import BasePrivateTest
from .._budget import PrivacyBudget
from .._params import (
    HasMethods,
    InstanceOf,
    Interval,
    InvalidParameterError,
    NoneValue,
    Options,
    RandomState,
    check_value,
    validate_parameters,
)
from .._recorder import NoisedQuantity, NoisePlan
from .._warnings import find_stack_level, warn_leak
from ._cache import _cached, law_tokens, snapshot
from ._exact import exact_model
from ._laws import _dim, check_law, make_laws
from ._merge import expected_log_release, plan_release, release, release_noise, release_sum
from ._optimal import optimal_statistic, tslr_statistic
from ._results import EValueResult
from ._rows import RowTable, check_block, check_finite, integer_sum, is_dask, validate_rows

__all__ = ["PrivateEValueTest", "expected_log_e_value"]

_STATISTICS = ("optimal", "tslr", "exact")

#: The largest ε a mechanism is run at. Any ε > 0 is valid, but above this value the
#: release is computed at ε = MAX_EPSILON: it is then MAX_EPSILON-DP, hence ε-DP (a
#: smaller ε only adds noise), and the budget is still charged the ε asked for. The
#: e-values are already at their non-private limit there: the planned clip range of E*
#: stays far below it (about 12 nats for a unit Gaussian shift at ε = 600) and the
#: noise scale of the merged release is at most R_λ / 512 nats; larger values would
#: only overflow the planning (e^{a + ε} in the normaliser of E*, e^{ε/2} in tsLR, the
#: exact sampler's rates are capped at 2**32).
MAX_EPSILON = 512.0


def mechanism_epsilon(epsilon):
    """The ε the release is computed at: ``min(epsilon, MAX_EPSILON)`` (see there)."""
    return min(float(epsilon), MAX_EPSILON)


def warn_epsilon_cap(estimator_name, epsilon):
    """Tell the user when the release runs at ``MAX_EPSILON`` instead of ``epsilon``
    (a parameter the fit overrides; public: a function of the parameter only)."""
    if float(epsilon) > MAX_EPSILON:
        warn_leak(
            f"{estimator_name}: epsilon={epsilon!r} is above {MAX_EPSILON:g}; the release "
            f"is computed at epsilon={MAX_EPSILON:g} (already the non-private limit of the "
            "e-value) while the budget is charged the epsilon asked for."
        )


def default_laws(n_features):
    """N(0, I_d) against N(μ, I_d) with a unit shift spread evenly: μ_j = 1/√d."""
    mean = np.full(n_features, 1.0 / math.sqrt(n_features))
    return (
        stats.multivariate_normal(mean=np.zeros(n_features), cov=np.eye(n_features)),
        stats.multivariate_normal(mean=mean, cov=np.eye(n_features)),
    )


LAW = HasMethods("rvs", description="a frozen scipy.stats distribution")

#: Constraints shared by the e-value estimators.
COMMON_CONSTRAINTS = {
    "null": [NoneValue(), LAW],
    "alternative": [NoneValue(), LAW],
    "epsilon": [Interval(Real, 0, None, closed="neither")],
    "alpha": [Interval(Real, 0, 1, closed="neither")],
    "budget": [NoneValue(), InstanceOf(PrivacyBudget)],
    "random_state": [RandomState()],
}


def check_laws(params):
    """Cross-check ``null`` and ``alternative`` (given together, supported kinds)."""
    if (params["null"] is None) != (params["alternative"] is None):
        raise InvalidParameterError(
            "null and alternative must be given together (or both left as None)."
        )
    if params["null"] is not None:
        tokens, _ = held = law_tokens(params["null"], params["alternative"])
        for name, token in zip(("null", "alternative"), tokens, strict=True):
            law = params[name]
            try:
                # public (the law alone), memoised by the law's values: quantiles of a
                # custom law are slow
                _cached(("check_law", token, name), (law,) if token[0] == "id" else (),
                        lambda law=law, name=name: check_law(law, name))
            except (TypeError, ValueError) as exc:
                raise InvalidParameterError(str(exc)) from exc
        # the fit's plan reads the same tokens (each costs ~0.1 ms: a third of a fit
        # whose plan is cached); they are recomputed at every fit, as the cache requires
        params = MappingProxyType({**params, _TOKENS: held})
    return params


#: The key of the laws' cache tokens (and anchors) in parameters that went through
#: :func:`check_laws`.
_TOKENS = "_law_tokens"


def laws_tokens(params):
    """``law_tokens(null, alternative)`` of the validated ``params``: those
    :func:`check_laws` computed for this fit, else computed now."""
    held = params.get(_TOKENS)
    return held if held is not None else law_tokens(params["null"], params["alternative"])


def resolve_statistic(params, n_features):
    """The laws and the per-row statistic of an e-value estimator, for ``n_features``."""
    epsilon, name = mechanism_epsilon(params["epsilon"]), params["statistic"]
    # keyed by the laws' values (``_cache.law_token``): fresh but equal law objects,
    # e.g. written inline or deep-copied by ``clone``, share one plan
    tokens, anchors = laws_tokens(params)

    def compute():
        null, alternative = (
            default_laws(n_features) if params["null"] is None
            else (snapshot(params["null"], tokens[0]),
                  snapshot(params["alternative"], tokens[1]))
        )
        laws = make_laws(null, alternative)
        if laws.n_features != n_features:
            raise ValueError(
                f"X has {n_features} feature(s) but the null distribution has dimension "
                f"{laws.n_features}."
            )
        if name == "optimal":
            return laws, optimal_statistic(laws, epsilon)[0]
        if name == "exact":
            exact = exact_model(laws, epsilon)
            if exact is None:
                raise ValueError(
                    "statistic='exact' needs an exact model of the laws (finite discrete, "
                    "Gaussian location family or univariate continuous); use "
                    "statistic='tslr' for these laws."
                )
            return laws, exact
        return laws, tslr_statistic(laws, epsilon)

    key = ("stat", tokens, name, epsilon, n_features)
    return _cached(key, anchors, compute)


def resolve_plan(bet, laws, stat, n, epsilon):
    """The per-row statistic, bet and clip range for n rows (public: laws and n only).

    A fixed ``bet`` merges ``stat`` (E* clipped at ε, or tsLR). With ``bet="auto"``
    the bet maximises the expected release; for E* on laws with cheap rates
    (finite discrete, Gaussian) a narrower clip range r < ε without merging is also
    planned (``choose_clip``) and kept when its expected release is larger, which it
    is for continuous laws at small n R_ε. Returns (stat, bet, clip range or None).
    """
    clip = epsilon if stat.name == "optimal" else None
    if bet != "auto":
        return stat, float(bet), clip

    def compute():
        stat_at = None
        if stat.name == "optimal" and laws.fast_rates:
            def stat_at(r):
                return optimal_statistic(laws, r, rates=False)[0]
        planned, bet, r = plan_release(laws, stat, n, epsilon, stat_at)
        if r is not None:  # the chosen clip, with the rate's consistency check
            planned = optimal_statistic(laws, r)[0]
        return planned, bet, clip if r is None else r

    return _cached(("plan", id(laws), id(stat), n, epsilon), (laws, stat), compute)


def merged_plan(bet, laws, stat, n, epsilon):
    """The public :class:`_EValuePlan` of a merged release of n rows (statistic, bet,
    clip range, grid noise and, for finite discrete laws, the per-value table).

    A function of the laws, n and ε only, memoised: a second fit with the same laws and
    n plans in O(1).
    """
    def compute():
        s, b, clip = resolve_plan(bet, laws, stat, n, epsilon)
        noise = release_noise(s, b, epsilon)
        return _EValuePlan(laws, s, b, clip, noise, RowTable.maybe(laws, s, b, noise))

    return _cached(("merged", id(laws), id(stat), bet, n, epsilon), (laws, stat), compute)


class PrivateEValueTest(BasePrivateTest):
    """Batch ε-DP e-value for a simple null P against a simple alternative Q.

    Each row gets the per-row e-statistic E (the optimal clipped likelihood
    ratio E*, or the distribution-free tsLR), the rows are merged with a bet λ
    into Λ_n = Σ log(1 − λ + λ E(x_t)), and Λ_n is released with Laplace noise of
    scale b = R_λ/ε and the exact compensator log(1 − b²). ``exp`` of the release
    is an e-value: E_P[E] <= 1, so rejecting when E >= 1/α has level α.

    Parameters
    ----------
    null : frozen scipy.stats distribution, default=None
        The null P of one row: discrete with finite support, univariate
        continuous, or multivariate normal. ``None`` (with ``alternative=None``):
        N(0, I_d), d = number of features of X.
    alternative : frozen scipy.stats distribution, default=None
        The alternative Q, of the same kind. ``None``: N(μ, I_d) with
        μ_j = 1/√d (a unit mean shift spread evenly over the features).
    epsilon : float, default=1.0
        Privacy parameter ε > 0 of one fit (or one score).
    statistic : {"optimal", "tslr", "exact"}, default="optimal"
        ``"optimal"``: E* = min(c2, max(c1, q/p)) with c2 = e^ε c1 normalised so
        that E_P[E*] = 1 (exact for finite discrete laws and Gaussian location
        families, crossings + cdfs for univariate continuous laws; refused
        otherwise). ``"tslr"``: e^{-η} + (1 − e^{-η}) min(1 + e^η, q/p) with
        η = ε/2, valid for any pair without a normaliser. ``"exact"``: for laws on
        two points (e.g. Bernoulli) release the count plus two-sided geometric
        noise at rate ε and return the likelihood ratio f_Q/f_P of that release
        (no bet, no compensator): certified to be the most powerful ε-DP
        e-value in every case checked (doc/evalues.md, 'Finite-n optimality');
        for other laws with an exact model (finite discrete, Gaussian location,
        univariate continuous) the same with log E* quantised to a lattice.
    bet : "auto" or float, default="auto"
        Merging bet λ in (0, 1). ``"auto"`` maximises the expected released log
        e-value under Q, a public function of n and the laws; with
        ``statistic="optimal"`` on finite discrete or Gaussian laws it also tries
        E* clipped at a narrower log-range r < ε released without merging
        (λ = 1, Laplace scale r/ε) and keeps whichever has the larger expected
        release (``result_.clip_range``; doc/evalues.md, 'Clip-range planning').
    alpha : float, default=0.05
        Level: reject P when the e-value is at least 1/α.
    budget : PrivacyBudget, default=None
        Ledger charged ε before every fit and score.
    random_state : None, int, RandomState instance or Generator, default=None
        Source of the noise. For tests and reproducible examples only: any value other than
        ``None`` raises :class:`~skdptest.FixedRandomStateWarning` (whoever holds the seed, the
        generator or a pickle of the estimator can replay the noise, and equal seeds correlate the
        noise of different fits). ``None`` draws fresh OS entropy and keeps nothing from which the
        noise could be regenerated.

    Attributes
    ----------
    result_ : EValueResult
        The private result of the last fit.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of features seen during fit, when X has string column names.
    privacy_spent_ : PrivacySpent
        What the last charge cost: ``epsilon``, ``delta`` and the privacy profile
        declared to the ledger. This estimator declares ``"pure"``: its release is
        ε-DP. It is not one continuous Laplace draw, so the
        ``"laplace"`` profile (a tighter zCDP) is not claimed; the ``"zcdp"`` and
        ``"rdp"`` accountants charge it as generic pure DP (see "Privacy profiles" in
        the privacy-budget guide).

    See Also
    --------
    optimal_rate : the optimal rate R_ε and the constants of E*.

    Notes
    -----
    Privacy: pure ε-DP with respect to replacing one row; the data domain is the
    support of the null (rows outside it are rejected with a ``ValueError``
    before anything is charged or released). The sensitivity R_λ is computed
    from the actual extreme values of E over that support (exactly for discrete
    laws, the clip bounds otherwise). The number of rows is public.

    Released fields, jointly: one private value leaves the estimator, the integer
    J = M + K (M the exactly summed, floored merged statistic; K exact discrete
    Laplace noise at rate r <= ε / Δ_int, so J is ε-DP), or for
    ``statistic="exact"`` the noisy count (or lattice sum). ``log_e_value``
    (= g·J − c), ``e_value``, ``pvalue`` = min(1, 1/E) and ``reject`` are fixed
    public functions of that one integer, so together they cost ε, and every
    reachable float is reachable from both neighbours (no low-order-bit leak).
    ``bet``, ``clip_range``, ``noise_scale``, ``grid`` and ``compensator`` are
    public plans (functions of n, ε and the laws); ``n_samples``, ``alpha``,
    ``epsilon``, ``n_features_in_`` and ``feature_names_in_`` are public. Nothing
    else is kept: no per-row statistic, no noise draw, no generator.

    Validity: E_P[exp(g·J − c)] <= (1 − λ + λ E_P[E])^n E[e^{gK}] e^{−c} <= 1
    exactly, at every n (the floors only lower the statistic, c = log E[e^{gK}]);
    for ``statistic="exact"``, E_P[f_Q(Y)/f_P(Y)] = Σ_y f_Q(y) = 1.

    Power: the expected released log e-value under Q is about
    n E_Q[log(1 − λ + λ E)] − c, close to n R_ε for large n.

    References
    ----------
    .. [1] Jacobsen, Gonzalez, Brown, Fawaz, Ramdas. "Optimal Rates for
       Differentially Private Hypothesis Testing with E-values." arXiv:2605.28952.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import stats
    >>> from skdptest import PrivateEValueTest
    >>> rng = np.random.default_rng(0)
    >>> X = rng.binomial(1, 0.5, size=(1000, 1))
    >>> test = PrivateEValueTest(stats.bernoulli(0.3), stats.bernoulli(0.5),
    ...                          epsilon=1.0, random_state=0).fit(X)
    >>> test.decision()
    True
    """

    def __init__(
        self,
        null=None,
        alternative=None,
        *,
        epsilon=1.0,
        statistic="optimal",
        bet="auto",
        alpha=0.05,
        budget=None,
        random_state=None,
    ):
        self.null = null
        self.alternative = alternative
        self.epsilon = epsilon
        self.statistic = statistic
        self.bet = bet
        self.alpha = alpha
        self.budget = budget
        self.random_state = random_state

    _parameter_constraints = {
        **COMMON_CONSTRAINTS,
        "statistic": [Options(*_STATISTICS)],
        "bet": [Options("auto"), Interval(Real, 0, 1, closed="neither")],
    }

    def _check_params(self, params):
        params = check_laws(params)
        warn_epsilon_cap(type(self).__name__, params["epsilon"])
        if params["statistic"] == "exact" and params["bet"] != "auto":
            warn_leak(
                f"PrivateEValueTest: bet={params['bet']!r} is ignored by statistic='exact' "
                "(it releases the noisy count or lattice sum and its likelihood ratio, "
                "with no bet)."
            )
        return params

    def _validate_input(self, X, y, reset):
        # finiteness is checked in the plan, in the same pass as the null's support
        # where the laws have a table (one pass over X saved)
        return validate_rows(self, X, reset, finite=False), y

    def _plan(self, params, X, y):
        # Everything that can refuse the data runs here, before the budget is charged;
        # the checks' results are discarded (nothing private is kept before charging).
        warn_default_laws(params, X.shape[1])
        laws, stat = resolve_statistic(params, X.shape[1])
        if is_dask(X) and stat.name == "exact":
            raise ValueError(
                "statistic='exact' does not take dask input; use statistic='optimal' or "
                "'tslr' (their integer row sums are computed per chunk)."
            )
        if stat.name == "exact":
            laws.check_rows(check_finite(X))
            try:  # the sampler's rate is planned now: a tiny ε refuses before the charge
                stat.noise_scale(X.shape[0], mechanism_epsilon(params["epsilon"]))
            except ValueError as exc:
                raise ValueError(
                    f"epsilon={params['epsilon']!r} is too small for the exact sampler: {exc}"
                ) from exc
            return _EValuePlan(laws, stat, None, None)
        plan = merged_plan(params["bet"], laws, stat, X.shape[0],
                           mechanism_epsilon(params["epsilon"]))
        if is_dask(X):
            _dask_map(X, check_block, laws, plan.table)  # per chunk, on the workers
        elif plan.table is not None:
            plan.table.check(X)  # support and finiteness, counts discarded
        else:
            # the null's support only (nothing for Gaussian laws): the log-ratio is
            # computed once, in the release
            laws.check_rows(check_finite(X))
        return plan

    def _release(self, prep, rng):
        params, plan, X = prep.params, prep.plan, prep.X
        epsilon, n = mechanism_epsilon(params["epsilon"]), prep.n_samples
        if plan.stat.name == "exact":
            log_e = plan.stat.batch_log_e(X, epsilon, rng)
            scale = plan.stat.noise_scale(n, epsilon)
        elif plan.noise is None:  # constant statistic: nothing about the data is released
            if is_dask(X):
                log_e = math.fsum(_dask_map(X, _constant_sum, plan.laws, plan.stat, plan.bet))
            else:
                log_e = release(plan.stat.log_e(plan.laws.log_ratio(X)), plan.stat,
                                plan.bet, epsilon, rng)[0]
            scale = 0.0
        else:
            # S = Σ floor(t_i / h): one integer per chunk for dask (computed on the
            # workers; only these integers come back), else one pass (table lookup for
            # discrete laws). The noise is drawn once, here.
            args = (plan.laws, plan.stat, plan.bet, plan.noise, plan.table)
            total = sum(_dask_map(X, integer_sum, *args)) if is_dask(X) \
                else integer_sum(X, *args)
            log_e, scale = release_sum(total, plan.noise, rng), plan.noise.scale
        noise = getattr(plan, "noise", None)
        return EValueResult(
            e_value=math.exp(min(log_e, 700.0)),
            log_e_value=log_e,
            reject=bool(log_e >= -math.log(params["alpha"])),
            alpha=params["alpha"],
            epsilon=params["epsilon"],
            delta=0.0,
            n_samples=n,
            statistic_kind=plan.stat.name,
            bet=plan.bet,
            noise_scale=scale,
            clip_range=plan.clip,
            grid=None if noise is None else noise.grid,
            compensator=None if noise is None else noise.log_mgf,
        )

    def _score_value(self, result):
        return result.log_e_value

    def _noise_plan(self, prep):
        """What a fit noises (the grey-box audit hook, doc/contributing.md)."""
        return NoisePlan(batch_noised_quantities(
            prep.plan.stat, prep.plan.noise, prep.n_samples,
            mechanism_epsilon(prep.params["epsilon"])))

    def score(self, X, y=None):
        """Private log e-value on new data ``X`` (charged ε like a fit).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Private data.
        y : None
            Ignored.

        Returns
        -------
        log_e_value : float
            Released log e-value, in nats.
        """
        return super().score(X, y)


@dataclass(frozen=True)
class _EValuePlan:
    """Public plan of one e-value release: laws, statistic, bet and clip range."""

    laws: Any
    stat: Any
    bet: float | None
    clip: float | None
    noise: Any = None  # GridNoise of the merged release (None: exact or constant)
    table: Any = None  # RowTable of finite discrete laws (per-row integers by value)


def batch_noised_quantities(stat, noise, n, epsilon):
    """The noised quantity of one batch release of n rows at ``epsilon`` (grey-box audit
    declaration): the exact models' count (sensitivity: one count, or the lattice's
    ``steps``), else the merged integer M (sensitivity Δ_int = ``noise.steps`` on the
    grid ``noise.grid``); none for a constant statistic."""
    if stat.name == "exact":
        if stat.noise_scale(n, epsilon) == 0:
            return ()
        steps = stat.steps(n) if hasattr(stat, "steps") else 1
        return (NoisedQuantity("noisy count", "discrete_laplace", steps, epsilon),)
    if noise is None:
        return ()
    return (NoisedQuantity("merged integer", "discrete_laplace", noise.steps, epsilon,
                           unit=noise.grid),)


def _constant_sum(X, laws, stat, bet):
    from ._merge import _log_merge

    return float(np.sum(_log_merge(stat.log_e(laws.log_ratio(X)), bet)))


def _dask_map(X, func, *args):
    """``func(block, *args)`` of every row block of the dask array ``X``, computed where
    the chunks live (a distributed client if one is active); returns the list of
    results. Only what ``func`` returns comes back (a refusal or an integer sum)."""
    import dask

    X = X.rechunk({1: -1})
    blocks = X.to_delayed().ravel()
    return list(dask.compute(*[dask.delayed(func)(b, *args) for b in blocks]))


def warn_default_laws(params, n_features):
    """Warn when no laws are given: the default pair is rarely the data's model."""
    if params["null"] is None:
        warnings.warn(
            f"null and alternative are not given: testing N(0, I_{n_features}) against "
            f"N(μ, I_{n_features}) with μ_j = 1/√{n_features} on the raw columns of X. "
            "Unless X is standardised under the null, pass the laws of your rows "
            "(e.g. PrivateEValueTest(scipy.stats.norm(0, 1), scipy.stats.norm(0.5, 1))).",
            UserWarning,
            stacklevel=find_stack_level(),  # the user's line, not the package's
        )


def expected_log_e_value(null, alternative, n_samples, epsilon, *, statistic="optimal",
                         bet="auto"):
    """Expected released log e-value under the alternative: power planning at no cost.

    Computes E_Q[log E] of :class:`PrivateEValueTest` with these parameters from the
    public laws alone (no data, nothing charged), so ε and n can be chosen before any
    private data are touched.

    Parameters
    ----------
    null, alternative : frozen scipy.stats distributions
        As in :class:`PrivateEValueTest`.
    n_samples : int
        Number of rows, >= 1.
    epsilon : float
        Privacy parameter, > 0.
    statistic : {"optimal", "tslr", "exact"}, default="optimal"
        Per-row statistic (``"exact"``: the likelihood ratio of the noisy count or
        lattice sum, for laws with an exact model).
    bet : "auto" or float, default="auto"
        Merging bet (ignored by ``"exact"``).

    Returns
    -------
    log_e : float
        Merged statistics: n E_Q[log(1 − λ + λE)] + log(1 − b²) at the planned bet and
        clip, in nats (exact for the laws with an exact model, Monte Carlo planning
        otherwise). ``"exact"``: KL(f_Q‖f_P) of the release, summed over its
        support. Compare it with log(1/α).

    Examples
    --------
    >>> from scipy import stats
    >>> from skdptest import expected_log_e_value
    >>> round(expected_log_e_value(stats.bernoulli(0.3), stats.bernoulli(0.7), 1000, 1.0), 1)
    278.9
    >>> round(expected_log_e_value(stats.bernoulli(0.3), stats.bernoulli(0.7), 1000, 1.0,
    ...                            statistic="exact"), 1)
    280.9
    """
    params = validate_parameters(
        {k: PrivateEValueTest._parameter_constraints[k]
         for k in ("null", "alternative", "epsilon", "statistic", "bet")},
        dict(null=null, alternative=alternative, epsilon=epsilon, statistic=statistic, bet=bet),
    )
    params = check_laws(params)
    n_samples = check_value(n_samples, [Interval(Integral, 1, None)], "n_samples")
    if null is None:
        raise InvalidParameterError("null and alternative must be given.")
    epsilon = mechanism_epsilon(params["epsilon"])
    # the dimension of the laws (make_laws, inside the memoised resolve_statistic,
    # refuses laws of different dimensions or kinds)
    laws, stat = resolve_statistic(params, _dim(null))
    if stat.name == "exact":
        return stat.expected_log_e(n_samples, epsilon)
    stat, lam, _ = resolve_plan(params["bet"], laws, stat, n_samples, epsilon)
    return float(expected_log_release(laws, stat, lam, n_samples, epsilon))
