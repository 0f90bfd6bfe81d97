"""PrivateConfidenceSequence: a central ε-DP time-uniform confidence sequence for a mean."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from numbers import Integral, Real

import numpy as np

from .._base import BaseStreamingTest, validate_input
from .._budget import PrivacyBudget
from .._noise import discrete_laplace, quantise_rate
from .._params import InstanceOf, Interval, InvalidParameterError, NoneValue, RandomState
from .._recorder import NoisedQuantity, NoisePlan, observe
from .._validation import is_dask
from ._confseq_result import ConfidenceSequenceResult
from ._csbounds import MassCache, MixturePrior, confidence_bounds

__all__ = ["PrivateConfidenceSequence", "batch_ends"]

#: Batch ends per decade: ends are A·10^(j/6) (ratio 10^(1/6) ≈ 1.468), A = the
#: horizon or 10, so that a batch ends at every power of ten (or at the horizon).
PER_DECADE = 6
#: Smallest grid of the mixture's alternatives (steps of 1/GRID).
GRID = 1024
#: Uniform share of the tuned mixtures.
UNIFORM_SHARE = 0.05
#: A mixture tuned to horizon h puts its alternatives at distance τ = sqrt(KAPPA / (4 h)).
KAPPA = 10.0
#: The default mixture: equal shares of the mixtures tuned to each of these horizons
#: (one per decade; no single horizon is favoured), plus the uniform share.
DEFAULT_HORIZONS = (10**2, 10**3, 10**4, 10**5, 10**6)
#: Grid points per sqrt(h) of the default mixture (a finer grid gives the same widths:
#: 16 per sqrt(h) changed no width by 0.0002 in benchmarks/confidence_sequences.py).
DEFAULT_GRID_PER_ROOT = 4.0


def first_end(rate):
    """Smallest first batch: 10 rows, or more when one batch's noise (variance 2/r²
    in counts) would swamp its binomial spread (at most n/4): public, from ε."""
    return max(10, math.ceil(2.0 / rate**2))


def batch_ends(rate, horizon=None):
    """Iterator over the public batch ends (cumulative rows) of a stream."""
    anchor = 10.0 if horizon is None else float(horizon)
    first = first_end(rate)
    j = math.floor(PER_DECADE * math.log10(first / anchor)) - 1
    while round(anchor * 10.0 ** (j / PER_DECADE)) < first:
        j += 1
    end = 0
    while True:
        new = max(end + 1, round(anchor * 10.0 ** (j / PER_DECADE)))
        yield int(new)
        end = new
        j += 1


def _tuned_prior(horizons, per_root):
    """The mixture with equal shares tuned to each horizon, on a grid of at least
    ``per_root`` points per sqrt(h) (the standard error at h is about 0.5 / sqrt(h))."""
    grid = max(GRID, 1 << math.ceil(math.log2(per_root * math.sqrt(max(horizons)))))
    return MixturePrior(grid, scale=[math.sqrt(KAPPA / (4.0 * h)) for h in horizons],
                        uniform_share=UNIFORM_SHARE)


class _Plan:
    """Public plan of a stream: bounds, noise rate, prior, schedule."""

    def __init__(self, params):
        self.a, self.b = (float(v) for v in params["bounds"])
        self.rate = float(quantise_rate(params["epsilon"]))
        self.alpha = 1.0 - params["confidence_level"]
        horizon = params["horizon"]
        self.horizon = horizon
        if horizon is None:
            self.prior = _tuned_prior(DEFAULT_HORIZONS, DEFAULT_GRID_PER_ROOT)
        else:
            self.prior = _tuned_prior((horizon,), 16.0)

    def ends(self):
        return batch_ends(self.rate, self.horizon)

    def interval(self, ys, ns, cache=None):
        """The released interval of the noisy counts so far, in the data's units."""
        lo, hi = confidence_bounds(ys, ns, self.rate, self.alpha, self.prior, cache)
        span = self.b - self.a
        return self.a + span * lo, min(self.b, self.a + span * hi)


