"""The law of the log-likelihood ratio L = log(q/p)(X) under the null P and the
alternative Q, for the pairs of public laws the e-value tests support.

Both per-row statistics (E* and tsLR) are functions of L, so everything the
tests need -- the normaliser of E*, the e-power, the extreme values that set the
sensitivity -- is an expectation or a tail probability of L. Three models:

- :class:`_DiscreteLaws`: finite discrete supports, exact sums;
- :class:`_GaussianLaws`: Gaussian location families (equal covariance), where
  L is Gaussian under both laws, closed forms;
- :class:`_UnivariateLaws`: other univariate continuous laws; tail probabilities
  are cdf differences between the exactly located crossings of L with a level
  (bisection to machine precision), expectations by quadrature on quantiles.
  Crossings are *certified* only for the scipy families of :func:`_certify`,
  whose L is monotone between known points (support ends, kinks, and the roots
  of L' in closed form); for any other univariate law ``exact = False``.

Models that cannot compute tail probabilities exactly set ``exact = False``:
the optimal statistic refuses them (validity never rests on Monte Carlo or on
a grid that may miss a crossing).
"""

from __future__ import annotations

import bisect
import functools
import math
from numbers import Real

import numpy as np
from scipy import special, stats

__all__ = ["make_laws"]

_MVN_FROZEN = type(stats.multivariate_normal(mean=0.0, cov=1.0))
_MAX_SUPPORT = 2_000_000  # largest finite support enumerated exactly
_TAIL = 1e-15  # tail mass left outside the grids of univariate continuous laws


def _quantile_nodes(n_panels=4000, order=10):
    """Composite Gauss-Legendre nodes and weights on (0, 1).

    E[h(L(X))] = ∫_0^1 h(L(F^{-1}(u))) du: evaluating L once at F^{-1}(nodes) turns
    every later expectation into a weighted sum. Used for e-power planning and
    reporting, never for validity.
    """
    x, w = np.polynomial.legendre.leggauss(order)
    left = np.arange(n_panels) / n_panels
    u = (left[:, None] + (x[None, :] + 1) / (2 * n_panels)).ravel()
    return u, np.tile(w / (2 * n_panels), n_panels)


def _weighted_sum(w, values):
    """Σ w·values by numpy's pairwise sum, not ``np.dot``: a threaded BLAS dot splits
    the sum by thread (its last bits, hence planned bets, depended on the BLAS thread
    count) and its workers cost ~8 ms of CPU per 40 000-node call on a loaded machine."""
    return float(np.sum(w * values))


#: Gauss-Legendre order per panel and half-width of the z range of
#: :func:`_normal_panels` (the normal mass beyond 12 sd is below 4e-33).
_GL_ORDER = 8
_Z_MAX = 12.0
_GL = np.polynomial.legendre.leggauss(_GL_ORDER)


def _gl_panels(edges):
    """Gauss-Legendre nodes z and weights w·φ(z) of the panels between ``edges``."""
    half = 0.5 * np.diff(edges)
    mid = edges[:-1] + half
    x, wx = _GL
    z = (mid[:, None] + half[:, None] * x[None, :]).ravel()
    w = (half[:, None] * wx[None, :]).ravel() * np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
    return z, w


@functools.lru_cache(maxsize=32)
def _normal_base(s):
    """The unsplit panels of :func:`_normal_panels` for the scale s (read-only)."""
    width = 0.5 / max(1.0, s)
    edges = np.linspace(-_Z_MAX, _Z_MAX, math.ceil(2.0 * _Z_MAX / width) + 1)
    z, w = _gl_panels(edges)
    for a in (edges, z, w):
        a.flags.writeable = False
    return edges, z, w


def _normal_panels(z_breaks, s):
    """Nodes z and weights w with Σ w h(z) ≈ E[h(Z)], Z ~ N(0, 1), for h analytic
    between ``z_breaks`` and varying on the scale of L = s·z.

    Composite Gauss-Legendre of order 8 on [−12, 12] with panels of width at most
    0.5 in z and in L (0.5 / max(1, s) in z), the panels holding a break split there:
    on each panel φ(z) h(z) is analytic and the rule's error is ~1e-17 of its mass.
    About 400·max(1, s) nodes instead of the quantile grid's 40 000. Read-only arrays.
    """
    # The planners ask for the same panels again and again (one statistic, so the same
    # breaks, at many bets): kept per exact breaks and scale, public values (hex: the
    # sign of a zero and NaN are kept apart and the key round-trips exactly).
    return _split_panels(tuple(float(b).hex() for b in z_breaks), float(s).hex())


@functools.lru_cache(maxsize=64)
def _split_panels(z_breaks_hex, s_hex):
    """:func:`_normal_panels` of the breaks and scale given as float hex strings."""
    z_breaks, s = [float.fromhex(b) for b in z_breaks_hex], float.fromhex(s_hex)
    edges, z, w = _normal_base(s)
    inner = sorted({b for b in z_breaks if -_Z_MAX < b < _Z_MAX})
    if not inner:
        return z, w
    k = np.searchsorted(edges, inner, side="right") - 1
    split = sorted(set(k.tolist()))
    keep = np.ones(edges.size - 1, dtype=bool)
    keep[split] = False
    keep = np.repeat(keep, _GL_ORDER)
    parts_z, parts_w = [z[keep]], [w[keep]]
    for j in split:
        sub = [edges[j], *(b for b in inner if edges[j] < b < edges[j + 1]), edges[j + 1]]
        pz, pw = _gl_panels(np.array(sub))
        parts_z.append(pz)
        parts_w.append(pw)
    z, w = np.concatenate(parts_z), np.concatenate(parts_w)
    z.flags.writeable = w.flags.writeable = False
    return z, w


