"""Grey-box audit (:func:`skdptest.audit.grey_box_audit`) of every public estimator.

- every estimator of ``skdptest.__all__`` (the ``CASES`` of tests/test_common.py) declares
  what it noises (``_noise_plan``) and passes the audit on neighbours (one row replaced)
  that move a noised value: the same draws on both, each noise scale at least
  factor · sensitivity / ε share, each measured change within its declared sensitivity;
- for the classical family's Tulap, bounded-mean, χ², contingency and KS releases, a
  halved noise is flagged: the plan's rate doubled (claim and charge unchanged) and the
  module's noise sampler run at twice the rate;
- the declarations of those releases are attained or nearly so on worst-case neighbours
  (a sensitivity declared too small would fail the audit there).
"""

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

import skdptest
from skdptest import _noise, _permutation
from skdptest._recorder import recording
from skdptest.audit import _REL_TOL, grey_box_audit
from skdptest.classical import _aggregate, _chi2, _ks, _mean, _proportion
from tests._mutants import halve_permutation_noise

_spec = importlib.util.spec_from_file_location(
    "_skdptest_common_cases", Path(__file__).parents[1] / "test_common.py")
_common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_common)
CASES, ESTIMATOR_CLASSES = _common.CASES, _common.ESTIMATOR_CLASSES


def _column(values):
    return np.asarray(values, dtype=float).reshape(-1, 1)


def _replaced(X, row, value):
    X1 = np.array(X, dtype=float, copy=True)
    X1[row] = value
    return X1


def _flags_large_values(x):
    """A public inner test: rejects (p = 0) a subset holding a value above 5."""
    return 0.0 if np.max(x) > 5 else 1.0


def _neighbours():
    """Per public estimator: (its CASES keyword arguments, updated for a small fast fit,
    X0, X1, y0, y1): neighbours by replacing one row, chosen to move a noised value by
    (nearly) its full sensitivity."""
    rng = np.random.default_rng(0)
    z = rng.normal(size=20)
    halves = np.repeat([0, 1], 10)
    # e-values: Bernoulli(0.3) against Bernoulli(0.6) (the same objects in every fit: the
    # public plan is computed once), one row from the null's likeliest value to its least
    laws = {"null": stats.bernoulli(0.3), "alternative": stats.bernoulli(0.6)}
    e0 = _column(np.zeros(20))
    mmd0 = _column(z)
    hsic_x, hsic_y = _column(rng.normal(size=20)), rng.normal(size=20)
    gtm0 = _column(np.r_[np.full(10, 2.0), np.full(10, 4.0)])
    # a dependent 2 x 2 table; one row moved from cell (1, 1) to (0, 0)
    table = np.array([[1, 1]] * 8 + [[0, 0]] + [[1, 1]] * 2 + [[0, 0]], dtype=float)
    mean0 = _column(np.full(20, -5.0))
    ks0 = _column(np.arange(20.0))
    out = {
        "PrivateEValueTest": (laws, e0, _replaced(e0, 0, 1.0), None, None),
        "PrivateEProcess": (laws, e0, _replaced(e0, 0, 1.0), None, None),
        # one row from 0 to 1: the first batch count moves by 1; horizon=20 tunes a
        # smaller prior (the same draws and declaration; the interval, post-processing of
        # the counts, costs a fifth of the default horizons' mixture)
        "PrivateConfidenceSequence": ({"horizon": 20}, e0, _replaced(e0, 0, 1.0), None,
                                      None),
        # random relabellings (cyclic=False): the cyclic route has its own audit in
        # tests/kernel/test_mmd_cyclic.py; under cyclic='auto' n_permutations=19 would warn
        "DPMMDTest": ({"n_permutations": 19, "cyclic": False}, mmd0, _replaced(mmd0, -1, 50.0),
                      halves, halves),
        # the cyclic aggregate uses the n - 1 = 19 shifts: n_permutations left at its default
        "DPHSICTest": ({"n_permutations": 2000}, hsic_x, _replaced(hsic_x, 0, 50.0), hsic_y,
                       _replaced(hsic_y, 0, 50.0)),
        "GeneralizedThresholdMechanism": ({}, gtm0, _replaced(gtm0, 0, 100.0), None, None),
        # the rank tests' worst cases (tests/classical/test_rank.py): full sensitivity
        "DPMannWhitneyTest": ({"n_resamples": 19}, _column([1, 2, 3, 4, 5, 6, 7]),
                              _column([9, 2, 3, 4, 5, 6, 7]), np.array([0, 0, 0, 1, 1, 1, 1]),
                              np.array([0, 0, 0, 1, 1, 1, 1])),
        "DPKruskalWallisTest": ({"n_resamples": 19}, _column([1, 6, 2, 5, 3, 4]),
                                _column([7, 6, 2, 5, 3, 4]), np.array([0, 0, 1, 1, 2, 2]),
                                np.array([0, 0, 1, 1, 2, 2])),
        "DPWilcoxonTest": ({"n_resamples": 19}, _column([-1, -2, -3, -4, -5]),
                           _column([-1, -2, -3, -4, 9]), np.zeros(5), np.zeros(5)),
        # the count of ones moves by 1
        "DPBinomialTest": ({}, _column(np.zeros(20)), _replaced(_column(np.zeros(20)), 0, 1.0),
                           None, None),
        # the subset holding row 0 turns from not rejecting to rejecting
        "DPSubsampleAggregateTest": ({"inner_test": _flags_large_values},
                                     _column(np.zeros(20)),
                                     _replaced(_column(np.zeros(20)), 0, 10.0), None, None),
        # one row from the lower bound to the upper one
        "DPBoundedMeanTest": ({}, mean0, _replaced(mean0, 0, 5.0), None, None),
        # one row from the first cell to the second
        "DPChiSquareTest": ({"n_resamples": 19}, _column(np.zeros(20)),
                            _replaced(_column(np.zeros(20)), 0, 1.0), None, None),
        "DPContingencyTest": ({"categories": ([0, 1], [0, 1]), "n_resamples": 19},
                              table, _replaced(table, 0, 0.0), None, None),
        # the smallest value of the first group moved above every other value
        "DPKolmogorovSmirnovTest": ({"n_resamples": 19}, ks0, _replaced(ks0, 0, 100.0),
                                    halves, halves),
    }
    return out


