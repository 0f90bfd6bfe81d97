"""Exact privacy of GTM-R by numerical integration of its output law.

The law over {1..T, never} is computed by
:func:`skdptest.threshold.exact_output_log_probabilities`, which takes every
parameter from the function the shipped search uses
(:func:`~skdptest.threshold.gtm_step_parameters`). For neighbouring data sets
(each mechanism's p_t moved to a corner of its privacy box) the largest
|log Pr_X[o] − Pr_X'[o]| must be ≤ ε; under-noised mutants of the shipped
parameter function must be flagged by the same check.

TOL is the quadrature error: halving the grid step moves log-probabilities by
about 1e-5 and log-ratios by far less (see ``test_quadrature_converges``).
"""


import numpy as np
import pytest
from scipy import stats

import skdptest.threshold._params as params_module
from skdptest.threshold import (
    GaussianThresholdQuery,
    RandomizedResponse,
    exact_output_log_probabilities,
)
from skdptest.threshold._gtm import _search, _steps
from tests.threshold._reference import (
    EPS,
    chisquare_pvalue,
    lap_p,
    law,
    max_log_ratio_corners,
    max_log_ratio_gaussian,
    max_log_ratio_rr,
    rr_p,
)

TOL = 1e-4


@pytest.fixture
def mutant(monkeypatch):
    """Monkeypatch the shipped noise means (used by the search and the integrator)."""
    original = params_module._noise_means

    def apply(b0_factor, b1_factor):
        def mutated(epsilon, theta):
            b0, b1 = original(epsilon, theta)
            return b0 * b0_factor, b1 * b1_factor

        monkeypatch.setattr(params_module, "_noise_means", mutated)

    return apply


# -- the integrator ------------------------------------------------------------------


@pytest.mark.parametrize("work", ["poisson", "constant"])
@pytest.mark.parametrize("p_star, eps_t", [(0.5, 0.25),
                                           pytest.param(0.99, 0.25, marks=pytest.mark.slow),
                                           (0.95, 0.05)],
                         ids=["direct", "direct-high-target", "flip"])
def test_output_law_sums_to_one(p_star, eps_t, work):
    """Each branch (direct, flip) of each work mode; direct-high-target takes the
    direct branch's code path again and runs in the slow suite."""
    p = [0.1, 0.6, 0.95]
    lp = law(p, eps_t, p_star, work=work)
    assert lp.shape == (4,)
    err = abs(np.exp(lp).sum() - 1.0)
    assert err < 1e-5
    # O(h^2) quadrature error: the default grid step, half the coarse one, divides it by
    # about 4 (4.00 in each case, as from 40 to 80 points; the coarse grid is the cheaper
    # witness of the order, test_quadrature_converges compares with the finer one)
    coarse = exact_output_log_probabilities(p, [eps_t] * 3, p_star, resolution=20, work=work)
    assert err < abs(np.exp(coarse).sum() - 1.0) / 3


def test_constant_work_changes_the_flip_branch_law():
    # flip branch: N_t > M_t forces a rejection where the count could have accepted, so
    # the integrated laws of the two modes differ (the constant-work integrator is not
    # a copy of the Poisson one); in the direct branch the forced region only adds
    # acceptances that were already certain
    p = [lap_p(-20.0, 0.1), lap_p(5.0, 0.1)]
    assert params_module.gtm_step_parameters(1, 0.1, 0.0, 0.95, epsilon=EPS,
                                             failure_probability=0.1, approximation=1.5,
                                             theta=1.0).direction == -1
    gap = np.max(np.abs(law(p, 0.1, 0.95) - law(p, 0.1, 0.95, work="constant")))
    assert gap > 1e-4
    with pytest.raises(ValueError, match="work must be 'poisson' or 'constant'"):
        law(p, 0.1, 0.95, work="fast")


def test_quadrature_converges():
    p = [lap_p(3.0, 0.25), lap_p(8.0, 0.25)]
    q = [lap_p(2.0, 0.25), lap_p(9.0, 0.25)]
    coarse_p = law(p, 0.25)
    fine_p = exact_output_log_probabilities(p, [0.25] * 2, resolution=80)
    coarse = coarse_p - law(q, 0.25)
    fine = fine_p - exact_output_log_probabilities(q, [0.25] * 2, resolution=80)
    assert np.max(np.abs(coarse - fine)) < TOL / 10
    assert np.max(np.abs(coarse_p - fine_p)) < 1e-4


def _search_frequencies(bits, eps_t, p_star, epsilon, work, n, seed=12345, mutate=None):
    """Output counts over {1, 2, 3, never} of ``n`` runs of the shipped search.

    The steps are computed once by ``_steps``, as the estimator's plan does, and passed
    to ``_search``; ``mutate`` (a function of a step) alters them to model a search whose
    noise is not the one the integrator assumes.
    """
    mechs = [RandomizedResponse(lambda X, y, b=b: b > 0, eps_t) for b in bits]
    privacy, p_stars = [(eps_t, 0.0)] * len(bits), [p_star] * len(bits)
    kwargs = dict(epsilon=epsilon, failure_probability=0.1, approximation=1.5, theta=1.0)
    steps = _steps(privacy, p_stars, **kwargs)
    if mutate is not None:
        steps = [mutate(sp) for sp in steps]
    rng = np.random.default_rng(seed)
    counts = np.zeros(len(bits) + 1)
    X = np.zeros((1, 1))
    for _ in range(n):
        i = _search(mechs, privacy, p_stars, X, None, rng, work=work, steps=steps, **kwargs)
        counts[-1 if i is None else i] += 1
    return counts


