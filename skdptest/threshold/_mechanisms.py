"""Binary private mechanisms M_t: data → {+1, −1} for the generalized threshold search.

The protocol
------------
A *mechanism* is any object with

- ``epsilon`` : float > 0, and optionally ``delta`` : float in [0, 1) (default 0),
  such that one output is (ε, δ)-DP under the neighbouring relation of the data
  it is run on;
- ``sample(X, y, size, rng)`` : returns an array of shape ``(size,)`` of
  ``size`` *independent* draws of the mechanism on the same data, each +1 or −1,
  using only the :class:`numpy.random.Generator` ``rng`` for randomness.

:class:`ThresholdMechanism` is an abstract base class of this protocol (duck
typing is also accepted). The subclasses here also expose
``probability(X, y)``, the exact Pr[M(X, y) = +1], used by tests and benchmarks
only (never by the search, which only samples).

Batch draws matter: GTM runs M_t a Poisson number of times, often thousands.
"""

from __future__ import annotations

import math
import warnings
from abc import ABC, abstractmethod

import numpy as np
from scipy import optimize, special

from .. import _noise
from .._budget import accounted_elsewhere
from .._noise import laplace
from .._params import InvalidParameterError
from .._validation import check_real
from .._warnings import warn_leak
from ._params import purification_flip_probability

__all__ = [
    "EstimatorMechanism",
    "GaussianThresholdQuery",
    "NoisyThresholdQuery",
    "Purified",
    "RandomizedResponse",
    "ThresholdMechanism",
    "as_outputs",
    "check_mechanism",
]


class ThresholdMechanism(ABC):
    """Abstract binary mechanism: one output in {+1, −1}, (ε, δ)-DP.

    Subclasses set ``epsilon`` (and ``delta``, default 0) and implement
    :meth:`sample`.

    Attributes
    ----------
    epsilon : float
        ε of one output, > 0.
    delta : float, default=0.0
        δ of one output, in [0, 1).

    Examples
    --------
    A fair coin that ignores the data (ε-DP for every ε > 0):

    >>> import numpy as np
    >>> from skdptest.threshold import ThresholdMechanism, check_mechanism
    >>> class Coin(ThresholdMechanism):
    ...     epsilon = 0.1
    ...     def sample(self, X, y, size, rng):
    ...         return rng.choice(np.array([-1, 1]), size=size)
    >>> check_mechanism(Coin())
    (0.1, 0.0)
    >>> Coin().sample(np.zeros((3, 1)), None, 4, np.random.default_rng(0)).shape
    (4,)
    """

    epsilon: float
    delta: float = 0.0

    @abstractmethod
    def sample(self, X, y, size, rng):
        """Draw ``size`` independent outputs of the mechanism on ``(X, y)``.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            Private data.
        y : ndarray or None
            Optional second variable.
        size : int
            Number of independent draws.
        rng : numpy.random.Generator
            Source of randomness.

        Returns
        -------
        out : ndarray of shape (size,)
            Entries +1 or −1.
        """


