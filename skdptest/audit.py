"""Empirical privacy audit: statistical lower bounds on the ε of a release.

A differential-privacy proof covers one mechanism; an attacker who knows both
neighbouring data sets sees *everything* that leaves an estimator: every field
of ``result_`` jointly, every public fitted attribute and the exact bit pattern
of every float. This module turns that attacker into a reusable check.

- :func:`epsilon_lower_bound` fits fresh estimators on two neighbouring data
  sets, records a hashable view of all they release, chooses a distinguishing
  event on 30 % of the trials (thresholds on the numeric fields first, a set of
  views only where it does better on fits it was not built on) and bounds its
  probability ratio on the others with Clopper–Pearson intervals. The result is
  a lower bound ε_lb that holds with the stated confidence: a claimed ε is
  *contradicted* when ε_lb > ε. A small ε_lb proves nothing (the audit is a
  lower bound, not a proof).
- :func:`grey_box_audit` replays fits on the two neighbours with identical
  randomness, records every noise draw (:mod:`skdptest._recorder`) and checks it
  against what the estimator declares it noises (its ``_noise_plan`` hook): the
  same control flow, a measured change within the declared sensitivity, a noise
  scale of at least sensitivity / ε share. It catches a halved noise in one fit.
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
import functools
import math
import numbers
import types
from collections import Counter
from collections.abc import Mapping
from fractions import Fraction

import numpy as np
from scipy import special

from ._special import logsumexp

__all__ = [
    "AuditResult",
    "FloatAuditResult",
    "GreyBoxResult",
    "QuantityAudit",
    "attainable_floats_differ",
    "epsilon_lower_bound",
    "epsilon_lower_bound_from_samples",
    "exact_ratio",
    "float_bits_view",
    "grey_box_audit",
    "release_view",
]

# Cap on the candidate thresholds tried per scalar feature during event
# selection: the selection fits are only used to *choose* the event, so a grid of
# quantiles loses little and keeps the audit linear in the trials.
_MAX_THRESHOLDS = 256
# Share of the fits that choose the event; the others estimate it. A threshold has
# one parameter, so a minority of the fits chooses it well and the bound gains from
# more estimation fits.
_SELECTION_FRACTION = 0.3


# ---------------------------------------------------------------------------
# Views: everything an estimator releases, as a hashable value
# ---------------------------------------------------------------------------
def _canonical(value):
    """A hashable, exact encoding of a released value (floats by bit pattern)."""
    # The built-in scalars first (exact type checks, no ABC lookups): the elements of
    # every array view land here, and the result is the same as the general branches'.
    kind = type(value)
    if kind is float or kind is np.float64:
        return ("f", float(value).hex())
    if kind is int or kind is bool or kind is str:
        return value
    if kind is np.int64:
        return int(value)
    if kind is np.bool_:
        return bool(value)
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
        Description of the distinguishing event chosen on the selection fits, e.g.
        ``"threshold result_.EValueResult.log_e_value >= -0.5"``.
    direction : str
        ``"P0/P1"`` (the event is likelier on the first data set) or ``"P1/P0"``,
        chosen with the event.
    counts : tuple of int
        ``(k0, m0, k1, m1)``: the event's hits ``k`` among the ``m`` estimation
        trials on the first (0) and second (1) data set.
    n_trials : int
        Trials per data set (selection plus estimation).
    confidence : float
        Joint confidence of the bound (Bonferroni over its two one-sided
        Clopper–Pearson bounds).
    claimed_epsilon : float or None
        The ε the release claims (its ``result_.epsilon``), where known.
    event_kind : str
        ``"threshold"`` (one-sided threshold on a numeric field), ``"set"`` (a set of
        whole views) or ``"none"``.

    Examples
    --------
    Randomized response on one bit at ε = log 3:

    >>> import math
    >>> import numpy as np
    >>> from skdptest.audit import epsilon_lower_bound_from_samples
    >>> rng = np.random.default_rng(0)
    >>> out0, out1 = rng.random(400) < 0.75, rng.random(400) < 0.25
    >>> r = epsilon_lower_bound_from_samples(out0, out1, random_state=0,
    ...                                      claimed_epsilon=math.log(3))
    >>> r.event_kind, r.n_trials, 0 < r.epsilon_lb <= math.log(3), r.contradicted
    ('threshold', 400, True, False)
    """

    epsilon_lb: float
    event: str
    direction: str
    counts: tuple
    n_trials: int
    confidence: float
    claimed_epsilon: float | None = None
    event_kind: str = "none"

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

    Examples
    --------
    Values on the claimed grid of 1/4, one grid step apart on the two neighbours:

    >>> import numpy as np
    >>> from skdptest.audit import attainable_floats_differ
    >>> v = np.arange(100) / 4.0
    >>> r = attainable_floats_differ(v, v + 0.25, epsilon=1.0, grid=0.25, random_state=0)
    >>> r.flagged, r.off_grid, r.audit.n_trials
    (False, (0, 0), 100)
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


