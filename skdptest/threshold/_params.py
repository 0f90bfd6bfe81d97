"""Public parameters of GTM-R, computed in one place.

Both the shipped search (:mod:`skdptest.threshold._gtm`) and the exact privacy
integrator (:mod:`skdptest.threshold._privacy`) take every quantity of a step
from :func:`gtm_step_parameters`, so a change here (say an under-noised
variant) changes both, and the exact check sees what the search would do.

Steps are numbered from ``t = 1`` in every formula of this module.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import NamedTuple

import numpy as np
from scipy import stats

from .._validation import check_real

__all__ = [
    "RATE_CAP_FACTOR",
    "StepParameters",
    "constant_work_evaluations",
    "gtm_evaluation_bound",
    "gtm_lambda",
    "gtm_p_bar",
    "gtm_step_parameters",
    "poisson_threshold_k",
    "purification_flip_probability",
]

#: Safeguard against runaway evaluation counts. When the Poisson rate λ_t of a
#: step exceeds ``RATE_CAP_FACTOR`` times its high-probability bound (see
#: :func:`gtm_evaluation_bound`), the step is decided without running the
#: mechanism: *accepted* in the direct branch (s = +1, where the rate grows with
#: ν_t − R) and *rejected* in the flip branch (s = −1, where it grows with R − ν_t).
#: The forced region is an up-set (s = +1) or a down-set (s = −1) of ν_t − R, so
#: the sparse-vector coupling (R → R + 1, ν_t → ν_t + 2) maps it into itself and
#: the search stays ε-DP; it only happens when ν_t > V_t or R > R_max, events
#: already charged to the failure probability β, so accuracy is unchanged.
RATE_CAP_FACTOR = 100.0


class StepParameters(NamedTuple):
    """Public parameters of step t of GTM-R (see :func:`gtm_step_parameters`).

    Attributes
    ----------
    t : int
        Step number, from 1.
    b0, b1 : float
        Means of the exponential threshold noise R and step noise ν_t.
    r_max : float
        R_max = b0 ln(4/β), the high-probability bound of R.
    failure_probability_t : float
        β_t = β / (5 t ln³(t + 2)), the step's failure probability.
    v_t : float
        V_t = b1 ln(1/β_t), the high-probability bound of ν_t.
    log_lambda : float
        ln Λ_t = ε_t (R_max + V_t).
    k : int
        Count threshold (see :func:`poisson_threshold_k`).
    log_rho : float
        log of the base Poisson rate ρ_t.
    direction : int
        s_t: +1 (direct branch) or −1 (flip branch).
    q_star : float
        Purified acceptance target q*_t.
    phi : float
        Purification flip probability (see :func:`purification_flip_probability`).
    log_rate_cap : float
        log of the rate above which the step is decided without running M_t (see
        :data:`RATE_CAP_FACTOR`).
    constant_work : int
        Evaluations of the step in constant-work mode (see
        :func:`constant_work_evaluations`).

    Examples
    --------
    >>> from skdptest.threshold import gtm_step_parameters
    >>> step = gtm_step_parameters(1, 0.1, 0.0, 0.5, epsilon=1.0, failure_probability=0.1,
    ...                            approximation=1.5, theta=1.0)
    >>> step.t, step.k, step.direction
    (1, 126, 1)
    """

    t: int
    b0: float
    b1: float
    r_max: float
    failure_probability_t: float
    v_t: float
    log_lambda: float
    k: int
    log_rho: float
    direction: int
    q_star: float
    phi: float
    log_rate_cap: float
    constant_work: int


def _noise_means(epsilon, theta):
    """Means (b0, b1) of the exponential threshold noise R and step noise ν_t.

    b0 = (2 + θ) / (θ ε) and b1 = (2 + θ) / ε, so that 1/b0 + 2/b1 = ε.
    """
    return (2.0 + theta) / (theta * epsilon), (2.0 + theta) / epsilon


def purification_flip_probability(epsilon_t, delta_t):
    """Flip probability φ = δ / (e^ε − 1 + 2δ) of the purifying binary channel.

    Passing an (ε, δ)-DP binary mechanism through a binary symmetric channel
    with this flip probability makes it pure ε-DP: (1 − 2φ) δ = (e^ε − 1) φ.

    Parameters
    ----------
    epsilon_t : float
        ε of the mechanism, > 0.
    delta_t : float
        δ of the mechanism, in [0, 1).

    Returns
    -------
    phi : float
        Flip probability in [0, 1/2); 0 when ``delta_t == 0``.

    Examples
    --------
    >>> from skdptest.threshold import purification_flip_probability
    >>> purification_flip_probability(1.0, 0.0)
    0.0
    >>> round(purification_flip_probability(1.0, 1e-3), 6)
    0.000581
    """
    if delta_t == 0:
        return 0.0
    return float(delta_t / (math.expm1(epsilon_t) + 2.0 * delta_t))


@lru_cache(maxsize=4096)
def poisson_threshold_k(failure_probability_t, approximation):
    """Least k with Pr[Po(√γ k) < k] ≤ β_t and Pr[Po(k/√γ) ≥ k] ≤ β_t.

    Both tails are computed exactly (regularised incomplete gamma functions).

    Parameters
    ----------
    failure_probability_t : float
        Per-step failure probability β_t, in (0, 1).
    approximation : float
        Approximation factor γ, > 1.

    Returns
    -------
    k : int
        The count threshold.

    Examples
    --------
    >>> from skdptest.threshold import poisson_threshold_k
    >>> poisson_threshold_k(0.01, 1.5)
    145
    """
    beta_t, root = failure_probability_t, math.sqrt(approximation)
    lo = 1
    width = 256
    while True:
        ks = np.arange(lo, lo + width, dtype=float)
        low_tail = stats.poisson.cdf(ks - 1, root * ks)  # Pr[Po(√γ k) ≤ k − 1]
        high_tail = stats.poisson.sf(ks - 1, ks / root)  # Pr[Po(k/√γ) ≥ k]
        ok = np.flatnonzero((low_tail <= beta_t) & (high_tail <= beta_t))
        if ok.size:
            return int(ks[ok[0]])
        lo += width
        width *= 2
        if lo > 10**9:  # pragma: no cover - unreachable for gamma > 1
            raise ValueError(f"no k found for failure_probability_t={beta_t}, "
                             f"approximation={approximation}.")


def _beta_t(t, beta):
    return beta / (5.0 * t * math.log(t + 2.0) ** 3)


@lru_cache(maxsize=4096)
def constant_work_evaluations(log_rate_bound, failure_probability_t):
    """Evaluations run by a step in constant-work mode (public).

    The (1 − β_t) quantile of Po(bound), with ``bound`` the high-probability
    rate bound of the step: N_t exceeds it with probability at most
    Pr[λ_t > bound] + β_t, so the extra forced decisions it causes cost at most
    β_t of accuracy per step.

    Parameters
    ----------
    log_rate_bound : float
        log of the rate bound (see :func:`gtm_evaluation_bound`).
    failure_probability_t : float
        Per-step failure probability β_t.

    Returns
    -------
    m : int
        Number of evaluations, ≥ 1. Above a rate of 1e15 (far beyond what a
        constant-work search accepts to run), and wherever scipy's quantile is not
        finite (β_t below about 1.1e-16, where 1 − β_t rounds to 1, or very large
        rates), an upper bound is returned instead: the Bernstein quantile of
        Po(bound), at least the exact one.

    Notes
    -----
    Memoised (a pure function of two public numbers): every fit plans each step
    again, and scipy's Poisson quantile costs far more than the rest of the step.

    Examples
    --------
    >>> import math
    >>> from skdptest.threshold import constant_work_evaluations
    >>> constant_work_evaluations(math.log(5.0), 0.01)  # the 99% quantile of Po(5)
    11
    """
    if log_rate_bound <= math.log(1e15):
        rate = math.exp(log_rate_bound)
        quantile = stats.poisson.ppf(1.0 - failure_probability_t, rate)
        if math.isfinite(quantile):
            return max(int(quantile), 1)
    # Pr[Po(λ) ≥ λ + x] ≤ exp(−x² / (2(λ + x/3))) (Bernstein); solve for that bound = β_t
    rate = math.exp(min(log_rate_bound, 700.0))
    a = -math.log(failure_probability_t)  # (1 / β_t overflows for subnormal β_t)
    x = a / 3.0 + math.sqrt((a / 3.0) ** 2 + 2.0 * rate * a)
    return int(min(rate + x + 1.0, 2.0**62))


def gtm_step_parameters(t, epsilon_t, delta_t, p_star_t, *, epsilon, failure_probability,
                        approximation, theta):
    """All public parameters of step t of GTM-R.

    Parameters
    ----------
    t : int
        Step number, from 1.
    epsilon_t, delta_t : float
        Privacy parameters of the mechanism M_t.
    p_star_t : float
        Acceptance target p*_t in (0, 1).
    epsilon, failure_probability, approximation, theta : float
        Parameters of the search: ε, β, γ and θ (see
        :class:`~skdptest.threshold.GeneralizedThresholdMechanism`).

    Returns
    -------
    params : StepParameters
        ``b0``, ``b1`` (noise means), ``r_max`` = b0 ln(4/β),
        ``failure_probability_t`` = β_t = β / (5 t ln³(t + 2)), ``v_t`` =
        b1 ln(1/β_t), ``log_lambda`` = ln Λ_t = ε_t (R_max + V_t), ``k`` (count
        threshold), ``log_rho`` (log base rate), ``direction`` s_t (+1 or −1),
        ``q_star`` (purified target), ``phi`` (purification flip probability),
        ``log_rate_cap`` (log of the rate above which the step is decided
        without running M_t, see :data:`RATE_CAP_FACTOR`) and
        ``constant_work`` (evaluations of the step in constant-work mode, see
        :func:`constant_work_evaluations`).

    Examples
    --------
    >>> from skdptest.threshold import gtm_step_parameters
    >>> step = gtm_step_parameters(1, 0.1, 0.0, 0.5, epsilon=1.0, failure_probability=0.1,
    ...                            approximation=1.5, theta=1.0)
    >>> step.b0, step.b1  # (2 + θ)/(θ ε) and (2 + θ)/ε
    (3.0, 3.0)
    >>> step.k, step.direction
    (126, 1)
    """
    beta, gamma = failure_probability, approximation
    b0, b1 = _noise_means(epsilon, theta)
    r_max = b0 * math.log(4.0 / beta)
    beta_t = _beta_t(t, beta)
    v_t = b1 * math.log(1.0 / beta_t)
    log_lam = epsilon_t * (r_max + v_t)
    lam = math.exp(log_lam)
    phi = purification_flip_probability(epsilon_t, delta_t)
    q_star = phi + (1.0 - 2.0 * phi) * p_star_t
    direct = q_star / (gamma * lam)
    flipped = 1.0 - gamma * lam * (1.0 - q_star)
    direction = 1 if direct >= flipped else -1
    k = poisson_threshold_k(beta_t, gamma)
    root = math.sqrt(gamma)
    if direction == 1:
        log_rho = math.log(root * k) + epsilon_t * r_max - math.log(q_star)
        # high-probability bound of the rate: ρ e^{ε_t V_t} = √γ k Λ_t / q*_t
        log_bound = log_rho + epsilon_t * v_t
    else:
        log_rho = math.log(k) - epsilon_t * r_max - math.log(root * (1.0 - q_star))
        # high-probability bound of the rate: ρ e^{ε_t R_max} = k / (√γ (1 − q*_t))
        log_bound = log_rho + epsilon_t * r_max
    return StepParameters(
        t=int(t), b0=b0, b1=b1, r_max=r_max, failure_probability_t=beta_t, v_t=v_t,
        log_lambda=log_lam, k=k, log_rho=log_rho, direction=direction, q_star=q_star,
        phi=phi, log_rate_cap=log_bound + math.log(RATE_CAP_FACTOR),
        constant_work=constant_work_evaluations(log_bound, beta_t),
    )


def _check_common(t, epsilon_t, delta_t, epsilon, beta, gamma, theta, p_star=None):
    if isinstance(t, bool) or not isinstance(t, int | np.integer) or t < 1:
        raise ValueError(f"t must be an integer >= 1, got {t!r}.")
    check_real(epsilon_t, "epsilon_t", low=0.0, low_open=True)
    check_real(delta_t, "delta_t", low=0.0, high=1.0, high_open=True)
    check_real(epsilon, "epsilon", low=0.0, low_open=True)
    check_real(beta, "failure_probability", low=0.0, high=1.0, low_open=True, high_open=True)
    check_real(gamma, "approximation", low=1.0, high=2.0, low_open=True)
    check_real(theta, "theta", low=0.0, low_open=True)
    if p_star is not None:
        check_real(p_star, "p_star", low=0.0, high=1.0, low_open=True, high_open=True)


def gtm_lambda(t, epsilon_t, *, epsilon=1.0, failure_probability=0.1, theta=1.0):
    """Λ_t = exp(ε_t (R_max + V_t)) of GTM-R.

    Equals (5 t ln³(t + 2))^{(2+θ) ε_t/ε} (4/β)^{(2+θ) ε_t/(θ ε)} (1/β)^{(2+θ) ε_t/ε},
    which is at most the abstract's
    (5 t ln³(t + 2))^{(2+θ) ε_t/ε} (4/β)^{(3+θ+2/θ) ε_t/ε} (the abstract writes
    4/β where the step noise only needs 1/β).

    Parameters
    ----------
    t : int
        Step number, from 1.
    epsilon_t : float
        ε of the mechanism M_t.
    epsilon, failure_probability, theta : float
        Parameters of the search: ε, β and θ.

    Returns
    -------
    lam : float
        Λ_t ≥ 1 (``inf`` on overflow).

    Examples
    --------
    >>> from skdptest.threshold import gtm_lambda
    >>> round(gtm_lambda(1, 0.05, epsilon=1.0, failure_probability=0.1, theta=1.0), 3)
    3.262
    """
    beta = failure_probability
    _check_common(t, epsilon_t, 0.0, epsilon, beta, 1.5, theta)
    b0, b1 = _noise_means(epsilon, theta)
    log_lam = epsilon_t * (b0 * math.log(4.0 / beta) + b1 * math.log(1.0 / _beta_t(t, beta)))
    return math.exp(log_lam) if log_lam < 709.0 else math.inf


def gtm_p_bar(t, epsilon_t, p_star, *, delta_t=0.0, epsilon=1.0, failure_probability=0.1,
              approximation=1.5, theta=1.0, exact=False):
    """Rejection level p̄_t: with probability 1 − β, M_t is rejected if p_t ≤ p̄_t.

    Parameters
    ----------
    t : int
        Step number, from 1.
    epsilon_t : float
        ε of the mechanism M_t.
    p_star : float
        Acceptance target p*_t in (0, 1).
    delta_t : float, default=0.0
        δ of the mechanism M_t.
    epsilon, failure_probability, approximation, theta : float
        Parameters of the search: ε, β, γ and θ.
    exact : bool, default=False
        ``False``: the abstract's formula
        max(p*/(γΛ_t), 1 − γΛ_t(1 − p*)) − δ_t/ε_t. ``True``: the level GTM-R
        guarantees, (q̄_t − φ_t)/(1 − 2φ_t) with q̄_t the larger of
        q*_t/(γΛ_t) and 1 − γΛ_t(1 − q*_t). They agree when δ_t = 0; in the
        direct branch the exact level is the larger one, while in the flip
        branch purification costs φ(γΛ_t − 1)/(1 − 2φ), which exceeds δ_t/ε_t
        when γΛ_t > 2 (the open point of the reconstruction).

    Returns
    -------
    p_bar : float
        May be ≤ 0, in which case nothing is guaranteed to be rejected.

    Examples
    --------
    >>> from skdptest.threshold import gtm_p_bar
    >>> round(gtm_p_bar(1, 0.05, 0.5), 4)
    0.1022
    """
    beta, gamma = failure_probability, approximation
    _check_common(t, epsilon_t, delta_t, epsilon, beta, gamma, theta, p_star)
    lam = gtm_lambda(t, epsilon_t, epsilon=epsilon, failure_probability=beta, theta=theta)
    if not exact:
        best = max(p_star / (gamma * lam), 1.0 - gamma * lam * (1.0 - p_star))
        return best - delta_t / epsilon_t
    phi = purification_flip_probability(epsilon_t, delta_t)
    q_star = phi + (1.0 - 2.0 * phi) * p_star
    q_bar = max(q_star / (gamma * lam), 1.0 - gamma * lam * (1.0 - q_star))
    return (q_bar - phi) / (1.0 - 2.0 * phi)


def gtm_evaluation_bound(t, epsilon_t, p_star, *, delta_t=0.0, epsilon=1.0,
                         failure_probability=0.1, approximation=1.5, theta=1.0):
    """High-probability bound on the Poisson rate λ_t of step t (E[N_t | noise]).

    In the direct branch λ_t ≤ √γ k_t Λ_t / q*_t when ν_t ≤ V_t (probability
    1 − β_t); in the flip branch λ_t ≤ k_t / (√γ (1 − q*_t)) when R ≤ R_max
    (probability 1 − β/4). With k_t = O(ln(t/β)/(γ − 1)²) this is the
    abstract's O(ln(t/β)/(γ − 1)² · max(Λ_t/p*, 1/(1 − p*))). The number of
    evaluations N_t ~ Poisson(λ_t) is then at most the (1 − β_t) Poisson
    quantile of this rate with probability 1 − 2β_t (− β/4); that quantile is
    the number of evaluations of the step in constant-work mode.

    Parameters
    ----------
    t : int
        Step number, from 1.
    epsilon_t : float
        ε of the mechanism M_t.
    p_star : float
        Acceptance target p*_t in (0, 1).
    delta_t : float, default=0.0
        δ of the mechanism.
    epsilon, failure_probability, approximation, theta : float
        Parameters of the search: ε, β, γ and θ.

    Returns
    -------
    rate : float
        The bound on λ_t.

    Examples
    --------
    >>> from skdptest.threshold import gtm_evaluation_bound
    >>> gtm_evaluation_bound(1, 0.05, 0.5) > 100
    True
    """
    _check_common(t, epsilon_t, delta_t, epsilon, failure_probability, approximation, theta,
                  p_star)
    sp = gtm_step_parameters(t, epsilon_t, delta_t, p_star, epsilon=epsilon,
                             failure_probability=failure_probability,
                             approximation=approximation, theta=theta)
    return math.exp(sp.log_rate_cap - math.log(RATE_CAP_FACTOR))