def check_mechanism(mechanism, name="mechanism"):
    """Validate a mechanism and return its ``(epsilon, delta)``.

    Parameters
    ----------
    mechanism : object
        A :class:`ThresholdMechanism` or any object with a ``sample(X, y, size, rng)``
        method and an ``epsilon`` attribute (``delta`` optional, default 0).
    name : str, default="mechanism"
        How refusals name it (e.g. ``"mechanisms[3]"``).

    Returns
    -------
    epsilon, delta : float
        The mechanism's privacy parameters.

    Raises
    ------
    InvalidParameterError
        A ``TypeError`` and a ``ValueError`` naming ``name`` when ``sample`` is
        missing, when ε is missing, not a real number or not > 0, or when δ is
        outside [0, 1).

    Examples
    --------
    >>> from skdptest.threshold import RandomizedResponse, check_mechanism
    >>> check_mechanism(RandomizedResponse(lambda X, y: X.mean() > 0, epsilon=0.5))
    (0.5, 0.0)
    >>> check_mechanism(object(), "mechanisms[0]")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    skdptest._params.InvalidParameterError: mechanisms[0] must have a method sample(...
    """
    if not callable(getattr(mechanism, "sample", None)):
        raise InvalidParameterError(
            f"{name} must have a method sample(X, y, size, rng) returning ±1 outputs; "
            f"got {type(mechanism).__name__}."
        )
    if not hasattr(mechanism, "epsilon"):
        raise InvalidParameterError(
            f"{name} has no attribute 'epsilon' (its ε_t is required).")
    eps = mechanism.epsilon
    if isinstance(eps, bool) or not isinstance(eps, int | float | np.integer | np.floating):
        raise InvalidParameterError(
            f"{name}.epsilon must be a real number, got {type(eps).__name__}.")
    if not (math.isfinite(eps) and eps > 0):
        raise InvalidParameterError(f"{name}.epsilon must be finite and > 0, got {eps}.")
    delta = getattr(mechanism, "delta", 0.0)
    if delta is None:
        delta = 0.0
    if isinstance(delta, bool) or not isinstance(delta, int | float | np.integer | np.floating):
        raise InvalidParameterError(
            f"{name}.delta must be a real number, got {type(delta).__name__}.")
    if not (0.0 <= delta < 1.0):
        raise InvalidParameterError(f"{name}.delta must lie in [0, 1), got {delta}.")
    return float(eps), float(delta)


def check_outputs(out, size, name="mechanism"):
    """Return ``out`` as an int8 array after checking shape ``(size,)`` and values ±1.

    Raises :class:`~skdptest.InvalidParameterError` (a ``ValueError``) naming ``name``.
    """
    out = np.asarray(out)
    if out.shape != (size,):
        raise InvalidParameterError(
            f"{name}.sample returned an array of shape {out.shape}, expected ({size},)."
        )
    if size and not np.all((out == 1) | (out == -1)):
        bad = out[(out != 1) & (out != -1)][0]
        raise InvalidParameterError(
            f"{name}.sample returned outputs other than ±1 (e.g. {bad!r}).")
    return out.astype(np.int8)


def as_outputs(out, size, name="mechanism"):
    """Outputs of a draw after the charge, as int8 ±1: the shape is checked (a function
    of ``size``, refused as by :func:`check_outputs`), but a value other than +1 counts
    as −1 instead of raising: the values depend on the data, and an exception (or its
    message) after the charge would tell neighbours apart. :func:`check_outputs` refuses
    such values before the charge, on the public surrogate."""
    out = np.asarray(out)
    if out.shape != (size,):
        raise InvalidParameterError(
            f"{name}.sample returned an array of shape {out.shape}, expected ({size},)."
        )
    return np.where(out == 1, 1, -1).astype(np.int8)


def _statistic(func, X, y):
    """q(X, y) as a float. It runs after the charge, so a non-finite value must not
    raise (an exception would tell neighbours apart): ±inf keep their sign (the noisy
    comparison is then certain) and NaN counts as −inf (never reaches the threshold).
    Either means the statistic broke its declared sensitivity on these data (e.g. a
    mean overflowing on rows near 1e308): clip the rows in the statistic."""
    value = float(np.asarray(func(X, y), dtype=float).reshape(()))
    return -math.inf if math.isnan(value) else value


class RandomizedResponse(ThresholdMechanism):
    """Randomized response on one data bit: ε-DP.

    Outputs the bit b(X, y) ∈ {+1, −1} with probability e^ε / (1 + e^ε), its
    opposite otherwise, so p = e^ε/(1 + e^ε) or 1/(1 + e^ε). ε-DP under any
    neighbouring relation, whatever the bit function.

    Parameters
    ----------
    bit : callable
        ``bit(X, y) -> bool`` (True means +1).
    epsilon : float
        Privacy parameter ε > 0.

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest.threshold import RandomizedResponse
    >>> m = RandomizedResponse(lambda X, y: X.mean() > 0, epsilon=1.0)
    >>> X = np.ones((5, 1))
    >>> round(m.probability(X, None), 4)
    0.7311
    >>> m.sample(X, None, 3, np.random.default_rng(0)).shape
    (3,)
    """

    def __init__(self, bit, epsilon):
        self.bit = bit
        self.epsilon = check_real(epsilon, "epsilon", low=0.0, low_open=True)
        self.delta = 0.0

    def __repr__(self):
        return f"RandomizedResponse(bit={self.bit!r}, epsilon={self.epsilon!r})"

    def _bit(self, X, y):
        return 1 if bool(self.bit(X, y)) else -1

    def probability(self, X, y):
        """Exact Pr[output = +1]."""
        keep = 1.0 / (1.0 + math.exp(-self.epsilon))
        return keep if self._bit(X, y) == 1 else 1.0 - keep

    def sample(self, X, y, size, rng):
        b = self._bit(X, y)
        keep = _noise.bernoulli(rng, 1.0 / (1.0 + math.exp(-self.epsilon)), size)
        return np.where(keep, b, -b).astype(np.int8)


