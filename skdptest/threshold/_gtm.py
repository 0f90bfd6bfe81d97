"""GeneralizedThresholdMechanism: GTM-R, a pure ε-DP generalized threshold search."""

from __future__ import annotations

import copy
import math
import warnings
from dataclasses import dataclass
from numbers import Real
from types import MappingProxyType

import numpy as np

from .. import _noise
from .._base import BasePrivateTest
from .._budget import PrivacyBudget
from .._noise import exponential
from .._params import (
    Callable,
    InstanceOf,
    Interval,
    InvalidParameterError,
    NoneValue,
    Options,
    RandomState,
)
from .._recorder import NoisedQuantity, NoisePlan
from .._warnings import find_stack_level
from ._mechanisms import (
    GaussianThresholdQuery,
    NoisyThresholdQuery,
    RandomizedResponse,
    _statistic,
    as_outputs,
    check_mechanism,
    check_outputs,
)
from ._params import gtm_step_parameters
from ._results import ThresholdResult

__all__ = ["GeneralizedThresholdMechanism", "default_mechanisms"]

# Largest Poisson rate drawn in one call (numpy's limit is about 9.2e18).
_POISSON_CHUNK = 1e15
# Largest admissible rate cap: a step that could need more evaluations is refused
# before anything is charged (it could never run anyway).
_MAX_RATE = 1e18
# Largest number of evaluations of one step in constant-work mode (refused above).
_MAX_CONSTANT_WORK = 1e10
# Outputs drawn per call to a mechanism's ``sample`` (memory bound of a step). The
# calls of a step are a function of its number of evaluations only.
_SAMPLE_CHUNK = 1 << 20

#: ε_t / ε of the default mechanisms.
DEFAULT_EPSILON_RATIO = 0.05

_WORK_MODES = ("poisson", "constant")

#: Mechanism classes whose ``sample`` returns ``np.where(..., 1, -1).astype(np.int8)`` of
#: shape (size,) whatever the data and parameters: the output probe of ``_plan`` cannot
#: refuse them (exact classes only; a subclass may override ``sample``). The 63 default
#: queries are such, and probing them was a third of a default fit.
_PLUS_MINUS_BY_CONSTRUCTION = (NoisyThresholdQuery, RandomizedResponse, GaussianThresholdQuery)


def _exp_or_inf(x):
    return math.exp(x) if x < 709 else math.inf


def _dyadic_grid():
    pos = [2.0**j for j in range(-10, 21)]
    return [-c for c in reversed(pos)] + [0.0] + pos


class _BelowFraction:
    """Statistic #{i : mean(X_i) ≤ c} − n/2 (sensitivity 1, replace-one or add/remove)."""

    def __init__(self, c):
        self.c = c

    def __call__(self, X, y):
        X = np.asarray(X, dtype=float)
        return float(np.count_nonzero(X.mean(axis=1) <= self.c)) - X.shape[0] / 2.0

    def __repr__(self):
        return f"_BelowFraction(c={self.c!r})"


def default_mechanisms(epsilon):
    """The mechanisms used when ``mechanisms=None``: a private dyadic median search.

    Mechanism t is the noisy threshold query
    1{#{i : mean(X_i) ≤ c_t} − n/2 + Lap(1/ε_t) ≥ 0} with ε_t = 0.05 ε, over the
    public grid c_t = −2^20, …, −2^−10, 0, 2^−10, …, 2^20 (63 points, increasing).
    Its p_t ≥ 1/2 exactly when at least half of the row means are ≤ c_t, so with
    ``p_star=0.5`` the accepted index locates the median of the row means on
    the grid (to within a factor 2). The statistic has sensitivity 1 under both
    replace-one and add/remove-one neighbours.

    Parameters
    ----------
    epsilon : float
        ε of the whole search.

    Returns
    -------
    mechanisms : list of NoisyThresholdQuery
        The 63 queries, in the order the search examines them.

    Examples
    --------
    >>> from skdptest.threshold import default_mechanisms
    >>> mechanisms = default_mechanisms(1.0)
    >>> len(mechanisms), mechanisms[0].epsilon
    (63, 0.05)
    """
    eps_t = DEFAULT_EPSILON_RATIO * epsilon
    grid = _dyadic_grid()
    # the constructor checks ε_t, the threshold and Δ, the same for all 63: check them
    # once and copy the checked query (its checks were most of a default plan)
    first = NoisyThresholdQuery(_BelowFraction(grid[0]), 0.0, eps_t)
    out = [first]
    for c in grid[1:]:
        query = copy.copy(first)
        query.statistic = _BelowFraction(c)
        out.append(query)
    return out