@functools.lru_cache(maxsize=64)
def _view_leaves(view):
    """``_leaves(view)``, read-only and memoised: a discrete release repeats a few views
    over thousands of trials (a small cache: it keeps the views it holds alive)."""
    return types.MappingProxyType(_leaves(view))


# Tags of the canonical encoding (_canonical): not names of released fields.
_TAGS = frozenset({"f", "c", "a", "m", "s", "r"})


def _named(node):
    """Whether a canonical node is a (name, value) pair (a field, attribute or key)."""
    return (isinstance(node, tuple) and len(node) == 2 and isinstance(node[0], str)
            and node[0] not in _TAGS)


def _leaf_name(view, path):
    """Readable name of a numeric leaf: ``result_.EValueResult.log_e_value``, ``[0]``."""
    parts, node = [], view
    for i in path:
        if _named(node):
            parts.append(node[0])
        elif isinstance(node, tuple) and node and node[0] == "a" and i == 3:
            pass  # into an array's values: the element index follows
        elif not (isinstance(node, tuple) and node and isinstance(node[0], str)
                  and node[0] in _TAGS) and not _named(node[i]):
            parts.append(f"[{i}]")
        node = node[i]
    return ".".join(parts).replace(".[", "[") or "output"


def _describe(view, limit=120):
    text = repr(view)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Event:
    """A threshold on one numeric leaf of the views, or a set of views."""

    def __init__(self, kind, payload, path=None, name=None):
        self.kind, self.payload, self.path, self.name = kind, payload, path, name

    def hits(self, views):
        """How many of ``views`` lie in the event."""
        if self.kind == "set":
            return sum(v in self.payload for v in views)
        # a view without the leaf (NaN) is in neither threshold event
        values = np.array([_view_leaves(v).get(self.path, math.nan) for v in views],
                          dtype=float)
        inside = values <= self.payload if self.kind == "le" else values >= self.payload
        return int(np.count_nonzero(inside))

    def describe(self):
        if self.kind == "set":
            views = sorted(self.payload, key=repr)
            if len(views) == 1:
                return f"output == {_describe(views[0])}"
            return f"output in a set of {len(views)} views, e.g. {_describe(views[0])}"
        op = "<=" if self.kind == "le" else ">="
        return f"threshold {self.name} {op} {self.payload!r}"