class NoisyThresholdQuery(ThresholdMechanism):
    """Noisy threshold query 1{q(X) + Lap(Δ/ε) ≥ c}: ε-DP.

    Parameters
    ----------
    statistic : callable
        ``statistic(X, y) -> float`` of global sensitivity ``sensitivity`` under
        the neighbouring relation of the data.
    threshold : float
        The threshold c.
    epsilon : float
        Privacy parameter ε > 0.
    sensitivity : float, default=1.0
        Global sensitivity Δ of the statistic.

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest.threshold import NoisyThresholdQuery
    >>> count = lambda X, y: float((X[:, 0] > 0).sum())
    >>> m = NoisyThresholdQuery(count, threshold=3, epsilon=0.5)
    >>> round(m.probability(np.ones((3, 1)), None), 2)
    0.5
    """

    def __init__(self, statistic, threshold, epsilon, sensitivity=1.0):
        self.statistic = statistic
        self.threshold = check_real(threshold, "threshold")
        self.epsilon = check_real(epsilon, "epsilon", low=0.0, low_open=True)
        self.sensitivity = check_real(sensitivity, "sensitivity", low=0.0, low_open=True)
        self.delta = 0.0

    def __repr__(self):
        return (f"NoisyThresholdQuery(statistic={self.statistic!r}, threshold="
                f"{self.threshold!r}, epsilon={self.epsilon!r}, "
                f"sensitivity={self.sensitivity!r})")

    @property
    def scale(self):
        """Laplace scale Δ/ε."""
        return self.sensitivity / self.epsilon

    def probability(self, X, y):
        """Exact Pr[q(X) + Lap(Δ/ε) ≥ c]."""
        gap = (self.threshold - _statistic(self.statistic, X, y)) / self.scale
        return 0.5 * math.exp(-gap) if gap >= 0 else 1.0 - 0.5 * math.exp(gap)

    def sample(self, X, y, size, rng):
        q = _statistic(self.statistic, X, y)
        noisy = q + laplace(rng, self.scale, size=size)
        return np.where(noisy >= self.threshold, 1, -1).astype(np.int8)


def _gaussian_delta(sigma, sensitivity, epsilon):
    """δ(ε) of the Gaussian mechanism (Balle & Wang, 2018, Theorem 8)."""
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    return special.ndtr(a - b) - math.exp(epsilon) * special.ndtr(-a - b)