def _kind(dist, name):
    if isinstance(dist, _MVN_FROZEN):
        return "mvn"
    inner = getattr(dist, "dist", None)
    if isinstance(inner, stats.rv_discrete):
        return "discrete"
    if isinstance(inner, stats.rv_continuous):
        return "continuous"
    raise TypeError(
        f"{name} must be a frozen scipy.stats distribution (e.g. scipy.stats.norm(0, 1), "
        f"scipy.stats.bernoulli(0.3), scipy.stats.multivariate_normal(mean, cov)), "
        f"got {type(dist).__name__}."
    )


def check_law(dist, name):
    """Raise ``TypeError`` unless ``dist`` is a supported frozen distribution, and
    ``ValueError`` (naming ``name`` and the law) when float64 cannot represent its
    rows faithfully (:func:`check_float_range`). Returns the kind of law."""
    kind = _kind(dist, name)
    check_float_range(dist, name, kind)
    return kind


# ---------------------------------------------------------------- float64 limits
# A continuous law whose scale is not large against float64's spacing at its
# location has rows that float64 rounds to a grid coarse against that scale: the
# data then follow the rounded law, not the law given, and every e-value computed
# for the given law loses its validity (N(2**52, 1) against N(2**52 + 1, 1) rejected
# a true null 176 times out of 200). Such laws are refused before anything is
# charged. The scale must be at least 2**SPACING_BITS spacings at the location, so
# that a row's rounding moves it by at most 2**-(SPACING_BITS + 1) of the scale.
SPACING_BITS = 30
# Scales outside this range overflow or underflow the log-densities and likelihood
# ratios (a normal's variance 1e-600 is 0 in float64).
SCALE_RANGE = (2.0**-400, 2.0**400)
# Discrete laws: support points must be integers exactly representable in float64,
# and an infinite support is enumerated between its 1e-15 quantiles (at most this
# many points).
MAX_INTEGER = 2.0**53
MAX_ENUMERATED = 2**24
_IQR_NORMAL = 2.0 * 0.6744897501960817  # interquartile range of N(0, 1)


def describe_law(dist):
    """A short public description of a frozen law for messages (its parameters)."""
    if isinstance(dist, _MVN_FROZEN):
        mean = np.array2string(np.atleast_1d(dist.mean), threshold=6, precision=6)
        cov = np.array2string(np.atleast_2d(dist.cov), threshold=6, precision=6)
        return f"multivariate_normal(mean={mean}, cov={' '.join(cov.split())})"
    gen = getattr(dist, "dist", None)
    name = getattr(gen, "name", type(gen).__name__)
    args = [repr(float(a)) if isinstance(a, Real) else repr(a) for a in dist.args]
    args += [f"{k}={float(v)!r}" if isinstance(v, Real) else f"{k}={v!r}"
             for k, v in dist.kwds.items()]
    return f"{name}({', '.join(args)})"


def check_float_range(dist, name, kind=None):
    """Refuse (``ValueError`` naming ``name`` and the law) a law whose rows float64
    cannot represent faithfully; a function of the law alone (run before the charge).

    - continuous univariate: the interquartile range (its scale) must lie in
      ``SCALE_RANGE`` and be at least 2**SPACING_BITS float64 spacings at the
      quartiles (its location);
    - multivariate normal: the same for every coordinate's marginal;
    - discrete: support points must be integers of magnitude below 2**53, and an
      infinite support must be enumerable (finite 1e-15 quantiles, at most
      ``MAX_ENUMERATED`` points between them).
    """
    kind = kind or _kind(dist, name)
    law = describe_law(dist)
    if kind == "discrete":
        _check_discrete(dist, name, law)
        return
    if kind == "mvn":
        mean = np.atleast_1d(np.asarray(dist.mean, dtype=float))
        cov = np.atleast_2d(np.asarray(dist.cov, dtype=float))
        sd = np.sqrt(np.diag(cov))
        quartiles = [(m - 0.5 * _IQR_NORMAL * s, m, m + 0.5 * _IQR_NORMAL * s)
                     for m, s in zip(mean.tolist(), sd.tolist(), strict=True)]
    else:
        try:
            with np.errstate(all="ignore"):
                quartiles = [tuple(float(v) for v in dist.ppf([0.25, 0.5, 0.75]))]
        except Exception as exc:  # noqa: BLE001 - a law whose quantiles fail is refused
            raise ValueError(
                f"{name}={law}: its quartiles could not be computed ({type(exc).__name__});"
                " the e-value tests need a law with finite quantiles."
            ) from exc
    for q25, med, q75 in quartiles:
        iqr = q75 - q25
        if not all(math.isfinite(v) for v in (q25, med, q75, iqr)):
            raise ValueError(
                f"{name}={law} has non-finite quartiles in float64: its location or scale "
                "is beyond float64's range. Standardise the data with public constants "
                "and give the standardised laws."
            )
        spacing = float(np.spacing(max(abs(q25), abs(med), abs(q75))))
        if iqr < 2.0**SPACING_BITS * spacing:
            raise ValueError(
                f"{name}={law} has scale (interquartile range) {iqr:.3g}, less than "
                f"2**{SPACING_BITS} float64 spacings ({spacing:.3g}) at its location "
                f"{med:.6g}: float64 rounds its rows to a grid that is coarse against its "
                "scale, so the data would not follow this law and no e-value computed "
                "for it would be valid. Centre the data on a public constant near the "
                "location (and rescale them) and give the centred laws."
            )
        if not SCALE_RANGE[0] <= iqr <= SCALE_RANGE[1]:
            raise ValueError(
                f"{name}={law} has scale (interquartile range) {iqr:.3g}, outside "
                "[2**-400, 2**400]: its log-densities and likelihood ratios overflow or "
                "underflow float64. Rescale the data by a public constant and give the "
                "rescaled laws."
            )


