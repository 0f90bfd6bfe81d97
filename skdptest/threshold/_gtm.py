"""GeneralizedThresholdMechanism: GTM-R, a pure ε-DP generalized threshold search."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from numbers import Real

import numpy as np

from .._base import BasePrivateTest
from .._noise import exponential
from .._results import ThresholdResult
from .._validation import check_real
from ._mechanisms import NoisyThresholdQuery, check_mechanism, check_outputs
from ._params import gtm_step_parameters

__all__ = ["GeneralizedThresholdMechanism", "default_mechanisms"]

# Largest Poisson rate drawn in one call (numpy's limit is about 9.2e18).
_POISSON_CHUNK = 1e15
# Largest admissible rate cap: a step that could need more evaluations is refused
# before anything is charged (it could never run anyway).
_MAX_RATE = 1e18

#: ε_t / ε of the default mechanisms.
DEFAULT_EPSILON_RATIO = 0.05


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
    """
    eps_t = DEFAULT_EPSILON_RATIO * epsilon
    return [NoisyThresholdQuery(_BelowFraction(c), 0.0, eps_t) for c in _dyadic_grid()]


def _resolve_p_star(p_star, n):
    if callable(p_star):
        values = [p_star(i) for i in range(n)]
        where = "p_star({i})"
    elif isinstance(p_star, Real) and not isinstance(p_star, bool):
        values = [p_star] * n
        where = "p_star"
    elif isinstance(p_star, Sequence | np.ndarray) and not isinstance(p_star, str):
        values = list(np.ravel(p_star)) if isinstance(p_star, np.ndarray) else list(p_star)
        if len(values) < n:
            raise ValueError(
                f"p_star has {len(values)} entries but there are {n} mechanisms."
            )
        values = values[:n]
        where = "p_star[{i}]"
    else:
        raise TypeError(
            "p_star must be a float, a sequence of floats or a callable, got "
            f"{type(p_star).__name__}."
        )
    out = []
    for i, v in enumerate(values):
        out.append(check_real(v, where.format(i=i), low=0.0, high=1.0, low_open=True,
                              high_open=True))
    return out


def _poisson(rng, lam):
    """Exact Poisson(λ) draw for 0 ≤ λ ≤ 1e18 (sum of chunks below numpy's limit)."""
    if lam <= _POISSON_CHUNK:
        return int(rng.poisson(lam))
    m = int(math.ceil(lam / _POISSON_CHUNK))
    return int(rng.poisson(lam / m, size=m).sum(dtype=np.int64))


def _run_step(mech, X, y, n_runs, k, target, phi, rng, name):
    """Run the purified mechanism up to ``n_runs`` times; stop at the k-th ``target``.

    Returns (reached, evaluations): whether ``target`` occurred at least k times
    among the ``n_runs`` outputs, and how many evaluations were made. Stopping
    at the k-th occurrence does not change ``reached``.
    """
    count = 0
    done = 0
    batch = max(2 * k, 256)
    while done < n_runs:
        m = int(min(batch, n_runs - done))
        out = check_outputs(mech.sample(X, y, m, rng), m, name)
        if phi > 0:
            out = np.where(rng.random(m) < phi, -out, out)
        hits = np.flatnonzero(out == target)
        if count + hits.size >= k:
            return True, done + int(hits[k - count - 1]) + 1
        count += hits.size
        done += m
        batch *= 2
    return False, done


