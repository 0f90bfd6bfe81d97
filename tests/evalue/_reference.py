"""Test oracles of the e-value family: independent computations that the tests in
tests/evalue/ check the library against (exact pmfs and cdfs of the noises, exact laws
of releases, brute-force and vectorised exact e-processes, independent quadratures,
KL and rate formulas), one definition each; and, at the end, copies of the code that
this family's speed-ups replaced (test_speedups.py's regression oracles).

Imported by full name, ``from tests.evalue._reference import ...``: pyproject's pytest
options put the repository root on sys.path (``pythonpath``), and tests/ is a namespace
package, so two families' ``_reference.py`` never clash.

Where two test files had computed the same law differently (scipy's discrete Laplace,
its pmf written with tanh(r/2), or with (1 − e^{−r}) / (1 + e^{−r}); a searched and a
closed-form tail cut), each computation is kept under its own name, and
test_reference.py checks that they agree.
"""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import integrate, optimize, special, stats

from skdptest import optimal_rate
from skdptest._noise import (
    _INT64_LIMIT,
    discrete_laplace_log_pmf,
    log_geometric_mixture_at,
    quantise_rate,
)

P0 = 0.3  # the Bernoulli null of the tests

# ---------------------------------------------------------------------------- laws

def bern_pair(q):
    """The null Bernoulli(P0) and the alternative Bernoulli(q)."""
    return stats.bernoulli(P0), stats.bernoulli(q)


def bernoulli_e_star(q, eps):
    """E* clipped at log-range ``eps`` on {0, 1}, from the closed form of evalues.md
    (independent of the solver)."""
    lr = np.array([(1 - q) / (1 - P0), q / P0])
    if lr.max() / lr.min() <= math.exp(eps):
        return lr
    c1 = 1.0 / (1 - P0 + P0 * math.exp(eps))
    return np.clip(lr, c1, math.exp(eps) * c1)


# --------------------------- the noise: discrete Laplace (two-sided geometric) law

def dlaplace_pmf_scipy(z, eps):
    """P(Z = z) = tanh(ε/2) e^{−ε|z|}, from scipy's discrete Laplace (independent)."""
    return stats.dlaplace.pmf(z, eps)


def tail_cut_search(eps, tol=1e-15):
    """M with P(|Z| > M) < tol, and that bound: the mass of Y = K + Z outside
    [−M, n + M] is at most P(|Z| > M) = 2 tanh(ε/2) e^{−ε(M+1)} / (1 − e^{−ε})."""
    M = 0
    while (tail := 2 * math.tanh(eps / 2) * math.exp(-eps * (M + 1)) / -math.expm1(-eps)) >= tol:
        M += 1
    return M, tail


def geometric_difference_pmf(z, rate, g_max=4000):
    """Discrete Laplace law of rate r, as the law of G1 − G2 with G1, G2 iid
    Geometric(1 − e^{−r}) on {1, 2, ...} (an independent construction of the law the
    exact sampler draws), by summing scipy's geometric pmfs."""
    g = np.arange(1, g_max + 1)
    pg = stats.geom.pmf(g, -math.expm1(-rate))
    return np.array([np.sum(stats.geom.pmf(g + zi, -math.expm1(-rate)) * pg) for zi in z])


def geometric_audit_pvalue(z, eps, half_width=5):
    """Chi-square goodness of fit of integer draws to the two-sided geometric law at
    the sampler's rate quantise_rate(ε), on the values |z| <= half_width with both
    tails pooled."""
    assert np.all(z == np.round(z))
    values = np.arange(-half_width, half_width + 1)
    observed = [np.sum(z < -half_width), *[np.sum(z == v) for v in values],
                np.sum(z > half_width)]
    law = stats.dlaplace(quantise_rate(eps))
    probs = [law.cdf(-half_width - 1), *law.pmf(values), law.sf(half_width)]
    expected = np.array(probs) * z.size
    assert math.fsum(probs) == pytest.approx(1.0, abs=1e-12) and expected.min() >= 5
    return stats.chisquare(observed, expected).pvalue