def _check_discrete(dist, name, law):
    gen = getattr(dist, "dist", None)
    if isinstance(gen, stats.rv_discrete) and hasattr(gen, "xk"):  # rv_discrete(values=)
        _, loc, _ = _parse_discrete(dist)
        points = np.asarray(gen.xk, dtype=float) + loc
    else:
        points = np.array([float(v) for v in dist.support()])
    finite = points[np.isfinite(points)]
    if not np.all(np.floor(finite) == finite):
        raise ValueError(
            f"{name}={law} has support points that are not integers: the discrete laws "
            "of the e-value tests live on the integers (map the values to integer codes "
            "with a public rule and give the law of the codes)."
        )
    if finite.size and not np.all(np.abs(finite) < MAX_INTEGER):
        raise ValueError(
            f"{name}={law} has support points of magnitude 2**53 or more, which float64 "
            "cannot tell apart from their neighbours. Shift the data by a public "
            "constant and give the shifted law."
        )
    if finite.size == points.size and points.max() - points.min() < _MAX_SUPPORT:
        return
    with np.errstate(all="ignore"):
        a, b = float(dist.ppf(_TAIL)), float(dist.isf(_TAIL))
    if not (math.isfinite(a) and math.isfinite(b) and abs(a) < MAX_INTEGER
            and abs(b) < MAX_INTEGER and b - a < MAX_ENUMERATED):
        raise ValueError(
            f"{name}={law}: its support is enumerated between its 1e-15 quantiles, and "
            f"these are not finite or lie more than {MAX_ENUMERATED} points apart (or "
            "beyond 2**53). Shift or coarsen the data with a public rule and give the "
            "law of the transformed rows."
        )


def _parse_discrete(dist):
    try:
        shapes, loc = dist.dist._parse_args(*dist.args, **dist.kwds)
        return shapes, float(loc), 1.0
    except (TypeError, ValueError):  # pragma: no cover - scipy refused it already
        return (), 0.0, 1.0


def make_laws(null, alternative):
    """Return the model of L for the pair (``null``, ``alternative``)."""
    kinds = (check_law(null, "null"), check_law(alternative, "alternative"))
    if kinds == ("discrete", "discrete"):
        return _DiscreteLaws(null, alternative)
    if "discrete" in kinds:
        raise ValueError(
            "null and alternative must both be discrete or both continuous, got "
            f"{kinds[0]} and {kinds[1]}."
        )
    dims = [_dim(d) for d in (null, alternative)]
    if dims[0] != dims[1]:
        raise ValueError(
            f"null and alternative have different dimensions {dims[0]} and {dims[1]}."
        )
    gauss = [_gaussian_params(d) for d in (null, alternative)]
    if None not in gauss and np.allclose(gauss[0][1], gauss[1][1], rtol=0, atol=0):
        return _GaussianLaws(null, alternative, gauss[0][0], gauss[1][0], gauss[0][1])
    if dims[0] == 1 and kinds == ("continuous", "continuous"):
        breaks, why = _certify(null, alternative)
        return _UnivariateLaws(null, alternative, breaks, why)
    return _MonteCarloLaws(null, alternative, dims[0])


def _dim(dist):
    return int(dist.dim) if isinstance(dist, _MVN_FROZEN) else 1


def _gaussian_params(dist):
    if isinstance(dist, _MVN_FROZEN):
        return np.atleast_1d(dist.mean).astype(float), np.atleast_2d(dist.cov).astype(float)
    # only scipy's own, untouched normal: a subclass or a patched instance named
    # "norm" need not have a normal density
    fam = _family(dist)
    if fam is not None and fam[0] == "norm":
        return np.array([float(dist.mean())]), np.array([[float(dist.var())]])
    return None


# ---------------------------------------------------------------- certification
# The normaliser of E* needs P(L < t), Q(L < t), P(L > t) exactly for every level t.
# They are sums of cdf differences between the crossings of L with t, and a grid
# finds every crossing only if L is monotone between consecutive grid points. For
# the families below L' = l_Q' - l_P' (l = log density) has a known finite set of
# sign changes: on each piece of the support, l' = N/D with polynomials N, D (D != 0
# inside the piece), so L' = (N_Q D_P - N_P D_Q) / (D_P D_Q) changes sign only at
# real roots of a polynomial of degree <= 3. Adding those roots, the pieces' ends
# and the support ends to the grid makes L monotone on every cell.
_RATIONAL = ("norm", "t", "cauchy", "laplace", "expon", "gamma", "chi2", "beta",
             "uniform", "truncnorm")
# Log-concave location families with a non-rational l': a pair with equal shape
# and scale has a monotone L (l' non-increasing, so l'(x - m_Q) - l'(x - m_P) has
# the sign of m_Q - m_P). Any other pair of these is refused.
_LOG_CONCAVE_LOCATION = ("logistic", "gumbel_r", "gumbel_l")
# Methods a user could override on a frozen law or its generator instance.
_METHODS = ("pdf", "logpdf", "cdf", "sf", "ppf", "isf", "_pdf", "_logpdf", "_cdf",
            "_sf", "_ppf", "_isf", "_logcdf", "_logsf", "_support", "_argcheck")


def _family(dist):
    """(name, shapes, loc, scale) of an untouched scipy family, else ``None``.

    The generator must be scipy's own class (not a subclass), with its default
    support and no method replaced on the instance, so that the density really is
    the family's formula.
    """
    gen = getattr(dist, "dist", None)
    name = getattr(gen, "name", None)
    if name not in _RATIONAL + _LOG_CONCAVE_LOCATION:
        return None
    ref = getattr(stats, name)
    if type(gen) is not type(ref) or (gen.a, gen.b) != (ref.a, ref.b):
        return None
    if any(m in vars(gen) or m in vars(dist) for m in _METHODS):
        return None
    try:
        shapes, loc, scale = gen._parse_args(*dist.args, **dist.kwds)
    except (TypeError, ValueError):  # pragma: no cover - scipy refuses these first
        return None
    vals = [float(v) for v in (*shapes, loc, scale)]
    if not (all(math.isfinite(v) for v in vals) and vals[-1] > 0
            and bool(np.all(gen._argcheck(*shapes)))):
        return None
    return name, tuple(vals[:-2]), vals[-2], vals[-1]