def _search(mechanisms, privacy, p_stars, X, y, rng, *, epsilon, beta, gamma, theta,
            trace=None):
    """GTM-R on a finite list of mechanisms; returns the accepted index or None.

    ``trace`` (a list or None) receives one dict per examined step with the
    non-private diagnostics (N_t, evaluations, forced); for benchmarks only.
    """
    b0 = gtm_step_parameters(1, 1.0, 0.0, 0.5, epsilon=epsilon, beta=beta, gamma=gamma,
                             theta=theta).b0
    R = exponential(rng, b0)
    for i, (mech, (eps_t, delta_t), p_star_t) in enumerate(
        zip(mechanisms, privacy, p_stars, strict=True)
    ):
        sp = gtm_step_parameters(i + 1, eps_t, delta_t, p_star_t, epsilon=epsilon,
                                 beta=beta, gamma=gamma, theta=theta)
        nu = exponential(rng, sp.b1)
        log_rate = sp.log_rho + sp.direction * eps_t * (nu - R)
        if log_rate >= sp.log_rate_cap:
            # safeguard (see RATE_CAP_FACTOR): forced accept (s=+1) / reject (s=-1)
            accept, n_runs, evals, forced = sp.direction == 1, 0, 0, True
        else:
            n_runs = _poisson(rng, math.exp(log_rate))
            reached, evals = _run_step(mech, X, y, n_runs, sp.k, sp.direction, sp.phi, rng,
                                       f"mechanisms[{i}]")
            accept = reached if sp.direction == 1 else not reached
            forced = False
        if trace is not None:
            trace.append({"t": i + 1, "n_runs": n_runs, "evaluations": evals,
                          "forced": forced, "accept": accept})
        if accept:
            return i
    return None


def _simulate_search(p, p_stars, epsilons, deltas, *, epsilon, beta, gamma, theta, n_reps,
                     rng):
    """Monte Carlo of GTM-R on mechanisms with known p_t, exact in law.

    Uses Poisson splitting: with N_t ~ Po(λ_t) runs, the numbers of +1 and −1
    outputs are independent Po(λ_t q_t) and Po(λ_t (1 − q_t)), q_t the purified
    probability. Vectorised over ``n_reps`` independent searches.

    Returns
    -------
    accepted : ndarray of shape (n_reps,)
        0-based accepted index, −1 when none.
    total_runs : ndarray of shape (n_reps,)
        Σ N_t over the examined steps.
    """
    T = len(p)
    R = exponential(
        rng,
        gtm_step_parameters(1, 1.0, 0.0, 0.5, epsilon=epsilon, beta=beta, gamma=gamma,
                            theta=theta).b0, size=n_reps)
    accepted = np.full(n_reps, -1)
    total = np.zeros(n_reps)
    active = np.ones(n_reps, dtype=bool)
    for i in range(T):
        sp = gtm_step_parameters(i + 1, epsilons[i], deltas[i], p_stars[i], epsilon=epsilon,
                                 beta=beta, gamma=gamma, theta=theta)
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        nu = exponential(rng, sp.b1, size=idx.size)
        log_rate = sp.log_rho + sp.direction * epsilons[i] * (nu - R[idx])
        forced = log_rate >= sp.log_rate_cap
        rate = np.exp(np.minimum(log_rate, sp.log_rate_cap))
        q = sp.phi + (1.0 - 2.0 * sp.phi) * p[i]
        plus = rng.poisson(rate * q)
        minus = rng.poisson(rate * (1.0 - q))
        if sp.direction == 1:
            acc = np.where(forced, True, plus >= sp.k)
        else:
            acc = np.where(forced, False, minus < sp.k)
        total[idx] += np.where(forced, 0, plus + minus)
        hit = idx[acc]
        accepted[hit] = i
        active[hit] = False
    return accepted, total