def dlaplace_cdf(k, rate):
    """P(K <= k) of the discrete Laplace law P(K = k) ∝ e^{−rate|k|}, written out."""
    p = math.exp(-rate)
    k = np.asarray(k, dtype=float)
    with np.errstate(over="ignore"):
        return np.where(k >= 0, 1 - p ** (k + 1) / (1 + p), p ** (-k) / (1 + p))


def dlaplace_log_pmf(k, rate):
    """log P(K = k) of the discrete Laplace law, written out (independent of _noise)."""
    return math.log(math.tanh(rate / 2)) - rate * np.abs(k)


def log_mgf_bounds(rate, g, cut):
    """(lower, upper) bounds of log E[e^{gK}]: the sum over |k| <= cut, and that sum plus
    the certified tails Σ_{|k| > cut} tanh(r/2) e^{−(r ∓ g)|k|}
    <= 2 tanh(r/2) e^{−(r − g)(cut + 1)} / (1 − e^{−(r − g)})."""
    k = np.arange(-cut, cut + 1)
    inner = special.logsumexp(dlaplace_log_pmf(k, rate) + g * k)
    tail = (math.log(2 * math.tanh(rate / 2)) - (rate - g) * (cut + 1)
            - math.log(-math.expm1(-(rate - g))))
    return float(inner), float(np.logaddexp(inner, tail))


def tail_cut_closed_form(rate, tol=1e-16):
    """(cut, bound) with P(|K| > cut) <= bound < tol, in closed form: the bound
    2 e^{−r(cut+1)} / (1 − e^{−r}) drops the factor tanh(r/2) < 1 of the exact tail, so
    it is looser than :func:`tail_cut_search`'s and ``cut`` is at least that one's M."""
    cut = int(-math.log(tol * -math.expm1(-rate) / 2) / rate) + 1
    return cut, 2 * math.exp(-rate * (cut + 1)) / -math.expm1(-rate)


def chi2_pvalue_written(z, rate, half_width):
    """Chi-square goodness of fit of draws ``z`` to the discrete Laplace law at ``rate``
    itself (no quantisation, unlike :func:`geometric_audit_pvalue`), on |z| <= half_width
    with both tails pooled, the probabilities from :func:`dlaplace_log_pmf`."""
    values = np.arange(-half_width, half_width + 1)
    p = np.exp(dlaplace_log_pmf(values, rate))
    tail = (1 - p.sum()) / 2
    observed = [np.sum(z < -half_width), *[np.sum(z == v) for v in values],
                np.sum(z > half_width)]
    expected = np.array([tail, *p, tail]) * z.size
    assert expected.min() >= 5
    return stats.chisquare(observed, expected).pvalue


def geometric_pmf_written(z, rate):
    """Two-sided geometric law P(Z = z) = tanh(rate/2) exp(-rate |z|), written out."""
    a = math.exp(-rate)
    return (1 - a) / (1 + a) * np.exp(-rate * np.abs(z))


# ---------------------------------------------------------- exact laws of releases

def binomial_release_pmf(n, prob, eps, M):
    """P(Y = y) on y = −M, ..., n + M for Y = Binom(n, prob) + Z, by convolving scipy's
    binomial pmf with the noise pmf on every z that can reach those y (no truncation)."""
    z = np.arange(-(n + M), n + M + 1)
    full = np.convolve(stats.binom.pmf(np.arange(n + 1), n, prob), dlaplace_pmf_scipy(z, eps))
    return full[n:2 * n + 2 * M + 1]  # index j is y = j − (n + M)


def law_of_sum(masses, n):
    """Law of T, by n direct convolutions (independent of the shipped code)."""
    law = np.array([1.0])
    for _ in range(n):
        law = np.convolve(law, masses)
    return law


def validity_sum(model, law, n, rate, against="P"):
    """Σ_y f(y) E(y) with f built from an independent law of T under the hypothesis
    the e-value is against."""
    t = np.arange(law.size)
    ys = np.arange(-int(60 / rate), law.size + int(60 / rate))
    f = np.array([np.dot(law, geometric_pmf_written(y - t, rate)) for y in ys])
    return float(np.sum(f * np.exp(model.log_lr(ys, n, against=against))))