def _best_threshold(views_a, views_b, a):
    """The threshold event {leaf >= t} or {leaf <= t} maximising the Clopper–Pearson
    lower bound of log P_a(E)/P_b(E) on these samples, with its score.

    For a scalar release with Laplace-type noise (log-concave, a monotone likelihood
    ratio) a one-sided threshold is the most powerful event, and a one-parameter
    family barely over-fits the samples that choose it.
    """
    na, nb = len(views_a), len(views_b)
    leaves_a = [_view_leaves(v) for v in views_a]
    leaves_b = [_view_leaves(v) for v in views_b]
    paths = sorted(set().union(*leaves_a, *leaves_b), key=repr)
    best = (-np.inf, None)
    for path in paths:
        xa = np.array([d.get(path, np.nan) for d in leaves_a])
        xb = np.array([d.get(path, np.nan) for d in leaves_b])
        pooled = np.concatenate([xa, xb])
        pooled = pooled[np.isfinite(pooled)]
        if pooled.size == 0 or pooled.min() == pooled.max():
            continue  # a constant leaf separates nothing
        thresholds = np.unique(np.quantile(pooled, np.linspace(0, 1, _MAX_THRESHOLDS + 1),
                                           method="inverted_cdf"))
        sa, sb = np.sort(xa[~np.isnan(xa)]), np.sort(xb[~np.isnan(xb)])
        le_a = np.searchsorted(sa, thresholds, side="right")
        le_b = np.searchsorted(sb, thresholds, side="right")
        ge_a = sa.size - np.searchsorted(sa, thresholds, side="left")
        ge_b = sb.size - np.searchsorted(sb, thresholds, side="left")
        for kind, hits_a, hits_b in (("le", le_a, le_b), ("ge", ge_a, ge_b)):
            s = _log_ratio_lb(hits_a, na, hits_b, nb, a)
            i = int(np.argmax(s))
            if s[i] > best[0]:
                best = (float(s[i]), _Event(kind, float(thresholds[i]), path,
                                            _leaf_name(views_a[0] if views_a else views_b[0],
                                                       path)))
    return best


def _best_set(views_a, views_b, a):
    """The likelihood-ratio prefix set of distinct views (Neyman–Pearson order, only
    views seen at least twice) maximising the same bound, with its score."""
    na, nb = len(views_a), len(views_b)
    ca, cb = Counter(views_a), Counter(views_b)
    # A view seen once says nothing about its probability (with a continuous release
    # every view is unique, and the set of side-a views would look perfect here and be
    # empty on fresh fits).
    distinct = [v for v in set(ca) | set(cb) if ca[v] + cb[v] >= 2]
    if not distinct:
        return (-np.inf, None)
    ka = np.array([ca[v] for v in distinct], dtype=float)
    kb = np.array([cb[v] for v in distinct], dtype=float)
    order = np.argsort(-((ka + 0.5) / na) / ((kb + 0.5) / nb), kind="stable")
    scores = _log_ratio_lb(np.cumsum(ka[order]), na, np.cumsum(kb[order]), nb, a)
    i = int(np.argmax(scores))
    return (float(scores[i]), _Event("set", frozenset(distinct[j] for j in order[: i + 1])))