class GeneralizedThresholdMechanism(BasePrivateTest):
    """Generalized threshold search (GTM-R): accept the first good mechanism, ε-DP.

    Given a stream of binary mechanisms M_1, M_2, … (each (ε_t, δ_t)-DP on the
    data, with p_t = Pr[M_t(X) = +1]), outputs the index of the first t with
    p_t ≥ p*_t. With probability 1 − β, simultaneously for all t, M_t is
    rejected if p_t ≤ p̄_t (see :func:`gtm_p_bar`) and accepted if p_t ≥ p*_t.
    Only the index is released; the whole search is pure ε-DP, even when some
    δ_t > 0 (those mechanisms are purified), under the neighbouring relation
    for which every M_t has its stated privacy (replace-one for the default
    mechanisms and the skdptest tests).

    Each step draws a Poisson number of runs of M_t with a rate set by secret
    exponential noises (threshold noise R of mean b0 = (2 + θ)/(θ ε), step
    noise ν_t of mean b1 = (2 + θ)/ε) and accepts on the count of +1 outputs
    (or of −1 outputs in the flip branch, used when p*_t is close to 1).

    Parameters
    ----------
    mechanisms : sequence of mechanisms, default=None
        Finite, ordered stream of binary mechanisms, each with ``epsilon``,
        optional ``delta`` and ``sample(X, y, size, rng)`` returning ±1 (see
        :mod:`skdptest.threshold`). ``None`` uses :func:`default_mechanisms`:
        a private median search of the row means of ``X`` over a dyadic grid
        (noisy count thresholds with ε_t = 0.05 ε), meaningful on any numeric X.
    p_star : float, sequence of float or callable, default=0.5
        Acceptance target p*_t in (0, 1): one value, one per mechanism, or a
        function of the 0-based mechanism index (adaptive thresholds must depend
        only on public information).
    epsilon : float, default=1.0
        ε of the whole search (charged once per fit, pure: δ = 0).
    beta : float, default=0.1
        Failure probability of the accuracy guarantee, in (0, 1).
    gamma : float, default=1.5
        Approximation factor in (1, 2]: smaller means a sharper test and more
        evaluations (∝ 1/(γ − 1)²).
    theta : float, default=1.0
        Split of ε between the threshold noise and the step noises, > 0.
    budget : PrivacyBudget, default=None
        Budget charged ε per fit and per score.
    random_state : int, RandomState instance, Generator or None, default=None
        Source of all noise, including the mechanisms' own randomness.

    Attributes
    ----------
    result_ : ThresholdResult
        The accepted index (or None), the number of mechanisms examined and the
        ε spent. Nothing else (no run counts, rates or noise) is kept.
    mechanisms_ : list
        The mechanisms searched (the default ones when ``mechanisms=None``).
    p_star_ : list of float
        The target p*_t of each mechanism.
    n_features_in_ : int
        Number of features seen during :meth:`fit`.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of features seen during :meth:`fit`, when ``X`` has string
        column names.

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
    e^{1/b0 + 2/b1} = e^ε. This is checked exactly (numerical integration of
    the output law, :func:`exact_output_log_probabilities`) in the tests,
    where the bound is attained to quadrature precision and under-noised
    variants are flagged.

    Accuracy: the failure events are R > R_max (β/4), and per step ν_t > V_t
    (β_t) and a Poisson tail (β_t), in total at most
    β/4 + 2 Σ_t β/(5 t ln³(t + 2)) ≤ 0.75 β.

    Runaway evaluation counts are prevented by a private safeguard: when the
    rate of a step exceeds :data:`~skdptest.threshold.RATE_CAP_FACTOR` times
    its high-probability bound, the step is decided without running M_t
    (accepted in the direct branch, rejected in the flip branch). This happens
    only on the failure events of the accuracy analysis and keeps the search
    ε-DP (the forced region is monotone in the noise). A step whose capped rate
    would exceed 1e18 runs is refused with an error before anything is charged.
    When ε_t ≥ ε/(2 + θ) (direct branch) or ε_t ≥ θε/(2 + θ) (flip branch) the
    expected number of evaluations is infinite and a ``RuntimeWarning`` is
    issued.

    Before the budget is charged, each mechanism is run once on the data (the
    output is discarded) to check that it returns ±1.

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
    >>> i = gtm.decision()
    >>> gtm.mechanisms_[i].statistic.c  # a dyadic upper bound of the median 3
    4.0
    """

    def __init__(self, mechanisms=None, p_star=0.5, epsilon=1.0, beta=0.1, gamma=1.5,
                 theta=1.0, budget=None, random_state=None):
        self.mechanisms = mechanisms
        self.p_star = p_star
        self.epsilon = epsilon
        self.beta = beta
        self.gamma = gamma
        self.theta = theta
        self.budget = budget
        self.random_state = random_state

    # -- validation --------------------------------------------------------------
    def _check_params(self):
        epsilon = check_real(self.epsilon, "epsilon", low=0.0, low_open=True)
        beta = check_real(self.beta, "beta", low=0.0, high=1.0, low_open=True, high_open=True)
        gamma = check_real(self.gamma, "gamma", low=1.0, high=2.0, low_open=True)
        theta = check_real(self.theta, "theta", low=0.0, low_open=True)
        if self.mechanisms is None:
            mechanisms = default_mechanisms(epsilon)
        else:
            if isinstance(self.mechanisms, str | bytes) or not isinstance(
                self.mechanisms, Sequence
            ):
                raise TypeError(
                    "mechanisms must be None or a sequence of mechanisms, got "
                    f"{type(self.mechanisms).__name__}."
                )
            mechanisms = list(self.mechanisms)
            if not mechanisms:
                raise ValueError("mechanisms must contain at least one mechanism.")
        privacy = [check_mechanism(m, f"mechanisms[{i}]") for i, m in enumerate(mechanisms)]
        p_stars = _resolve_p_star(self.p_star, len(mechanisms))
        for i, ((eps_t, delta_t), p_t) in enumerate(zip(privacy, p_stars, strict=True)):
            sp = gtm_step_parameters(i + 1, eps_t, delta_t, p_t, epsilon=epsilon, beta=beta,
                                     gamma=gamma, theta=theta)
            if sp.log_rate_cap > math.log(_MAX_RATE):
                raise ValueError(
                    f"mechanisms[{i}]: epsilon_t={eps_t:g} is too large for epsilon="
                    f"{epsilon:g} (the step could need about "
                    f"{math.exp(sp.log_rate_cap):.3g} runs); lower epsilon_t/epsilon."
                )
            mean = sp.b1 if sp.direction == 1 else sp.b0
            if eps_t * mean >= 1.0:
                warnings.warn(
                    f"mechanisms[{i}]: epsilon_t={eps_t:g} >= epsilon/(2+theta)"
                    f"{'' if sp.direction == 1 else '*theta'} = {1.0 / mean:g}: the "
                    "expected number of evaluations of this step is infinite.",
                    RuntimeWarning,
                    stacklevel=3,
                )
        self._resolved = (mechanisms, privacy, p_stars, epsilon, beta, gamma, theta)

    def _privacy_cost(self):
        return float(self.epsilon), 0.0

    def _check_data(self, X, y):
        # Output check before charging, on a public surrogate of the data's shape (zeros):
        # the private data are not read before the budget is charged. A mechanism that
        # cannot run on the surrogate is checked during the search instead.
        mechanisms = self._resolved[0]
        probe = np.random.default_rng(0)
        X0 = np.zeros_like(X)
        y0 = None if y is None else np.zeros_like(np.asarray(y))
        for i, mech in enumerate(mechanisms):
            try:
                out = mech.sample(X0, y0, 1, probe)
            except Exception:  # noqa: BLE001 - the surrogate may be outside its domain
                continue
            check_outputs(out, 1, f"mechanisms[{i}]")

    # -- computation -------------------------------------------------------------
    def _run(self, X, y, rng):
        mechanisms, privacy, p_stars, epsilon, beta, gamma, theta = self._resolved
        return _search(mechanisms, privacy, p_stars, X, y, rng, epsilon=epsilon, beta=beta,
                       gamma=gamma, theta=theta)

    def _fit_private(self, X, y, rng):
        mechanisms, _, p_stars, epsilon, *_ = self._resolved
        accepted = self._run(X, y, rng)
        self.mechanisms_ = mechanisms
        self.p_star_ = p_stars
        return ThresholdResult(
            accepted=accepted,
            n_examined=len(mechanisms) if accepted is None else accepted + 1,
            n_mechanisms=len(mechanisms),
            epsilon=epsilon,
            delta=0.0,
        )

    def _score_private(self, X, y, rng):
        accepted = self._run(X, y, rng)
        n = len(self._resolved[0])
        return -float((n if accepted is None else accepted) + 1)

    # -- public API --------------------------------------------------------------
    def fit(self, X, y=None):
        """Run the private search on ``X`` (and ``y``); charge ε once.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Private data, passed to every mechanism.
        y : array-like or None, default=None
            Passed to every mechanism.

        Returns
        -------
        self : object
            The fitted estimator; the result is in ``result_``.
        """
        return super().fit(X, y)

    def decision(self, X=None, y=None):
        """Index (0-based) of the accepted mechanism, or None; fits first if ``X`` is given.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), default=None
            Data to fit on first.
        y : array-like, default=None
            As in :meth:`fit`.

        Returns
        -------
        accepted : int or None
        """
        return self.test(X, y).accepted

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
