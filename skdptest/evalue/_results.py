"""Results of the e-value tests (frozen, keyword-only)."""

from __future__ import annotations

from dataclasses import dataclass

from .._results import TestResult, pvalue_from_log_e

__all__ = ["EProcessResult", "EValueResult"]


@dataclass(frozen=True, kw_only=True)
class EValueResult(TestResult):
    """Result of a private batch e-value test.

    Unpacks like scipy's results: ``e_value, pvalue = result``.

    Attributes
    ----------
    reject : bool
        Whether ``e_value >= 1 / alpha`` (Markov: type-I error <= alpha).
    alpha : float
        Level of the test.
    epsilon : float
        ε spent by this release (pure ε-DP, replace-one neighbours).
    delta : float
        δ spent (always 0).
    n_samples : int
        Number of rows used.
    method : str
        Name of the procedure.
    e_value : float
        The ε-DP e-value E (unitless, >= 0, E_P[E] <= 1 under the null P);
        ``exp(log_e_value)``, capped at exp(700) to stay finite.
    log_e_value : float
        Its natural logarithm, in nats (the released quantity; may be negative).
    statistic_kind : str
        Per-row statistic: ``"optimal"`` (clipped likelihood ratio E*),
        ``"tslr"``, or ``"exact"`` (likelihood ratio of the released value).
    bet : float or None
        Merging bet λ_b in (0, 1] (public: a function of n and the laws); 1 means
        no merging (the planner chose a narrower clip range instead, see
        ``clip_range``); None for ``statistic="exact"``, which does not merge.
    noise_scale : float
        Scale of the noise (public): for the merged release, the scale of its
        noise on the log statistic, in nats; for ``statistic="exact"``, the
        reciprocal sensitivity / ε of the rate of the two-sided geometric noise,
        in counts (two-point laws) or lattice units (other laws); 0 when the
        statistic is constant.
    clip_range : float or None
        Log-range log(c2/c1) at which E* is clipped, in nats: ε, or a narrower
        range planned by ``bet="auto"`` when that beats merging; None for
        ``"tslr"`` and ``"exact"``.
    grid : float or None
        The public grid g (a power of two) of the float-safe merged release: the
        released ``log_e_value`` is g·J − c for an integer J, so anyone can check that
        ``(log_e_value + compensator) / grid`` is an integer. None for
        ``statistic="exact"`` and for a constant statistic.
    compensator : float or None
        The public compensator c = log E[e^{gK}] of the discrete Laplace noise K (in
        nats); None where ``grid`` is.
    pvalue : float
        Property: the valid p-value ``min(1, 1 / e_value)`` (Markov's inequality).

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import stats
    >>> from skdptest import PrivateEValueTest
    >>> X = np.random.default_rng(0).binomial(1, 0.6, size=(200, 1))
    >>> test = PrivateEValueTest(stats.bernoulli(0.3), stats.bernoulli(0.6), random_state=0)
    >>> result = test.fit(X).result_
    >>> result.reject, result.e_value >= 1 / result.alpha
    (True, True)
    >>> e_value, pvalue = result
    >>> pvalue == min(1.0, 1.0 / e_value)
    True
    """

    e_value: float
    log_e_value: float
    statistic_kind: str
    bet: float | None
    noise_scale: float
    clip_range: float | None
    grid: float | None = None
    compensator: float | None = None
    method: str = "PrivateEValueTest"

    _unpack = ("e_value", "pvalue")

    @property
    def pvalue(self):
        """Valid p-value min(1, 1/E) (a function of the released e-value)."""
        return pvalue_from_log_e(self.log_e_value)


@dataclass(frozen=True, kw_only=True)
class EProcessResult(TestResult):
    """State of a private e-process.

    Unpacks like scipy's results: ``e_value, pvalue = result``.

    Attributes
    ----------
    reject : bool
        ``decision == "reject"``: the null P is rejected (the e-process against P
        crossed ``1 / alpha``).
    alpha : float
        Level against P.
    epsilon : float
        ε spent for the whole stream (pure ε-DP, replace-one neighbours).
    delta : float
        δ spent (always 0).
    n_samples : int
        Rows consumed by completed batches up to the decision (or so far).
    method : str
        Name of the procedure.
    decision : str
        ``"reject"`` (the null P is rejected), ``"accept"`` (two-sided mode: the
        alternative is rejected, i.e. P accepted) or ``"continue"``.
    e_value : float
        Current value of the private e-process against P (product of the
        released batch e-values; constant between batch ends).
    log_e_process : tuple of float
        Released log e-process against P at each completed batch end, in nats.
    log_e_process_alt : tuple of float or None
        Two-sided mode: the released log e-process against Q; otherwise None.
    batch_ends : tuple of int
        Number of rows consumed at each batch end (public: the schedule).
    beta : float or None
        Level against Q (two-sided mode) or None.
    pvalue : float
        Property: the anytime-valid p-value ``min(1, 1 / max_t E_t)`` over the
        released path (Ville's inequality).

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import stats
    >>> from skdptest import PrivateEProcess
    >>> X = np.random.default_rng(0).binomial(1, 0.6, size=(400, 1))
    >>> test = PrivateEProcess(stats.bernoulli(0.3), stats.bernoulli(0.6), random_state=0)
    >>> result = test.fit(X).result_
    >>> result.decision in ("reject", "accept", "continue"), result.n_samples <= 400
    (True, True)
    """

    decision: str
    e_value: float
    log_e_process: tuple
    log_e_process_alt: tuple | None
    batch_ends: tuple
    beta: float | None
    method: str = "PrivateEProcess"

    _unpack = ("e_value", "pvalue")

    @property
    def pvalue(self):
        """Anytime-valid p-value min(1, 1 / sup_t E_t) of the released path."""
        return pvalue_from_log_e(max(self.log_e_process, default=0.0))