# -------------------------------------------------- KL, rates and e-power ceilings

def family_ceiling(null, alt, n, eps, grid=40):
    """max over r of n R_r + log(1 − (r/ε)²), from the public ``optimal_rate``
    (independent of the planner's search): a coarse grid, then a bounded scalar search
    between the grid points around its best (an attained value: a lower bound of the
    maximum, closer to it than the former 300-point grid for a tenth of the calls)."""

    def objective(r):
        return n * optimal_rate(null, alt, r).rate + math.log1p(-(r / eps) ** 2)

    rs = np.linspace(1e-3, 1 - 1e-6, grid) * eps
    vals = [objective(r) for r in rs]
    i = int(np.argmax(vals))
    fine = optimize.minimize_scalar(lambda r: -objective(r), method="bounded",
                                    bounds=(rs[max(i - 1, 0)], rs[min(i + 1, grid - 1)]),
                                    options={"xatol": 1e-6 * eps})
    if -fine.fun > vals[i]:
        return -fine.fun, fine.x
    return vals[i], rs[i]


def binomial_laws(n, p, q):
    """The pmfs of Binom(n, p) and Binom(n, q) on s = 0..n (scipy)."""
    s = np.arange(n + 1)
    return stats.binom.pmf(s, n, p), stats.binom.pmf(s, n, q)


def kl_columns(cols, P, Q):
    """Per row c of ``cols`` (the likelihood c(s), s = 0..n, of one output of a
    mechanism), that output's KL term a log(a / b), with a = c·Q and b = c·P."""
    a, b = cols @ Q, cols @ P
    return a * np.log(a / b)


def dp_walks(n, eps):
    """All 2^n extreme rays of the ε-DP cone on {0..n}, normalised at s = 0."""
    steps = np.array(list(itertools.product([-eps, eps], repeat=n)))
    return np.exp(np.concatenate([np.zeros((steps.shape[0], 1)), steps.cumsum(axis=1)], 1))


def geometric_kl(n, p, q, eps, pad=80):
    """KL of S + two-sided geometric noise by direct summation over the integers."""
    P, Q = binomial_laws(n, p, q)
    y = np.arange(-pad, n + pad + 1)
    k = np.arange(n + 1)
    kern = np.tanh(eps / 2) * np.exp(-eps * np.abs(y[:, None] - k[None, :]))
    mp, mq = kern @ P, kern @ Q
    return math.fsum(mq * np.log(mq / mp))


def bern_kl(a, b):
    """KL(Bern(a) ‖ Bern(b)), written out (0 log 0 = 0)."""
    return sum(
        pa * math.log(pa / pb) for pa, pb in ((a, b), (1 - a, 1 - b)) if pa > 0
    )


def variational_rate(p, q, eps):
    """R_ε = inf_r KL(Bern(r)‖Bern(p)) + ε TV(Bern(r), Bern(q)), by direct minimisation."""
    obj = lambda r: bern_kl(r, p) + eps * abs(r - q)  # noqa: E731
    grid = np.linspace(1e-6, 1 - 1e-6, 20001)
    r0 = grid[np.argmin([obj(r) for r in grid])]
    res = optimize.minimize_scalar(obj, bounds=(max(r0 - 1e-3, 1e-9), min(r0 + 1e-3, 1 - 1e-9)),
                                   method="bounded", options={"xatol": 1e-12})
    return res.fun


# ------------------------------------------- independent densities and quadratures

def norm_logpdf(x, mu, sd):
    """log density of N(mu, sd^2), written out: the integrands of test_optimal.py call
    it once per point, where a frozen scipy law costs ~100 µs a call (checked against scipy in
    test_closed_form_gaussian_densities_match_scipy)."""
    z = (x - mu) / sd
    return -0.5 * z * z - math.log(sd) - 0.5 * math.log(2 * math.pi)


def crossings(g, levels, lo=-40.0, hi=40.0):
    """Roots of g(x) = level, bracketed on a fine grid and polished by brentq."""
    xs = np.linspace(lo, hi, 200_001)
    roots = []
    for t in levels:
        s = np.sign(g(xs) - t)
        for i in np.flatnonzero(s[1:] != s[:-1]):
            roots.append(optimize.brentq(lambda x, t=t: g(x) - t, xs[i], xs[i + 1], xtol=1e-15))
    return sorted(roots)