def _pieces(dist, fam):
    """[(lo, hi, N, D)]: on (lo, hi), d/dx log density = N(x)/D(x) (numpy.polyval
    coefficients, highest degree first), D != 0 there; the pieces cover the support."""
    name, shapes, m, s = fam
    lo, hi = (float(v) for v in dist.support())
    if name in ("norm", "truncnorm"):  # l' = -(x - m) / s^2
        return [(lo, hi, [-1.0, m], [s * s])]
    if name in ("t", "cauchy"):  # l' = -(nu + 1)(x - m) / ((x - m)^2 + nu s^2)
        nu = shapes[0] if name == "t" else 1.0
        return [(lo, hi, [-(nu + 1), (nu + 1) * m], [1.0, -2 * m, m * m + nu * s * s])]
    if name == "laplace":  # l' = +1/s left of the mode, -1/s right of it
        return [(lo, m, [1.0], [s]), (m, hi, [-1.0], [s])]
    if name in ("expon", "gamma", "chi2"):  # l' = (a - 1)/(x - m) - 1/theta
        a, theta = {"expon": (1.0, s), "gamma": (shapes[0] if shapes else 1.0, s),
                    "chi2": (shapes[0] / 2 if shapes else 1.0, 2 * s)}[name]
        return [(lo, hi, [-1.0, (a - 1) * theta + m], [theta, -theta * m])]
    if name == "beta":  # y = x - m: l' = (a - 1)/y - (b - 1)/(s - y)
        a, b = shapes
        return [(lo, hi, [-(a + b - 2), (a - 1) * s + (a + b - 2) * m],
                 [-1.0, 2 * m + s, -m * m - s * m])]
    if name == "uniform":
        return [(lo, hi, [0.0], [1.0])]
    raise AssertionError(name)  # pragma: no cover - _family filters the names


def _real_roots(poly, lo, hi):
    """Real roots of a polynomial inside (lo, hi), Newton-polished; near-real pairs
    (a double root split by rounding) are kept too: an extra grid point is harmless."""
    c = np.trim_zeros(np.asarray(poly, dtype=float), "f")
    if c.size <= 1:
        return []
    out = []
    dc = np.polyder(c)
    for r in np.roots(c):
        if abs(r.imag) > 1e-7 * max(1.0, abs(r.real)):
            continue
        x = float(r.real)
        for _ in range(3):
            d = np.polyval(dc, x)
            if d == 0 or not math.isfinite(d):
                break
            step = np.polyval(c, x) / d
            if not math.isfinite(step) or abs(step) > 1e-6 * max(1.0, abs(x)):
                break
            x -= step
        if lo < x < hi:
            out.append(x)
    return out


def _certify(null, alternative):
    """(breaks, None) with L monotone between consecutive breaks (and the quantile
    grid added to them), or (None, reason) when no such certificate exists."""
    fams = [_family(d) for d in (null, alternative)]
    names = [getattr(getattr(d, "dist", None), "name", type(d).__name__)
             for d in (null, alternative)]
    desc = f"null={names[0]!r} and alternative={names[1]!r}"
    refused = (
        f"statistic='optimal' cannot certify E_P[E*] <= 1 for {desc}: the crossings of "
        "their likelihood ratio with the clip levels are certified only for pairs of "
        "scipy.stats laws from " + ", ".join(_RATIONAL) + " (any parameters, any two of "
        "them), and for location pairs (equal scale) of " + ", ".join(_LOG_CONCAVE_LOCATION)
        + "; a grid could miss crossings of any other law and break validity. Use "
        "statistic='tslr' (distribution-free, no normaliser), or discretise the data "
        "for the exact discrete laws."
    )
    if None in fams:
        return None, refused
    ends = [v for d in (null, alternative) for v in d.support() if np.isfinite(v)]
    if fams[0][0] in _LOG_CONCAVE_LOCATION or fams[1][0] in _LOG_CONCAVE_LOCATION:
        (n0, sh0, _, s0), (n1, sh1, _, s1) = fams
        if (n0, sh0, s0) != (n1, sh1, s1):
            return None, refused
        return np.array(ends, dtype=float), None
    breaks = list(ends)
    for lo0, hi0, n0, d0 in _pieces(null, fams[0]):
        for lo1, hi1, n1, d1 in _pieces(alternative, fams[1]):
            lo, hi = max(lo0, lo1), min(hi0, hi1)
            if not lo < hi:
                continue
            breaks += [v for v in (lo, hi) if math.isfinite(v)]
            deriv = np.polysub(np.polymul(n1, d0), np.polymul(n0, d1))
            breaks += _real_roots(deriv, lo, hi)
    return np.array(breaks, dtype=float), None


