"""The speed-ups of the e-value family's hot paths give bit-identical results.

Each test runs the fast code and a copy of the code it replaced (the regression oracles
in tests/evalue/_reference.py) on the same inputs, edge cases included, and compares
with ``==`` / ``np.array_equal`` (never a tolerance).
"""

import math

import numpy as np
import pytest

from skdptest._noise import floor_to_grid
from tests.evalue._reference import (
    cs_segment_lse_rows_by_gathers,
    cs_segments_by_gathers,
    floor_to_grid_one_path,
    lattice_tilt_ends_evaluated_twice,
    solve_clip_ends_evaluated_twice,
    univariate_tails_one_set_at_a_time,
)

_EDGES = [0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, -2.2250738585072014e-308,
          1e-300, -1e-300, 0.3, -0.1, -0.25, 1.0, -1.0, 0.999999999999, 7.0, -7.0,
          2.0**62, -(2.0**62), 2.0**63 - 1024, -(2.0**63), 1e300, -1e300]
_GRIDS = [2.0**-1074, 2.0**-40, 2.0**-10, 0.5, 1.0, 2.0, 4.0, 2.0**10, 2.0**1000]


def _outcome(f, values, grid):
    try:
        out = f(values, grid)
    except ValueError as err:
        return ("error", str(err))
    return ("value", out.dtype, out.shape, out.tolist())


@pytest.mark.parametrize("grid", _GRIDS)
def test_floor_to_grid_equals_its_reference_on_every_size_and_edge(grid):
    rng = np.random.default_rng(0)
    cases = [np.array(v) for v in _EDGES] + [float(v) for v in _EDGES[:4]]
    cases += [np.array([], dtype=float), np.zeros((0, 3)), np.array([[-5e-324, 0.3]])]
    cases += [np.array(_EDGES[i:i + k]) for k in (2, 7, 8, 9, 12) for i in (0, 5, 10)]
    cases += [np.array(_EDGES), np.array(_EDGES).reshape(2, 11)]
    for size in (2, 8, 9, 1000):  # both paths, both sides of the size switch
        cases.append(rng.standard_normal(size) * 10.0 ** rng.integers(-320, 300, size))
    for bad in (math.nan, math.inf, -math.inf):  # refused alike, whatever the path
        cases += [np.array([0.5, bad]), np.array([bad] + [0.5] * 9), np.array(bad)]
    for values in cases:
        new, old = _outcome(floor_to_grid, values, grid), \
            _outcome(floor_to_grid_one_path, values, grid)
        assert new == old, (values, grid)


def test_floor_to_grid_refuses_bad_grids_alike():
    for grid in (0.3, 0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="grid must be a positive finite power of two"):
            floor_to_grid([1.0], grid)
        with pytest.raises(ValueError, match="grid must be a positive finite power of two"):
            floor_to_grid(np.zeros(20), grid)


def _pairs():
    from scipy import stats
    return [
        (stats.norm(0, 1), stats.norm(0.5, 1)),           # Gaussian closed form
        (stats.norm(0, 1), stats.norm(6.0, 1)),           # far apart
        (stats.norm(0, 1), stats.norm(0, 1)),             # P = Q: flat ratio
        (stats.bernoulli(0.3), stats.bernoulli(0.6)),     # discrete, two points
        (stats.binom(5, 0.2), stats.binom(5, 0.5)),       # discrete, ties of L
        (stats.laplace(0, 1), stats.laplace(0.3, 1)),     # univariate, certified
    ]


@pytest.mark.parametrize("pair", range(6))
def test_solve_clip_equals_its_reference(pair):
    from skdptest.evalue._laws import make_laws
    from skdptest.evalue._optimal import _solve_clip
    laws = make_laws(*_pairs()[pair])
    assert laws.exact
    # the certified univariate pair costs ~0.25 s per solve: one ε
    for epsilon in (1e-3, 0.1, 0.5, 1.0, 3.0, 20.0) if pair < 5 else (0.5,):
        assert _solve_clip(laws, epsilon) == solve_clip_ends_evaluated_twice(laws, epsilon)


def test_tilt_equals_its_reference():
    from skdptest.evalue._lattice import LatticeExact
    rng = np.random.default_rng(1)
    masses = [np.array([0.5, 0.5]), np.array([0.9, 0.0, 0.1]), np.array([1e-300, 1.0, 1e-300]),
              rng.dirichlet(np.ones(40)), np.r_[rng.dirichlet(np.ones(9)), 0.0, 0.0]]
    for m in masses:
        j = np.arange(m.size)
        with np.errstate(divide="ignore"):
            logm = np.log(m)
        top = j[m > 0][-1]
        for target in (0.5 / 7, m @ j, 0.5 * top, top - 1e-9):
            assert LatticeExact._tilt(logm, j, target) == \
                lattice_tilt_ends_evaluated_twice(logm, j, target)


