"""Empirical privacy audit: statistical lower bounds on the ε of a release.

A differential-privacy proof covers one mechanism; an attacker who knows both
neighbouring data sets sees *everything* that leaves an estimator: every field
of ``result_`` jointly, every public fitted attribute and the exact bit pattern
of every float. This module turns that attacker into a reusable check.

- :func:`epsilon_lower_bound` fits fresh estimators on two neighbouring data
  sets, records a hashable view of all they release, chooses a distinguishing
  event on one half of the trials and bounds its probability ratio on the other
  half with Clopper–Pearson intervals. The result is a lower bound ε_lb that
  holds with the stated confidence: a claimed ε is *contradicted* when
  ε_lb > ε. A small ε_lb proves nothing (the audit is a lower bound, not a proof).
- :func:`epsilon_lower_bound_from_samples` does the same on outputs you drew
  yourself (any hashable values, or floats).
- :func:`exact_ratio` computes the exact privacy loss max |log p0/p1| of two
  discrete output laws.
- :func:`attainable_floats_differ` checks a released float for the low-order-bit
  leak of textbook floating-point Laplace noise (Mironov, CCS 2012), and checks
  a release claimed to lie on a public power-of-two grid.

Only numpy and scipy are used (joblib, installed with scikit-learn, for
``n_jobs``).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections import Counter
from collections.abc import Mapping
from fractions import Fraction

import numpy as np
from scipy import special

__all__ = [
    "AuditResult",
    "FloatAuditResult",
    "attainable_floats_differ",
    "epsilon_lower_bound",
    "epsilon_lower_bound_from_samples",
    "exact_ratio",
    "float_bits_view",
    "release_view",
]

# Cap on the candidate thresholds tried per scalar feature during event
# selection: the selection half is only used to *choose* the event, so a coarse
# grid of quantiles loses little and keeps the audit linear in the trials.
_MAX_THRESHOLDS = 64


# ---------------------------------------------------------------------------
# Views: everything an estimator releases, as a hashable value
# ---------------------------------------------------------------------------
def _canonical(value):
    """A hashable, exact encoding of a released value (floats by bit pattern)."""
    if value is None or isinstance(value, (bool, np.bool_, str, bytes)):
        return bool(value) if isinstance(value, np.bool_) else value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        # float.hex is exact: two floats that differ in the last bit of the
        # significand (or in the sign of zero) get different views.
        return ("f", float(value).hex())
    if isinstance(value, numbers.Complex):
        return ("c", float(value.real).hex(), float(value.imag).hex())
    if isinstance(value, np.ndarray):
        return ("a", str(value.dtype), value.shape,
                tuple(_canonical(v) for v in value.ravel().tolist()))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__,
                tuple((f.name, _canonical(getattr(value, f.name)))
                      for f in dataclasses.fields(value)))
    if isinstance(value, Mapping):
        return ("m", tuple(sorted(((repr(k), _canonical(v)) for k, v in value.items()),
                                  key=lambda kv: kv[0])))
    if isinstance(value, (list, tuple)):
        return tuple(_canonical(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return ("s", tuple(sorted(repr(_canonical(v)) for v in value)))
    # Objects without a structural encoding (e.g. a kernel object): their repr
    # is what a user printing the attribute would see.
    return ("r", type(value).__name__, repr(value))


def release_view(estimator):
    """Hashable view of everything a fitted estimator releases.

    The view holds every dataclass field of ``estimator.result_`` and every
    public fitted attribute (a name ending in ``_`` that does not start with
    ``_``) other than ``result_`` itself; floats are encoded by their exact bit
    pattern (:meth:`float.hex`), arrays element by element.

    Parameters
    ----------
    estimator : object
        A fitted estimator with a ``result_`` attribute.

    Returns
    -------
    view : tuple
        ``(("result_", fields), (name, value), ...)``, names sorted; equal
        views mean bit-identical releases.

    Examples
    --------
    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class R:
    ...     statistic: float
    >>> class Fitted:
    ...     pass
    >>> est = Fitted()
    >>> est.result_, est.n_features_in_ = R(0.5), 1
    >>> release_view(est)
    (('result_', ('R', (('statistic', ('f', '0x1.0000000000000p-1')),))), ('n_features_in_', 1))
    """
    if not hasattr(estimator, "result_"):
        raise ValueError(f"estimator {type(estimator).__name__} is not fitted: it has no "
                         "result_ attribute.")
    result = estimator.result_
    if not (dataclasses.is_dataclass(result) and not isinstance(result, type)):
        raise TypeError(f"estimator.result_ must be a dataclass instance, got "
                        f"{type(result).__name__}.")
    items = [("result_", _canonical(result))]
    for name in sorted(vars(estimator)):
        if name.endswith("_") and not name.startswith("_") and name != "result_":
            items.append((name, _canonical(getattr(estimator, name))))
    return tuple(items)


def float_bits_view(value):
    """The low-order-bit signature of a float: (sign, exponent, trailing zero bits).

    For ``value = ± m · 2**(e - 53)`` with a 53-bit significand ``m``, returns
    ``(sign, e, t)`` where ``t`` is the number of trailing zero bits of ``m``.
    The absolute position of the lowest set bit, ``e - 53 + t``, is what
    Mironov's attack reads: ``fl(x + L)`` with a public offset ``x`` cannot have
    a set bit below the unit in the last place of ``x`` when ``|L| < |x|``,
    whereas ``L`` alone can.

    Parameters
    ----------
    value : float
        A released float.

    Returns
    -------
    tuple
        ``("zero", sign)``, ``("nonfinite", repr)`` or ``(sign, e, t)``.

    Examples
    --------
    >>> float_bits_view(0.75)     # 0.75 = 3 * 2**-2: two set bits, lowest 2**-2
    (1, 0, 51)
    >>> float_bits_view(-1.0)
    (-1, 1, 52)
    """
    v = float(value)
    if not math.isfinite(v):
        return ("nonfinite", repr(v))
    if v == 0.0:
        return ("zero", int(math.copysign(1.0, v)))
    mantissa, exponent = math.frexp(abs(v))  # abs(v) = mantissa * 2**exponent
    m = int(mantissa * 2.0**53)  # exact: the 53-bit significand as an integer
    t = (m & -m).bit_length() - 1
    return (1 if v > 0 else -1, exponent, t)


# ---------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class AuditResult:
    """Outcome of an empirical privacy audit (see :func:`epsilon_lower_bound`).

    Attributes
    ----------
    epsilon_lb : float
        Lower bound on the ε of the release, valid with probability at least
        ``confidence`` (0 when no event separates the neighbours).
    event : str
        Description of the distinguishing event chosen on the selection half.
    direction : str
        ``"P0/P1"`` (the event is likelier on the first data set) or ``"P1/P0"``.
    counts : tuple of int
        ``(k0, m0, k1, m1)``: the event's hits ``k`` among ``m`` estimation-half
        trials on the first (0) and second (1) data set.
    n_trials : int
        Trials per data set (selection plus estimation).
    confidence : float
        Joint confidence of the bound (Bonferroni over both directions and both
        one-sided Clopper–Pearson bounds of each).
    claimed_epsilon : float or None
        The ε the release claims (its ``result_.epsilon``), where known.
    """

    epsilon_lb: float
    event: str
    direction: str
    counts: tuple
    n_trials: int
    confidence: float
    claimed_epsilon: float | None = None

    @property
    def contradicted(self):
        """Whether the audit refutes the claimed ε (``epsilon_lb > claimed_epsilon``)."""
        return self.claimed_epsilon is not None and bool(self.epsilon_lb > self.claimed_epsilon)


@dataclasses.dataclass(frozen=True)
class FloatAuditResult:
    """Outcome of :func:`attainable_floats_differ`.

    Attributes
    ----------
    flagged : bool
        Whether the float release leaks: its low-order-bit audit contradicts
        ``epsilon``, or a value lies off the claimed grid.
    epsilon_lb : float
        The audit's lower bound on ε from the bit signatures
        (:func:`float_bits_view`) alone.
    off_grid : tuple of int
        Values of each sample that are not ``offset`` plus an exact multiple of
        ``grid`` (``(0, 0)`` when no grid is claimed).
    audit : AuditResult
        The underlying audit of the bit signatures.
    """

    flagged: bool
    epsilon_lb: float
    off_grid: tuple
    audit: AuditResult


# ---------------------------------------------------------------------------
# Clopper–Pearson bounds and event selection
# ---------------------------------------------------------------------------
def _cp_lower(k, n, a):
    """One-sided (1 - a) Clopper–Pearson lower bound of a binomial proportion."""
    k, n = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = special.betaincinv(k, n - k + 1, a)
    return np.where(k <= 0, 0.0, lo)


def _cp_upper(k, n, a):
    """One-sided (1 - a) Clopper–Pearson upper bound of a binomial proportion."""
    k, n = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        up = special.betaincinv(k + 1, n - k, 1 - a)
    return np.where(k >= n, 1.0, up)


def _log_ratio_lb(ka, na, kb, nb, a):
    """log(lower(P_a(E)) / upper(P_b(E))), each bound at one-sided level ``a``."""
    with np.errstate(divide="ignore"):
        return np.log(_cp_lower(ka, na, a)) - np.log(_cp_upper(kb, nb, a))


def _leaves(view, path=()):
    """Numeric leaves of a canonical view: {path: float} (the threshold features)."""
    out = {}
    if isinstance(view, bool):
        out[path] = float(view)
    elif isinstance(view, int):
        out[path] = float(view)
    elif isinstance(view, tuple):
        if len(view) == 2 and view[0] == "f" and isinstance(view[1], str):
            out[path] = float.fromhex(view[1])
        else:
            for i, item in enumerate(view):
                out.update(_leaves(item, (*path, i)))
    return out


def _describe(view, limit=120):
    text = repr(view)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Event:
    """A set of views, or a threshold on one numeric leaf of the views."""

    def __init__(self, kind, payload, path=None):
        self.kind, self.payload, self.path = kind, payload, path

    def contains(self, view):
        if self.kind == "set":
            return view in self.payload
        value = _leaves(view).get(self.path, math.nan)
        if self.kind == "le":
            return value <= self.payload
        return value > self.payload  # NaN (leaf absent) is never in the event

    def describe(self):
        if self.kind == "set":
            views = sorted(self.payload, key=repr)
            if len(views) == 1:
                return f"output == {_describe(views[0])}"
            return f"output in a set of {len(views)} views, e.g. {_describe(views[0])}"
        op = "<=" if self.kind == "le" else ">"
        return f"leaf {self.path} {op} {self.payload!r}"


def _best_event(views_a, views_b, a):
    """Event E maximising the lower bound of log P_a(E)/P_b(E) on these samples.

    Candidates: the likelihood-ratio prefix sets of distinct views (sorted by a
    smoothed empirical ratio, the Neyman–Pearson order) and one-sided thresholds
    on every numeric leaf. Scoring by the Clopper–Pearson bound, not the raw
    ratio, penalises events seen a handful of times.
    """
    na, nb = len(views_a), len(views_b)
    ca, cb = Counter(views_a), Counter(views_b)
    # A view seen once in the selection half says nothing about its probability
    # (with a continuous release every view is unique, and the set of side-a
    # views would look perfect here and be empty on the estimation half).
    distinct = [v for v in set(ca) | set(cb) if ca[v] + cb[v] >= 2]
    best = (-np.inf, _Event("set", frozenset()))
    if distinct:
        ka = np.array([ca[v] for v in distinct], dtype=float)
        kb = np.array([cb[v] for v in distinct], dtype=float)
        order = np.argsort(-((ka + 0.5) / na) / ((kb + 0.5) / nb), kind="stable")
        scores = _log_ratio_lb(np.cumsum(ka[order]), na, np.cumsum(kb[order]), nb, a)
        i = int(np.argmax(scores))
        best = (scores[i], _Event("set", frozenset(distinct[j] for j in order[: i + 1])))

    leaves_a = [_leaves(v) for v in views_a]
    leaves_b = [_leaves(v) for v in views_b]
    paths = sorted(set().union(*leaves_a, *leaves_b), key=repr)
    for path in paths:
        xa = np.array([d.get(path, np.nan) for d in leaves_a])
        xb = np.array([d.get(path, np.nan) for d in leaves_b])
        pooled = np.concatenate([xa, xb])
        pooled = pooled[np.isfinite(pooled)]
        if pooled.size == 0:
            continue
        thresholds = np.unique(np.quantile(pooled, np.linspace(0, 1, _MAX_THRESHOLDS + 1),
                                           method="inverted_cdf"))
        sa, sb = np.sort(xa[~np.isnan(xa)]), np.sort(xb[~np.isnan(xb)])
        le_a = np.searchsorted(sa, thresholds, side="right")
        le_b = np.searchsorted(sb, thresholds, side="right")
        for kind, hits_a, hits_b in (("le", le_a, le_b),
                                     ("gt", sa.size - le_a, sb.size - le_b)):
            s = _log_ratio_lb(hits_a, na, hits_b, nb, a)
            i = int(np.argmax(s))
            if s[i] > best[0]:
                best = (s[i], _Event(kind, float(thresholds[i]), path))
    return best[1]


def _check_confidence(confidence):
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real) \
            or not 0 < confidence < 1:
        raise ValueError(f"confidence must be a real number in (0, 1), got {confidence!r}.")
    return float(confidence)


def _audit_views(views0, views1, confidence, claimed=None):
    """Held-out audit of two lists of hashable views (trials in random order)."""
    n = min(len(views0), len(views1))
    if n < 4:
        raise ValueError(f"n_trials must be >= 4 per data set (two for event selection, "
                         f"two for estimation), got {n}.")
    # Bonferroni: two directions, each with a lower and an upper one-sided bound.
    a = (1.0 - confidence) / 4.0
    half = n // 2
    sel0, est0 = views0[:half], views0[half:n]
    sel1, est1 = views1[:half], views1[half:n]
    best = (0.0, "no separating event", "P0/P1", (0, len(est0), 0, len(est1)))
    for direction, (sa, sb, ea, eb) in (("P0/P1", (sel0, sel1, est0, est1)),
                                        ("P1/P0", (sel1, sel0, est1, est0))):
        event = _best_event(sa, sb, a)
        ka = sum(event.contains(v) for v in ea)
        kb = sum(event.contains(v) for v in eb)
        lb = float(_log_ratio_lb(ka, len(ea), kb, len(eb), a))
        counts = (ka, len(ea), kb, len(eb)) if direction == "P0/P1" else \
            (kb, len(eb), ka, len(ea))
        if lb > best[0]:
            best = (lb, event.describe(), direction, counts)
    return AuditResult(epsilon_lb=best[0], event=best[1], direction=best[2],
                       counts=tuple(int(c) for c in best[3]), n_trials=n,
                       confidence=confidence,
                       claimed_epsilon=None if claimed is None else float(claimed))


def _shuffled(views, rng):
    return [views[i] for i in rng.permutation(len(views))]


def epsilon_lower_bound_from_samples(outputs0, outputs1, *, confidence=0.95,
                                     random_state=None, claimed_epsilon=None):
    """Held-out audit of outputs drawn on two neighbouring data sets.

    Parameters
    ----------
    outputs0, outputs1 : sequence
        Independent outputs of the mechanism on the first and on the second data
        set: hashable values, floats or arrays (encoded exactly, floats by bit
        pattern).
    confidence : float, default=0.95
        Probability that the bound holds.
    random_state : int, Generator or None, default=None
        Shuffles the outputs before the selection/estimation split.
    claimed_epsilon : float or None, default=None
        Stored on the result, which then says whether it is ``contradicted``.

    Returns
    -------
    AuditResult

    Examples
    --------
    Randomized response on one bit at ε = log 3 (keep the bit w.p. 3/4):

    >>> import math
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> out0 = rng.random(4000) < 0.75          # true bit 1
    >>> out1 = rng.random(4000) < 0.25          # true bit 0
    >>> r = epsilon_lower_bound_from_samples(out0, out1, random_state=0,
    ...                                      claimed_epsilon=math.log(3))
    >>> 0.8 < r.epsilon_lb <= math.log(3), r.contradicted
    (True, False)
    """
    confidence = _check_confidence(confidence)
    rng = np.random.default_rng(random_state)
    views0 = _shuffled([_canonical(v) for v in outputs0], rng)
    views1 = _shuffled([_canonical(v) for v in outputs1], rng)
    return _audit_views(views0, views1, confidence, claimed_epsilon)


def _fit_views(make_estimator, X, y, seeds, view):
    views, claimed = [], []
    for seed in seeds:
        est = make_estimator(int(seed))
        est = est.fit(X) if y is None else est.fit(X, y)
        views.append(_canonical(view(est)))  # exact encoding of a custom view too
        eps = getattr(getattr(est, "result_", None), "epsilon", None)
        if isinstance(eps, numbers.Real) and not isinstance(eps, bool):
            claimed.append(float(eps))
    return views, claimed


def epsilon_lower_bound(make_estimator, X0, X1, *, y0=None, y1=None, n_trials=200,
                        confidence=0.95, random_state=None, n_jobs=None,
                        view=release_view):
    """Empirical lower bound on the ε of an estimator, from two neighbouring data sets.

    Each trial fits a fresh estimator ``make_estimator(seed)`` (``seed`` drawn
    from ``random_state``) on ``(X0, y0)`` and another on ``(X1, y1)``, and
    records ``view(estimator)`` — by default :func:`release_view`: all result
    fields jointly, every public fitted attribute, floats by exact bit pattern.
    The first half of the trials chooses the distinguishing event E (a set of
    views, or a threshold on one numeric field); the second half bounds it:
    ``ε_lb = log(lower(P0(E)) / upper(P1(E)))`` (or the symmetric ratio) with
    one-sided Clopper–Pearson bounds, Bonferroni-corrected so that
    ``P(ε_lb > true ε) <= 1 - confidence`` for an ε-DP release.

    Parameters
    ----------
    make_estimator : callable
        ``make_estimator(seed) -> estimator``: an unfitted estimator using
        ``seed`` as its ``random_state``.
    X0, X1 : array-like
        The neighbouring data sets.
    y0, y1 : array-like or None, default=None
        Labels / paired variables; ``fit(X)`` is called when ``None``.
    n_trials : int, default=200
        Fits per data set (half select the event, half estimate it).
    confidence : float, default=0.95
        Probability that the bound holds.
    random_state : int, Generator or None, default=None
        Draws the per-fit seeds.
    n_jobs : int or None, default=None
        Parallel workers (joblib); ``None`` fits in this process.
    view : callable, default=release_view
        ``view(fitted) -> hashable``: what the attacker sees.

    Returns
    -------
    AuditResult
        With ``claimed_epsilon`` read from ``result_.epsilon``.

    Examples
    --------
    A bit released by randomized response at ε = 1, audited on the neighbours
    x = 1 and x' = 0:

    >>> import numpy as np
    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Bit:
    ...     bit: bool
    ...     epsilon: float
    >>> class RandomizedResponse:
    ...     def __init__(self, epsilon=1.0, random_state=None):
    ...         self.epsilon, self.random_state = epsilon, random_state
    ...     def fit(self, X):
    ...         rng = np.random.default_rng(self.random_state)
    ...         keep = rng.random() < np.exp(self.epsilon) / (1 + np.exp(self.epsilon))
    ...         self.result_ = Bit(bool(X[0][0]) == keep, self.epsilon)
    ...         return self
    >>> r = epsilon_lower_bound(lambda s: RandomizedResponse(random_state=s),
    ...                         [[1]], [[0]], n_trials=2000, random_state=0)
    >>> r.claimed_epsilon, r.epsilon_lb <= 1.0, r.contradicted
    (1.0, True, False)
    """
    if not callable(make_estimator):
        raise TypeError(f"make_estimator must be callable (seed -> estimator), got "
                        f"{type(make_estimator).__name__}.")
    if not callable(view):
        raise TypeError(f"view must be callable (fitted estimator -> hashable), got "
                        f"{type(view).__name__}.")
    if isinstance(n_trials, bool) or not isinstance(n_trials, numbers.Integral) \
            or n_trials < 4:
        raise ValueError(f"n_trials must be an integer >= 4, got {n_trials!r}.")
    if (y0 is None) != (y1 is None):
        raise ValueError("y0 and y1 must both be given or both be None.")
    confidence = _check_confidence(confidence)
    rng = np.random.default_rng(random_state)
    seeds = rng.integers(0, 2**32, size=(2, int(n_trials)))
    sides = ((X0, y0, seeds[0]), (X1, y1, seeds[1]))
    if n_jobs is None or n_jobs == 1:
        out = [_fit_views(make_estimator, X, y, s, view) for X, y, s in sides]
    else:
        from joblib import Parallel, delayed, effective_n_jobs

        chunks = max(1, effective_n_jobs(n_jobs))
        parts = Parallel(n_jobs=n_jobs)(
            delayed(_fit_views)(make_estimator, X, y, c, view)
            for X, y, s in sides for c in np.array_split(s, chunks))
        out = []
        for side in range(2):
            mine = parts[side * chunks:(side + 1) * chunks]
            out.append(([v for p in mine for v in p[0]], [e for p in mine for e in p[1]]))
    claimed = out[0][1] + out[1][1]
    # Seeds are i.i.d., so the trials are already in random order.
    return _audit_views(out[0][0], out[1][0], confidence, max(claimed) if claimed else None)


# ---------------------------------------------------------------------------
# Exact laws
# ---------------------------------------------------------------------------
def _check_pmf(pmf, name, log):
    if not isinstance(pmf, Mapping):
        raise TypeError(f"{name} must be a dict mapping outcomes to probabilities, got "
                        f"{type(pmf).__name__}.")
    if not pmf:
        raise ValueError(f"{name} is empty.")
    values = np.array([float(v) for v in pmf.values()])
    if log:
        if np.any(np.isnan(values)) or np.any(values == np.inf):
            raise ValueError(f"{name} holds a log-probability that is NaN or +inf.")
        total = float(special.logsumexp(values))
        ok = abs(total) <= 1e-9
        support = {k for k, v in pmf.items() if float(v) > -np.inf}
    else:
        if np.any(~np.isfinite(values)) or np.any(values < 0):
            raise ValueError(f"{name} holds a probability that is negative or not finite.")
        total = float(values.sum())
        ok = abs(total - 1.0) <= 1e-9
        support = {k for k, v in pmf.items() if float(v) > 0}
    if not ok:
        raise ValueError(f"{name} does not sum to 1 (total {'log ' if log else ''}mass "
                         f"{total!r}); give the full output law.")
    return support


def exact_ratio(pmf0, pmf1, *, log=False):
    """Exact privacy loss max_o abs(log p0(o) / p1(o)) of two discrete output laws.

    For a mechanism whose output law is computable exactly on each neighbour,
    this is the smallest ε for which the pair satisfies ε-DP (δ = 0).

    Parameters
    ----------
    pmf0, pmf1 : dict
        Output law on each neighbouring data set: outcome -> probability (or
        log-probability with ``log=True``). Each must sum to 1 within 1e-9.
    log : bool, default=False
        Whether the values are natural-log probabilities.

    Returns
    -------
    float
        The maximal absolute log ratio; ``inf`` when the supports differ.

    Examples
    --------
    >>> import math
    >>> e = math.exp(1.0)
    >>> rr1 = {1: e / (1 + e), 0: 1 / (1 + e)}
    >>> rr0 = {1: 1 / (1 + e), 0: e / (1 + e)}
    >>> round(exact_ratio(rr1, rr0), 12)
    1.0
    >>> exact_ratio({0: 1.0}, {0: 0.5, 1: 0.5})
    inf
    """
    s0, s1 = _check_pmf(pmf0, "pmf0", log), _check_pmf(pmf1, "pmf1", log)
    if s0 != s1:
        return math.inf
    loss = 0.0
    for outcome in s0:
        p0, p1 = float(pmf0[outcome]), float(pmf1[outcome])
        diff = p0 - p1 if log else math.log(p0) - math.log(p1)
        loss = max(loss, abs(diff))
    return loss


# ---------------------------------------------------------------------------
# Floating-point releases
# ---------------------------------------------------------------------------
def _check_grid(grid):
    if isinstance(grid, bool) or not isinstance(grid, numbers.Real) or not grid > 0 \
            or not math.isfinite(grid):
        raise ValueError(f"grid must be a positive power of two, got {grid!r}.")
    mantissa, _ = math.frexp(float(grid))
    if mantissa != 0.5:
        raise ValueError(f"grid must be a positive power of two, got {grid!r}.")
    return Fraction(float(grid))


def _off_grid(values, grid, offset):
    # Exact rational arithmetic: a float subtraction would round and could hide
    # (or invent) a residue.
    return sum((Fraction(float(v)) - offset) % grid != 0 for v in values)


def attainable_floats_differ(values0, values1, *, epsilon, grid=None, offset=0.0,
                             confidence=0.95, random_state=None):
    """Check a released float for neighbour-identifying low-order bits.

    Two checks, on independent releases of one float field drawn on two
    neighbouring data sets:

    1. **bit signatures** (always): audit the law of :func:`float_bits_view`
       (sign, exponent, trailing zero bits of the significand) with
       :func:`epsilon_lower_bound_from_samples`. This is Mironov's observation:
       ``fl(x + L)`` for textbook float Laplace noise ``L`` has coarser
       low-order bits near zero when ``x`` is larger, so the bits alone can
       identify the neighbour; a truly ε-DP release (any function of it is
       post-processing) gives ``epsilon_lb <= epsilon`` with probability at
       least ``confidence``.
    2. **grid** (when ``grid`` is given): every value must be ``offset`` plus an
       exact multiple of the public power of two ``grid``, as a release built
       from integer noise on a grid is.

    Parameters
    ----------
    values0, values1 : array-like of float
        Independent releases on each neighbour.
    epsilon : float
        The ε the release claims.
    grid : float or None, default=None
        A claimed power-of-two grid.
    offset : float, default=0.0
        Public offset of the grid.
    confidence : float, default=0.95
        Confidence of the bit-signature audit.
    random_state : int, Generator or None, default=None
        Shuffles the values before the audit's split.

    Returns
    -------
    FloatAuditResult

    Examples
    --------
    Textbook float Laplace noise on x = 0 versus x' = 1/3 (ε = 1 for
    sensitivity 1/3 at scale 1/3):

    >>> import numpy as np
    >>> rng = np.random.default_rng(1)
    >>> v0 = 0.0 + rng.laplace(0.0, 1 / 3, 4000)
    >>> v1 = 1 / 3 + rng.laplace(0.0, 1 / 3, 4000)
    >>> attainable_floats_differ(v0, v1, epsilon=1.0, random_state=0).flagged
    True
    """
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real) \
            or not epsilon >= 0:
        raise ValueError(f"epsilon must be a real number >= 0, got {epsilon!r}.")
    confidence = _check_confidence(confidence)
    arrays = []
    for name, values in (("values0", values0), ("values1", values1)):
        arr = np.asarray(values)
        if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.floating):
            raise TypeError(f"{name} must be a 1-D array of floats, got dtype {arr.dtype} "
                            f"and shape {arr.shape}.")
        arrays.append(arr)
    off = (0, 0)
    if grid is not None:
        g = _check_grid(grid)
        if isinstance(offset, bool) or not isinstance(offset, numbers.Real) \
                or not math.isfinite(offset):
            raise ValueError(f"offset must be a finite real number, got {offset!r}.")
        o = Fraction(float(offset))
        off = (int(_off_grid(arrays[0], g, o)), int(_off_grid(arrays[1], g, o)))
    audit = epsilon_lower_bound_from_samples(
        [float_bits_view(v) for v in arrays[0]], [float_bits_view(v) for v in arrays[1]],
        confidence=confidence, random_state=random_state, claimed_epsilon=float(epsilon))
    return FloatAuditResult(flagged=bool(audit.contradicted or off[0] or off[1]),
                            epsilon_lb=audit.epsilon_lb, off_grid=off, audit=audit)