class _Laws:
    """Common interface. ``L`` may be +inf (q > 0 = p) or -inf (p > 0 = q)."""

    exact = True
    n_features = 1
    # Whether E* at a new clip range is cheap (closed forms or finite sums): the
    # planner searches clip ranges only then (univariate quadrature costs ~1 s each).
    fast_rates = False

    #: Rows per chunk of the fused release (``_merge.fused_integer_sum``) and of
    #: :meth:`check_rows`: large enough that scipy's per-call overhead is negligible,
    #: small enough that the temporaries stay far below the data.
    chunk_rows = 1 << 16

    def log_ratio(self, X):
        """L for each row of X; ``ValueError`` for rows outside the null's support."""
        raise NotImplementedError

    def _null_log_density(self, X):
        """log p of each row (any non-finite value: outside the null's support)."""
        raise NotImplementedError

    def check_rows(self, X):
        """Refuse (``ValueError``, as :meth:`log_ratio`) rows outside the null's support,
        keeping nothing: the null's log-density only, chunk by chunk, every chunk read
        before refusing (the time does not say where the row is)."""
        inside = True
        with np.errstate(all="ignore"):  # reads the data: no warning may depend on it
            for start in range(0, X.shape[0], self.chunk_rows):
                lp = self._null_log_density(X[start:start + self.chunk_rows])
                inside &= bool(np.isfinite(lp).all())
        if not inside:
            self._outside()

    def tails(self, lo, hi):
        """(P(L < lo), Q(lo <= L <= hi), P(L > hi)) for lo <= hi."""
        raise NotImplementedError

    def expect(self, h, under, breaks=()):
        """E[h(L)] under ``under`` in {"P", "Q"}; h maps arrays of L (finite or inf)."""
        raise NotImplementedError

    def l_range(self):
        """(inf, sup) of L over the null's support (may be infinite)."""
        return -math.inf, math.inf

    def slack(self, lo, hi, total):
        """Upper bound on E_P[clip(e^L, e^lo, e^hi)] minus ``total``, its value from
        :meth:`tails`: 0 where the tails are exact sums or closed forms."""
        return 0.0

    @staticmethod
    def _outside():
        # What kind of problem, never how many rows or which values: the refusal
        # reveals one bit (the data left the declared domain).
        raise ValueError(
            "X has values outside the support of the null distribution (where its "
            "density or mass is 0, or its log-density is not finite in float64); the "
            "data domain of the test is the null's support: remove or map such rows "
            "with a public rule before the test."
        )


class _DiscreteLaws(_Laws):
    fast_rates = True

    def __init__(self, null, alternative):
        self.null, self.alternative = null, alternative
        lo, hi = null.support()
        qlo, qhi = alternative.support()
        finite = all(np.isfinite(v) for v in (lo, hi, qlo, qhi))
        if finite and max(hi, qhi) - min(lo, qlo) + 1 <= _MAX_SUPPORT:
            xs = np.arange(int(min(lo, qlo)), int(max(hi, qhi)) + 1, dtype=float)
        else:
            self.exact = False
            a = min(null.ppf(_TAIL), alternative.ppf(_TAIL))
            b = max(null.isf(_TAIL), alternative.isf(_TAIL))
            xs = np.arange(a, b + 1, dtype=float)
        lp, lq = null.logpmf(xs), alternative.logpmf(xs)
        keep = np.isfinite(lp) | np.isfinite(lq)
        self.xs, self.wP, self.wQ = xs[keep], np.exp(lp[keep]), np.exp(lq[keep])
        with np.errstate(divide="ignore", invalid="ignore"):
            self.L = lq[keep] - lp[keep]
        # L never NaN (a point with both masses 0 is dropped): sorted by L, the sets of
        # :meth:`tails` are slices (lists: a bisection and a fsum per set)
        order = np.argsort(self.L, kind="stable")
        self._by_l = tuple(a[order].tolist() for a in (self.L, self.wP, self.wQ))

    def log_ratio(self, X):
        # reads the data: no floating-point warning may depend on it
        with np.errstate(all="ignore"):
            x = X[:, 0]
            lp = self.null.logpmf(x)
            bad = ~np.isfinite(lp)
            if bad.any():
                self._outside()
            return self.alternative.logpmf(x) - lp

    def _null_log_density(self, X):
        return self.null.logpmf(X[:, 0])

    def tails(self, lo, hi):
        # fsum is correctly rounded, so the order of the summands does not matter: the
        # same sets give the same floats as the boolean masks of L
        if math.isnan(lo) or math.isnan(hi):  # no order to bisect: masks
            L = self.L
            return (math.fsum(self.wP[L < lo]), math.fsum(self.wQ[(L >= lo) & (L <= hi)]),
                    math.fsum(self.wP[L > hi]))
        by_l, w_p, w_q = self._by_l
        i = bisect.bisect_left(by_l, lo)   # L < lo: [0, i)
        j = bisect.bisect_right(by_l, hi)  # L <= hi: [0, j)
        return math.fsum(w_p[:i]), math.fsum(w_q[i:j]), math.fsum(w_p[j:])

    def expect(self, h, under, breaks=()):
        w = self.wP if under == "P" else self.wQ
        pos = w > 0
        return math.fsum(w[pos] * h(self.L[pos]))

    def l_range(self):
        L = self.L[self.wP > 0]
        return float(L.min()), float(L.max())