NEIGHBOURS = _neighbours()
each = pytest.mark.parametrize("cls", ESTIMATOR_CLASSES,
                               ids=[c.__name__ for c in ESTIMATOR_CLASSES])


def _audit(cls):
    update, X0, X1, y0, y1 = NEIGHBOURS[cls.__name__]
    kwargs = {**CASES[cls.__name__][0], **update}
    return grey_box_audit(lambda seed: cls(**kwargs, random_state=seed), X0, X1, y0=y0,
                          y1=y1, n_replays=2, random_state=0)


def test_every_public_estimator_has_a_neighbour_pair():
    assert set(NEIGHBOURS) == set(CASES)


@each
def test_every_public_estimator_declares_its_noise_and_passes(cls):
    assert callable(getattr(cls, "_noise_plan", None)), cls
    r = _audit(cls)
    assert not r.flagged, r.findings
    assert r.quantities and min(r.n_draws) > 0
    for q in r.quantities:
        if q.required_scale is not None and q.drawn_scale is not None:
            assert q.required_scale <= q.drawn_scale * (1 + _REL_TOL), q
        # a log rate attained in floating point may exceed 1 by an ulp or so (the
        # audit's own slack)
        assert q.measured_change is None or \
            q.measured_change <= q.sensitivity * (1 + _REL_TOL), q
    # the neighbours move a noised value: the audit is not vacuous
    assert any(q.measured_change for q in r.quantities), r.quantities


# -- the classical releases: declarations attained, halved noise flagged ---------------------

# The classical releases and variants: (class, keyword arguments added to its CASES and
# NEIGHBOURS ones); their neighbours are NEIGHBOURS' unless _DATA gives others.
_CLASSICAL = {
    "binomial": (skdptest.DPBinomialTest, {}),
    "aggregate": (skdptest.DPSubsampleAggregateTest, {}),
    "mean": (skdptest.DPBoundedMeanTest, {"bet": 0.5}),
    "mean, greater": (skdptest.DPBoundedMeanTest, {"bet": 0.5, "alternative": "greater"}),
    "mean, two groups": (skdptest.DPBoundedMeanTest,
                         {"bet": 0.5, "null_mean": None, "alternative": "greater"}),
    "chi-square": (skdptest.DPChiSquareTest, {}),
    "contingency": (skdptest.DPContingencyTest, {}),
    "KS two-sample": (skdptest.DPKolmogorovSmirnovTest, {}),
    "KS goodness of fit": (skdptest.DPKolmogorovSmirnovTest, {"null": stats.norm()}),
    "KS several columns": (skdptest.DPKolmogorovSmirnovTest, {}),
}

_ks_cols = np.c_[np.arange(20.0), np.arange(20.0)]
_groups_x = np.r_[np.full(10, 0.0), np.full(10, 5.0)].reshape(-1, 1)
_DATA = {  # (X0, X1, y0, y1)
    # group 0's row 0 from a to b against a block of group 1 at b: D from a − b to 0, the
    # steep end of the bet on "greater"
    "mean, two groups": (_replaced(_groups_x, 0, -5.0), _replaced(_groups_x, 0, 5.0),
                         np.repeat([0, 1], 10), np.repeat([0, 1], 10)),
    # one value from the left tail of the null to the right one
    "KS goodness of fit": (_column(np.full(20, -3.0)),
                           _replaced(_column(np.full(20, -3.0)), 0, 3.0), None, None),
    "KS several columns": (_ks_cols, _replaced(_ks_cols, 0, 100.0),
                           np.repeat([0, 1], 10), np.repeat([0, 1], 10)),
}