class PrivateConfidenceSequence(BaseStreamingTest):
    """Central ε-DP time-uniform confidence sequence for the mean of a bounded stream.

    Rows arrive in order (``partial_fit``) and are cut into disjoint batches of a
    public schedule. Each row x in the public bounds [a, b] is rounded at random to
    a bit B ~ Bernoulli((x − a)/(b − a)) (fresh randomness; E[B] = (E[x] − a)/(b − a)),
    so the stream becomes a Bernoulli stream with mean p = (μ − a)/(b − a). At the
    end of batch k its count S_k of ones is released as Y_k = S_k + Z_k, Z_k exact
    discrete Laplace noise (two-sided geometric) of rate r = ε (rounded down onto the
    sampler's grid). For each candidate p the exact likelihood of the releases,
    L_K(p) = ∏ Σ_s Binom(s; n_k, p) tanh(r/2) e^{−r abs(Y_k − s)}, enters the
    mixture e-process M_K(p) = Σ_j w_j(p) L_K(q_j) / L_K(p), a nonnegative
    martingale under p; by Ville's inequality the set {p : M_K(p) < 1/α} covers p
    at all release times simultaneously with probability at least 1 − α. The
    interval reported is the running intersection of these sets, computed with
    bounds that only ever widen it (see Notes), mapped back to [a, b].

    Parameters
    ----------
    bounds : tuple of (float, float), default=(0.0, 1.0)
        Public bounds (a, b), a < b, that every row satisfies (a row outside is
        refused). The default is a Bernoulli stream of 0/1 values (values in
        between are rounded at random, keeping the mean).
    epsilon : float, default=1.0
        ε of the whole stream (every row enters exactly one batch count).
    confidence_level : float, default=0.95
        Time-uniform coverage 1 − α.
    horizon : int or None, default=None
        An int h: the mixture puts its weight near each candidate at the distance
        that minimises the width at t = h (a Gaussian of scale sqrt(10 / (4 h)) in
        p, plus a 5 % uniform share), and the batch ends are anchored at h (a batch
        ends exactly at h): narrower near h, wider far from it. ``None``: equal
        shares of the mixtures tuned to h = 10², 10³, ..., 10⁶ (and the uniform
        share), for streams of unknown length. Valid at every t either way.
    null_mean : float or None, default=None
        A mean to test: ``reject`` (and ``decision()``) tell whether it has left
        the interval, a time-uniform test of level α.
    budget : PrivacyBudget, default=None
        Ledger charged ε once per stream, when its first rows arrive.
    random_state : None, int, RandomState instance or Generator, default=None
        Source of the noise and of the random rounding. For tests and reproducible
        examples only: any value other than ``None`` raises
        :class:`~skdptest.FixedRandomStateWarning` (whoever holds the seed, the
        generator or a pickle of the estimator can replay the noise, and equal seeds
        correlate the noise of different fits). ``None`` draws fresh OS entropy and
        keeps nothing from which the noise could be regenerated.

    Attributes
    ----------
    result_ : ConfidenceSequenceResult
        The current interval, the interval at each release, the rows used.
    intervals_ : ndarray of shape (n_releases, 3)
        Property: ``[t, lower, upper]`` at each batch end (a copy of
        ``result_.intervals``; ``pandas.DataFrame(est.intervals_, columns=["t",
        "lower", "upper"])``).
    n_features_in_ : int
        Number of features (1).
    privacy_spent_ : PrivacySpent
        What the last charge cost: ``epsilon``, ``delta`` and the privacy profile
        declared to the ledger. This estimator declares ``"pure"``: its release is
        ε-DP. It is not one continuous Laplace draw, so the
        ``"laplace"`` profile (a tighter zCDP) is not claimed; the ``"zcdp"`` and
        ``"rdp"`` accountants charge it as generic pure DP (see "Privacy profiles" in
        the privacy-budget guide).

    Notes
    -----
    **Privacy.** Pure ε-DP for the whole stream under replacing one row (the
    stream's length and order are public). Replacing a row changes its rounded bit
    at most, hence one batch count by at most 1: the count plus discrete Laplace
    noise of rate r <= ε is ε-DP (the pmf ratio at any output is at most e^r, for
    every value of the other rows' bits, hence for their mixture), and the batches
    are disjoint (parallel composition). The noise is drawn by the exact integer
    sampler (no floating-point leak); everything released — the intervals, the
    rows used, the empty flag — is post-processing of the noisy counts and the
    public schedule. The pending count of an incomplete batch and the generator
    live in the running stream, never pickled or copied.

    **Validity.** The likelihood of each release is the exact convolution of the
    binomial and the noise law (no approximation); for each p, M_K(p) is a
    martingale under p (a fixed mixture of likelihood ratios), so coverage holds at
    every release time simultaneously, for any law on [a, b] (the rounded bits are
    i.i.d. Bernoulli(p) whatever the law). The inversion never narrows the set: the
    mixture's normaliser is bounded from below (terms far from the data dropped),
    the likelihood over each cell of candidates from above (the binomial term
    maximised over the cell, the dropped terms of each convolution bounded by a
    geometric series), and a cell is excluded only when every p in it has
    M_K(p) >= 1/α; the ends are resolved to 1/16384 of [0, 1].

    **Between batch ends** the last interval stands: batch ends grow by a ratio
    10^(1/6) ≈ 1.468, so an interval is at most 1.468 times older than the stream
    (about sqrt(1.468) ≈ 1.21 times wider than a release at that moment would
    be). Batches end at every power of ten (or at the horizon).

    **The empty flag.** The running intersection can become empty only if some
    released set missed the mean; the result then says so (``empty=True``) and
    reports the latest released set alone (never empty: it contains the maximum
    likelihood mean).

    This is a confidence sequence for the mean of the stream (sampling and noise
    together); it is not a measure of the noise alone.

    References
    ----------
    .. [1] S. R. Howard, A. Ramdas, J. McAuliffe and J. Sekhon, "Time-uniform,
       nonparametric, nonasymptotic confidence sequences", Ann. Statist. 2021.
    .. [2] I. Waudby-Smith, Z. S. Wu and A. Ramdas, "Nonparametric extensions of
       randomized response for private confidence sets", ICML 2023.
    .. [3] C. L. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for
       differential privacy", NeurIPS 2020 (the exact discrete Laplace sampler).

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest import PrivateConfidenceSequence
    >>> rng = np.random.default_rng(0)
    >>> cs = PrivateConfidenceSequence(epsilon=1.0, random_state=0)
    >>> for _ in range(2):
    ...     _ = cs.partial_fit(rng.binomial(1, 0.3, size=(100, 1)))
    >>> lower, upper = cs.result_  # as of the last public batch end (147 of 200 rows)
    >>> bool(lower < 0.3 < upper), cs.result_.n_samples
    (True, 147)
    >>> cs.intervals_.shape[1]
    3
    """

    def __init__(self, *, bounds=(0.0, 1.0), epsilon=1.0, confidence_level=0.95,
                 horizon=None, null_mean=None, budget=None, random_state=None):
        self.bounds = bounds
        self.epsilon = epsilon
        self.confidence_level = confidence_level
        self.horizon = horizon
        self.null_mean = null_mean
        self.budget = budget
        self.random_state = random_state

    _parameter_constraints = {
        "bounds": [InstanceOf(tuple, list, description="a pair (a, b) of reals, a < b")],
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "confidence_level": [Interval(Real, 0, 1, closed="neither")],
        "horizon": [NoneValue(), Interval(Integral, 1, None)],
        "null_mean": [NoneValue(), Interval(Real, None, None)],
        "budget": [NoneValue(), InstanceOf(PrivacyBudget)],
        "random_state": [RandomState()],
    }

    def _check_params(self, params):
        bounds = params["bounds"]
        if len(bounds) != 2 or not all(
                isinstance(v, Real) and not isinstance(v, bool) and math.isfinite(v)
                for v in bounds) or not bounds[0] < bounds[1]:
            raise InvalidParameterError(
                "bounds must be a pair (a, b) of finite reals with a < b.")
        if not params["epsilon"] >= 2.0**-20 or params["epsilon"] > 2.0**32:
            raise InvalidParameterError(
                "epsilon must lie in [2**-20, 2**32] (the exact sampler's rates).")
        if not math.isfinite(params["epsilon"]):
            raise InvalidParameterError("epsilon must be finite.")
        return params

    # ---------------------------------------------------------------- input
    def _validate_input(self, X, y, reset):
        if is_dask(X):
            raise TypeError("PrivateConfidenceSequence takes numpy or pandas rows, not dask "
                            "input (X is consumed in order, batch by batch).")
        X = validate_input(self, X, reset=reset)
        if X.shape[1] != 1:
            raise ValueError(
                "PrivateConfidenceSequence needs X with exactly one column (one value per "
                f"row); got {X.shape[1]} columns.")
        return X.astype(np.float64, copy=False), y

    def _plan(self, params, X, y):
        plan = _Plan(params)
        self._check_rows(plan, X)
        return plan

    @staticmethod
    def _check_rows(plan, X):
        if np.any((X < plan.a) | (X > plan.b)):  # the kind of problem only, no count
            raise ValueError(
                f"X has values outside bounds=({plan.a:g}, {plan.b:g}). Declare bounds "
                "that every value satisfies (clip with public bounds first if needed).")

    def _check_stream_data(self, stream, X):
        self._check_rows(stream.plan, X)

    # ---------------------------------------------------------------- stream
    def _start_stream(self, prep):
        return _State(ends=prep.plan.ends())

    def _advance(self, stream, X):
        st, plan = stream.state, stream.plan
        u = (X[:, 0] - plan.a) / (plan.b - plan.a)
        # Random rounding to {a, b}, one fresh uniform per row, keeps the mean
        # (P(U < u) = u). Like the rank tests' tie-breaking permutation, the uniforms
        # are drawn independently of the data (only their number, public, is used):
        # not noise, so not through _noise; the noise is the discrete Laplace below.
        bits = stream.rng.random(u.shape[0]) < u
        start, m = 0, bits.shape[0]
        while start < m:
            if st.next_end is None:
                st.next_end = next(st.ends)
            need = st.next_end - st.used - st.filled
            take = min(need, m - start)
            st.pending += int(np.count_nonzero(bits[start:start + take]))
            st.filled += take
            start += take
            if st.filled == st.next_end - st.used:
                self._release_batch(stream)
        if st.result is None:
            st.result = self._result(stream)
        return st.result

    def _release_batch(self, stream):
        st, plan = stream.state, stream.plan
        observe("noisy count", st.pending)  # for the grey-box audit (a no-op otherwise)
        y = st.pending + int(discrete_laplace(stream.rng, plan.rate))
        st.ys.append(y)
        st.ns.append(st.filled)
        st.used += st.filled
        st.pending = st.filled = 0
        st.next_end = None
        lo, hi = plan.interval(st.ys, st.ns, st.cache)
        if not st.empty and st.lower is not None:
            new_lo, new_hi = max(st.lower, lo), min(st.upper, hi)
            if new_lo > new_hi:
                st.empty = True
            else:
                lo, hi = new_lo, new_hi
        st.lower, st.upper = lo, hi
        st.intervals.append((float(st.used), float(lo), float(hi)))
        st.result = self._result(stream)

    @staticmethod
    def _result(stream):
        st, params, plan = stream.state, stream.params, stream.plan
        lower = plan.a if st.lower is None else st.lower
        upper = plan.b if st.upper is None else st.upper
        null = params["null_mean"]
        reject = null is not None and (st.empty or not lower <= null <= upper)
        return ConfidenceSequenceResult(
            reject=bool(reject), alpha=plan.alpha, epsilon=params["epsilon"], delta=0.0,
            n_samples=int(st.used), lower=float(lower), upper=float(upper),
            confidence_level=params["confidence_level"], empty=bool(st.empty),
            intervals=tuple(st.intervals), null_mean=null,
        )

    def _noise_plan(self, prep):
        """One noisy count per complete batch of the public schedule (sensitivity one
        count, rate ε); the random rounding draws are data-independent in number."""
        out, eps = [], prep.params["epsilon"]
        for end in prep.plan.ends():
            if end > prep.n_samples:
                break
            out.append(NoisedQuantity("noisy count", "discrete_laplace", 1, eps))
        return NoisePlan(tuple(out), sequential=True)

    # ---------------------------------------------------------------- API
    @property
    def intervals_(self):
        """``[t, lower, upper]`` at each release, shape (n_releases, 3)."""
        if "result_" not in vars(self):
            raise AttributeError("intervals_ is set by fit or partial_fit.")
        return np.array(self.result_.intervals, dtype=float).reshape(-1, 3)

    def _score_value(self, result):
        """Minus the width of the final interval (larger: a more precise estimate)."""
        return -result.width

    def score(self, X, y=None):
        """Minus the width of the interval of a fresh stream fed ``X`` (charged ε).

        Parameters
        ----------
        X : array-like of shape (n_samples, 1)
            Private rows in order.
        y : None
            Ignored.

        Returns
        -------
        score : float
            ``-(upper - lower)`` after the last complete batch, in the data's units.
        """
        return super().score(X, y)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # One column of values inside declared bounds, not a numeric 2-D array:
        # scikit-learn's generic checks do not apply; tests/test_common.py runs the
        # contract's checks on bounded data.
        tags.input_tags.two_d_array = False
        return tags


@dataclass
class _State:
    """Mutable state of a running stream (private: ``pending`` is an unnoised count).

    Lives inside the estimator's ``_stream``, which is never pickled or copied.
    """

    ends: object
    next_end: int | None = None
    pending: int = 0
    filled: int = 0
    used: int = 0
    ys: list = field(default_factory=list)
    ns: list = field(default_factory=list)
    lower: float | None = None
    upper: float | None = None
    empty: bool = False
    intervals: list = field(default_factory=list)
    cache: MassCache = field(default_factory=MassCache)  # running sums (of releases)
    result: object = None