def _choose_event(sel0, sel1, a):
    """(event, direction) chosen on the selection fits only, or (None, None).

    Thresholds on the numeric leaves come first: they are chosen on all selection fits.
    A set of views, which can over-fit (many distinct views, each seen a few times), is
    built on the first half of the selection fits and replaces the threshold only if it
    scores better on the second half, fits it has not seen.
    """
    half = len(sel0) // 2
    candidates = []  # (score on the check half, is_threshold, event, direction)
    for direction, sa, sb in (("P0/P1", sel0, sel1), ("P1/P0", sel1, sel0)):
        for is_threshold, (_, event) in (
                (True, _best_threshold(sa, sb, a)),
                (False, _best_set(sa[:half], sb[:half], a))):
            if event is None:
                continue
            check = _log_ratio_lb(event.hits(sa[half:]), len(sa) - half,
                                  event.hits(sb[half:]), len(sb) - half, a)
            candidates.append((float(check), is_threshold, event, direction))
    candidates = [c for c in candidates if c[0] > 0]
    if not candidates:
        return None, None
    # the best check score; a threshold wins ties
    score, _, event, direction = max(candidates, key=lambda c: (c[0], c[1]))
    return event, direction


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
    # The event and its direction are chosen on the selection fits, so one lower and
    # one upper one-sided bound are computed on the others: Bonferroni over two.
    a = (1.0 - confidence) / 2.0
    n_sel = min(max(2, round(n * _SELECTION_FRACTION)), n - 2)
    sel0, est0 = views0[:n_sel], views0[n_sel:n]
    sel1, est1 = views1[:n_sel], views1[n_sel:n]
    event, direction = _choose_event(sel0, sel1, a)
    common = dict(n_trials=n, confidence=confidence,
                  claimed_epsilon=None if claimed is None else float(claimed))
    if event is None:
        return AuditResult(epsilon_lb=0.0, event="no separating event", direction="P0/P1",
                           counts=(0, len(est0), 0, len(est1)), event_kind="none", **common)
    k0, k1 = event.hits(est0), event.hits(est1)
    if direction == "P0/P1":
        lb = float(_log_ratio_lb(k0, len(est0), k1, len(est1), a))
    else:
        lb = float(_log_ratio_lb(k1, len(est1), k0, len(est0), a))
    return AuditResult(epsilon_lb=max(lb, 0.0), event=event.describe(), direction=direction,
                       counts=(int(k0), len(est0), int(k1), len(est1)),
                       event_kind="set" if event.kind == "set" else "threshold", **common)


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
    import warnings

    from skdptest import FixedRandomStateWarning

    views, claimed = [], []
    for seed in seeds:
        est = make_estimator(int(seed))
        with warnings.catch_warnings():
            # the audit fixes the seeds on purpose: these fits are its own, never released
            warnings.simplefilter("ignore", FixedRandomStateWarning)
            est = est.fit(X) if y is None else est.fit(X, y)
        seen = view(est)
        # release_view's output is canonical already (encoding it again is the identity
        # and was about a third of an audit of a cheap estimator); a custom view is encoded
        views.append(seen if view is release_view else _canonical(seen))
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
    30 % of the trials choose the distinguishing event E and its direction: a
    one-sided threshold on a numeric field first (the most powerful event for a
    scalar release with Laplace-type noise), a set of views only where it scores
    better on selection fits it was not built on. The other 70 % bound it:
    ``ε_lb = log(lower(P0(E)) / upper(P1(E)))`` (or the symmetric ratio) with
    one-sided Clopper–Pearson bounds, Bonferroni-corrected so that
    ``P(ε_lb > true ε) <= 1 - confidence`` for an ε-DP release. The fits' seeds are
    the audit's own: their ``FixedRandomStateWarning`` is silenced.

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
        Fits per data set (30 % select the event, 70 % estimate it).
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
    ...                         [[1]], [[0]], n_trials=500, random_state=0)
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
# Grey-box: replay on neighbours with identical randomness
# ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class QuantityAudit:
    """What :func:`grey_box_audit` measured for one declared noised quantity.

    Attributes
    ----------
    label : str
        The quantity's label in the estimator's noise plan.
    kind : str
        The draw kind of its noise.
    sensitivity : float
        Declared sensitivity (units of the noised value).
    epsilon : float
        Declared ε share.
    required_scale : float or None
        ``factor * sensitivity / epsilon``, the least noise scale the claim needs
        (None for an exponential-mechanism choice).
    drawn_scale : float or None
        Smallest scale among its draws over all replays (None when none was drawn
        or for a choice).
    measured_change : float or None
        Largest change of the pre-noise value between the neighbours over the replays
        (None when not measured).
    privacy_loss : float or None
        For a choice: the largest ``abs(log p0 / p1)`` of its selection probabilities.
    n_draws : int
        Draws assigned to it, over all replays and both neighbours.

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest import DPBinomialTest
    >>> from skdptest.audit import grey_box_audit
    >>> X0 = np.zeros((20, 1))
    >>> X1 = X0.copy()
    >>> X1[0] = 1.0
    >>> r = grey_box_audit(lambda s: DPBinomialTest(epsilon=1.0, random_state=s), X0, X1)
    >>> q = r.quantities[0]
    >>> q.label, q.kind, q.sensitivity, q.measured_change, q.drawn_scale >= q.required_scale
    ('count', 'discrete_laplace', 1.0, 1.0, True)
    """

    label: str
    kind: str
    sensitivity: float
    epsilon: float
    required_scale: float | None
    drawn_scale: float | None
    measured_change: float | None
    privacy_loss: float | None
    n_draws: int