def exact_mass_oscillating(log_e):
    """E_P[E] for P = U(0, 1) and a statistic E = exp(log_e(L)), by exact cell integrals:
    half of [0, 1] (the even cells) has q/p = 0.5, the other half q/p = 1.5."""
    e = np.exp(log_e(np.log(np.array([0.5, 1.5]))))
    return 0.5 * e[0] + 0.5 * e[1]


def band_levels(log_e):
    """The L-levels where log_e(L) = clip(L - shift, log c1, log c2) has its kinks,
    read off the function itself (log_e - L is constant inside the band)."""
    L = np.linspace(-60, 60, 240_001)
    v = log_e(L)
    inside = (v > v.min()) & (v < v.max())
    if not inside.any():
        return []
    shift = float(np.median((L - v)[inside]))
    return [float(v.min()) + shift, float(v.max()) + shift]


def independent_mass(null, alt, log_e):
    """E_P[E] for E = exp(log_e(log q/p)) by adaptive quadrature in quantile space,
    E_P[E] = ∫_0^1 E(F^{-1}(u)) du (bounded integrand, no tails), split at the kinks
    (crossings of L with the clip levels found on a fine grid and polished by brentq).
    Returns (value, QUADPACK error estimate)."""

    def L(x):
        with np.errstate(invalid="ignore", divide="ignore"):
            return alt.logpdf(x) - null.logpdf(x)

    def h(u):
        return float(np.exp(log_e(np.array([L(null.ppf(u))])))[0])

    u = np.linspace(0, 1, 100_001)[1:-1]
    g = L(null.ppf(u))
    points = []
    for t in band_levels(log_e):
        s = np.sign(g - t)
        for i in np.flatnonzero(s[1:] != s[:-1]):
            points.append(optimize.brentq(lambda v, t=t: L(null.ppf(v)) - t, u[i], u[i + 1],
                                          xtol=1e-15))
    value, err = integrate.quad(h, 0.0, 1.0, points=sorted(points) or None, limit=1000,
                                epsabs=1e-13, epsrel=1e-13)
    return value, err


def exact_gaussian_log_ratio(x, mu_p, mu_q, var):
    """log q/p(x) for N(mu_q, var) against N(mu_p, var) in exact rational arithmetic,
    rounded once: (mu_q − mu_p) / var · (x − mu_p − (mu_q − mu_p) / 2)."""
    d = Fraction(mu_q) - Fraction(mu_p)
    return float(d / Fraction(var) * (Fraction(x) - Fraction(mu_p) - d / 2))


# --------------------- confidence sequence: exact likelihood and exact e-processes

def exact_log_f(y, n, p, rate):
    """Independent exact log P(Binom(n, p) + Z = y): every term of the convolution."""
    return float(log_geometric_mixture_at(np.array([float(y)]),
                                          stats.binom.logpmf(np.arange(n + 1), n, p),
                                          rate)[0])


def exact_e_process(ys, ns, rate, prior, ps):
    """log M_K(p) on ``ps`` with the exact likelihood and every alternative of the
    mixture (brute force: the weights term by term from their definition)."""
    def log_l(p):
        return sum(exact_log_f(y, n, p, rate) for y, n in zip(ys, ns, strict=True))

    def weights(p):
        size = len(prior.q)
        if prior.scale is None:
            return [1 / size] * size
        out = [prior.eta / size] * size
        taus = list(np.atleast_1d(prior.scale))
        for tau in taus:
            phi = [math.exp(-(q - p) ** 2 / (2 * tau**2)) for q in prior.q]
            for j in range(size):
                out[j] += (1 - prior.eta) * phi[j] / sum(phi) / len(taus)
        return out

    ell = [log_l(q) for q in prior.q]
    return np.array([math.log(sum(w * math.exp(e) for w, e in zip(weights(p), ell, strict=True)))
                     - log_l(p) for p in ps])


