"""Result of the private confidence sequence (frozen, keyword-only)."""

from __future__ import annotations

from dataclasses import dataclass

from .._results import TestResult

__all__ = ["ConfidenceSequenceResult"]


@dataclass(frozen=True, kw_only=True)
class ConfidenceSequenceResult(TestResult):
    """State of a :class:`~skdptest.PrivateConfidenceSequence`.

    Unpacks as the current interval: ``lower, upper = result``.

    Every field is a function of the released noisy batch counts and public
    parameters (the schedule, the bounds, the confidence level): post-processing of
    the ε-DP releases, covered jointly by the estimator's privacy statement.

    Attributes
    ----------
    reject : bool
        ``null_mean`` given: whether it lies outside the current interval (or the
        running intersection became empty); ``False`` when no ``null_mean`` is given.
        A time-uniform test of level ``alpha``.
    alpha : float
        1 − ``confidence_level``.
    epsilon : float
        ε spent for the whole stream (pure ε-DP, replace-one neighbours).
    delta : float
        δ spent (always 0).
    n_samples : int
        Rows used by completed batches (public: the schedule's last batch end).
    method : str
        Name of the procedure.
    lower, upper : float
        The current interval for the mean, in the data's units (within ``bounds``):
        the running intersection of the intervals released so far. It covers the
        mean at every release time simultaneously with probability at least
        ``confidence_level``, over the sampling and the noise together. Before the
        first batch end: the bounds.
    confidence_level : float
        The time-uniform coverage guaranteed.
    empty : bool
        Whether the running intersection of the released intervals became empty
        (which happens only on a miss: the data then contradict every mean). The
        interval reported from then on is the latest released interval alone
        (still a valid time-uniform interval, never empty); count such a stream as
        a miss when measuring coverage.
    intervals : tuple of tuple of float
        One ``(t, lower, upper)`` per release: the rows used at that batch end and
        the reported interval then (DataFrame-friendly; also the ``intervals_``
        fitted attribute, an array of shape (n_releases, 3)).
    null_mean : float or None
        The mean tested, if any.

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest import PrivateConfidenceSequence
    >>> cs = PrivateConfidenceSequence(random_state=0).fit(np.ones((15, 1)))
    >>> result = cs.result_
    >>> lower, upper = result
    >>> [t for t, _, _ in result.intervals], result.n_samples
    ([10.0, 15.0], 15)
    >>> bool(result.upper == 1.0 and result.lower > 0.25), result.empty
    (True, False)
    """

    lower: float
    upper: float
    confidence_level: float
    empty: bool
    intervals: tuple
    null_mean: float | None = None
    method: str = "PrivateConfidenceSequence"

    _unpack = ("lower", "upper")

    @property
    def width(self):
        """``upper - lower``, in the data's units."""
        return self.upper - self.lower
