"""ConfidenceInterval: the frozen result of ``result.confidence_interval(...)``.

A confidence interval here covers the parameter with probability at least its
confidence level over **both** sources of randomness: the sampling of the data and the
privacy noise. It is computed from a release and public quantities only
(post-processing: no extra privacy budget). The noise's own accuracy of a released
point estimate (``noise_sd`` on the results) is a different quantity with a different
name: it ignores the sampling and is **not** a confidence interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Real

from ._params import InvalidParameterError

__all__ = ["ConfidenceInterval", "check_confidence_level"]


def check_confidence_level(confidence_level):
    """``confidence_level`` as a float in (0, 1), else :class:`InvalidParameterError`."""
    if isinstance(confidence_level, bool) or not isinstance(confidence_level, Real):
        raise InvalidParameterError(
            "confidence_level must be a real number in (0, 1); got "
            f"{type(confidence_level).__name__}.")
    level = float(confidence_level)
    if not (math.isfinite(level) and 0.0 < level < 1.0):
        raise InvalidParameterError(
            f"confidence_level must be in (0, 1); got {confidence_level!r}.")
    return level


@dataclass(frozen=True, kw_only=True)
class ConfidenceInterval:
    """A confidence interval computed from a private release (frozen, keyword-only).

    Attributes
    ----------
    low : float
        Lower end (may be the lower end of the parameter's range, e.g. 0 for a
        proportion, or ``-inf``).
    high : float
        Upper end.
    confidence_level : float
        The nominal coverage 1 − α: P(low <= parameter <= high) >= confidence_level at
        every sample size, over the sampling of the data **and** the privacy noise
        together.
    parameter : str
        What the interval is for (e.g. ``"proportion"``, ``"mean"``).
    covers : str
        Which randomness the coverage accounts for: always ``"sampling and noise"``
        here (a noise-only accuracy is reported separately, as ``noise_sd``).
    method : str
        How it was computed.

    Notes
    -----
    The interval is a function of the released statistic and public quantities
    (sizes, bounds, ε and the plan of the release) only: post-processing of a release
    that was already paid for, so it costs no privacy budget. ``low, high = ci``
    unpacks it.

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest import DPBinomialTest
    >>> X = np.random.default_rng(0).binomial(1, 0.3, size=(500, 1))
    >>> ci = DPBinomialTest(epsilon=1.0).fit(X).result_.confidence_interval(0.9)
    >>> low, high = ci
    >>> ci.parameter, ci.confidence_level, ci.covers
    ('proportion', 0.9, 'sampling and noise')
    >>> 0.0 <= low < high <= 1.0
    True
    """

    low: float
    high: float
    confidence_level: float
    parameter: str
    covers: str = "sampling and noise"
    method: str = ""

    def __iter__(self):
        return iter((self.low, self.high))

    @property
    def width(self):
        """``high − low``."""
        return self.high - self.low