class _GaussianLaws(_Laws):
    """N(mu_P, S) vs N(mu_Q, S): L ~ N(-s2/2, s2) under P and N(s2/2, s2) under Q."""

    fast_rates = True

    def __init__(self, null, alternative, mu_p, mu_q, cov):
        self.null, self.alternative = null, alternative
        self.n_features = mu_p.size
        diff = mu_q - mu_p
        try:
            w = np.linalg.solve(cov, diff)
        except np.linalg.LinAlgError:
            w = np.full(diff.shape, np.nan)
        self.s2 = float(diff @ w) if np.all(np.isfinite(w)) else math.nan
        if not (math.isfinite(self.s2) and self.s2 >= 0):
            raise ValueError(
                f"null={describe_law(null)} and alternative={describe_law(alternative)}: "
                "the likelihood ratio of these normal laws is not finite in float64 "
                "(singular covariance, or a shift too large against the scale)."
            )
        self.s = math.sqrt(self.s2)
        # L = (x - mu_P - diff/2)·w. The centre is subtracted in two exact-as-possible
        # steps (x - mu_P is exact near mu_P, diff/2 is exact) instead of subtracting
        # the rounded midpoint (mu_P + mu_Q)/2, whose rounding error, at a location
        # large against the scale, shifted L by up to half a spacing times |w|. For
        # mu_P = 0 both are the same floats. The product runs on w·2^-k (k public) and
        # is scaled back: exact for ordinary rows (powers of two), and rows near
        # ±1e308 in several columns overflow to one signed infinity instead of
        # inf − inf = NaN (a NaN would escape the clip).
        self.mu_p, self.half = mu_p, diff / 2.0
        total = float(np.sum(np.abs(w)))
        self.shift_bits = max(0, math.ceil(math.log2(2.0 * total))) if total > 0 else 0
        self.w = w
        self._w_scaled = np.ldexp(w, -self.shift_bits)

    #: The Gaussian log-ratio is a few cheap passes: chunks that stay in cache.
    chunk_rows = 1 << 14

    def log_ratio(self, X):
        # reads the data: no floating-point warning may depend on it
        with np.errstate(all="ignore"):
            centred = X - self.mu_p - self.half
            if self.n_features == 1:
                # one column: the product of the (n, 1) @ (1,) matmul (itself a product,
                # up to the sign of a zero), without the matmul's overhead (~8 passes)
                out = np.multiply(centred[:, 0], self._w_scaled[0])
            else:
                out = centred @ self._w_scaled
            if 0 < self.shift_bits <= 1023:
                # ldexp by k >= 0 is the product by 2^k, exact (overflow: inf in both);
                # the multiplication is about 10 passes cheaper than ldexp's loop
                np.multiply(out, math.ldexp(1.0, self.shift_bits), out=out)
            elif self.shift_bits:  # 2^k itself overflows
                np.ldexp(out, self.shift_bits, out=out)
            return out

    def check_rows(self, X):
        """Nothing to check: every finite row is in the support (R^d), and finiteness
        is checked by the caller (``check_finite``) before the plan."""

    def _mean(self, under):
        return -self.s2 / 2 if under == "P" else self.s2 / 2

    def tails(self, lo, hi):
        if self.s == 0:
            return float(lo > 0), float(lo <= 0 <= hi), float(hi < 0)
        mp, mq = self._mean("P"), self._mean("Q")
        s = self.s
        return (
            float(special.ndtr((lo - mp) / s)),
            float(special.ndtr((hi - mq) / s) - special.ndtr((lo - mq) / s)),
            float(special.ndtr(-(hi - mp) / s)),
        )

    def expect(self, h, under, breaks=()):
        """E[h(L)] under ``under`` ("P" or "Q"); planning and reporting only.

        With ``breaks`` (the kinks of h; h analytic between them) by Gauss-Legendre
        panels in z = (L − mean)/s split at the breaks (:func:`_normal_panels`,
        ~1e-15 relative for the e-statistics' h); without, by the quantile grid of
        4000 panels (kinks inside panels: ~1e-9).
        """
        if self.s == 0:
            return float(h(np.array([0.0]))[0])
        m = self._mean(under)
        if breaks:
            z, w = _normal_panels(tuple((float(b) - m) / self.s for b in breaks), self.s)
            return _weighted_sum(w, h(z * self.s + m))
        if not hasattr(self, "_nodes"):
            u, self._w = _quantile_nodes()
            self._nodes = special.ndtri(u) * self.s
        return _weighted_sum(self._w, h(self._nodes + m))

    def clip_mean_q(self, lo, hi):
        """E_Q[clip(L, lo, hi)] in closed form (truncated normal moments)."""
        m, s = self._mean("Q"), self.s
        if s == 0:  # P = Q: L = 0
            return float(np.clip(0.0, lo, hi))
        a, b = (lo - m) / s, (hi - m) / s
        Pa, Pb = special.ndtr(a), special.ndtr(b)
        pdf = stats.norm.pdf
        return float(lo * Pa + hi * (1 - Pb) + m * (Pb - Pa) + s * (pdf(a) - pdf(b)))


#: Bisection steps per evaluation of L in :meth:`_UnivariateLaws._crossings` (2^5 - 1
#: midpoints a cell): scipy's overhead per logpdf call outweighs 31 points.
_BISECT_DEPTH = 5


class _Cellwise:
    """Predicates chosen per cell of a crossing search: cell c uses ``preds[which[c]]``
    (each an elementwise predicate of L)."""

    def __init__(self, preds, which):
        self.preds, self.which = preds, which

    def at(self, g, cells):
        """The predicate of each value's cell, applied to the values ``g``."""
        return np.where(self.which[cells], self.preds[1](g), self.preds[0](g))


def _apply(pred, g, cells):
    """``pred`` at the values ``g`` of the cells ``cells`` (a :class:`_Cellwise`
    chooses per cell; any other predicate is the same for every cell)."""
    return pred.at(g, cells) if isinstance(pred, _Cellwise) else pred(g)


