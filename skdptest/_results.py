"""Frozen result dataclasses: the base every test's result extends.

Every field of a result is itself a private release (covered, jointly with the
other fields, by the estimator's privacy argument) or public information
(parameters, sample sizes). No result holds a non-private statistic, a noise
draw or a count that would leak.

Family results (e-values, permutation tests, threshold search) subclass
:class:`TestResult` and live in their family's package; they are re-exported
from :mod:`skdptest`.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import ClassVar

__all__ = [
    "PValueAliasMixin",
    "TestResult",
    "pvalue_from_log_e",
]


def pvalue_from_log_e(log_e):
    """The valid p-value min(1, 1/E) of an e-value E given as log E (Markov)."""
    return math.exp(-max(float(log_e), 0.0))


@dataclass(frozen=True, kw_only=True)
class TestResult:
    """Fields every private test result has (keyword-only, frozen).

    Attributes
    ----------
    reject : bool
        Whether the null hypothesis is rejected at level ``alpha``.
    alpha : float
        Level of the test (probability of a false rejection under the null).
    epsilon : float
        ε spent by the release that produced this result.
    delta : float
        δ spent (0 for pure ε-DP releases).
    n_samples : int
        Number of rows the release used (public).
    method : str
        Name of the procedure.

    Notes
    -----
    Results whose class sets ``_unpack`` unpack like scipy's results, e.g.
    ``statistic, pvalue = result``.

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest import DPBinomialTest, TestResult
    >>> X = np.random.default_rng(0).binomial(1, 0.7, size=(100, 1))
    >>> result = DPBinomialTest(random_state=0).fit(X).result_
    >>> isinstance(result, TestResult)
    True
    >>> result.reject, result.alpha, result.epsilon, result.delta, result.n_samples
    (True, 0.05, 1.0, 0.0, 100)
    """

    __test__ = False  # not a pytest test class, despite the name

    reject: bool
    alpha: float
    epsilon: float
    delta: float
    n_samples: int
    method: str

    _unpack: ClassVar[tuple] = ()

    def __iter__(self):
        if not self._unpack:
            raise TypeError(f"{type(self).__name__} cannot be unpacked.")
        return iter(tuple(getattr(self, name) for name in self._unpack))


class PValueAliasMixin:
    """``p_value``: deprecated alias of ``pvalue`` (scipy's name)."""

    @property
    def p_value(self):
        """Deprecated alias of ``pvalue``; will be removed in 0.2."""
        warnings.warn("p_value is deprecated and will be removed in 0.2; use pvalue "
                      "(scipy's name).", FutureWarning, stacklevel=2)
        return self.pvalue