@dataclasses.dataclass(frozen=True)
class GreyBoxResult:
    """Outcome of :func:`grey_box_audit`.

    Attributes
    ----------
    flagged : bool
        Whether a check failed (``findings`` is not empty).
    findings : tuple of str
        One line per failed check: a different control flow or number of draws,
        noise the plan does not declare, a measured change above the declared
        sensitivity, a noise scale below ``factor * sensitivity / epsilon``, a
        declared plan that depends on the data.
    quantities : tuple of QuantityAudit
        Per declared quantity, what was measured.
    n_replays : int
        Seeds replayed on both neighbours.
    n_draws : tuple of int
        Draws recorded on the first and on the second data set, over all replays.

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest import DPBinomialTest
    >>> from skdptest.audit import grey_box_audit
    >>> X0 = np.zeros((20, 1))
    >>> X1 = X0.copy()
    >>> X1[0] = 1.0
    >>> r = grey_box_audit(lambda s: DPBinomialTest(epsilon=1.0, random_state=s), X0, X1)
    >>> r.flagged, r.findings, r.n_replays, r.n_draws
    (False, (), 3, (3, 3))
    """

    flagged: bool
    findings: tuple
    quantities: tuple
    n_replays: int
    n_draws: tuple


_REL_TOL = 1e-9  # floating-point slack of the comparisons with declared constants


def _replay(make_estimator, X, y, seed):
    """(declared plan, record) of one fit of ``make_estimator(seed)`` on (X, y)."""
    import warnings

    from skdptest import FixedRandomStateWarning
    from skdptest._recorder import recording

    with warnings.catch_warnings():
        # the audit fixes the seeds on purpose: the replays are its own, never released
        warnings.simplefilter("ignore", FixedRandomStateWarning)
        est = make_estimator(seed)
        hook = getattr(est, "_noise_plan", None)
        if not callable(hook):
            raise TypeError(f"{type(est).__name__} has no _noise_plan(prep) hook: it does not "
                            "declare what it noises (doc/contributing.md).")
        plan = hook(est._prepare(X, y, reset=True))
        est = make_estimator(seed)
        with recording() as record:
            est.fit(X) if y is None else est.fit(X, y)
    return plan, record


def _same_draw(d0, d1):
    # A choice's probabilities are data-dependent by design (exponential mechanism);
    # every other parameter is public and must be equal.
    return d0.kind == d1.kind and d0.size == d1.size and (
        d0.kind == "choice" or d0.param == d1.param)


def _assign(plan, draws):
    """The draws of each declared quantity (in order, per kind) and the leftovers."""
    from skdptest._recorder import SCALE_KINDS

    by_kind = {}
    for d in draws:
        by_kind.setdefault(d.kind, []).append(d)
    used = Counter()
    out = []
    for q in plan.quantities:
        pool = by_kind.get(q.kind, [])
        start = used[q.kind]
        stop = len(pool) if q.draws is None else min(len(pool), start + q.draws)
        out.append(pool[start:stop])
        used[q.kind] = stop
    leftover = {k: len(v) - used[k] for k, v in by_kind.items()
                if (k in SCALE_KINDS or k == "choice") and len(v) > used[k]}
    return out, leftover


def _choice_loss(d0, d1):
    p0, p1 = np.asarray(d0.param, dtype=float), np.asarray(d1.param, dtype=float)
    if p0.shape != p1.shape:
        return math.inf
    both = (p0 > 0) & (p1 > 0)
    if np.any((p0 > 0) != (p1 > 0)):
        return math.inf
    return float(np.max(np.abs(np.log(p0[both]) - np.log(p1[both])), initial=0.0))