# bits (+1, -1, +1) at eps_t = 0.1, p* = 0.95, eps = 1: step 1 takes the flip branch,
# steps 2 and 3 the direct one, and every output has probability >= 0.02, so a search
# whose threshold noise R or step noise nu is halved (the integrator unchanged) moves
# the law by a chi-square noncentrality of 0.059 n and 0.032 n: >= 64 at n = 2000, where
# the check (p < 1e-3 on 3 df) misses the step-noise mutant with probability 2e-5
# (scipy.stats.ncx2) (the former (-1, -1, +1), eps_t = 0.25, p* = 0.5 setting: 0.003 n)
MIXED = ([1, -1, 1], 0.1, 0.95, EPS)
N_RUNS = 2000


@pytest.mark.parametrize("work, bits, eps_t, p_star, epsilon",
                         [("poisson", *MIXED), ("constant", *MIXED),
                          pytest.param("constant", [-1, -1, 1], 0.1, 0.95, 0.5,
                                       marks=pytest.mark.slow)],
                         ids=["poisson-mixed", "constant-mixed", "constant-flip"])
def test_output_law_matches_the_shipped_search(work, bits, eps_t, p_star, epsilon):
    """The law integrated equals the frequencies of the shipped search (same code path)."""
    expected = np.exp(law([rr_p(b, eps_t) for b in bits], eps_t, p_star, epsilon=epsilon,
                          work=work))
    counts = _search_frequencies(bits, eps_t, p_star, epsilon, work, n=N_RUNS)
    assert chisquare_pvalue(counts, expected) > 1e-3


@pytest.mark.parametrize("field", ["b0", "b1"], ids=["threshold-noise/2", "step-noise/2"])
def test_output_law_check_catches_a_search_with_halved_noise(field):
    """The check above at the same n rejects a search drawing R (b0) or nu (b1) at half
    the scale the integrator assumes (p-values 2e-24 (R) and 3e-10 (nu) at n = 2000)."""
    bits, eps_t, p_star, epsilon = MIXED
    expected = np.exp(law([rr_p(b, eps_t) for b in bits], eps_t, p_star, epsilon=epsilon))
    counts = _search_frequencies(bits, eps_t, p_star, epsilon, "poisson", n=N_RUNS,
                                 mutate=lambda sp: sp._replace(**{field: getattr(sp, field) / 2}))
    assert chisquare_pvalue(counts, expected) < 1e-3


# -- privacy of the shipped parameters ----------------------------------------------------


# p* = 0.99 takes the direct branch's code path again: in the slow suite, where
# test_slow_randomized_response_six_steps also covers it on six steps
@pytest.mark.parametrize("p_star", [0.5, pytest.param(0.99, marks=pytest.mark.slow)])
def test_randomized_response_flips_are_private(p_star):
    worst = max_log_ratio_rr(3, 0.25, p_star)
    assert worst <= EPS + TOL
    assert worst >= 0.95 * EPS  # near the bound: a violation would show


def test_threshold_queries_at_corners_are_private_and_the_check_is_tight():
    worst = max(max_log_ratio_corners((3.0, 8.0), 0.25),
                max_log_ratio_corners((0.0, 40.0), 0.05))
    assert worst <= EPS + TOL
    # the sparse-vector analysis is tight here: the check can see a violation
    assert worst >= 0.95 * EPS


@pytest.mark.parametrize("work", ["poisson", pytest.param("constant", marks=pytest.mark.slow)])
def test_threshold_queries_flip_branch_are_private(work):
    # eps_t / eps = 0.1 with p* = 0.95 takes the flip branch (s = -1)
    sp = params_module.gtm_step_parameters(1, 0.1, 0.0, 0.95, epsilon=EPS,
                                           failure_probability=0.1, approximation=1.5,
                                           theta=1.0)
    assert sp.direction == -1
    worst = max(max_log_ratio_corners((-20.0, 5.0), 0.1, p_star=0.95, work=work),
                max_log_ratio_corners((-5.0, 15.0), 0.1, p_star=0.95, work=work))
    assert worst <= EPS + TOL
    assert worst >= 0.95 * EPS  # near the bound: a violation would show


@pytest.mark.parametrize("p_star", [0.5, pytest.param(0.99, marks=pytest.mark.slow)])
def test_constant_work_randomized_response_is_private(p_star):
    worst = max_log_ratio_rr(3, 0.25, p_star, work="constant")
    assert EPS * 0.95 <= worst <= EPS + TOL


