"""Result of the generalized threshold search (frozen, keyword-only)."""

from __future__ import annotations

from dataclasses import dataclass

from .._results import TestResult

__all__ = ["ThresholdResult"]


@dataclass(frozen=True, kw_only=True)
class ThresholdResult(TestResult):
    """Result of a generalized threshold search.

    Only the search's output and public information are kept: never the
    numbers of evaluations N_t, the rates, the counts of ±1 outputs or the
    noises R, ν_t (they would leak the data). Every field is the accepted
    index, a function of it, or public; the whole result is covered by the
    search's pure ε-DP guarantee.

    Attributes
    ----------
    reject : bool
        Whether a mechanism was accepted (``accepted is not None``). Read as a
        test of H0 "every mechanism has p_t ≤ p̄_t" (its rejection level, see
        :func:`~skdptest.threshold.gtm_p_bar`): under H0 a mechanism is
        accepted with probability at most ``alpha``.
    alpha : float
        The search's ``failure_probability`` β: the accuracy guarantee (every
        M_t with p_t ≤ p̄_t rejected and the first with p_t ≥ p*_t accepted)
        fails with probability at most β, so under the H0 above
        Pr[reject] ≤ β.
    epsilon : float
        ε spent for the whole search (pure ε-DP, under the neighbouring
        relation for which every mechanism has its stated privacy).
    delta : float
        δ spent: always 0, even when mechanisms have δ_t > 0 (they are purified).
    n_samples : int
        Number of rows passed to the mechanisms (public).
    method : str
        Name of the procedure.
    accepted : int or None
        Index (0-based) of the accepted mechanism, or None if none was
        accepted: the search's only private output.
    n_examined : int
        Number of mechanisms examined: ``accepted + 1`` when one was accepted,
        ``n_mechanisms`` otherwise (a function of ``accepted``).
    n_mechanisms : int
        Number of mechanisms in the stream (public).
    accepted_mechanism : str or None
        ``repr`` of the accepted mechanism (a public object, chosen before the
        data are seen), or None: a function of ``accepted``.
    work : str
        ``"poisson"`` or ``"constant"``: how many evaluations each step ran
        (public parameter, see
        :class:`~skdptest.threshold.GeneralizedThresholdMechanism`).

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest import GeneralizedThresholdMechanism
    >>> X = np.random.default_rng(0).normal(3.0, 1.0, size=(200, 1))
    >>> result = GeneralizedThresholdMechanism(epsilon=1.0, random_state=0).fit(X).result_
    >>> result.n_mechanisms, result.work, result.epsilon, result.delta
    (63, 'poisson', 1.0, 0.0)
    >>> result.reject, result.n_examined == result.accepted + 1
    (True, True)
    """

    accepted: int | None
    n_examined: int
    n_mechanisms: int
    accepted_mechanism: str | None
    work: str
    method: str = "GeneralizedThresholdMechanism"