def _check_replay(plan0, plan1, rec0, rec1, seed):
    """Findings and per-quantity measurements of one replay."""
    from skdptest._recorder import max_change

    findings = []
    if [q.public() for q in plan0.quantities] != [q.public() for q in plan1.quantities]:
        findings.append("the declared noise plan differs between the neighbours (it must "
                        "be a function of public quantities)")
    d0, d1 = rec0.draws, rec1.draws
    for i, (a, b) in enumerate(zip(d0, d1, strict=False)):
        if not _same_draw(a, b):
            findings.append(f"seed {seed}: draw {i} is {a.kind}({a.param!r}, size={a.size}) on "
                            f"X0 but {b.kind}({b.param!r}, size={b.size}) on X1: the control "
                            "flow or a noise parameter depends on the data")
            break
    else:
        if len(d0) != len(d1) and not plan0.sequential:
            findings.append(f"seed {seed}: {len(d0)} draws on X0 but {len(d1)} on X1: the "
                            "number of draws depends on the data")
    assigned0, left0 = _assign(plan0, d0)
    assigned1, left1 = _assign(plan1, d1)
    for kind, count in sorted({**left0, **left1}.items()):
        findings.append(f"seed {seed}: {count} {kind} draw(s) that no declared quantity "
                        "accounts for")
    # a choice that came out differently changes what follows (another bandwidth): the
    # sensitivity of later values holds for equal choices only
    chosen_alike = all(a.outcome == b.outcome for a, b in zip(d0, d1, strict=False)
                       if a.kind == "choice")
    observed = ({k: list(v) for k, v in rec0.observations.items()},
                {k: list(v) for k, v in rec1.observations.items()})
    rows = []
    for q, q1, draws0, draws1 in zip(plan0.quantities, plan1.quantities, assigned0,
                                     assigned1, strict=False):
        drawn = draws0 + draws1
        scales = [d.scale for d in drawn if d.scale is not None]
        if not drawn and not plan0.sequential:
            findings.append(f"{q.label}: declared but never drawn")
        loss = None
        if q.kind == "choice":
            losses = [_choice_loss(a, b) for a, b in zip(draws0, draws1, strict=False)]
            loss = max(losses, default=None)
            if loss is not None and loss > q.epsilon * (1 + _REL_TOL):
                findings.append(f"{q.label}: selection probabilities differ by a factor "
                                f"e^{loss:.4g} > e^ε share = e^{q.epsilon:.4g}")
        elif scales and min(scales) < q.required_scale * (1 - _REL_TOL):
            findings.append(f"{q.label}: noise scale {min(scales):.6g} < factor * "
                            f"sensitivity / ε share = {q.required_scale:.6g}")
        measured = None
        if q.kind != "choice" and chosen_alike:
            if q.value is not None and q1.value is not None:
                measured = max_change(q.value, q1.value)
            else:
                v0, v1 = observed[0].get(q.label), observed[1].get(q.label)
                if v0 and v1 and q.value is None:
                    (a0, unit0), (a1, unit1) = v0.pop(0), v1.pop(0)
                    if {unit0, unit1} != {float(q.unit)}:
                        findings.append(f"{q.label}: the release counts in units of "
                                        f"{unit0!r} / {unit1!r}, its plan declares "
                                        f"{float(q.unit)!r}")
                    measured = max_change(a0, a1)
            if measured is not None and not measured <= q.sensitivity * (1 + _REL_TOL):
                findings.append(f"{q.label}: measured change {measured:.6g} > declared "
                                f"sensitivity {q.sensitivity:.6g}")
        rows.append((q, min(scales, default=None), measured, loss, len(drawn)))
    return findings, rows