class GaussianThresholdQuery(ThresholdMechanism):
    """Gaussian threshold query 1{q(X) + N(0, σ²) ≥ c}: (ε, δ)-DP.

    σ is the smallest noise level with which the Gaussian mechanism on a
    statistic of sensitivity Δ is (ε, δ)-DP (analytic calibration of Balle and
    Wang, 2018); the threshold is post-processing. GTM purifies it.

    Parameters
    ----------
    statistic : callable
        ``statistic(X, y) -> float`` of global sensitivity ``sensitivity``.
    threshold : float
        The threshold c.
    epsilon : float
        ε > 0.
    delta : float
        δ in (0, 1).
    sensitivity : float, default=1.0
        Global sensitivity Δ.

    Attributes
    ----------
    sigma : float
        Standard deviation of the Gaussian noise.

    References
    ----------
    .. [1] B. Balle and Y.-X. Wang, "Improving the Gaussian mechanism for
       differential privacy: analytical calibration and optimal denoising",
       ICML 2018.

    Examples
    --------
    >>> from skdptest.threshold import GaussianThresholdQuery
    >>> m = GaussianThresholdQuery(lambda X, y: 0.0, 0.0, epsilon=1.0, delta=1e-5)
    >>> round(m.sigma, 3)
    3.731
    """

    def __init__(self, statistic, threshold, epsilon, delta, sensitivity=1.0):
        self.statistic = statistic
        self.threshold = check_real(threshold, "threshold")
        self.epsilon = check_real(epsilon, "epsilon", low=0.0, low_open=True)
        self.delta = check_real(delta, "delta", low=0.0, high=1.0, low_open=True,
                                high_open=True)
        self.sensitivity = check_real(sensitivity, "sensitivity", low=0.0, low_open=True)
        f = lambda log_s: _gaussian_delta(math.exp(log_s), self.sensitivity,  # noqa: E731
                                          self.epsilon) - self.delta
        lo, hi = math.log(self.sensitivity) - 20.0, math.log(self.sensitivity) + 20.0
        self.sigma = math.exp(optimize.brentq(f, lo, hi, xtol=1e-12)) * (1.0 + 1e-9)

    def __repr__(self):
        return (f"GaussianThresholdQuery(statistic={self.statistic!r}, threshold="
                f"{self.threshold!r}, epsilon={self.epsilon!r}, delta={self.delta!r}, "
                f"sensitivity={self.sensitivity!r})")

    def probability(self, X, y):
        """Exact Pr[q(X) + N(0, σ²) ≥ c]."""
        gap = (self.threshold - _statistic(self.statistic, X, y)) / self.sigma
        return float(special.ndtr(-gap))

    def sample(self, X, y, size, rng):
        q = _statistic(self.statistic, X, y)
        noisy = q + _noise.gaussian(rng, self.sigma, size=size)
        return np.where(noisy >= self.threshold, 1, -1).astype(np.int8)


class Purified(ThresholdMechanism):
    """Purification: a binary symmetric channel after an (ε, δ)-DP mechanism.

    Flips each output with probability φ = δ/(e^ε − 1 + 2δ); the result is pure
    ε-DP, with Pr[+1] = φ + (1 − 2φ) p. GTM applies the same channel by itself
    to any mechanism with δ > 0; this class makes it available on its own.

    Parameters
    ----------
    mechanism : object
        A mechanism (see the module docstring).

    Attributes
    ----------
    phi : float
        Flip probability.

    Examples
    --------
    >>> from skdptest.threshold import GaussianThresholdQuery, Purified
    >>> m = Purified(GaussianThresholdQuery(lambda X, y: 0.0, 0.0, 1.0, 1e-3))
    >>> m.delta, round(m.phi, 6)
    (0.0, 0.000581)
    """

    def __init__(self, mechanism):
        eps, delta = check_mechanism(mechanism, "mechanism")
        self.mechanism = mechanism
        self.epsilon = eps
        self.delta = 0.0
        self.phi = purification_flip_probability(eps, delta)

    def __repr__(self):
        return f"Purified({self.mechanism!r})"

    def probability(self, X, y):
        """Exact Pr[output = +1] (needs the inner mechanism's ``probability``)."""
        return self.phi + (1.0 - 2.0 * self.phi) * self.mechanism.probability(X, y)

    def sample(self, X, y, size, rng):
        out = as_outputs(self.mechanism.sample(X, y, size, rng), size, "mechanism")
        flip = _noise.bernoulli(rng, self.phi, size)
        return np.where(flip, -out, out).astype(np.int8)


