"""Liu–Talwar (STOC 2019) style baselines for the generalized threshold problem.

Used only for comparison with
:class:`~skdptest.threshold.GeneralizedThresholdMechanism`; shipped estimators
never import this module. Mechanisms follow the protocol of
:mod:`skdptest.threshold` (``epsilon``, ``sample(X, y, size, rng)``).

- :func:`lt19_threshold`: LT19 Algorithm 1 (known threshold, γ-coin stopping)
  on one binary mechanism: 2ε₁-DP, (2ε₁ + ε₀)-DP with the cap of
  :func:`lt19_cap`.
- :func:`sequential_lt_test`: Algorithm 1 run on M_1, M_2, … in turn with
  γ = p*β, moving on when the coin stops. Only *approximately* DP: its pure
  privacy loss grows with the number of steps (:func:`sequential_lt_privacy`).
- :func:`lt19_reference_p_bar` and :func:`cln23_reference_p_bar`: analytic
  reference lines for the rejection levels reported by LT19 and by Cohen, Lyu,
  Nelson, Sarlós and Stemmer (ITCS 2023). CLN+23's algorithm is not
  implemented: its text was not available to transcribe faithfully.

References
----------
.. [1] J. Liu and K. Talwar, "Private selection from private candidates",
   STOC 2019.
.. [2] E. Cohen, X. Lyu, J. Nelson, T. Sarlós and U. Stemmer, "Generalized
   private selection and testing with high confidence", ITCS 2023.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "cln23_reference_p_bar",
    "lt19_acceptance_probability",
    "lt19_cap",
    "lt19_expected_runs",
    "lt19_reference_p_bar",
    "lt19_threshold",
    "sequential_lt_output_probabilities",
    "sequential_lt_privacy",
    "sequential_lt_test",
]


def _check_gamma(gamma):
    if not 0.0 < gamma <= 1.0:
        raise ValueError(f"gamma must lie in (0, 1], got {gamma}.")


def lt19_cap(gamma, epsilon0):
    """Smallest cap T ≥ max(ln(2/ε₀)/γ, 1 + 1/(eγ)) (LT19, Theorem 3.1).

    With this cap, Algorithm 1 is (2ε₁ + ε₀)-DP.

    Parameters
    ----------
    gamma : float
        Stopping probability in (0, 1].
    epsilon0 : float
        Extra privacy loss allowed by the cap, > 0.

    Returns
    -------
    cap : int

    Examples
    --------
    >>> from skdptest.baselines import lt19_cap
    >>> lt19_cap(0.1, 0.05)
    37
    """
    _check_gamma(gamma)
    if not epsilon0 > 0:
        raise ValueError(f"epsilon0 must be > 0, got {epsilon0}.")
    return int(math.ceil(max(math.log(2.0 / epsilon0) / gamma, 1.0 + 1.0 / (math.e * gamma))))


def lt19_acceptance_probability(p, gamma, cap=None):
    """Pr[Algorithm 1 accepts] for a mechanism with Pr[+1] = p.

    p / (p + γ(1 − p)) without a cap; with a cap T, p (1 − r^T)/(1 − r) where
    r = (1 − p)(1 − γ).

    Parameters
    ----------
    p : float or ndarray
        Pr[M = +1].
    gamma : float
        Stopping probability in (0, 1].
    cap : int or None, default=None
        Largest number of runs.

    Returns
    -------
    prob : float or ndarray
        Acceptance probability, of the shape of ``p``.

    Examples
    --------
    >>> from skdptest.baselines import lt19_acceptance_probability
    >>> round(float(lt19_acceptance_probability(0.5, 0.1)), 4)  # 0.5 / (0.5 + 0.05)
    0.9091
    """
    _check_gamma(gamma)
    p = np.asarray(p, dtype=float)
    if cap is None:
        return p / (p + gamma * (1.0 - p))
    r = (1.0 - p) * (1.0 - gamma)
    return p * (1.0 - r**cap) / (1.0 - r)


def lt19_expected_runs(p, gamma, cap=None):
    """Expected number of runs of the mechanism: 1/(p + γ(1 − p)), or (1 − r^T)/(1 − r).

    Parameters
    ----------
    p : float or ndarray
        Pr[M = +1].
    gamma : float
        Stopping probability in (0, 1].
    cap : int or None, default=None
        Largest number of runs T (None: unbounded).

    Returns
    -------
    runs : float or ndarray
        Expected number of runs, of the shape of ``p``; r = (1 − p)(1 − γ).

    Examples
    --------
    >>> from skdptest.baselines import lt19_expected_runs
    >>> round(float(lt19_expected_runs(0.5, 0.1)), 4)  # 1 / (0.5 + 0.05)
    1.8182
    >>> round(float(lt19_expected_runs(0.5, 0.1, cap=3)), 4)  # 1 + r + r**2, r = 0.45
    1.6525
    """
    _check_gamma(gamma)
    p = np.asarray(p, dtype=float)
    r = (1.0 - p) * (1.0 - gamma)
    if cap is None:
        return 1.0 / (1.0 - r)
    return (1.0 - r**cap) / (1.0 - r)


def lt19_threshold(mechanism, X, y, gamma, rng, cap=None):
    """LT19 Algorithm 1 on one binary mechanism (known threshold, γ-coin stopping).

    Repeat: run M; on +1 accept and halt; otherwise halt (reject) with
    probability γ; after ``cap`` runs reject. 2ε₁-DP for an ε₁-DP mechanism
    without a cap, (2ε₁ + ε₀)-DP with ``cap >= lt19_cap(gamma, ε₀)``, under
    the mechanism's neighbouring relation.

    Parameters
    ----------
    mechanism : object
        Binary mechanism (``sample(X, y, size, rng)`` returning ±1).
    X, y : array-like
        Data.
    gamma : float
        Stopping probability in (0, 1].
    rng : numpy.random.Generator
        Randomness.
    cap : int or None, default=None
        Largest number of runs (None: unbounded).

    Returns
    -------
    accepted : bool
    runs : int
        Number of runs of the mechanism (not private).

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest.baselines import lt19_threshold
    >>> from skdptest.threshold import RandomizedResponse
    >>> m = RandomizedResponse(lambda X, y: True, epsilon=2.0)
    >>> lt19_threshold(m, None, None, 0.1, np.random.default_rng(0))[0]
    True
    """
    _check_gamma(gamma)
    runs = 0
    batch = 16
    while cap is None or runs < cap:
        m = batch if cap is None else min(batch, cap - runs)
        out = np.asarray(mechanism.sample(X, y, m, rng))
        stop = rng.random(m) < gamma
        for j in range(m):
            runs += 1
            if out[j] == 1:
                return True, runs
            if stop[j]:
                return False, runs
        batch *= 2
    return False, runs


def sequential_lt_test(mechanisms, X, y, p_star, beta, rng, cap=None):
    """Sequential LT-style tester: Algorithm 1 on each M_t with γ = p*β.

    Accepts the first t whose Algorithm 1 accepts; moves on when its coin
    stops it. It has p̄ ≈ p*β²/T over T steps but is only *approximately* DP:
    every examined step adds up to 2ε_t of pure privacy loss (see
    :func:`sequential_lt_privacy`).

    Parameters
    ----------
    mechanisms : sequence
        Binary mechanisms.
    X, y : array-like
        Data.
    p_star : float
        Acceptance target in (0, 1).
    beta : float
        Failure probability in (0, 1).
    rng : numpy.random.Generator
        Randomness.
    cap : int or None, default=None
        Cap of each Algorithm 1 run.

    Returns
    -------
    accepted : int or None
        0-based index of the accepted mechanism.
    runs : int
        Total number of runs (not private).

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest.baselines import sequential_lt_test
    >>> from skdptest.threshold import RandomizedResponse
    >>> mechanisms = [RandomizedResponse(lambda X, y: bit, epsilon=2.0)
    ...               for bit in (False, False, True)]
    >>> accepted, runs = sequential_lt_test(mechanisms, None, None, 0.5, 0.5,
    ...                                     np.random.default_rng(0))
    >>> accepted in (0, 1, 2, None)
    True
    """
    gamma = p_star * beta
    total = 0
    for i, mech in enumerate(mechanisms):
        ok, runs = lt19_threshold(mech, X, y, gamma, rng, cap)
        total += runs
        if ok:
            return i, total
    return None, total


def sequential_lt_output_probabilities(p, p_star, beta):
    """Exact law of :func:`sequential_lt_test` (uncapped) over {1..T, never}.

    Parameters
    ----------
    p : sequence of float
        Pr[M_t = +1].
    p_star, beta : float
        As in :func:`sequential_lt_test`.

    Returns
    -------
    prob : ndarray of shape (T + 1,)
        Pr[the tester accepts M_t] for t = 1..T, then Pr[it accepts none].

    Examples
    --------
    >>> from skdptest.baselines import sequential_lt_output_probabilities
    >>> prob = sequential_lt_output_probabilities([0.1, 0.9], 0.5, 0.1)
    >>> prob.shape, round(float(prob.sum()), 12)
    ((3,), 1.0)
    """
    a = lt19_acceptance_probability(np.asarray(p, dtype=float), p_star * beta)
    survive = np.concatenate([[1.0], np.cumprod(1.0 - a)])
    return np.concatenate([survive[:-1] * a, [survive[-1]]])


def sequential_lt_privacy(T, epsilon1, p_star, beta, eps_target=1.0):
    """Privacy of the sequential tester on randomized-response streams.

    Data set X has bits all +1 (p_t = e^{ε₁}/(1 + e^{ε₁})) at steps where the
    worst case needs it, X' the flipped bits; by the product form of the law,
    the largest log ratio of an output is the sum over its steps of the
    per-step worst cases.

    Parameters
    ----------
    T : int
        Number of mechanisms.
    epsilon1 : float
        ε of each (randomized response) mechanism.
    p_star, beta : float
        As in :func:`sequential_lt_test`.
    eps_target : float, default=1.0
        ε at which the hockey-stick divergence δ(ε) is evaluated.

    Returns
    -------
    pure_loss : float
        max over outputs and neighbouring streams of abs(log Pr_X/Pr_X').
    delta : float
        δ(eps_target) = Σ_o max(0, Pr_X[o] − e^ε Pr_X'[o]), maximised over the
        pairs where X has its bits one way on the first j steps and the other
        way after, and X' has every bit flipped.

    Examples
    --------
    >>> from skdptest.baselines import sequential_lt_privacy
    >>> loss, delta = sequential_lt_privacy(10, 0.5, 0.5, 0.1)
    >>> loss > 5
    True
    """
    hi = 1.0 / (1.0 + math.exp(-epsilon1))
    lo = 1.0 - hi
    gamma = p_star * beta
    a_hi, a_lo = lt19_acceptance_probability(np.array([hi, lo]), gamma)
    step_acc = abs(math.log(a_hi / a_lo))
    step_rej = abs(math.log((1 - a_hi) / (1 - a_lo)))
    losses = [t * step_rej + step_acc for t in range(T)] + [T * step_rej]
    pure = max(losses)
    best_delta = 0.0
    for first, second in ((hi, lo), (lo, hi)):
        for j in range(T + 1):  # X: `first` on steps < j, `second` after
            P = sequential_lt_output_probabilities([first] * j + [second] * (T - j),
                                                   p_star, beta)
            Q = sequential_lt_output_probabilities([second] * j + [first] * (T - j),
                                                   p_star, beta)
            best_delta = max(best_delta, float(np.sum(np.maximum(0.0,
                                                                 P - math.exp(eps_target) * Q))))
    return pure, best_delta


def lt19_reference_p_bar(T, p_star, beta, epsilon_t, epsilon):
    """LT19's reported rejection level p*(β²/T)^{12 ε₁/ε} (analytic reference line).

    Parameters
    ----------
    T : int
        Number of mechanisms.
    p_star : float
        Acceptance target in (0, 1).
    beta : float
        Failure probability in (0, 1).
    epsilon_t : float
        ε₁ of each mechanism.
    epsilon : float
        ε of the whole search.

    Returns
    -------
    p_bar : float
        The rejection level.

    Examples
    --------
    >>> from skdptest.baselines import lt19_reference_p_bar
    >>> round(lt19_reference_p_bar(10, 0.5, 0.1, 0.05, 1.0), 6)
    0.007924
    """
    return p_star * (beta**2 / T) ** (12.0 * epsilon_t / epsilon)


def cln23_reference_p_bar(T, p_star, beta):
    """CLN+23's rejection level p*β/T, pure DP (analytic reference line only).

    Parameters
    ----------
    T : int
        Number of mechanisms.
    p_star : float
        Acceptance target in (0, 1).
    beta : float
        Failure probability in (0, 1).

    Returns
    -------
    p_bar : float
        The rejection level.

    Examples
    --------
    >>> from skdptest.baselines import cln23_reference_p_bar
    >>> cln23_reference_p_bar(10, 0.5, 0.1)
    0.005
    """
    return p_star * beta / T