class _UnivariateLaws(_Laws):
    """Univariate continuous laws with densities; crossings located by bisection.

    With ``breaks`` (from :func:`_certify`) L is monotone on every open cell between
    consecutive evaluation points, so each one-sided set {L < t} meets a cell in one
    interval whose end bisection locates: the tail probabilities are exact. The only
    places not covered are the two tails beyond the grid and the two-ulp slivers
    around the support ends (where L may jump); their masses bound the error
    (:meth:`slack`). Without ``breaks`` (``exact = False``, reason ``why_inexact``)
    only the quantile-grid expectations used for planning are available.
    """

    def __init__(self, null, alternative, breaks=None, why=None):
        self.null, self.alternative = null, alternative
        self.exact, self.why_inexact = breaks is not None, why
        u = np.concatenate([[_TAIL], np.linspace(0, 1, 4001)[1:-1], [1 - _TAIL]])
        pts = [null.ppf(u), alternative.ppf(u)]
        ends = np.array([v for d in (null, alternative) for v in d.support()], dtype=float)
        ends = ends[np.isfinite(ends)]
        if breaks is not None:
            pts.append(breaks)
        grid = np.unique(np.concatenate([np.asarray(p, dtype=float) for p in pts]))
        grid = grid[np.isfinite(grid)]
        # L may jump at a support end: evaluate just inside each side instead.
        sliver = np.concatenate([np.nextafter(ends, -np.inf), np.nextafter(ends, np.inf)])
        self.grid = np.unique(np.concatenate([grid[~np.isin(grid, ends)], sliver]))
        self._g = self._lr(self.grid)
        lo_s, hi_s = np.nextafter(ends, -np.inf), np.nextafter(ends, np.inf)

        # P mass of the uncovered set: the tails beyond the grid and the slivers
        self._unc_p = float(null.cdf(self.grid[0])) + float(null.sf(self.grid[-1])) + \
            math.fsum(np.clip(null.cdf(hi_s) - null.cdf(lo_s), 0.0, None))

    def _lr(self, x):
        # public laws only, but log(0) at a support edge must not print: -inf is handled
        with np.errstate(divide="ignore", invalid="ignore"):
            lp, lq = self.null.logpdf(x), self.alternative.logpdf(x)
            out = lq - lp
        out = np.where(np.isneginf(lp) & np.isneginf(lq), np.nan, out)
        return out

    def log_ratio(self, X):
        # reads the data: no floating-point warning may depend on it
        with np.errstate(all="ignore"):
            x = X[:, 0]
            lp = self.null.logpdf(x)
            bad = ~np.isfinite(lp)
            if bad.any():
                self._outside()
            return self.alternative.logpdf(x) - lp

    def _null_log_density(self, X):
        return self.null.logpdf(X[:, 0])

    def _crossings(self, a, b, pred, fa=None):
        """Brackets (lo, hi) of adjacent floats with pred(lo) = pred(a) != pred(hi),
        by bisection of all cells [a_i, b_i] at once; the switch lies in [lo, hi].
        ``fa``: pred at a when known (grid points: their L is kept)."""
        a, b = a.copy(), b.copy()
        if fa is None:
            fa = _apply(pred, self._lr(a), np.arange(a.size))
        left = 2100  # enough halvings to reach adjacent floats from any range
        while left > 0:
            depth = min(_BISECT_DEPTH, left)
            left -= depth
            if not self._bisect_levels(a, b, fa, pred, depth):
                break
        return list(zip(a.tolist(), b.tolist(), strict=True))

    def _bisect_levels(self, a, b, fa, pred, depth):
        """``depth`` steps of plain bisection of every cell, in place, with one
        evaluation of L: the midpoints every outcome could lead to (a tree of
        2^depth - 1 per cell) are evaluated together, then each cell walks its path.
        The same midpoints and the same outcomes as one step at a time, so the same
        brackets; scipy's per-call overhead, which dominates, is paid once per
        ``depth`` steps. Returns False once no cell moves (every m is a or b)."""
        if a.size == 0:
            return False
        size = 1 << depth  # nodes 1 .. size - 1 are bisected; their children end a path
        lo, hi, mid = np.empty((2 * size, a.size)), np.empty((2 * size, a.size)), \
            np.empty((size, a.size))
        lo[1], hi[1] = a, b
        for level in range(depth):  # nodes 2^level .. 2^(level + 1) - 1, one level at once
            i = slice(1 << level, 2 << level)
            mid[i] = 0.5 * (lo[i] + hi[i])
            even, odd = slice(2 << level, 4 << level, 2), slice((2 << level) + 1, 4 << level, 2)
            lo[even], hi[even] = mid[i], hi[i]  # node 2i, same side as a: a = m
            lo[odd], hi[odd] = lo[i], mid[i]    # node 2i + 1, the switch side: b = m
        live = (mid[1:] != lo[1:size]) & (mid[1:] != hi[1:size])
        same = np.zeros((size - 1, a.size), dtype=bool)
        outcome = _apply(pred, self._lr(mid[1:][live]), np.nonzero(live)[1])
        same[live] = outcome == np.broadcast_to(fa, live.shape)[live]
        node = np.ones(a.size, dtype=np.int64)
        cols = np.arange(a.size)
        moved = False
        for _ in range(depth):
            todo = live[node - 1, cols]
            if not todo.any():
                break
            moved = True
            node = np.where(todo, 2 * node + ~same[node - 1, cols], node)
            # a cell that stops (m is a or b) stays at its node: m does not change
            a[todo], b[todo] = lo[node[todo], cols[todo]], hi[node[todo], cols[todo]]
        return moved

    def _switches(self, inside):
        """The grid cells [x_i, x_i+1] where ``inside`` switches: their ends (a, b) and
        ``inside`` at a (L at the grid points is kept: the same elementwise values)."""
        i = np.flatnonzero(inside[1:] != inside[:-1])
        return self.grid[i], self.grid[i + 1], inside[i]

    @staticmethod
    def _pieces(inside, brackets):
        """{x : pred(L(x))} as sorted disjoint intervals, and the crossing brackets,
        from ``inside`` = pred(L) on the grid and the brackets of its switches.

        ``pred`` must be one-sided (L < t or L > t): on a cell where L is monotone it
        then switches at most once, and the switch shows at the cell's ends. The
        interval ends are cut inside the brackets (adjacent floats).
        """
        edges = [-math.inf, *(0.5 * (a + b) for a, b in brackets), math.inf]
        # the pieces alternate between inside and outside, starting with inside[0]
        start = 0 if inside[0] else 1
        pieces = list(zip(edges[start:-1:2], edges[start + 1::2], strict=True))
        return pieces, brackets

    def _measure(self, dist, pieces):
        name = "_median_null" if dist is self.null else "_median_alternative"
        med = getattr(self, name, None)
        if med is None:  # one scipy call per law, not one per measure
            med = float(dist.median())
            setattr(self, name, med)
        if not pieces:
            return 0.0
        a, b = (np.array(v, dtype=float) for v in zip(*pieces, strict=True))
        # cdf differences left of the median, sf differences right of it: both keep
        # full relative precision in the far tails (one scipy call per kind, summed
        # piece by piece in order as before)
        left = b <= med
        diff = np.empty(a.size)
        if left.any():
            diff[left] = dist.cdf(b[left]) - dist.cdf(a[left])
        if not left.all():
            diff[~left] = dist.sf(a[~left]) - dist.sf(b[~left])
        total = 0.0
        for v in diff.tolist():
            total += v
        return total

    def _tails(self, lo, hi):
        # slack() follows tails() at the same (lo, hi): one entry, read and set whole
        last = getattr(self, "_last_tails", None)
        if last is not None and last[0] == (lo, hi):
            return last[1]
        out = self._compute_tails(lo, hi)
        self._last_tails = ((lo, hi), out)
        return out

    def _compute_tails(self, lo, hi):
        def nan_false(f):
            return lambda g: np.where(np.isnan(g), False, f(g))

        # the sets {L < lo} and {L > hi} (:meth:`_pieces`), their crossings searched
        # together: each cell bisects on its own predicate, so the brackets are the
        # same, with half the logpdf calls (scipy's overhead per call dominates)
        preds = (nan_false(lambda g: g < lo), nan_false(lambda g: g > hi))
        insides = [pred(self._g) for pred in preds]
        (a_b, b_b, f_b), (a_a, b_a, f_a) = (self._switches(inside) for inside in insides)
        brackets = self._crossings(np.concatenate([a_b, a_a]), np.concatenate([b_b, b_a]),
                                   _Cellwise(preds, np.arange(a_b.size + a_a.size) >= a_b.size),
                                   np.concatenate([f_b, f_a]))
        br_b, br_a = brackets[:a_b.size], brackets[a_b.size:]
        below, above = self._pieces(insides[0], br_b)[0], self._pieces(insides[1], br_a)[0]
        # The band {lo <= L <= hi} is the complement of the two one-sided sets: a band
        # can fit inside one monotone cell without showing at its ends, one-sided sets
        # cannot. As the measure of a set, its computed Q mass is never negative.
        cover, band, last = sorted(below + above), [], -math.inf
        for a, b in cover:
            if a > last:
                band.append((last, a))
            last = max(last, b)
        if last < math.inf:
            band.append((last, math.inf))
        masses = (self._measure(self.null, below), self._measure(self.alternative, band),
                  self._measure(self.null, above))
        return masses, br_b + br_a

    def tails(self, lo, hi):
        return self._tails(lo, hi)[0]

    def slack(self, lo, hi, total):
        """Upper bound on E_P[clip(e^L, e^lo, e^hi)] minus ``total``, its value from
        :meth:`tails`.

        Each term of the computed value is the measure of a set, hence >= 0 on any
        part of the line. On the uncovered set U (tails beyond the grid, slivers at
        the support ends) the true contribution is <= e^hi P(U); on each crossing
        bracket B (adjacent floats) it is <= e^hi P(B) and the computed one counts
        at most Q(B) too much; elsewhere the sets are exact, up to the rounding of
        the cdfs, covered by a relative 1e-12 of the total.
        """
        c2 = math.exp(hi)
        brackets = self._tails(lo, hi)[1]
        br = 0.0
        if brackets:  # one scipy call per law and end, the terms summed as before
            a, b = (np.array(v, dtype=float) for v in zip(*brackets, strict=True))
            p_mass = (self.null.cdf(b) - self.null.cdf(a)).tolist()
            q_mass = (self.alternative.cdf(b) - self.alternative.cdf(a)).tolist()
            br = math.fsum(c2 * p + q for p, q in zip(p_mass, q_mass, strict=True))
        return c2 * self._unc_p + br + 1e-12 * total

    def expect(self, h, under, breaks=()):
        if not hasattr(self, "_nodes"):
            u, self._w = _quantile_nodes()
            self._nodes = {k: self._lr(d.ppf(u)) for k, d in
                           (("P", self.null), ("Q", self.alternative))}
        L = self._nodes[under]
        ok = ~np.isnan(L)
        return _weighted_sum(self._w[ok], h(L[ok]))


