"""PrivateEProcess: a streaming ε-DP e-process that stops at the first crossing."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from numbers import Integral, Real

import numpy as np

from .._base import BaseStreamingTest
from .._noise import RATE_BITS
from .._params import InstanceOf, Interval, InvalidParameterError, NoneValue, Options
from .._recorder import NoisePlan
from .._warnings import warn_leak
from ._cache import _cached, snapshot
from ._evalue import (
    COMMON_CONSTRAINTS,
    batch_noised_quantities,
    check_laws,
    default_laws,
    laws_tokens,
    mechanism_epsilon,
    warn_default_laws,
    warn_epsilon_cap,
)
from ._exact import binary_exact, exact_model
from ._laws import _DiscreteLaws, _GaussianLaws, make_laws
from ._merge import plan_release, release, release_noise
from ._optimal import optimal_statistic, tslr_statistic
from ._results import EProcessResult
from ._rows import is_dask, validate_rows
from ._schedule import auto_schedule, fixed_schedule, geometric_schedule, paper_schedule

__all__ = ["PrivateEProcess"]

_SCHEDULES = ("auto", "paper", "doubling")
#: Largest batch size a stream plans. A batch's pending rows are buffered as they
#: arrive (memory grows with the rows given, never with the planned size), and its
#: release is planned from its size (the exact statistics' null laws cost O(size));
#: a schedule above this is refused before the charge.
MAX_BATCH = 10**9
_STATISTICS = ("auto", "exact", "optimal", "tslr")


class _Plan:
    """Public planning of one stream: statistics, bets and batch sizes."""

    def __init__(self, params, n_features):
        epsilon = mechanism_epsilon(params["epsilon"])
        null, alt = (
            default_laws(n_features) if params["null"] is None
            else (params["null"], params["alternative"])
        )
        self.laws = make_laws(null, alt)
        if self.laws.n_features != n_features:
            raise ValueError(
                f"X has {n_features} feature(s) but the null distribution has dimension "
                f"{self.laws.n_features}."
            )
        self.two_sided = params["beta"] is not None
        statistic = params["statistic"]
        if statistic == "exact":
            self.exact = exact_model(self.laws, epsilon)
            if self.exact is None:
                raise ValueError(
                    "statistic='exact' needs an exact model of the laws (finite discrete, "
                    "Gaussian location family or univariate continuous); use "
                    "statistic='optimal' or 'tslr'."
                )
        else:  # "auto": the exact statistic where it is cheap (two-point laws)
            self.exact = binary_exact(self.laws) if statistic == "auto" else None
        self.epsilon = epsilon
        # Two-sided merged mode splits ε between the two directions (sequential
        # composition within a batch); the exact mode serves both from one release.
        self.eps_stat = epsilon / 2 if (self.two_sided and self.exact is None) else epsilon
        name = "optimal" if statistic in ("auto", "exact") else statistic
        self.stat = self._statistic(self.laws, name)
        self.rate = optimal_statistic(self.laws, self.eps_stat)[1].rate if self.laws.exact \
            else self.laws.expect(self.stat.log_e, "Q")
        self.stat_name = name
        if self.two_sided and self.exact is None:
            self.laws_alt = make_laws(alt, null)
            self.stat_alt = self._on_null_support(self._statistic(self.laws_alt, name))
        self.fixed_bet = None
        self.schedule = params["schedule"]
        self.rho = params["rho"]
        # The null's support as a set, for finite discrete laws: the per-row check of
        # partial_fit is then a set lookup (NaN and ±inf are in no support) instead of
        # a scipy logpmf call per row.
        self.support = None
        if isinstance(self.laws, _DiscreteLaws) and self.laws.exact:
            xs = self.laws.xs
            self.support = frozenset(float(v) for v in xs[np.isfinite(null.logpmf(xs))])

    def rows_ok(self, X):
        """Whether the rows of a small numeric ndarray of the right width are all
        usable (finite, inside the null's support), without scipy where the laws allow.
        ``False`` sends them to the full validation, which refuses them with its own
        message; nothing is kept."""
        if self.support is not None:
            return all(v in self.support for v in X.ravel().tolist())
        if not all(math.isfinite(v) for v in X.ravel().tolist()):
            return False
        if isinstance(self.laws, _GaussianLaws):  # every finite row is in the support
            return True
        try:
            self.laws.log_ratio(X)
        except ValueError:
            return False
        return True

    def check_first_batch(self, max_samples):
        """Plan the first batch now, so that whatever can refuse it (a rate of 0 for
        the rate-based schedules, a noise rate below the exact sampler's smallest at a
        tiny ε) refuses before the stream is charged. Public: laws, ε and schedule."""
        if self.schedule in ("auto", "paper") and not self.rate > 0:
            raise ValueError(
                f"epsilon={self.epsilon!r} gives a per-row e-power rate of {self.rate!r} "
                "for these laws (ε too small, or null and alternative equal): the "
                f"schedule={self.schedule!r} batch sizes (in units of 1/rate) are undefined. "
                "Use a larger epsilon or a fixed schedule."
            )
        size = next(self.sizes())
        if max_samples is not None:
            size = min(size, max_samples)
        if size > MAX_BATCH:
            raise ValueError(
                f"The first batch of schedule={self.schedule!r} has {size} rows, more than "
                f"{MAX_BATCH} (epsilon={self.epsilon!r} gives a per-row rate of "
                f"{self.rate:.3g} for these laws). Use a larger epsilon, laws further "
                "apart, max_samples or a fixed schedule."
            )
        if self.exact is not None:
            if not self.epsilon >= 2.0**-RATE_BITS:
                raise ValueError(
                    f"epsilon={self.epsilon!r} is below 2**-{RATE_BITS}, the smallest noise "
                    "rate of the exact sampler."
                )
            return
        for against in ("P", "Q") if self.two_sided else ("P",):
            release_noise(*self.batch_plan(against, size), self.eps_stat)

    def _statistic(self, laws, name):
        if name == "optimal":
            return optimal_statistic(laws, self.eps_stat)[0]
        return tslr_statistic(laws, self.eps_stat)

    def _on_null_support(self, stat_b):
        """The data domain is the null's support: bound log E_B over it (E_B, the
        statistic against Q, is a non-decreasing function of −L)."""
        lmin, lmax = self.laws.l_range()
        stat_b.log_lo = float(stat_b.log_e(np.array([-lmax]))[0])
        stat_b.log_hi = float(stat_b.log_e(np.array([-lmin]))[0])
        return stat_b

    def sizes(self):
        if isinstance(self.schedule, str):
            if self.schedule == "doubling":
                return geometric_schedule(16, 2.0)
            if self.schedule == "paper":
                c = (self.stat.log_hi - self.stat.log_lo) / self.eps_stat
                sizes, self.fixed_bet = paper_schedule(self.rate, c, self.rho)
                return sizes
            return auto_schedule(self.rate, exact=self.exact is not None)
        return fixed_schedule(int(s) for s in self.schedule)

    def batch_plan(self, against, n):
        """(statistic, bet) of a batch of n rows for the e-value against ``against``
        ("P" or "Q"): the paper schedule's fixed bet, else ``plan_release`` (bet, and
        for E* on laws with cheap rates a narrower unmerged clip), public."""
        laws, stat = (self.laws, self.stat) if against == "P" else (self.laws_alt, self.stat_alt)
        if self.fixed_bet is not None:
            return stat, self.fixed_bet
        stat_at = None
        if self.stat_name == "optimal" and laws.fast_rates:
            def stat_at(r, rates=False):
                s = optimal_statistic(laws, r, rates=rates)[0]
                return s if against == "P" else self._on_null_support(s)

        def compute():
            planned, bet, r = plan_release(laws, stat, n, self.eps_stat, stat_at)
            if r is not None:  # the chosen clip, with the rate's consistency check
                planned = stat_at(r, rates=True)
            return planned, bet

        key = ("eplan", id(laws), id(stat), n, self.eps_stat)
        return _cached(key, (laws, stat), compute)

    def batch_log_e(self, Xb, rng):
        """Released log e-values of one batch: (against P, against Q or None)."""
        n = Xb.shape[0]
        if self.exact is not None:
            # one release serves both directions; each e-value carries its own
            # conservative guard (the lattice's is not symmetric)
            log_p, log_q = self.exact.batch_log_e_both(Xb, self.epsilon, rng)
            return log_p, (log_q if self.two_sided else None)
        L = self.laws.log_ratio(Xb)
        stat, bet = self.batch_plan("P", n)
        log_p, _ = release(stat.log_e(L), stat, bet, self.eps_stat, rng)
        if not self.two_sided:
            return log_p, None
        stat_b, bet_b = self.batch_plan("Q", n)
        log_q, _ = release(stat_b.log_e(-L), stat_b, bet_b, self.eps_stat, rng)
        return log_p, log_q


class PrivateEProcess(BaseStreamingTest):
    """Sequential ε-DP e-process for a simple null P against Q, with optional stopping.

    Rows arrive in order (``partial_fit``); they are cut into disjoint batches of
    a public schedule, and at the end of each batch one private batch e-value is
    released. The e-process is the running product of the batch e-values,
    constant between batch ends; the process stops at the first crossing of 1/α
    (reject P) or, in two-sided mode, when the e-process against Q reaches 1/β
    (accept P). The product is a test supermartingale under P (and under Q for
    the reversed process), so by Ville's inequality the decision keeps its level
    at any data-dependent stopping time.

    Parameters
    ----------
    null : frozen scipy.stats distribution, default=None
        The null P of one row (see :class:`PrivateEValueTest`). ``None``:
        N(0, I_d).
    alternative : frozen scipy.stats distribution, default=None
        The alternative Q. ``None``: N(μ, I_d), μ_j = 1/√d.
    epsilon : float, default=1.0
        ε of the whole stream (every row is used in exactly one batch).
    statistic : {"auto", "exact", "optimal", "tslr"}, default="auto"
        Batch e-value. ``"exact"``: release the batch count plus two-sided
        geometric noise at rate ε (two-point laws such as Bernoulli; certified the most
        powerful ε-DP batch e-value in every case checked) or the lattice-quantised
        sum of log E* plus two-sided geometric noise (other laws with an exact
        model) and multiply by the exact likelihood ratio of the release; in
        two-sided mode one release also gives the e-value against Q, so both
        directions use the full ε. ``"optimal"``/``"tslr"``: the merged statistics of
        :class:`PrivateEValueTest` (bet, and for E* on finite discrete or Gaussian
        laws a narrower unmerged clip range, planned per batch size); two-sided
        mode then releases one statistic per direction at ε/2 each. ``"auto"``:
        ``"exact"`` for two-point laws (cheap), else ``"optimal"``. For continuous
        laws ``"exact"`` stops sooner (Gaussian shift 0.5, two-sided: median 61
        rows instead of 104 at ε = 1) but its first
        fit computes a null law per batch size (about 1.5 s there, growing with
        the batch sizes), hence not the default.
    alpha : float, default=0.05
        Level against P: reject when the e-process reaches 1/α.
    beta : float or None, default=None
        ``None``: one-sided test of P. A float in (0, 1): two-sided decision,
        accepting P (rejecting Q at level β) when the e-process against Q
        reaches 1/β.
    schedule : {"auto", "paper", "doubling"} or sequence of int, default="auto"
        Batch sizes. ``"auto"``: for the exact statistic a first batch of
        ⌈3 / R⌉ rows (R the per-row rate), then batches of ⌈1.5 · 1.15^j / R⌉;
        for merged statistics geometric with ratio 1.5 from ⌈4 / R⌉ rows.
        ``"paper"``: Algorithm 1 of [1]_ with competitive ratio ``rho`` and its
        constant bet. ``"doubling"``: 16, 32,
        64, ... A sequence: those sizes, then the last one repeated.
    rho : float, default=3.0
        Competitive ratio ρ > 1 of ``schedule="paper"``.
    max_samples : int or None, default=None
        Most rows used; the last batch is cut to end there. ``None``: no limit.
    budget : PrivacyBudget, default=None
        Ledger charged ε once per stream, when its first rows arrive.
    random_state : None, int, RandomState instance or Generator, default=None
        Source of the noise of the stream. For tests and reproducible examples only: any value
        other than ``None`` raises :class:`~skdptest.FixedRandomStateWarning` (whoever holds the
        seed, the generator or a pickle of the estimator can replay the noise, and equal seeds
        correlate the noise of different fits). ``None`` draws fresh OS entropy and keeps nothing
        from which the noise could be regenerated.

    Attributes
    ----------
    result_ : EProcessResult
        State of the stream: decision, released e-process path, rows used.
    n_features_in_ : int
        Number of features of the stream.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of features, when the first chunk had string column names.
    privacy_spent_ : PrivacySpent
        What the last charge cost: ``epsilon``, ``delta`` and the privacy profile
        declared to the ledger. This estimator declares ``"pure"``: its release is
        ε-DP. It is not one continuous Laplace draw, so the
        ``"laplace"`` profile (a tighter zCDP) is not claimed; the ``"zcdp"`` and
        ``"rdp"`` accountants charge it as generic pure DP (see "Privacy profiles" in
        the privacy-budget guide).

    Notes
    -----
    Privacy: pure ε-DP for the whole stream with respect to replacing one row;
    each row belongs to exactly one batch, whose single release (or two releases
    at ε/2 in two-sided merged mode) is ε-DP, so the stream is ε-DP by parallel
    composition. Batch sizes are public. Only the e-process path at batch ends is
    exposed (no batch sums, no noise).

    Rows that arrive after a decision (or past ``max_samples``) are validated
    for their width, then ignored: the decision is final. Rows of an incomplete
    batch wait for the batch to complete. ``fit`` starts a new stream (charged
    again); ``partial_fit`` continues the current one.

    Released fields: ``result_`` (decision, path at batch ends, batch ends, rows
    used; all functions of the batch releases and the public schedule) and the
    public ``n_features_in_``/``feature_names_in_``. The generator and the rows
    of an incomplete batch are private: they live in the running stream, which
    is never pickled or copied (a copy keeps ``result_`` but cannot continue
    the stream). Every parameter is frozen when the stream is charged: changing
    one with ``set_params`` mid-stream (say a larger ``epsilon``, which would
    lower the noise of later batches) makes ``partial_fit`` raise; ``fit``
    starts a new, charged stream.

    References
    ----------
    .. [1] Jacobsen, Gonzalez, Brown, Fawaz, Ramdas. "Optimal Rates for
       Differentially Private Hypothesis Testing with E-values." arXiv:2605.28952.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import stats
    >>> from skdptest import PrivateEProcess
    >>> rng = np.random.default_rng(0)
    >>> proc = PrivateEProcess(stats.bernoulli(0.3), stats.bernoulli(0.6), epsilon=1.0,
    ...                        alpha=0.025, beta=0.025, random_state=0)
    >>> for _ in range(100):
    ...     _ = proc.partial_fit(rng.binomial(1, 0.6, size=(10, 1)))
    >>> proc.decision()
    True
    >>> proc.result_.decision
    'reject'
    """

    def __init__(
        self,
        null=None,
        alternative=None,
        *,
        epsilon=1.0,
        statistic="auto",
        alpha=0.05,
        beta=None,
        schedule="auto",
        rho=3.0,
        max_samples=None,
        budget=None,
        random_state=None,
    ):
        self.null = null
        self.alternative = alternative
        self.epsilon = epsilon
        self.statistic = statistic
        self.alpha = alpha
        self.beta = beta
        self.schedule = schedule
        self.rho = rho
        self.max_samples = max_samples
        self.budget = budget
        self.random_state = random_state

    _parameter_constraints = {
        **COMMON_CONSTRAINTS,
        "statistic": [Options(*_STATISTICS)],
        "beta": [NoneValue(), Interval(Real, 0, 1, closed="neither")],
        "schedule": [Options(*_SCHEDULES),
                     InstanceOf(list, tuple, range, np.ndarray,
                                description="a sequence of positive integers")],
        "rho": [Interval(Real, 1, None, closed="neither")],
        "max_samples": [NoneValue(), Interval(Integral, 1, None)],
    }

    # ---------------------------------------------------------------- params
    def _check_params(self, params):
        params = check_laws(params)
        warn_epsilon_cap(type(self).__name__, params["epsilon"])
        if not (isinstance(params["schedule"], str) and params["schedule"] == "paper") \
                and params["rho"] != 3.0:
            warn_leak(
                f"PrivateEProcess: rho={params['rho']!r} is ignored unless "
                "schedule='paper' (it is the competitive ratio of the paper's schedule)."
            )
        schedule = params["schedule"]
        if not isinstance(schedule, str):
            sizes = list(np.asarray(schedule).ravel()) if isinstance(schedule, np.ndarray) \
                else list(schedule)
            if not sizes or not all(
                isinstance(v, Integral | np.integer) and not isinstance(v, bool | np.bool_)
                and 1 <= v <= MAX_BATCH for v in sizes
            ):
                raise InvalidParameterError(
                    "schedule must be 'auto', 'paper', 'doubling' or a non-empty sequence of "
                    f"positive integers of at most {MAX_BATCH} (batch sizes are planned, and "
                    "checked, before the stream is charged)."
                )
        return params

    def _validate_input(self, X, y, reset):
        X = validate_rows(self, X, reset)
        if is_dask(X):
            raise TypeError("PrivateEProcess takes numpy or pandas rows, not dask input "
                            "(X is consumed in order, batch by batch).")
        return X, y

    def _plan(self, params, X, y):
        warn_default_laws(params, X.shape[1])
        # keyed by the laws' values (fresh but equal law objects share one plan); a
        # plan keyed by value is built on private copies of the laws
        tokens, anchors = laws_tokens(params)
        key = ("plan", tokens, params["statistic"], params["epsilon"],
               params["beta"] is None, repr(params["schedule"]), params["rho"], X.shape[1])

        def compute():
            own = dict(params, null=snapshot(params["null"], tokens[0]),
                       alternative=snapshot(params["alternative"], tokens[1]))
            return _Plan(own, X.shape[1])

        plan = _cached(key, anchors, compute)
        plan.laws.check_rows(X)  # refuses rows outside the null's support, before charging
        plan.check_first_batch(params["max_samples"])  # e.g. a tiny ε, before charging
        return plan

    # ---------------------------------------------------------------- stream
    #: Chunks of at most this many rows take the fast path of :meth:`partial_fit`.
    _FAST_ROWS = 256

    def _raw_params(self):
        """The frozen parameters as set (identity snapshot for the fast path)."""
        return tuple((name, getattr(self, name)) for name in self._parameter_constraints
                     if name not in self._unfrozen_params)

    def _start_stream(self, prep):
        return _StreamState(width=prep.X.shape[1], raw=self._raw_params(),
                            log_q=0.0 if prep.params["beta"] is not None else None)

    def _check_frozen(self, stream):
        super()._check_frozen(stream)
        # the values compare equal to the frozen ones: later calls may take the fast path
        stream.state.raw = self._raw_params()

    def _check_stream_data(self, stream, X):
        stream.plan.laws.log_ratio(X)

    def partial_fit(self, X, y=None):
        """Append rows to the stream (the first call starts it and charges ε).

        Small chunks of a numeric ndarray of the stream's width, with every parameter
        unchanged since the charge, take a fast path: the checks of the full validation
        (numeric dtype, width, finite, inside the null's support) done by hand, the rows
        copied into a preallocated batch buffer. The releases are the same; anything
        else (other input types, a changed parameter, a row to refuse) goes through the
        full validation and gets its message.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            New rows in arrival order.
        y : None
            Ignored.

        Returns
        -------
        self : object
        """
        stream = vars(self).get("_stream")
        if stream is not None and y is None and self._fast_rows(stream, X):
            return self
        return super().partial_fit(X, y)

    def _fast_rows(self, stream, X):
        """Consume a small plain ndarray chunk without scikit-learn's validation; return
        ``False`` (nothing consumed) when the full path must decide."""
        if type(X) is not np.ndarray or X.ndim != 2 or X.dtype.kind not in "biuf":
            return False
        st = stream.state
        if not 0 < X.shape[0] <= self._FAST_ROWS or X.shape[1] != st.width \
                or "feature_names_in_" in vars(self):  # sklearn warns there: full path
            return False
        for name, value in st.raw:
            if getattr(self, name) is not value:
                return False
        if not stream.plan.rows_ok(X):
            return False
        if self._consume(stream, X):
            self.result_ = st.result = self._result(stream)
        return True

    def _next_size(self, stream):
        st, plan = stream.state, stream.plan
        j = len(st.ends)
        while len(st.sizes) <= j:  # batch sizes are recomputed from the public plan
            gen = plan.sizes()
            st.sizes = [next(gen) for _ in range(max(2 * len(st.sizes), 8))]
        size = st.sizes[j]
        max_samples = stream.params["max_samples"]
        if max_samples is not None:
            size = min(size, max_samples - st.used)
        return size

    def _advance(self, stream, X):
        st = stream.state
        if self._consume(stream, X) or st.result is None:
            st.result = self._result(stream)
        return st.result

    def _consume(self, stream, X):
        """Feed rows to the pending batch; release every batch that completes. Returns
        whether a batch was released. Rows after a decision (or past ``max_samples``)
        are not used."""
        st, k, start, released = stream.state, X.shape[0], 0, False
        while st.decision == "continue" and not self._exhausted(stream):
            if st.size is None:
                st.size = self._next_size(stream)
            size = st.size
            need = size - st.filled
            if k - start < need:
                self._stash(st, X[start:], size)
                return released
            if st.filled:  # complete the pending rows in the buffer
                self._stash(st, X[start:start + need], size)
                batch = st.buffer[:size]
            else:  # a whole batch inside X: no copy
                batch = X[start:start + size]
            start += need
            log_p, log_q = stream.plan.batch_log_e(batch, stream.rng)
            st.filled, st.size = 0, None
            self._record(stream, size, log_p, log_q)
            released = True
        st.filled, st.buffer = 0, None  # decided: pending rows are dropped
        return released

    @staticmethod
    def _stash(st, rows, size):
        """Copy rows into the batch buffer (float64: exact for bool, integer and float
        rows). The buffer grows geometrically with the rows actually received, up to
        the batch size: its memory is bounded by the rows given (public n), never by a
        planned size (a schedule of 10**12 used to allocate terabytes at the first
        chunk, after the charge)."""
        m = rows.shape[0]
        if not m:
            return
        need = st.filled + m
        if st.buffer is None or st.buffer.shape[0] < need:
            old = 0 if st.buffer is None else st.buffer.shape[0]
            grown = np.empty((min(size, max(need, 2 * old, 256)), st.width))
            grown[:st.filled] = st.buffer[:st.filled] if st.filled else 0.0
            st.buffer = grown
        st.buffer[st.filled:st.filled + m] = rows
        st.filled += m

    @staticmethod
    def _exhausted(stream):
        max_samples = stream.params["max_samples"]
        return max_samples is not None and stream.state.used >= max_samples

    @staticmethod
    def _record(stream, size, log_p, log_q):
        st, params = stream.state, stream.params
        st.used += size
        st.ends.append(st.used)
        st.log_p += log_p
        st.path_p.append(st.log_p)
        if log_q is not None:
            st.log_q += log_q
            st.path_q.append(st.log_q)
        if st.log_p >= -math.log(params["alpha"]):
            st.decision = "reject"
        elif log_q is not None and st.log_q >= -math.log(params["beta"]):
            st.decision = "accept"

    @staticmethod
    def _result(stream):
        st, params = stream.state, stream.params
        return EProcessResult(
            decision=st.decision,
            reject=st.decision == "reject",
            e_value=math.exp(min(st.log_p, 700.0)),
            log_e_process=tuple(st.path_p),
            log_e_process_alt=tuple(st.path_q) if params["beta"] is not None else None,
            batch_ends=tuple(st.ends),
            n_samples=int(st.used),
            alpha=params["alpha"],
            beta=params["beta"],
            epsilon=params["epsilon"],
            delta=0.0,
        )

    def _noise_plan(self, prep):
        """What a fit on ``prep.X`` noises (the grey-box audit hook, doc/contributing.md):
        each complete batch of the public schedule, in order (one release, or one per
        direction at ε/2 in two-sided merged mode); the stream may stop earlier."""
        plan, n, cap = prep.plan, prep.n_samples, prep.params["max_samples"]
        # the ε shares from the parameters, not from the plan that sets the noise
        epsilon = mechanism_epsilon(prep.params["epsilon"])
        share = epsilon / 2 if (plan.two_sided and plan.exact is None) else epsilon
        out, used, sizes = [], 0, plan.sizes()
        while cap is None or used < cap:
            size = next(sizes) if cap is None else min(next(sizes), cap - used)
            if used + size > n:
                break
            if plan.exact is not None:
                out += batch_noised_quantities(plan.exact, None, size, epsilon)
            else:
                for against in ("P", "Q") if plan.two_sided else ("P",):
                    stat, bet = plan.batch_plan(against, size)
                    out += batch_noised_quantities(
                        stat, release_noise(stat, bet, plan.eps_stat), size, share)
            used += size
        return NoisePlan(tuple(out), sequential=True)

    # ---------------------------------------------------------------- API
    def _score_release(self, prep, rng):
        """Final log e-process of a fresh stream on X (every complete batch, no stopping)."""
        plan, X = prep.plan, prep.X
        gen, start, log_p = plan.sizes(), 0, 0.0
        while True:
            size = next(gen)
            if start + size > X.shape[0]:
                return log_p
            log_p += plan.batch_log_e(X[start:start + size], rng)[0]
            start += size

    def score(self, X, y=None):
        """Private log e-process against P of a fresh stream fed ``X`` (charged ε).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Private rows in order.
        y : None
            Ignored.

        Returns
        -------
        log_e_value : float
            Log of the e-process after the last complete batch, in nats.
        """
        return super().score(X, y)


@dataclass
class _StreamState:
    """Mutable state of a running stream (private: ``buffer`` holds pending rows).

    Lives inside the estimator's ``_stream``, which is never pickled or copied.
    """

    width: int
    raw: tuple  # the frozen parameters as set, for the identity check of the fast path
    log_q: float | None
    buffer: np.ndarray | None = None  # pending rows of the current batch: buffer[:filled]
    filled: int = 0
    size: int | None = None  # size of the current batch, once planned
    result: object = None  # the result of the last release (unchanged until the next)
    sizes: list = field(default_factory=list)
    log_p: float = 0.0
    path_p: list = field(default_factory=list)
    path_q: list = field(default_factory=list)
    ends: list = field(default_factory=list)
    used: int = 0
    decision: str = "continue"