@pytest.mark.slow
def test_slow_constant_work_threshold_queries_at_corners_are_private():
    worst = max(max_log_ratio_corners((3.0, 8.0), 0.25, work="constant"),
                max_log_ratio_corners((0.0, 40.0), 0.05, work="constant"))
    assert EPS * 0.95 <= worst <= EPS + TOL


def test_gaussian_threshold_queries_through_purification_are_private():
    assert max_log_ratio_gaussian((-1.0, 2.0), 0.25, 1e-3) <= EPS + TOL


@pytest.mark.parametrize("work", ["poisson", pytest.param("constant", marks=pytest.mark.slow)])
@pytest.mark.parametrize("b0_factor, b1_factor", [(1 / 3, 1.0), (1.0, 0.5)],
                         ids=["threshold-noise-mean/3", "step-noise-mean/2"])
def test_under_noised_mutants_are_flagged(mutant, b0_factor, b1_factor, work):
    mutant(b0_factor, b1_factor)
    # the mutant reaches the shipped search too
    sp = params_module.gtm_step_parameters(1, 0.25, 0.0, 0.5, epsilon=EPS,
                                           failure_probability=0.1, approximation=1.5,
                                           theta=1.0)
    assert sp.b0 == pytest.approx(3.0 * b0_factor) and sp.b1 == pytest.approx(3.0 * b1_factor)
    # The checks above maximise over every neighbour; one neighbour over the bound is
    # enough to flag a mutant (a maximum over a superset is at least as large), so only
    # the worst ones are integrated: the first gap down and the second up (all 9
    # directions: 1.67 for either mutant), and the bit vectors (-1, -1, 1), (1, 1, -1)
    # (all 28 pairs: 1.64 and 1.61).
    assert max_log_ratio_corners((3.0, 8.0), 0.25, work=work, directions=[(-1, 1)]) \
        > EPS + 0.5
    a, b = (law([rr_p(v, 0.25) for v in bits], 0.25, 0.5, work=work)
            for bits in ((-1, -1, 1), (1, 1, -1)))
    assert np.max(np.abs(a - b)) > EPS + 0.5


# -- slow: longer streams ------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("p_star", [0.5, 0.99])
def test_slow_randomized_response_six_steps(p_star):
    assert max_log_ratio_rr(6, 0.25, p_star) <= EPS + TOL


@pytest.mark.slow
@pytest.mark.parametrize("eps_t, p_star", [(0.05, 0.5), (0.1, 0.1), (0.25, 0.5), (0.25, 0.9)])
def test_slow_threshold_corners_six_steps(eps_t, p_star):
    rng = np.random.default_rng(2024)
    worst = 0.0
    for _ in range(2):
        gaps = tuple(rng.uniform(-4, 12, size=6) / (4 * eps_t))
        dirs = [tuple(rng.choice([-1, 0, 1], size=6)) for _ in range(10)]
        # the classical worst pattern: earlier steps up, later steps down
        dirs += [tuple([-1] * j + [1] * (6 - j)) for j in range(7)]
        worst = max(worst, max_log_ratio_corners(gaps, eps_t, p_star, directions=dirs))
    tight = (3.0, 3.0, 3.0, 3.0, 3.0, 8.0)
    dirs = [tuple([-1] * j + [1] * (6 - j)) for j in range(7)]
    worst = max(worst, max_log_ratio_corners(tuple(g / (4 * eps_t) for g in tight), eps_t,
                                             p_star, directions=dirs))
    assert worst <= EPS + TOL


@pytest.mark.slow
def test_slow_gaussian_six_steps():
    gaps = (-3.0, -1.0, 0.0, 2.0, 4.0, 8.0)
    sigma_dirs = [tuple([-1] * j + [1] * (6 - j)) for j in range(7)]
    eps_t, delta_t = 0.25, 1e-3
    sigma = GaussianThresholdQuery(lambda X, y: 0.0, 0.0, eps_t, delta_t).sigma
    deltas = [delta_t] * 6

    def p(g):
        return float(stats.norm.sf(g / sigma))

    base = law([p(g) for g in gaps], eps_t, 0.5, deltas)
    worst = 0.0
    for d in sigma_dirs:
        moved = [p(g + s) for g, s in zip(gaps, d, strict=True)]
        worst = max(worst, float(np.max(np.abs(base - law(moved, eps_t, 0.5, deltas)))))
    assert worst <= EPS + TOL


@pytest.mark.slow
@pytest.mark.parametrize("b0_factor, b1_factor", [(1 / 3, 1.0), (1.0, 0.5)],
                         ids=["threshold-noise-mean/3", "step-noise-mean/2"])
def test_slow_mutants_flagged_on_six_steps(mutant, b0_factor, b1_factor):
    mutant(b0_factor, b1_factor)
    # five steps that accept unless R is large, then a step far below its target
    gaps = (3.0, 3.0, 3.0, 3.0, 3.0, 8.0)
    dirs = [tuple([-1] * j + [1] * (6 - j)) for j in range(7)]
    assert max_log_ratio_corners(gaps, 0.25, directions=dirs) > EPS + 0.5
