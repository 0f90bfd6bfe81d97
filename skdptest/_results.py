"""Frozen result dataclasses.

Every field is itself a private release or public information (parameters,
sample sizes). No result holds a non-private statistic, a noise draw or a count
that would leak.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "EProcessResult",
    "EValueResult",
    "PermutationTestResult",
    "ThresholdResult",
]


@dataclass(frozen=True)
class EValueResult:
    """Result of a private batch e-value test.

    Attributes
    ----------
    e_value : float
        The ε-DP e-value E (unitless, ≥ 0, E_P[E] ≤ 1 under the null P).
    log_e_value : float
        Its natural logarithm, in nats (the released quantity; may be negative).
    reject : bool
        Whether ``e_value >= 1 / alpha`` (Markov: type-I error ≤ alpha).
    alpha : float
        Level of the test.
    epsilon : float
        ε spent by this release (pure ε-DP, replace-one neighbours).
    delta : float
        δ spent (always 0).
    n_samples : int
        Number of rows used.
    statistic : str
        Per-row statistic: ``"optimal"`` (clipped likelihood ratio E*),
        ``"tslr"``, or ``"exact"`` (likelihood ratio of the released value).
    bet : float or None
        Merging bet λ_b in (0, 1] (public: a function of n and the laws); 1 means
        no merging (the planner chose a narrower clip range instead, see
        ``clip_range``); None for ``statistic="exact"``, which does not merge.
    noise_scale : float
        Scale of the noise (public): the Laplace scale R_λ / ε, in nats, on the
        merged log statistic; for ``statistic="exact"``, the reciprocal
        sensitivity / ε of the rate of the two-sided geometric noise, in counts
        (two-point laws) or lattice units (other laws), 0 when the statistic is
        constant.
    clip_range : float or None
        Log-range log(c2/c1) at which E* is clipped, in nats: ε, or a narrower range
        planned by ``bet="auto"`` when that beats merging (continuous laws at small
        n·R_ε); None for ``"tslr"`` and ``"exact"``.
    method : str
        Name of the procedure.
    """

    e_value: float
    log_e_value: float
    reject: bool
    alpha: float
    epsilon: float
    delta: float
    n_samples: int
    statistic: str
    bet: float | None
    noise_scale: float
    clip_range: float | None
    method: str = "PrivateEValueTest"


@dataclass(frozen=True)
class EProcessResult:
    """State of a private e-process.

    Attributes
    ----------
    decision : str
        ``"reject"`` (the null P is rejected), ``"accept"`` (two-sided mode: the
        alternative is rejected, i.e. P accepted) or ``"continue"``.
    reject : bool
        ``decision == "reject"``.
    e_value : float
        Current value of the private e-process against P (product of the
        released batch e-values; constant between batch ends).
    log_e_process : tuple of float
        Released log e-process against P at each completed batch end, in nats.
    log_e_process_alt : tuple of float or None
        Two-sided mode: the released log e-process against Q; otherwise None.
    batch_ends : tuple of int
        Number of rows consumed at each batch end (public: the schedule).
    n_samples_used : int
        Rows consumed by completed batches up to the decision (or so far).
    alpha : float
        Level against P.
    beta : float or None
        Level against Q (two-sided mode) or None.
    epsilon : float
        ε spent for the whole stream (pure ε-DP, replace-one neighbours).
    delta : float
        δ spent (always 0).
    method : str
        Name of the procedure.
    """

    decision: str
    reject: bool
    e_value: float
    log_e_process: tuple
    log_e_process_alt: tuple | None
    batch_ends: tuple
    n_samples_used: int
    alpha: float
    beta: float | None
    epsilon: float
    delta: float
    method: str = "PrivateEProcess"


@dataclass(frozen=True)
class PermutationTestResult:
    """Result of a DP permutation test.

    Attributes
    ----------
    statistic : float
        The privatised test statistic T̃_0 (statistic plus its Laplace noise).
    p_value : float
        (1 + #{b ≥ 1 : T̃_b ≥ T̃_0}) / (B + 1), a private p-value, valid at
        finite samples under exchangeability.
    reject : bool
        Whether ``p_value <= alpha``.
    alpha : float
        Level of the test.
    epsilon : float
        ε spent.
    delta : float
        δ spent.
    n_samples : int
        Number of rows (pooled rows for two-sample tests, pairs for HSIC).
    n_permutations : int
        Number B of permuted statistics.
    sensitivity : float
        Global sensitivity Δ used for the noise (public).
    noise_scale : float
        Laplace scale 2Δ/ξ of the noise on each statistic (public).
    method : str
        Name of the procedure.
    """

    statistic: float
    p_value: float
    reject: bool
    alpha: float
    epsilon: float
    delta: float
    n_samples: int
    n_permutations: int
    sensitivity: float
    noise_scale: float
    method: str


@dataclass(frozen=True)
class ThresholdResult:
    """Result of a generalized threshold search.

    Only the search's output and public information are kept: never the
    numbers of runs N_t, the rates, the counts of ±1 outputs or the noises R,
    ν_t (they would leak the data).

    Attributes
    ----------
    accepted : int or None
        Index (0-based) of the accepted mechanism, or None if none was accepted.
    n_examined : int
        Number of mechanisms examined (``accepted + 1`` when one was accepted,
        ``n_mechanisms`` otherwise); a function of ``accepted``.
    n_mechanisms : int
        Number of mechanisms in the stream (public).
    epsilon : float
        ε spent for the whole search (pure ε-DP).
    delta : float
        δ spent (always 0, even when mechanisms have δ_t > 0).
    method : str
        Name of the procedure.
    """

    accepted: int | None
    n_examined: int
    n_mechanisms: int
    epsilon: float
    delta: float
    method: str = "GeneralizedThresholdMechanism"