def _check_target(value, name):
    """One p*_t: a real number in (0, 1), as a float."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, Real):
        raise InvalidParameterError(
            f"{name} must be a real number in (0, 1), got {type(value).__name__}.")
    value = float(value)
    if not 0.0 < value < 1.0:  # also refuses NaN
        raise InvalidParameterError(f"{name} must lie in (0, 1), got {value}.")
    return value


def _resolve_p_star(p_star, n):
    """The targets p*_0, …, p*_{n−1} (floats in (0, 1)) from ``p_star``."""
    if callable(p_star):
        return [_check_target(p_star(i), f"p_star({i})") for i in range(n)]
    if isinstance(p_star, Real):  # already checked by the constraint table
        return [float(p_star)] * n
    values = list(np.ravel(p_star)) if isinstance(p_star, np.ndarray) else list(p_star)
    if len(values) < n:
        raise InvalidParameterError(
            f"p_star has {len(values)} entries but there are {n} mechanisms.")
    return [_check_target(v, f"p_star[{i}]") for i, v in enumerate(values[:n])]


def _poisson(rng, lam):
    """Exact Poisson(λ) draw for 0 ≤ λ ≤ 1e18 (sum of chunks below numpy's limit)."""
    if lam <= _POISSON_CHUNK:
        return int(_noise.poisson(rng, lam))
    m = int(math.ceil(lam / _POISSON_CHUNK))
    return int(_noise.poisson(rng, lam / m, size=m).sum(dtype=np.int64))


def _count_targets(mech, X, y, n_evaluations, n_counted, target, phi, rng, name):
    """Run the purified mechanism ``n_evaluations`` times; count ``target`` in the first
    ``n_counted`` outputs.

    The calls to ``mech.sample`` (their number and sizes) are a function of
    ``n_evaluations`` only, never of the outputs: there is no early stop. The
    outputs are independent, so the count in the first ``n_counted`` of them has
    the law of the count in ``n_counted`` fresh evaluations (Poisson thinning).
    """
    count = 0
    done = 0
    while done < n_evaluations:
        m = int(min(_SAMPLE_CHUNK, n_evaluations - done))
        out = as_outputs(mech.sample(X, y, m, rng), m, name)
        if phi > 0:
            out = np.where(_noise.bernoulli(rng, phi, m), -out, out)
        used = min(max(n_counted - done, 0), m)
        count += int(np.count_nonzero(out[:used] == target))
        done += m
    return count


def _steps(privacy, p_stars, *, epsilon, failure_probability, approximation, theta):
    return [gtm_step_parameters(i + 1, eps_t, delta_t, p_t, epsilon=epsilon,
                                failure_probability=failure_probability,
                                approximation=approximation, theta=theta)
            for i, ((eps_t, delta_t), p_t) in enumerate(zip(privacy, p_stars, strict=True))]


def _search(mechanisms, privacy, p_stars, X, y, rng, *, epsilon, failure_probability,
            approximation, theta, work="poisson", steps=None, trace=None):
    """GTM-R on a finite list of mechanisms; returns the accepted index or None.

    ``work="poisson"`` runs each step's N_t ~ Po(λ_t) evaluations, all of them;
    ``work="constant"`` runs the public number ``constant_work`` of evaluations
    of every examined step and counts the outputs of the first N_t (forcing the
    step's decision, as above the rate cap, when N_t exceeds it).

    ``trace`` (a list or None) receives one dict per examined step with the
    non-private diagnostics (N_t, evaluations, forced); for tests and
    benchmarks only.
    """
    if steps is None:
        steps = _steps(privacy, p_stars, epsilon=epsilon,
                       failure_probability=failure_probability,
                       approximation=approximation, theta=theta)
    R = exponential(rng, steps[0].b0)
    for i, (mech, (eps_t, _), sp) in enumerate(zip(mechanisms, privacy, steps, strict=True)):
        nu = exponential(rng, sp.b1)
        log_rate = sp.log_rho + sp.direction * eps_t * (nu - R)
        # safeguard (see RATE_CAP_FACTOR): decided without counting, forced accept
        # (s = +1) or reject (s = −1); the region is monotone in ν_t − R
        forced = log_rate >= sp.log_rate_cap
        n_runs = 0 if forced else _poisson(rng, math.exp(log_rate))
        if work == "constant":
            evals = sp.constant_work
            # N_t > M_t: forced like the rate cap. The event {count < k and N_t ≤ M_t}
            # is a down-set of the two thinned Poisson counts, so acceptance stays
            # monotone in both of their means and the sparse-vector coupling holds.
            forced = forced or n_runs > evals
        else:
            evals = n_runs
        name = f"mechanisms[{i}]"
        hits = _count_targets(mech, X, y, evals, 0 if forced else n_runs, sp.direction,
                              sp.phi, rng, name)
        if forced:
            accept = sp.direction == 1
        else:
            reached = hits >= sp.k
            accept = reached if sp.direction == 1 else not reached
        if trace is not None:
            trace.append({"t": i + 1, "n_runs": n_runs, "evaluations": evals,
                          "forced": bool(forced), "accept": bool(accept)})
        if accept:
            return i
    return None


def _simulate_search(p, p_stars, epsilons, deltas, *, epsilon, failure_probability,
                     approximation, theta, n_reps, rng, work="poisson"):
    """Monte Carlo of GTM-R on mechanisms with known p_t, exact in law.

    Uses Poisson splitting: with N_t ~ Po(λ_t) runs, the numbers of +1 and −1
    outputs are independent Po(λ_t q_t) and Po(λ_t (1 − q_t)), q_t the purified
    probability. Vectorised over ``n_reps`` independent searches.

    Returns
    -------
    accepted : ndarray of shape (n_reps,)
        0-based accepted index, −1 when none.
    total_runs : ndarray of shape (n_reps,)
        Σ over the examined steps of the evaluations (N_t, or the constant
        number of the step with ``work="constant"``).
    """
    T = len(p)
    steps = _steps(list(zip(epsilons, deltas, strict=True)), p_stars, epsilon=epsilon,
                   failure_probability=failure_probability, approximation=approximation,
                   theta=theta)
    R = exponential(rng, steps[0].b0, size=n_reps)
    accepted = np.full(n_reps, -1)
    total = np.zeros(n_reps)
    active = np.ones(n_reps, dtype=bool)
    for i in range(T):
        sp = steps[i]
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        nu = exponential(rng, sp.b1, size=idx.size)
        log_rate = sp.log_rho + sp.direction * epsilons[i] * (nu - R[idx])
        forced = log_rate >= sp.log_rate_cap
        rate = np.exp(np.minimum(log_rate, sp.log_rate_cap))
        q = sp.phi + (1.0 - 2.0 * sp.phi) * p[i]
        plus = _noise.poisson(rng, rate * q)
        minus = _noise.poisson(rng, rate * (1.0 - q))
        if work == "constant":
            forced = forced | (plus + minus > sp.constant_work)
            total[idx] += sp.constant_work
        else:
            total[idx] += np.where(forced, 0, plus + minus)
        if sp.direction == 1:
            acc = np.where(forced, True, plus >= sp.k)
        else:
            acc = np.where(forced, False, minus < sp.k)
        hit = idx[acc]
        accepted[hit] = i
        active[hit] = False
    return accepted, total


@dataclass(frozen=True)
class _Plan:
    """Public plan of a search: a function of the parameters and the data's shape."""

    mechanisms: tuple
    privacy: tuple  # (ε_t, δ_t) of each mechanism
    p_stars: tuple
    steps: tuple  # StepParameters of each step


class GeneralizedThresholdMechanism(BasePrivateTest):
    """Generalized threshold search (GTM-R): accept the first good mechanism, ε-DP.

    Given a stream of binary mechanisms M_1, M_2, … (each (ε_t, δ_t)-DP on the
    data, with p_t = Pr[M_t(X) = +1]), outputs the index of the first t with
    p_t ≥ p*_t. With probability 1 − β (β = ``failure_probability``),
    simultaneously for all t, M_t is rejected if p_t ≤ p̄_t (see
    :func:`gtm_p_bar`) and accepted if p_t ≥ p*_t. Only the index is released;
    the whole search is pure ε-DP, even when some δ_t > 0 (those mechanisms are
    purified), under the neighbouring relation for which every M_t has its
    stated privacy (replace-one for the default mechanisms and the skdptest
    tests).

    Each step draws a Poisson number N_t of runs of M_t with a rate set by
    secret exponential noises (threshold noise R of mean b0 = (2 + θ)/(θ ε),
    step noise ν_t of mean b1 = (2 + θ)/ε) and accepts on the count of +1
    outputs (or of −1 outputs in the flip branch, used when p*_t is close to 1).

    Parameters
    ----------
    mechanisms : list or tuple of mechanisms, default=None
        Finite, ordered stream of binary mechanisms, each with ``epsilon``,
        optional ``delta`` and ``sample(X, y, size, rng)`` returning ±1 (see
        :mod:`skdptest.threshold`). The mechanisms are public: chosen without
        looking at the data (their ``repr`` is released with the accepted
        index). ``None`` uses :func:`default_mechanisms`: a private median
        search of the row means of ``X`` over a dyadic grid (noisy count
        thresholds with ε_t = 0.05 ε), meaningful on any numeric X.
    p_star : float, list/tuple/array of float or callable, default=0.5
        Acceptance target p*_t in (0, 1): one value, one per mechanism, or a
        function of the 0-based mechanism index (adaptive thresholds must depend
        only on public information).
    epsilon : float, default=1.0
        ε of the whole search (charged once per fit, pure: δ = 0).
    failure_probability : float, default=0.1
        β in [1e-100, 1): probability that the accuracy guarantee fails (a mechanism
        with p_t ≤ p̄_t accepted, or the first with p_t ≥ p*_t missed). Also the
        result's ``alpha``. (Called ``beta`` before 0.2.)
    approximation : float, default=1.5
        Approximation factor γ in (1, 2] between the acceptance target p*_t and
        the rejection level p̄_t ≈ p*_t/(γΛ_t): smaller means a sharper search
        and more evaluations (∝ 1/(γ − 1)²). (Called ``gamma`` before 0.2.)
    theta : float, default=1.0
        Split θ > 0 of ε between the threshold noise and the step noises.
    work : {"poisson", "constant"}, default="poisson"
        How many times each step evaluates its mechanism. ``"poisson"``: N_t,
        the Poisson number of the algorithm (all of them: no early stop). The
        number of evaluations then follows the secret noise: see Notes before
        letting anyone observe running times. ``"constant"``: a public number
        M_t of evaluations per step (the (1 − β_t) Poisson quantile of the
        step's high-probability rate bound), of which the first N_t are counted;
        the work is then a function of the released index only. It costs more
        evaluations and at most β_t more failure probability per step (the
        total stays ≤ β).
    budget : PrivacyBudget, default=None
        Budget charged ε per fit and per score.
    random_state : None, int, RandomState instance or Generator, default=None
        Source of all noise, including the mechanisms' own randomness. For tests and reproducible
        examples only: any value other than ``None`` raises
        :class:`~skdptest.FixedRandomStateWarning` (whoever holds the seed, the generator or a
        pickle of the estimator can replay the noise, and equal seeds correlate the noise of
        different fits). ``None`` draws fresh OS entropy and keeps nothing from which the noise
        could be regenerated.

    Attributes
    ----------
    result_ : ThresholdResult
        The accepted index (or None, ``result_.accepted``), whether one was
        accepted (``result_.reject``), the number of mechanisms examined and
        the ε spent. Nothing else (no evaluation counts, rates or noise) is kept.
    mechanisms_ : list
        The mechanisms searched (the default ones when ``mechanisms=None``).
    p_star_ : list of float
        The target p*_t of each mechanism.
    n_features_in_ : int
        Number of features seen during :meth:`fit`.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of features seen during :meth:`fit`, when ``X`` has string
        column names.
    privacy_spent_ : PrivacySpent
        What the last charge cost: ``epsilon``, ``delta`` and the privacy profile
        declared to the ledger. This estimator declares ``"pure"``: its release is
        ε-DP. It is not one continuous Laplace draw, so the
        ``"laplace"`` profile (a tighter zCDP) is not claimed; the ``"zcdp"`` and
        ``"rdp"`` accountants charge it as generic pure DP (see "Privacy profiles" in
        the privacy-budget guide).

    See Also
    --------
    gtm_p_bar : the rejection level p̄_t.
    gtm_lambda : Λ_t.
    gtm_evaluation_bound : the high-probability rate of evaluations per step.
    exact_output_log_probabilities : exact output law, for privacy audits.

    Notes
    -----
    Privacy: given R and ν_t the count of +1 outputs is Poisson(λ_t q_t)
    (thinning), so acceptance is a non-decreasing function of
    w_t = u_t + ν_t − R with u_t = ln(q_t)/ε_t (or −ln(1 − q_t)/ε_t in the flip
    branch), which moves by at most 1 between neighbours. The coupling
    R → R + 1, ν_t → ν_t + 2 then bounds every output's probability ratio by
    e^{1/b0 + 2/b1} = e^ε. In constant-work mode a step with N_t > M_t is
    forced (accepted when s = +1, rejected when s = −1): its rejection event
    is a down-set (s = +1) or up-set (s = −1) of the two independent Poisson
    counts of +1 and −1 outputs, with means λ_t q_t and λ_t (1 − q_t). A
    neighbour moves each of q_t and 1 − q_t by a factor at most e^{ε_t} (pure
    ε_t-DP on both outputs), which the coupling's factor e^{±ε_t} on λ_t
    compensates for both means at once, so the same coupling applies. Both modes are
    checked exactly (numerical integration of the output law,
    :func:`exact_output_log_probabilities`) in the tests, where the bound is
    attained to quadrature precision and under-noised variants are flagged.

    What the running time reveals: the guarantee covers the released index.
    No step stops early on its outputs, so the work never depends on the
    mechanisms' outputs; but with ``work="poisson"`` step t runs N_t
    evaluations, and N_t ~ Po(λ_t) follows the secret noises R and ν_t. An
    observer of per-step evaluation counts (or running times) learns λ_t, and
    given λ_t the acceptance of a step is no longer ε-DP: the search is then
    not private against that observer. The number of examined steps is a
    function of the released index (no leak). With ``work="constant"`` every
    examined step runs its public M_t evaluations, so the total work
    Σ_{t ≤ index} M_t is a function of the released index: use it when timing
    is observable (the time of each evaluation must itself not depend on the
    data, which is the mechanism's responsibility).

    Accuracy: the failure events are R > R_max (β/4), and per step ν_t > V_t
    (β_t) and a Poisson tail (β_t), in total at most
    β/4 + 2 Σ_t β/(5 t ln³(t + 2)) ≤ 0.75 β; constant-work mode adds
    Pr[Po(bound) > M_t] ≤ β_t per step, in total ≤ β.

    Runaway evaluation counts are prevented by a private safeguard: when the
    rate of a step exceeds :data:`~skdptest.threshold.RATE_CAP_FACTOR` times
    its high-probability bound, the step is decided without counting
    (accepted in the direct branch, rejected in the flip branch). This happens
    only on the failure events of the accuracy analysis and keeps the search
    ε-DP (the forced region is monotone in the noise). A step whose capped rate
    would exceed 1e18 runs (or, with ``work="constant"``, whose M_t exceeds
    1e10) is refused with an error before anything is charged. With
    ``work="poisson"``, when ε_t ≥ ε/(2 + θ) (direct branch) or
    ε_t ≥ θε/(2 + θ) (flip branch) the expected number of evaluations is
    infinite and a ``RuntimeWarning`` is issued.

    Before the budget is charged, each mechanism is run once on a public
    surrogate of the data (zeros of the data's shape; the output is
    discarded) to check that it returns ±1; the private data are not read
    before the charge.

    References
    ----------
    .. [1] Chaturvedi, Henzinger et al., "Near-Optimal Generalized Private
       Testing", arXiv 2605.21601 (GTM-R is a reconstruction from its abstract).
    .. [2] J. Liu and K. Talwar, "Private selection from private candidates",
       STOC 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest import GeneralizedThresholdMechanism
    >>> X = np.random.default_rng(0).normal(3.0, 1.0, size=(2000, 1))
    >>> gtm = GeneralizedThresholdMechanism(epsilon=1.0, random_state=0).fit(X)
    >>> gtm.decision()  # a grid point was accepted
    True
    >>> i = gtm.result_.accepted
    >>> gtm.mechanisms_[i].statistic.c  # a dyadic upper bound of the median 3
    4.0
    """

    _parameter_constraints = {
        "mechanisms": [NoneValue(), InstanceOf(list, tuple,
                                               description="a list or tuple of mechanisms")],
        "p_star": [Interval(Real, 0, 1, closed="neither"),
                   InstanceOf(list, tuple, np.ndarray,
                              description="a list, tuple or array of floats in (0, 1)"),
                   Callable()],
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        # β_t = β / (5 t ln³(t + 2)) must stay a positive float at every step: β >= 1e-100.
        "failure_probability": [Interval(Real, 1e-100, 1, closed="left")],
        "approximation": [Interval(Real, 1, 2, closed="right")],
        "theta": [Interval(Real, 0, None, closed="neither")],
        "work": [Options(*_WORK_MODES)],
        "budget": [NoneValue(), InstanceOf(PrivacyBudget)],
        "random_state": [RandomState()],
    }

    def __init__(self, mechanisms=None, *, p_star=0.5, epsilon=1.0, failure_probability=0.1,
                 approximation=1.5, theta=1.0, work="poisson", budget=None,
                 random_state=None):
        self.mechanisms = mechanisms
        self.p_star = p_star
        self.epsilon = epsilon
        self.failure_probability = failure_probability
        self.approximation = approximation
        self.theta = theta
        self.work = work
        self.budget = budget
        self.random_state = random_state

    # -- validation and plan (before the charge) ---------------------------------
    def _check_params(self, params):
        """Resolve the mechanisms (defaults) and the targets p*_t; check each."""
        if params["mechanisms"] is None:
            mechanisms = default_mechanisms(params["epsilon"])
        else:
            mechanisms = list(params["mechanisms"])
            if not mechanisms:
                raise InvalidParameterError("mechanisms must contain at least one mechanism.")
        for i, mech in enumerate(mechanisms):
            check_mechanism(mech, f"mechanisms[{i}]")
        p_stars = _resolve_p_star(params["p_star"], len(mechanisms))
        return MappingProxyType({**params, "mechanisms": tuple(mechanisms),
                                 "p_star": tuple(p_stars)})

    def _plan(self, params, X, y):
        mechanisms, p_stars = params["mechanisms"], params["p_star"]
        privacy = tuple(check_mechanism(m, f"mechanisms[{i}]")
                        for i, m in enumerate(mechanisms))
        steps = tuple(_steps(privacy, p_stars, epsilon=params["epsilon"],
                             failure_probability=params["failure_probability"],
                             approximation=params["approximation"], theta=params["theta"]))
        epsilon, work = params["epsilon"], params["work"]
        for i, ((eps_t, _), sp) in enumerate(zip(privacy, steps, strict=True)):
            if sp.log_rate_cap > math.log(_MAX_RATE):
                raise InvalidParameterError(
                    f"mechanisms[{i}]: epsilon_t={eps_t:g} is too large for epsilon="
                    f"{epsilon:g} and failure_probability="
                    f"{params['failure_probability']:g} (the step could need about "
                    f"{_exp_or_inf(sp.log_rate_cap):.3g} runs); lower epsilon_t/epsilon or "
                    "raise failure_probability."
                )
            if work == "constant":
                if sp.constant_work > _MAX_CONSTANT_WORK:
                    raise InvalidParameterError(
                        f"mechanisms[{i}]: with work='constant' the step would run "
                        f"{sp.constant_work:.3g} evaluations (more than "
                        f"{_MAX_CONSTANT_WORK:.0e}); lower epsilon_t/epsilon or use "
                        "work='poisson'."
                    )
                continue
            mean = sp.b1 if sp.direction == 1 else sp.b0
            if eps_t * mean >= 1.0:
                warnings.warn(
                    f"mechanisms[{i}]: epsilon_t={eps_t:g} >= epsilon/(2+theta)"
                    f"{'' if sp.direction == 1 else '*theta'} = {1.0 / mean:g}: the "
                    "expected number of evaluations of this step is infinite.",
                    RuntimeWarning,
                    stacklevel=find_stack_level(),  # the user's line
                )
        # Refusals of wrapped estimators run on the data now, before the charge (a draw
        # refused after it would tell neighbours apart); they release only a refusal.
        for mech in mechanisms:
            check = getattr(mech, "check_data", None)
            if callable(check):
                check(X, y)
        # Output check before the charge, on a public surrogate of the data's shape
        # (zeros): the private data are not read before the budget is charged. A
        # mechanism that cannot run on the surrogate is checked during the search.
        probe = np.random.default_rng(0)
        X0 = np.zeros_like(X)
        y0 = None if y is None else np.zeros_like(np.asarray(y))
        for i, mech in enumerate(mechanisms):
            if type(mech) in _PLUS_MINUS_BY_CONSTRUCTION:
                continue
            try:
                out = mech.sample(X0, y0, 1, probe)
            except Exception:  # noqa: BLE001 - the surrogate may be outside its domain
                continue
            check_outputs(out, 1, f"mechanisms[{i}]")
        return _Plan(mechanisms=mechanisms, privacy=privacy, p_stars=p_stars, steps=steps)

    # -- release ---------------------------------------------------------------------
    def _release(self, prep, rng):
        params, plan = prep.params, prep.plan
        accepted = _search(plan.mechanisms, plan.privacy, plan.p_stars, prep.X, prep.y, rng,
                           epsilon=params["epsilon"],
                           failure_probability=params["failure_probability"],
                           approximation=params["approximation"], theta=params["theta"],
                           work=params["work"], steps=plan.steps)
        n = len(plan.mechanisms)
        return ThresholdResult(
            reject=accepted is not None,
            alpha=params["failure_probability"],
            epsilon=params["epsilon"],
            delta=0.0,
            n_samples=prep.n_samples,
            accepted=accepted,
            n_examined=n if accepted is None else accepted + 1,
            n_mechanisms=n,
            accepted_mechanism=None if accepted is None else repr(plan.mechanisms[accepted]),
            work=params["work"],
        )

    def _privacy_cost(self, params):
        return params["epsilon"], 0.0  # pure ε-DP, even with δ_t > 0 (purification)

    def _noise_plan(self, prep):
        """What a search noises (the grey-box audit hook, doc/contributing.md).

        The threshold noise R (mean b0 = (2 + θ)/(θ ε): the share θ ε/(2 + θ)) and the
        step noises ν_t (mean b1 = (2 + θ)/ε: the share 2 ε/(2 + θ), paid twice) shift
        the log rates by ε_t (ν_t − R). They hide log q_t / ε_t and log(1 − q_t) / ε_t,
        q_t the purified Pr[M_t = +1], which move by at most 1 between neighbours when
        M_t is ε_t-DP (measured where the mechanisms give ``probability``). The threshold
        queries' noise hides q(X) / Δ_t (Laplace scale at least Δ_t / ε_t).
        The search stops at the accepted index: draws may stop earlier on one side.
        """
        params, plan, X, y = prep.params, prep.plan, prep.X, prep.y
        eps, theta = params["epsilon"], params["theta"]
        logs = None
        if all(hasattr(m, "probability") for m in plan.mechanisms):
            logs = []
            for mech, (eps_t, _), sp in zip(plan.mechanisms, plan.privacy, plan.steps,
                                            strict=True):
                q = sp.phi + (1.0 - 2.0 * sp.phi) * float(mech.probability(X, y))
                logs += [(math.log(q) if q > 0 else -math.inf) / eps_t,
                         (math.log1p(-q) if q < 1 else -math.inf) / eps_t]
        out = [NoisedQuantity("log rates (threshold noise R)", "exponential", 1.0,
                              theta * eps / (2.0 + theta), value=logs),
               NoisedQuantity("log rates (step noises)", "exponential", 1.0,
                              2.0 * eps / (2.0 + theta), factor=2.0, draws=None, value=logs)]
        for cls, kind in ((NoisyThresholdQuery, "laplace"), (GaussianThresholdQuery, "gaussian")):
            queries = [m for m in plan.mechanisms if isinstance(m, cls)]
            if not queries:
                continue
            # one declaration for all draws of the kind: the least scale any of them needs
            # (Laplace Δ_t/ε_t; Gaussian σ_t as the mechanism calibrates it, not re-derived)
            share = max(m.epsilon / m.sensitivity for m in queries)
            least = min(m.sensitivity / m.epsilon if kind == "laplace" else m.sigma
                        for m in queries)
            out.append(NoisedQuantity(
                f"threshold queries ({kind})", kind, 1.0, share, factor=least * share,
                draws=None,
                value=[_statistic(m.statistic, X, y) / m.sensitivity for m in queries]))
        return NoisePlan(tuple(out), sequential=True)

    def _fitted_attributes(self, prep, result):
        return {"mechanisms_": list(prep.plan.mechanisms),
                "p_star_": list(prep.plan.p_stars)}

    def _score_value(self, result):
        # minus the 1-based position of the accepted mechanism (n + 1 when none)
        return -float(result.n_examined + (result.accepted is None))

    # -- public API --------------------------------------------------------------
    def score(self, X, y=None):
        """Run a fresh private search on ``X`` (charged ε) and score how early it accepts.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Private data.
        y : array-like or None, default=None
            As in :meth:`fit`.

        Returns
        -------
        score : float
            Minus the 1-based position of the accepted mechanism, or
            −(n_mechanisms + 1) when none is accepted: larger means an earlier
            mechanism was found good. It is a private (ε-DP) release.
        """
        return super().score(X, y)