def log_binom_rows(n, cands):
    """log Binom(s; n, q), rows q in ``cands``, columns s = 0..n (0 log 0 = 0)."""
    s = np.arange(n + 1.0)
    q = np.asarray(cands, dtype=float)[:, None]
    return (special.gammaln(n + 1.0) - special.gammaln(s + 1.0) - special.gammaln(n - s + 1.0)
            + special.xlogy(s, q) + special.xlog1py(n - s, -q))


def log_f_exact(y, n, cands, rate):
    """log f(y; q) = log P(Binom(n, q) + Z = y), Z discrete Laplace at ``rate``
    (pmf tanh(r/2) e^{-r abs(z)}): rows q in ``cands``, columns the noisy counts ``y``.
    The convolution over the count's whole support is one matrix product (binomial
    rows scaled by their maximum (at most 1), the noise kernel at each distinct y).
    Only an f below about e^-708 can underflow to 0: :func:`vector_e_process`
    checks that the mixture it enters is far above that."""
    logb = log_binom_rows(n, cands)
    top = logb.max(axis=1, keepdims=True)
    uy, inv = np.unique(np.asarray(y, dtype=float), return_inverse=True)
    s = np.arange(n + 1.0)[:, None]
    kernel = math.tanh(rate / 2) * np.exp(-rate * np.abs(uy[None, :] - s))
    with np.errstate(divide="ignore"):
        return (np.log(np.exp(logb - top) @ kernel) + top)[:, inv.ravel()]


def log_weights(prior, ps):
    """log w_j(p) of the mixture, rows p in ``ps``, columns the grid q_j (written from
    its definition, with the exact normalisers Z_k(p) = sum_m phi_km(p))."""
    G = prior.q.size
    ps = np.asarray(ps, dtype=float)[:, None]
    if prior.scale is None:
        return np.full((ps.shape[0], G), -math.log(G))
    taus = np.atleast_1d(prior.scale)
    local = np.zeros((ps.shape[0], G))
    for tau in taus:
        phi = np.exp(-(prior.q[None, :] - ps) ** 2 / (2 * tau**2))
        local += phi / phi.sum(axis=1, keepdims=True) / taus.size
    return np.log(prior.eta / G + (1 - prior.eta) * local)


def vector_e_process(Y, ns, rate, prior, ps, log_f=log_f_exact):
    """log M_k(p) of the mixture e-process, exact likelihood, for every release k
    (axis 0), candidate p in ``ps`` (axis 1) and stream (rows of Y, axis 2)."""
    cands = np.r_[prior.q, np.asarray(ps, dtype=float)]
    w = np.exp(log_weights(prior, ps))  # once, not once per release
    ell = np.zeros((cands.size, Y.shape[0]))
    out = []
    for k, n in enumerate(ns):
        ell += log_f(Y[:, k], int(n), cands, rate)
        top = ell[:prior.q.size].max(axis=0)
        log_n = np.log(w @ np.exp(ell[:prior.q.size] - top)) + top
        # underflowed terms (each below e^-708 times its weight) change N by a factor
        # < 1 + e^-100
        assert np.all(log_n > -600)
        out.append(log_n - ell[prior.q.size:])
    return np.array(out)


def count_law(xs):
    """Exact law of the randomly rounded count of rows xs in [0, 1] (Poisson binomial)."""
    law = np.array([1.0])
    for x in xs:
        law = np.convolve(law, [1 - x, x])
    return law


def release_log_pmf(xs, rate, ys):
    """Exact log P(count + K = y) for y in ``ys``: the randomly rounded count of the rows
    ``xs`` (:func:`count_law`) plus discrete Laplace noise at ``rate``."""
    law = count_law(xs)
    return np.array([special.logsumexp(np.log(np.maximum(law, 1e-300))
                                       + discrete_laplace_log_pmf(y - np.arange(law.size),
                                                                  rate))
                     for y in ys])


