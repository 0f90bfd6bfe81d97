"""Wald's sequential probability ratio test (non-private baseline) and the
machinery shared with the private DP-SPRT baseline.

Both tests watch the running log-likelihood ratio S_n = Σ_{t<=n} L(x_t),
L = log(q/p), of a simple null P against a simple alternative Q, and stop the
first time a (possibly noisy) comparison with two boundaries fires: above the
upper boundary they reject P, below the lower one they accept P (reject Q).

The runs are vectorised: many independent streams are processed together, in
blocks of time steps, and a stream is dropped as soon as it stops.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .._validation import check_alpha, check_generator, check_int, check_real
from ..evalue._laws import check_law, make_laws

__all__ = ["SPRT", "SequentialRuns", "SequentialTestResult"]

_CODES = np.array(["continue", "reject", "accept"])  # index: 0, +1, -1


@dataclass(frozen=True)
class SequentialTestResult:
    """Outcome of one sequential test on one stream.

    Attributes
    ----------
    decision : str
        ``"reject"`` (P rejected, Q accepted), ``"accept"`` (P accepted, Q
        rejected) or ``"continue"`` (the stream ended before a boundary was
        crossed).
    reject : bool
        ``decision == "reject"``.
    n_samples_used : int
        Stopping time: the number of rows read up to the decision (the whole
        stream for ``"continue"``).
    alpha : float
        Target probability of rejecting P when P is true.
    beta : float
        Target probability of accepting P when Q is true.
    epsilon : float
        ε spent on the whole stream (``inf`` for the non-private SPRT).
    delta : float
        δ spent (0 for pure ε-DP; 1 for the non-private SPRT).
    method : str
        Name of the procedure.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import stats
    >>> from skdptest.baselines import SPRT
    >>> x = np.random.default_rng(0).binomial(1, 0.7, size=500)
    >>> result = SPRT(stats.bernoulli(0.3), stats.bernoulli(0.7)).run(x)
    >>> result.decision, result.reject, result.epsilon
    ('reject', True, inf)
    """

    decision: str
    reject: bool
    n_samples_used: int
    alpha: float
    beta: float
    epsilon: float
    delta: float
    method: str


class SequentialRuns(NamedTuple):
    """Outcomes of many independent streams.

    Attributes
    ----------
    decision : ndarray of str, shape (n_runs,)
        ``"reject"``, ``"accept"`` or ``"continue"`` for each stream.
    n_samples_used : ndarray of int, shape (n_runs,)
        Stopping time of each stream (its length when it did not stop).

    Examples
    --------
    >>> from scipy import stats
    >>> from skdptest.baselines import SPRT
    >>> runs = SPRT(stats.bernoulli(0.3), stats.bernoulli(0.7)).simulate(
    ...     100, "P", 200, random_state=0)
    >>> runs.decision.shape, bool((runs.n_samples_used <= 200).all())
    ((100,), True)
    """

    decision: np.ndarray
    n_samples_used: np.ndarray


def check_llr_clip(llr_clip):
    """``None`` or a pair ``(low, high)`` of finite floats with low < high."""
    if llr_clip is None:
        return None
    try:
        low, high = llr_clip
    except (TypeError, ValueError):
        raise TypeError(
            f"llr_clip must be None or a pair (low, high), got {llr_clip!r}."
        ) from None
    low = check_real(low, "llr_clip[0]")
    high = check_real(high, "llr_clip[1]")
    if not low < high:
        raise ValueError(f"llr_clip must satisfy low < high, got ({low}, {high}).")
    return low, high


class _LLRSequentialTest:
    """Common driver: parameters, laws, per-row LLR, vectorised stopping."""

    _method = "?"

    def __init__(self, null, alternative, *, alpha=0.05, beta=0.05, llr_clip=None,
                 random_state=None):
        self.null = null
        self.alternative = alternative
        self.alpha = alpha
        self.beta = beta
        self.llr_clip = llr_clip
        self.random_state = random_state

    # -- parameters ------------------------------------------------------------
    def _check_params(self):
        check_alpha(self.alpha, "alpha")
        check_alpha(self.beta, "beta")
        check_law(self.null, "null")
        check_law(self.alternative, "alternative")
        clip = check_llr_clip(self.llr_clip)
        laws = make_laws(self.null, self.alternative)
        # The range is trusted only where the support is enumerated exactly (a
        # truncated infinite support, e.g. Poisson, would understate it).
        lmin, lmax = laws.l_range() if laws.exact else (-math.inf, math.inf)
        if clip is not None:
            lmin, lmax = max(lmin, clip[0]), min(lmax, clip[1])
        sensitivity = lmax - lmin
        if not sensitivity > 0:
            raise ValueError(
                "The log-likelihood ratio is constant over the null's support (null and "
                "alternative agree there, or llr_clip excludes the ratio's range): the "
                "test has nothing to observe."
            )
        return laws, clip, float(sensitivity)

    def _setup(self):
        """Validate and return ``(laws, clip, sensitivity)``; subclasses check more."""
        return self._check_params()

    # -- data --------------------------------------------------------------------
    def _row_llr(self, laws, clip, X):
        """Per-row L for X of shape (..., n_features); ValueError outside the support."""
        X = np.asarray(X, dtype=float)
        shape = X.shape[:-1]
        L = np.asarray(laws.log_ratio(X.reshape(-1, X.shape[-1])), dtype=float)
        if clip is not None:
            L = np.clip(L, clip[0], clip[1])
        elif not np.all(np.isfinite(L)):
            raise ValueError(
                "X has rows where the alternative has no mass/density (log-likelihood "
                "ratio -inf); give llr_clip to bound it."
            )
        return L.reshape(shape)

    def _as_streams(self, laws, X, single):
        """Coerce X to (n_runs, n_samples, n_features) floats with validation."""
        try:
            X = np.asarray(X, dtype=float)
        except (TypeError, ValueError):
            raise ValueError("X must be a numeric array.") from None
        d = laws.n_features
        lead = 1 if single else 2  # leading axes: (n_samples,) or (n_runs, n_samples)
        if X.ndim == lead and d == 1:
            X = X[..., None]
        if X.ndim != lead + 1:
            shape = "(n_samples, n_features)" if single else "(n_runs, n_samples, n_features)"
            raise ValueError(
                f"X must have shape {shape} (the feature axis may be dropped for "
                f"univariate laws), got an array with {X.ndim} dimension(s)."
            )
        if X.shape[-1] != d:
            raise ValueError(
                f"X has {X.shape[-1]} feature(s) but the laws have dimension {d}."
            )
        if X.shape[-2] == 0 or (not single and X.shape[0] == 0):
            raise ValueError("X is empty: a sequential test needs at least one row.")
        if not np.all(np.isfinite(X)):
            raise ValueError("X contains NaN or infinity.")
        return X[None] if single else X

    # -- the stopping rule -------------------------------------------------------
    def _start(self, n_runs, sensitivity, rng):  # pragma: no cover - abstract
        raise NotImplementedError

    def _crossings(self, state, S, t):  # pragma: no cover - abstract
        """(up, down) boolean arrays for running sums S at times t (1-based)."""
        raise NotImplementedError

    def _drive(self, llr_blocks, n_runs, sensitivity, rng):
        """Consume blocks of per-row LLRs (active runs x block) until all stop.

        ``llr_blocks(active_idx, size)`` returns the next ``size`` increments of
        the runs in ``active_idx`` (or fewer at the end of the streams).
        """
        state = self._start(n_runs, sensitivity, rng)
        codes = np.zeros(n_runs, dtype=np.int8)
        times = np.zeros(n_runs, dtype=np.int64)
        cum = np.zeros(n_runs)
        active = np.arange(n_runs)
        t0, size = 0, 64
        while active.size:
            L = llr_blocks(active, size)
            if L is None or L.shape[1] == 0:
                break
            B = L.shape[1]
            S = cum[active, None] + np.cumsum(L, axis=1)
            t = np.arange(t0 + 1, t0 + B + 1)
            up, down = self._crossings(state, active, S, t)
            hit = up | down
            first = np.argmax(hit, axis=1)
            stopped = hit[np.arange(active.size), first]
            rows = active[stopped]
            f = first[stopped]
            # reject first when both boundaries fire at the same step
            codes[rows] = np.where(up[stopped, f], 1, -1)
            times[rows] = t0 + f + 1
            cum[active] = S[:, -1]
            times[active[~stopped]] = t0 + B
            active = active[~stopped]
            t0 += B
            size = min(2 * size, 4096)
        return SequentialRuns(_CODES[codes], times)

    # -- public API --------------------------------------------------------------
    def run_many(self, X):
        """Run the test independently on each of many streams.

        Parameters
        ----------
        X : array-like of shape (n_runs, n_samples, n_features)
            One stream per leading index, rows in arrival order; the feature
            axis may be dropped for univariate laws. Each stream is a separate
            release (a private test spends its ε once per stream).

        Returns
        -------
        SequentialRuns
            Decisions and stopping times.
        """
        laws, clip, sensitivity = self._setup()
        X = self._as_streams(laws, X, single=False)
        L = self._row_llr(laws, clip, X)
        rng = check_generator(self.random_state)
        return self._drive(_slicer(L), L.shape[0], sensitivity, rng)

    def run(self, X):
        """Run the test on one stream.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows in arrival order (the feature axis may be dropped for
            univariate laws). Rows after the stopping time are not read.

        Returns
        -------
        SequentialTestResult
        """
        laws, clip, sensitivity = self._setup()
        X = self._as_streams(laws, X, single=True)
        L = self._row_llr(laws, clip, X)
        rng = check_generator(self.random_state)
        out = self._drive(_slicer(L), 1, sensitivity, rng)
        return self._result(str(out.decision[0]), int(out.n_samples_used[0]))

    def fit(self, X, y=None):
        """Run the test on one stream and store the outcome in ``result_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows in arrival order.
        y : None
            Ignored.

        Returns
        -------
        self
        """
        self.result_ = self.run(X)
        return self

    def simulate(self, n_runs, under, max_samples, random_state=None):
        """Run the test on ``n_runs`` streams drawn from the null or the alternative.

        Data are drawn block by block from the (public) law, so long streams
        cost only the rows read before stopping.

        Parameters
        ----------
        n_runs : int
            Number of independent streams.
        under : {"P", "Q"}
            Draw the rows from the null P or from the alternative Q.
        max_samples : int
            Length of each stream (a run that has not stopped by then ends with
            ``"continue"``).
        random_state : int, Generator or None, default=None
            Source of the data; the noise comes from ``self.random_state``.

        Returns
        -------
        SequentialRuns
        """
        n_runs = check_int(n_runs, "n_runs", low=1)
        max_samples = check_int(max_samples, "max_samples", low=1)
        if under not in ("P", "Q"):
            raise ValueError(f"under must be 'P' or 'Q', got {under!r}.")
        laws, clip, sensitivity = self._setup()
        law = self.null if under == "P" else self.alternative
        data_rng = check_generator(random_state)
        d = laws.n_features
        done = [0]

        def blocks(active, size):
            size = min(size, max_samples - done[0])
            if size <= 0:
                return None
            x = np.asarray(law.rvs(size=active.size * size, random_state=data_rng), float)
            done[0] += size
            return self._row_llr(laws, clip, x.reshape(active.size, size, d))

        return self._drive(blocks, n_runs, sensitivity, check_generator(self.random_state))

    def _result(self, decision, n_used):
        eps, delta = self._privacy()
        return SequentialTestResult(
            decision=decision,
            reject=decision == "reject",
            n_samples_used=n_used,
            alpha=float(self.alpha),
            beta=float(self.beta),
            epsilon=eps,
            delta=delta,
            method=self._method,
        )

    def __repr__(self):
        params = ", ".join(f"{k}={v!r}" for k, v in vars(self).items()
                           if not k.endswith("_"))
        return f"{type(self).__name__}({params})"


def _slicer(L):
    """Block reader over a full (n_runs, n_samples) array of increments."""
    pos = [0]

    def blocks(active, size):
        start = pos[0]
        if start >= L.shape[1]:
            return None
        pos[0] = min(start + size, L.shape[1])
        return L[active, start:pos[0]]

    return blocks


class SPRT(_LLRSequentialTest):
    """Wald's sequential probability ratio test (non-private baseline).

    Stops the first time the running log-likelihood ratio S_n leaves
    (log β, log(1/α)): rejects P when S_n >= log(1/α), accepts P when
    S_n <= log β.

    Parameters
    ----------
    null : frozen scipy.stats distribution
        The null P of one row.
    alternative : frozen scipy.stats distribution
        The alternative Q of one row.
    alpha : float, default=0.05
        Target P(reject P | P) in (0, 1).
    beta : float, default=0.05
        Target P(accept P | Q) in (0, 1).
    llr_clip : (float, float) or None, default=None
        Clip the per-row log-likelihood ratio to this range (the error bounds
        below then no longer hold). Needed only when the ratio is infinite
        somewhere on the data.
    random_state : None
        Unused (the test is deterministic); kept for a uniform interface.

    Notes
    -----
    Not private. Boundaries log(1/α) and log β (rather than Wald's
    approximations log((1 − β)/α), log(β/(1 − α))) make the error bounds exact
    by Ville's inequality: exp(S_n) is a nonnegative martingale with mean 1
    under P, so P(sup_n S_n >= log(1/α)) <= α, and exp(−S_n) is one under Q, so
    Q(inf_n S_n <= log β) <= β.

    References
    ----------
    .. [1] Wald. "Sequential Tests of Statistical Hypotheses." Annals of
       Mathematical Statistics 16(2), 1945.
    .. [2] Michel, Basu, Kaufmann. "DP-SPRT: Differentially Private Sequential
       Probability Ratio Tests." AISTATS 2026, arXiv:2508.06377.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import stats
    >>> from skdptest.baselines import SPRT
    >>> x = np.random.default_rng(0).binomial(1, 0.7, size=500)
    >>> SPRT(stats.bernoulli(0.3), stats.bernoulli(0.7), alpha=0.05).run(x).decision
    'reject'
    """

    _method = "SPRT"

    def boundaries(self):
        """(lower, upper) = (log β, log(1/α)) on the log-likelihood-ratio scale."""
        check_alpha(self.alpha, "alpha")
        check_alpha(self.beta, "beta")
        return math.log(self.beta), -math.log(self.alpha)

    def _start(self, n_runs, sensitivity, rng):
        return self.boundaries()

    def _crossings(self, state, active, S, t):
        lower, upper = state
        return S >= upper, S <= lower

    def _privacy(self):
        return math.inf, 1.0