def _grey(name, cls=None):
    """The grey-box audit of the variant ``name`` (of ``cls``, a mutant, if given)."""
    base, extra = _CLASSICAL[name]
    cls = cls or base
    kwargs = {**CASES[base.__name__][0], **NEIGHBOURS[base.__name__][0], **extra}
    X0, X1, y0, y1 = _DATA.get(name, NEIGHBOURS[base.__name__][1:])
    return grey_box_audit(lambda seed: cls(**kwargs, random_state=seed), X0, X1, y0=y0,
                          y1=y1, n_replays=2, random_state=0)


# Attained share of the declared sensitivity on these neighbours (measured / declared):
# the counts and the KS statistics move by their full sensitivity;
# the bet's integer by all but the floors' margin; χ² counts by 1 per cell (L1: 2); the
# contingency distances by 76 of the 8n = 96 units of the permuted tables' bound.
_ATTAINED = {"binomial": 1.0, "aggregate": 1.0,
             "mean": 0.99, "mean, greater": 0.99, "mean, two groups": 0.99,
             "chi-square": 0.5, "contingency": 0.75, "KS two-sample": 1.0,
             "KS goodness of fit": 1.0, "KS several columns": 1.0}


@pytest.mark.parametrize("name", sorted(_CLASSICAL))
def test_classical_declarations_are_attained(name):
    r = _grey(name)
    assert not r.flagged, r.findings
    noised = r.quantities[0]
    assert noised.measured_change <= noised.sensitivity
    assert noised.measured_change >= _ATTAINED[name] * noised.sensitivity, noised
    # the rates are rounded down: never less noise, and little more
    assert noised.required_scale <= noised.drawn_scale <= 1.002 * noised.required_scale, noised
    assert all(q.n_draws > 0 for q in r.quantities), r.quantities
    for q in r.quantities[1:]:  # the Monte Carlo null: no data, any noise
        assert q.sensitivity == 0 and q.measured_change == 0, q


def test_chi_square_counts_move_by_their_l1_sensitivity():
    # the audit measures the largest change of one cell (1); the noise is set by the L1
    # change of the count vector, 2, which one replaced row attains
    _, X0, X1, _, _ = NEIGHBOURS["DPChiSquareTest"]
    kwargs = {**CASES["DPChiSquareTest"][0], **NEIGHBOURS["DPChiSquareTest"][0]}
    counts = []
    for X in (X0, X1):
        with recording() as rec:
            skdptest.DPChiSquareTest(**kwargs, random_state=3).fit(X)
        (value, unit), = rec.observations["cell counts"]
        counts.append(np.asarray(value, dtype=np.int64))
    assert np.abs(counts[0] - counts[1]).sum() == 2


def _doubled_plan(cls):
    """The release planned at 2ε while it claims (and is charged) ε: half the noise."""
    class HalvedNoise(cls):
        def _plan(self, params, X, y):
            return super()._plan({**params, "epsilon": 2 * params["epsilon"]}, X, y)

    HalvedNoise.__name__ = cls.__name__
    return HalvedNoise


def _halved_permutation_noise(monkeypatch):
    # the DP permutation release (contingency, KS on several columns): its rate doubled on
    # the same grid, as tests/test_audit.py does for the kernel tests
    halve_permutation_noise(monkeypatch)


_PLANNED_AT_RELEASE = {"contingency", "KS several columns"}


@pytest.mark.parametrize("name", sorted(_CLASSICAL))
def test_classical_halved_noise_of_the_plan_is_flagged(monkeypatch, name):
    if name in _PLANNED_AT_RELEASE:
        _halved_permutation_noise(monkeypatch)
        r = _grey(name)
    else:
        r = _grey(name, cls=_doubled_plan(_CLASSICAL[name][0]))
    assert r.flagged and any("noise scale" in f for f in r.findings), r.findings


def _tulap_at_twice_the_rate(rng, epsilon, size=None, *, shift=0):
    return _noise.tulap(rng, 2 * epsilon, size, shift=shift)


def _discrete_laplace_at_twice_the_rate(rng, rate, size=None):
    return _noise.discrete_laplace(rng, 2 * rate, size)


# The module whose reference to its noise sampler is patched.
_SAMPLER = {"binomial": (_proportion, "tulap"),
            "aggregate": (_aggregate, "tulap"),
            "mean": (_mean, "discrete_laplace"), "mean, greater": (_mean, "discrete_laplace"),
            "mean, two groups": (_mean, "discrete_laplace"),
            "chi-square": (_chi2, "discrete_laplace"),
            "contingency": (_permutation, "discrete_laplace"),
            "KS two-sample": (_ks, "discrete_laplace"),
            "KS goodness of fit": (_ks, "discrete_laplace"),
            "KS several columns": (_permutation, "discrete_laplace")}


@pytest.mark.parametrize("name", sorted(_CLASSICAL))
def test_classical_halved_noise_sampler_is_flagged(monkeypatch, name):
    module, attr = _SAMPLER[name]
    honest = getattr(module, attr)
    assert honest is getattr(_noise, attr)  # the release draws through this reference
    patched = _tulap_at_twice_the_rate if attr == "tulap" else \
        _discrete_laplace_at_twice_the_rate
    monkeypatch.setattr(module, attr, patched)
    r = _grey(name)
    assert r.flagged and any("noise scale" in f for f in r.findings), r.findings