def bisect_one_step_at_a_time(lr, a, b, pred, steps=2100):
    """Crossing brackets of every cell [a_i, b_i] by plain bisection, one midpoint per
    step and one evaluation of ``lr`` per step (the laws' search before it evaluated a
    tree of steps at once; it must give these brackets bit for bit)."""
    a, b = np.array(a, dtype=float), np.array(b, dtype=float)
    fa = pred(lr(a))
    for _ in range(steps):
        m = 0.5 * (a + b)
        todo = (m != a) & (m != b)
        if not todo.any():
            break
        same = pred(lr(m[todo])) == fa[todo]
        idx = np.flatnonzero(todo)
        a[idx[same]] = m[todo][same]
        b[idx[~same]] = m[todo][~same]
    return list(zip(a.tolist(), b.tolist(), strict=True))


# ------------------------------------- the code before this session's speed-ups
# Regression oracles of test_speedups.py: each is a copy of the library code a speed-up
# replaced, which the fast code must equal bit for bit.

def floor_to_grid_one_path(values, grid):
    """floor_to_grid before the speed-up, one numpy path for every size (the regression
    oracle of test_floor_to_grid_equals_its_reference_on_every_size_and_edge)."""
    if not (math.isfinite(grid) and grid > 0 and math.frexp(grid)[0] == 0.5):
        raise ValueError(f"grid must be a positive finite power of two, got {grid}.")
    values = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(values)):
        raise ValueError("values must be finite to be floored onto the grid.")
    with np.errstate(over="ignore", under="ignore"):
        q = np.floor(values / grid)
    q = np.where((q == 0) & (values < 0), -1.0, q)
    if np.any(q >= _INT64_LIMIT) or np.any(q < -_INT64_LIMIT):
        raise ValueError(f"values / grid overflows int64 (grid={grid}).")
    return q.astype(np.int64)


def solve_clip_ends_evaluated_twice(laws, epsilon):
    """_optimal._solve_clip before the speed-up, the bracket's ends evaluated twice (the
    regression oracle of test_solve_clip_equals_its_reference)."""
    from skdptest.evalue._optimal import _mass

    def f(a):
        return _mass(laws, a, epsilon)

    lo, hi = -1.0, 1.0
    while f(lo) >= 1.0:
        lo *= 2.0
    while f(hi) <= 1.0:
        hi *= 2.0
    return optimize.brentq(lambda a: f(a) - 1.0, lo, hi, xtol=1e-15,
                           rtol=4 * np.finfo(float).eps)


def lattice_tilt_ends_evaluated_twice(logm, j, target):
    """LatticeExact._tilt before the speed-up, the bracket's ends evaluated twice (the
    regression oracle of test_tilt_equals_its_reference)."""

    def gap(theta):
        logw = logm + theta * j
        return float(np.dot(np.exp(logw - special.logsumexp(logw)), j)) - target

    lo, hi = -1.0, 1.0
    while gap(lo) > 0 and lo > -1e4:
        lo *= 2
    while gap(hi) < 0 and hi < 1e4:
        hi *= 2
    return optimize.brentq(gap, lo, hi, xtol=1e-12)


def cs_log_binom_logs_by_gathers(s, n, log_p, log_q, c, rep, log_choose):
    """_csbounds._log_binom_logs before the speed-up (part of the regression oracle of
    test_likelihood_bounds_equal_the_previous_window_sums and its confidence bounds test)."""
    lp, lq = log_p[c][rep], log_q[c][rep]
    with np.errstate(invalid="ignore"):
        head = np.where(s == 0, 0.0, s * lp)
        tail = np.where(s == n, 0.0, (n - s) * lq)
    return log_choose + head + tail


def cs_log_choose_by_gathers(s, n, n_seg, rep):
    """_csbounds._log_choose before the speed-up (part of the regression oracle of
    test_likelihood_bounds_equal_the_previous_window_sums and its confidence bounds test)."""
    from skdptest.evalue import _csbounds as cb
    if int(n_seg.max()) >= cb._TABLE_MAX:
        return special.gammaln(n + 1.0) - special.gammaln(s + 1.0) \
            - special.gammaln(n - s + 1.0)
    table = special.gammaln(np.arange(1.0, int(n_seg.max()) + 2.0))
    si = s.astype(np.int64)
    return table[n_seg][rep] - table[si] - table[n_seg[rep] - si]