class EstimatorMechanism(ThresholdMechanism):
    """A private test's ``decision`` as a binary mechanism.

    Each draw clones the estimator, fits it on ``(X, y)`` with a fresh seed
    taken from ``rng`` and maps its decision to ±1: +1 when
    ``bool(decision())`` is True (H0 rejected), −1 otherwise. The decision of
    an skdptest test is always a bool (an e-process that has not decided yet
    returns False, so it counts as −1). The privacy of one draw is the
    estimator's (``epsilon`` and ``delta`` attributes). This lets GTM search
    over test configurations (levels, kernels, ε...).

    The search charges its own ε once for everything; the wrapped estimator's
    ``budget`` should be ``None``. A non-None budget is dropped from the clones
    (with a warning) so that the draws are not charged a second time.

    Parameters
    ----------
    estimator : object
        Any object with ``fit``, ``decision``, ``epsilon`` and optionally
        ``delta``, ``random_state`` and ``budget`` parameters (``get_params``).
    positive : callable, default=None
        Maps the estimator after its fit to True (+1) or False (−1), e.g.
        ``lambda est: est.result_.decision == "accept"``. ``None`` uses
        ``bool(est.decision())``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.base import BaseEstimator
    >>> from skdptest.threshold import EstimatorMechanism
    >>> class MeanIsPositive(BaseEstimator):
    ...     def __init__(self, epsilon=1.0, random_state=None, budget=None):
    ...         self.epsilon, self.random_state, self.budget = epsilon, random_state, budget
    ...     def fit(self, X, y=None):
    ...         rng = np.random.default_rng(self.random_state)
    ...         z = np.clip(X[:, 0], -1, 1).sum() + rng.laplace(0, 2 / self.epsilon)
    ...         self.reject_ = bool(z > 0)
    ...         return self
    ...     def decision(self, X=None, y=None):
    ...         return self.reject_
    >>> m = EstimatorMechanism(MeanIsPositive(epsilon=0.5))
    >>> out = m.sample(np.ones((50, 1)), None, 4, np.random.default_rng(0))
    >>> out.tolist()
    [1, 1, 1, 1]
    """

    def __init__(self, estimator, positive=None):
        for attr in ("fit", "decision"):
            if not callable(getattr(estimator, attr, None)):
                raise TypeError(f"estimator must have a method {attr}().")
        if not hasattr(estimator, "epsilon"):
            raise ValueError("estimator has no attribute 'epsilon'.")
        if positive is not None and not callable(positive):
            raise TypeError(f"positive must be None or a callable, got "
                            f"{type(positive).__name__}.")
        self.estimator = estimator
        self.positive = positive
        if hasattr(estimator, "get_params"):
            params = estimator.get_params(deep=False)
            if params.get("budget") is not None:
                warn_leak(
                    "EstimatorMechanism: the wrapped estimator's budget is ignored (the "
                    "search charges its own epsilon once); pass budget=None."
                )
            if params.get("random_state") is not None:
                warn_leak(
                    "EstimatorMechanism: the wrapped estimator's random_state is replaced "
                    "by a fresh seed from the search's generator at every draw; pass "
                    "random_state=None."
                )
        self.epsilon = estimator.epsilon
        self.delta = getattr(estimator, "delta", 0.0) or 0.0

    def __repr__(self):
        return f"EstimatorMechanism({self.estimator!r})"

    def _clone(self):
        from sklearn.base import clone

        est = clone(self.estimator)
        params = est.get_params(deep=False) if hasattr(est, "get_params") else {}
        if params.get("budget") is not None:
            est.set_params(budget=None)
        return est, params

    def check_data(self, X, y):
        """Run the wrapped skdptest estimator's refusals on ``(X, y)`` (before the
        search's charge): input it would refuse is refused by the search, before
        anything is charged, not by a draw after it. Nothing is kept."""
        est, _ = self._clone()
        prepare = getattr(est, "_prepare", None)
        if prepare is not None:
            prepare(X, y, reset=True)

    def sample(self, X, y, size, rng):
        out = np.empty(size, dtype=np.int8)
        for i in range(size):
            est, params = self._clone()
            with warnings.catch_warnings():
                # The draws run after the search's charge: no warning may escape them
                # (its text or its count could depend on the data). The parameter
                # warnings were raised once by check_data, before the charge; the seed
                # comes from the search's own secret generator, so the clone's
                # FixedRandomStateWarning does not apply.
                warnings.simplefilter("ignore")
                if "random_state" in params:
                    est.set_params(random_state=int(rng.integers(2**32 - 1)))
                with accounted_elsewhere():  # the search charged its ε once
                    est.fit(X, y)
            if self.positive is not None:
                positive = bool(self.positive(est))
            else:
                positive = bool(est.decision())
            out[i] = 1 if positive else -1
        return out