def grey_box_audit(make_estimator, X0, X1, *, y0=None, y1=None, n_replays=3,
                   random_state=None):
    """Replay fits on two neighbours with identical randomness and check the noise.

    For each of ``n_replays`` seeds, ``make_estimator(seed)`` is fitted on
    ``(X0, y0)`` and, with the same seed, on ``(X1, y1)``, while every draw of
    :mod:`skdptest._noise` and every pre-noise value the release reports is recorded.
    The estimator's hook ``_noise_plan(prep)`` (doc/contributing.md) declares what it
    noises: each quantity's sensitivity and ε share. The audit checks

    1. the same control flow: the same draws (kind, parameter, size) in the same
       order on both neighbours, as many of them (a prefix where the plan is
       ``sequential``, e.g. a search that stops where it accepts), and no noise
       draw outside the declared quantities;
    2. the measured change of each noised value between the neighbours is at most
       its declared sensitivity;
    3. each noise scale is at least ``factor * sensitivity / ε share`` (for an
       exponential mechanism: its selection probabilities differ by at most
       e^ε share).

    A halved noise scale fails 3 on any data; a sensitivity claimed too small fails
    2 on neighbours that move the value enough; a noise parameter that depends on
    the data fails 1.

    Parameters
    ----------
    make_estimator : callable
        ``make_estimator(seed) -> estimator`` using ``seed`` as its ``random_state``;
        the estimator implements ``_noise_plan``.
    X0, X1 : array-like
        The neighbouring data sets.
    y0, y1 : array-like or None, default=None
        Labels / paired variables; ``fit(X)`` is called when ``None``.
    n_replays : int, default=3
        Seeds replayed (a search's control flow depends on the noise).
    random_state : int, Generator or None, default=None
        Draws the seeds.

    Returns
    -------
    GreyBoxResult

    Examples
    --------
    The shipped e-value test passes; a mutant that plans the noise of 2ε while it
    claims ε (half the noise scale) is caught:

    >>> import numpy as np
    >>> from scipy import stats
    >>> from skdptest import PrivateEValueTest
    >>> class HalvedNoise(PrivateEValueTest):
    ...     def _plan(self, params, X, y):
    ...         return super()._plan({**params, "epsilon": 2 * params["epsilon"]}, X, y)
    >>> laws = stats.bernoulli(0.3), stats.bernoulli(0.6)
    >>> X0 = np.zeros((20, 1))   # one row moved from the null's likeliest value
    >>> X1 = X0.copy()           # to its least likely one: the full sensitivity
    >>> X1[0] = 1.0
    >>> ok = grey_box_audit(lambda s: PrivateEValueTest(*laws, random_state=s), X0, X1)
    >>> q = ok.quantities[0]
    >>> ok.flagged, q.label, q.measured_change == q.sensitivity
    (False, 'merged integer', True)
    >>> bad = grey_box_audit(lambda s: HalvedNoise(*laws, random_state=s), X0, X1)
    >>> bad.flagged
    True
    >>> print(bad.findings[0])
    merged integer: noise scale 556.569 < factor * sensitivity / ε share = 1113
    """
    if not callable(make_estimator):
        raise TypeError(f"make_estimator must be callable (seed -> estimator), got "
                        f"{type(make_estimator).__name__}.")
    if isinstance(n_replays, bool) or not isinstance(n_replays, numbers.Integral) \
            or n_replays < 1:
        raise ValueError(f"n_replays must be an integer >= 1, got {n_replays!r}.")
    if (y0 is None) != (y1 is None):
        raise ValueError("y0 and y1 must both be given or both be None.")
    seeds = np.random.default_rng(random_state).integers(0, 2**32, size=int(n_replays))
    findings, per_quantity, totals = [], None, [0, 0]
    for seed in (int(s) for s in seeds):
        plan0, rec0 = _replay(make_estimator, X0, y0, seed)
        plan1, rec1 = _replay(make_estimator, X1, y1, seed)
        totals[0] += len(rec0.draws)
        totals[1] += len(rec1.draws)
        found, rows = _check_replay(plan0, plan1, rec0, rec1, seed)
        findings += [f for f in found if f not in findings]
        if per_quantity is None:
            per_quantity = [list(r) for r in rows]
        else:
            for acc, (_, scale, measured, loss, n) in zip(per_quantity, rows, strict=False):
                acc[1] = _min_defined(acc[1], scale)
                acc[2] = _max_defined(acc[2], measured)
                acc[3] = _max_defined(acc[3], loss)
                acc[4] += n
    quantities = tuple(
        QuantityAudit(label=q.label, kind=q.kind, sensitivity=float(q.sensitivity),
                      epsilon=float(q.epsilon),
                      required_scale=None if q.kind == "choice" else float(q.required_scale),
                      drawn_scale=scale, measured_change=measured, privacy_loss=loss,
                      n_draws=int(n))
        for q, scale, measured, loss, n in per_quantity or ())
    return GreyBoxResult(flagged=bool(findings), findings=tuple(findings),
                         quantities=quantities, n_replays=int(n_replays),
                         n_draws=tuple(totals))


def _min_defined(a, b):
    return b if a is None else a if b is None else min(a, b)


def _max_defined(a, b):
    return b if a is None else a if b is None else max(a, b)


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
        total = float(logsumexp(values))
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