def cs_segment_lse_by_gathers(x, starts, rep):
    """_csbounds._segment_lse before the speed-up (part of the regression oracle of
    test_likelihood_bounds_equal_the_previous_window_sums and its confidence bounds test)."""
    m = np.maximum.reduceat(x, starts)
    safe = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.add.reduceat(np.exp(x - safe[rep]), starts)) + safe


def cs_segments_by_gathers(part, lengths, lo, hi, ys, ns, a, b, rate, log_norm, lower_only,
                           low, high):
    """_csbounds._segments before the speed-up, two-step gathers and fresh temporaries
    (the regression oracle of test_likelihood_bounds_equal_the_previous_window_sums and
    test_confidence_bounds_equal_the_previous_computation)."""
    from skdptest.evalue._csbounds import _log_binom, _log_pq, points_only
    idx = np.arange(lengths.size)[part]
    lens = lengths[part]
    k, c = np.unravel_index(idx, lo.shape)
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    rep = np.repeat(np.arange(idx.size), lens)
    s = lo.ravel()[idx][rep] + (np.arange(int(lens.sum())) - starts[rep])
    n = ns[k][rep].astype(float)
    log_choose = cs_log_choose_by_gathers(s, n, ns[k], rep)
    log_g = log_norm - rate * np.abs(ys[k][rep] - s)
    la = cs_log_binom_logs_by_gathers(s, n, *_log_pq(a), c, rep, log_choose)
    if lower_only:
        lmin = lmax = la if points_only(a, b) else np.minimum(
            la, cs_log_binom_logs_by_gathers(s, n, *_log_pq(b), c, rep, log_choose))
    else:
        lb = cs_log_binom_logs_by_gathers(s, n, *_log_pq(b), c, rep, log_choose)
        lmin = np.minimum(la, lb)
        lmax = np.maximum(la, lb)
        mid = np.flatnonzero((s > n * a[c][rep]) & (s < n * b[c][rep]))
        if mid.size:
            sm, nm = s[mid], n[mid]
            lmax[mid] = _log_binom(sm, nm, sm / nm, log_choose[mid])
    out_low = cs_segment_lse_by_gathers(lmin + log_g, starts, rep)
    out_high = out_low if lower_only else cs_segment_lse_by_gathers(lmax + log_g, starts, rep)
    low.ravel()[idx] = out_low
    high.ravel()[idx] = out_high


def cs_segment_lse_rows_by_gathers(x, starts):
    """_csbounds._segment_lse_rows before the speed-up (part of the regression oracle of
    test_likelihood_bounds_equal_the_previous_window_sums and its confidence bounds test)."""
    top = x.max(axis=1, keepdims=True)
    with np.errstate(divide="ignore"):
        return np.log(np.add.reduceat(np.exp(x - top), starts, axis=1)) + top


def univariate_tails_one_set_at_a_time(laws, lo, hi):
    """_UnivariateLaws._compute_tails before the speed-up, each one-sided set by its own
    crossing search (here plain bisection, one midpoint per step), the regression oracle
    of test_univariate_tails_equal_one_set_at_a_time."""

    def one_set(pred):
        inside = pred(laws._g)
        i = np.flatnonzero(inside[1:] != inside[:-1])
        brackets = bisect_one_step_at_a_time(laws._lr, laws.grid[i], laws.grid[i + 1], pred)
        edges = [-math.inf, *(0.5 * (a + b) for a, b in brackets), math.inf]
        start = 0 if inside[0] else 1
        return list(zip(edges[start:-1:2], edges[start + 1::2], strict=True)), brackets

    below, br_b = one_set(lambda g: np.where(np.isnan(g), False, g < lo))
    above, br_a = one_set(lambda g: np.where(np.isnan(g), False, g > hi))
    cover, band, last = sorted(below + above), [], -math.inf
    for a, b in cover:
        if a > last:
            band.append((last, a))
        last = max(last, b)
    if last < math.inf:
        band.append((last, math.inf))
    masses = (laws._measure(laws.null, below), laws._measure(laws.alternative, band),
              laws._measure(laws.null, above))
    return masses, br_b + br_a