class _MonteCarloLaws(_Laws):
    """Any pair with log densities; expectations by a fixed-seed Monte Carlo.

    Used only to *plan* (choose the bet) for the distribution-free tsLR
    statistic, whose validity does not depend on these numbers.
    """

    exact = False

    def __init__(self, null, alternative, dim, n_draws=200_000):
        self.null, self.alternative = null, alternative
        self.n_features = dim
        rng = np.random.default_rng(0)
        self._draws = {
            key: self._lr(np.asarray(d.rvs(size=n_draws, random_state=rng)).reshape(n_draws, -1))
            for key, d in (("P", null), ("Q", alternative))
        }

    def _logpdf(self, dist, X):
        return np.atleast_1d(dist.logpdf(X if isinstance(dist, _MVN_FROZEN) else X[:, 0]))

    def _lr(self, X):
        return self._logpdf(self.alternative, X) - self._logpdf(self.null, X)

    def log_ratio(self, X):
        # reads the data: no floating-point warning may depend on it
        with np.errstate(all="ignore"):
            lp = self._logpdf(self.null, X)
            bad = ~np.isfinite(lp)
            if bad.any():
                self._outside()
            return self._logpdf(self.alternative, X) - lp

    def _null_log_density(self, X):
        return self._logpdf(self.null, X)

    def expect(self, h, under, breaks=()):
        return float(np.mean(h(self._draws[under])))