# -- the confidence sequence's bounds (_csbounds): the previous window sums ------------

def _old_csbounds(monkeypatch):
    from skdptest.evalue import _csbounds as cb
    monkeypatch.setattr(cb, "_segments", cs_segments_by_gathers)
    monkeypatch.setattr(cb, "_segment_lse_rows", cs_segment_lse_rows_by_gathers)


def _cs_cases():
    rng = np.random.default_rng(3)
    cases = []
    for n_batch, p, rate in ((1, 0.5, 2.0), (7, 0.0, 0.5), (7, 1.0, 0.5), (50, 0.3, 0.05),
                             (400, 0.9, 1.0), (3000, 0.02, 0.2)):
        ns = rng.integers(max(1, n_batch // 2), n_batch + 1, size=5)
        ys = rng.binomial(ns, p) + rng.integers(-3, 4, size=5)  # noisy, may leave [0, n]
        cases.append((ys.astype(float), ns.astype(np.int64), rate))
    return cases


def _cells():
    leaf = 1.0 / (64 * 16)
    a = np.r_[0.0, leaf, 0.25, 0.5 - leaf, 0.999, 1.0 - leaf, np.linspace(0, 1, 17)[:-1]]
    b = np.r_[leaf, 2 * leaf, 0.25, 0.5, 1.0, 1.0, np.linspace(0, 1, 17)[1:]]
    return a, b


def test_likelihood_bounds_equal_the_previous_window_sums(monkeypatch):
    from skdptest.evalue._csbounds import log_lik_bounds
    a, b = _cells()
    pts = np.array([0.0, 1e-9, 0.3, 0.5, 1 - 1e-9, 1.0])
    for ys, ns, rate in _cs_cases():
        for cells in ((a, b), (pts, pts)):
            for high in (True, False):
                new = log_lik_bounds(ys, ns, *cells, rate, high)
                with monkeypatch.context() as m:
                    _old_csbounds(m)
                    old = log_lik_bounds(ys, ns, *cells, rate, high)
                for x, y in zip(new, old, strict=True):
                    assert (x is None and y is None) or np.array_equal(x, y, equal_nan=True)


def test_confidence_bounds_equal_the_previous_computation(monkeypatch):
    from skdptest.evalue._csbounds import MassCache, MixturePrior, confidence_bounds
    for prior in (MixturePrior(64), MixturePrior(64, scale=[0.01, 0.05, 0.3])):
        for ys, ns, rate in _cs_cases()[1:4]:  # p = 0, p = 1, a slow rate
            new, cache = [], MassCache()
            for k in (1, 3, 5):  # a stream: the running sums reused
                new.append(confidence_bounds(ys[:k], ns[:k], rate, 0.05, prior, cache))
            with monkeypatch.context() as m:
                _old_csbounds(m)
                old, cache = [], MassCache()
                for k in (1, 3, 5):
                    old.append(confidence_bounds(ys[:k], ns[:k], rate, 0.05, prior, cache))
            assert new == old
            a, b = _cells()
            ell = np.linspace(-30.0, 0.0, 9)
            blocks = (np.arange(9) / 8 * 0.5, np.arange(9) / 8 * 0.5 + 1 / 16, np.full(9, 4.0))
            new_mass = prior.log_mass_lower(ell, blocks, a, b)
            with monkeypatch.context() as m:
                _old_csbounds(m)
                old_mass = prior.log_mass_lower(ell, blocks, a, b)
            assert np.array_equal(new_mass, old_mass)


# -- the univariate laws' tails: both one-sided sets searched together -----------------

def test_univariate_tails_equal_one_set_at_a_time():
    from scipy import stats

    from skdptest.evalue._laws import make_laws
    pairs = [(stats.norm(0, 1), stats.norm(0.5, 2)),  # two crossings of each level
             (stats.expon(), stats.uniform(0, 3))]     # a support end: L jumps to -inf
    for pair in pairs:
        laws = make_laws(*pair)
        g = laws._g[np.isfinite(laws._g)]
        levels = np.quantile(g, [0.0, 0.1, 0.5, 0.9, 1.0])
        for lo, hi in [(levels[1], levels[3]), (levels[2], levels[2]), (levels[0], levels[4]),
                       (levels[0] - 1.0, levels[1]), (levels[3], levels[4] + 1.0),
                       (-math.inf, math.inf), (levels[4] + 1.0, levels[4] + 2.0)]:
            want = univariate_tails_one_set_at_a_time(laws, lo, hi)
            assert laws._compute_tails(lo, hi) == want


# -- the Gaussian planner's quadrature panels: kept per breaks and scale ---------------

def test_normal_panels_kept_equal_freshly_computed_ones():
    from skdptest.evalue import _laws
    cases = [((), 0.5), ((0.3,), 1.0), ((-0.0,), 2.0), ((0.0,), 2.0), ((0.0, -0.0), 2.0),
             ((-13.0, 13.0), 1.0), ((-1.0, 1.0, 1.0), 7.5), ((math.nan, 0.25), 1.0),
             ((-12.0, 12.0, 11.999999999), 0.1), ((0.5, 0.5000000001), 30.0)]
    for breaks, s in cases:
        first = _laws._normal_panels(breaks, s)
        again = _laws._normal_panels(tuple(breaks), s)  # served from the cache
        fresh = _laws._split_panels.__wrapped__(tuple(float(b).hex() for b in breaks),
                                                float(s).hex())
        for got in (first, again):
            assert all(np.array_equal(x, y) and not x.flags.writeable
                       for x, y in zip(got, fresh, strict=True))
            # the sign of a zero break reaches the nodes as before
            assert np.array_equal(np.signbit(got[0]), np.signbit(fresh[0]))


# -- the discrete laws' tails: slices of L sorted, one fsum per set --------------------

def test_discrete_tails_equal_the_masked_sums():
    from scipy import stats

    from skdptest.evalue._laws import make_laws
    pairs = [(stats.bernoulli(0.3), stats.bernoulli(0.6)),
             (stats.binom(12, 0.2), stats.binom(12, 0.5)),       # distinct L, a wide range
             (stats.randint(0, 6), stats.randint(0, 6)),          # every L tied at 0
             (stats.randint(0, 4), stats.randint(2, 8)),          # L = ±inf on each side
             (stats.binom(40, 0.5), stats.betabinom(40, 2.0, 2.0))]  # symmetric: ties
    rng = np.random.default_rng(5)
    for pair in pairs:
        laws = make_laws(*pair)
        L = laws.L
        finite = L[np.isfinite(L)]
        levels = np.r_[L, np.nextafter(finite, -np.inf), np.nextafter(finite, np.inf),
                       -np.inf, np.inf, 0.0, -0.0, rng.normal(0, 3, 8)]
        cases = [(a, b) for a in levels[::3] for b in levels[::4]]
        cases += [(math.nan, 0.5), (0.5, math.nan), (math.nan, math.nan)]
        for lo, hi in cases:
            want = (math.fsum(laws.wP[L < lo]), math.fsum(laws.wQ[(L >= lo) & (L <= hi)]),
                    math.fsum(laws.wP[L > hi]))
            got = laws.tails(lo, hi)
            assert [x.hex() for x in got] == [x.hex() for x in want], (lo, hi)


# -- the exact two-point model: the binomial law kept per batch size and law ------------

def test_exact_log_density_with_kept_binomial_equals_fresh():
    from scipy import stats

    from skdptest._noise import log_geometric_mixture_at
    from skdptest.evalue._exact import BinaryExact
    model = BinaryExact(1.0, 0.3, 0.55)
    ys = np.array([-40.0, -3.0, 0.0, 1.0, 7.0, 12.0, 60.0])
    for n in (1, 12, np.int64(12), 300):
        for prob, eps in ((0.3, 1.0), (0.55, 0.1), (1e-300, 2.0)):
            for _ in range(2):  # the second call is served from the cache
                got = model.log_density(ys, n, prob, eps)
                want = log_geometric_mixture_at(
                    ys, stats.binom.logpmf(np.arange(n + 1), n, prob), model.noise_rate(eps),
                    block_terms=2_000_000)
                assert np.array_equal(got, want)


# -- the laws' cache tokens: computed once per fit by check_laws ------------------------

def test_checked_params_carry_the_laws_fresh_tokens():
    from types import MappingProxyType

    from scipy import stats

    from skdptest.evalue._cache import law_tokens
    from skdptest.evalue._evalue import check_laws, laws_tokens

    class Custom(stats.rv_continuous):  # a user subclass: keyed by identity
        def _pdf(self, x):
            return np.exp(-x * x / 2) / np.sqrt(2 * np.pi)

    for null, alt in [(stats.norm(0, 1), stats.norm(0.3, 1)),
                      (stats.binom(5, 0.2), stats.binom(5, 0.5)),
                      (Custom(name="c")(), stats.norm(0.3, 1))]:
        params = MappingProxyType({"null": null, "alternative": alt})
        checked = check_laws(params)
        assert laws_tokens(checked) == law_tokens(null, alt) == laws_tokens(params)
        held, fresh = laws_tokens(checked)[1], law_tokens(null, alt)[1]
        assert len(held) == len(fresh) and all(a is b for a, b in zip(held, fresh, strict=True))
    none = MappingProxyType({"null": None, "alternative": None})
    assert check_laws(none) is none  # nothing to key
