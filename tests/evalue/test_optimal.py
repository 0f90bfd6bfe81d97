"""The optimal statistic E* and the rate R_ε, checked against independent computations."""

import math

import numpy as np
import pytest
from scipy import integrate, stats

from skdptest import optimal_rate
from skdptest.evalue._laws import _certify, _UnivariateLaws, make_laws
from skdptest.evalue._optimal import optimal_statistic, tslr_statistic
from tests.evalue._reference import bern_kl, crossings, norm_logpdf, variational_rate

P0 = 0.3
# (q, eps, R_eps, KL) from the reference table of evalues.md
TABLE = [
    (0.5, 0.5, 0.072175, 0.087177),
    (0.5, 1.0, 0.087177, 0.087177),
    (0.6, 1.0, 0.184265, 0.192042),
    (0.7, 0.5, 0.172175, 0.338919),
    (0.7, 1.0, 0.284265, 0.338919),
]


@pytest.mark.parametrize("q, eps, rate, kl", TABLE)
def test_bernoulli_table_matches_reference_and_variational_definition(q, eps, rate, kl):
    r = optimal_rate(stats.bernoulli(P0), stats.bernoulli(q), eps)
    assert r.rate == pytest.approx(rate, abs=5e-7)
    assert r.kl == pytest.approx(kl, abs=5e-7)
    assert r.kl == pytest.approx(bern_kl(q, P0), rel=1e-12)
    assert r.rate == pytest.approx(variational_rate(P0, q, eps), abs=1e-9)
    assert r.rate <= r.kl + 1e-15


@pytest.mark.parametrize("q, eps", [(q, e) for q, e, _, _ in TABLE])
def test_e_star_is_normalised_and_has_rate_as_e_power(q, eps):
    r = optimal_rate(stats.bernoulli(P0), stats.bernoulli(q), eps)
    lr = np.array([(1 - q) / (1 - P0), q / P0])
    e_star = np.clip(lr, r.c1, r.c2)
    # E_P[E*] = 1 and E_Q[log E*] = R by direct two-point sums
    assert (1 - P0) * e_star[0] + P0 * e_star[1] == pytest.approx(1.0, abs=1e-14)
    assert (1 - q) * math.log(e_star[0]) + q * math.log(e_star[1]) == pytest.approx(
        r.rate, abs=1e-13
    )
    assert math.log(r.c2 / r.c1) == pytest.approx(eps, abs=1e-12)


@pytest.mark.parametrize("eps, c1, c2", [(1.0, 0.659855, 1.793672), (0.5, 0.837089, 1.380126)])
def test_binary_clipped_closed_form(eps, c1, c2):
    r = optimal_rate(stats.bernoulli(P0), stats.bernoulli(0.7), eps)
    closed_c1 = 1.0 / (1 - P0 + P0 * math.exp(eps))
    assert r.c1 == pytest.approx(closed_c1, rel=1e-12)
    assert r.c2 == pytest.approx(math.exp(eps) * closed_c1, rel=1e-12)
    assert (r.c1, r.c2) == pytest.approx((c1, c2), abs=1e-6)


def test_flat_case_returns_the_unclipped_likelihood_ratio():
    # max LR / min LR = (5/3) / (5/7) = 7/3 < e: the likelihood ratio is not clipped
    laws = make_laws(stats.bernoulli(P0), stats.bernoulli(0.5))
    stat, r = optimal_statistic(laws, 1.0)
    L = np.log(np.array([0.5 / 0.7, 0.5 / 0.3]))
    np.testing.assert_allclose(stat.log_e(L), L, atol=1e-13)
    assert r.rate == pytest.approx(r.kl, abs=1e-13)
    # flat continuous case: logistic shift has a bounded likelihood ratio
    r = optimal_rate(stats.logistic(), stats.logistic(loc=0.3), 1.0)
    assert r.rate == pytest.approx(r.kl, rel=1e-6)


def test_finite_discrete_with_more_points_is_normalised():
    null, alt = stats.binom(10, 0.4), stats.binom(10, 0.6)
    r = optimal_rate(null, alt, 0.7)
    k = np.arange(11)
    e_star = np.clip(alt.pmf(k) / null.pmf(k), r.c1, r.c2)
    assert np.dot(null.pmf(k), e_star) == pytest.approx(1.0, abs=1e-13)
    assert np.dot(alt.pmf(k), np.log(e_star)) == pytest.approx(r.rate, abs=1e-13)


def test_gaussian_closed_form_matches_generic_univariate_path():
    null, alt = stats.norm(0, 1), stats.norm(0.8, 1)
    gauss = optimal_rate(null, alt, 1.0)
    generic = _UnivariateLaws(null, alt, *_certify(null, alt))
    assert generic.exact
    stat, r = optimal_statistic(generic, 1.0)
    assert r.c1 == pytest.approx(gauss.c1, rel=1e-10)
    assert r.rate == pytest.approx(gauss.rate, abs=1e-7)
    assert gauss.kl == pytest.approx(0.32, rel=1e-9)


def test_closed_form_gaussian_densities_match_scipy():
    x = np.linspace(-40, 40, 1001)
    for mu, sd in [(0, 1), (1, 1), (0.5, 1.6)]:
        np.testing.assert_allclose(norm_logpdf(x, mu, sd), stats.norm(mu, sd).logpdf(x),
                                   rtol=1e-14, atol=1e-14)


def test_gaussian_normaliser_by_independent_quadrature():
    null, alt = stats.norm(0, 1), stats.norm(1, 1)
    r = optimal_rate(null, alt, 1.0)

    def e_star(x):
        return min(r.c2, max(r.c1, math.exp(norm_logpdf(x, 1, 1) - norm_logpdf(x, 0, 1))))

    mass = integrate.quad(lambda x: e_star(x) * math.exp(norm_logpdf(x, 0, 1)), -40, 40,
                          points=[-3, 0, 3], limit=400, epsabs=1e-13)[0]
    assert mass == pytest.approx(1.0, abs=1e-10)
    power = integrate.quad(lambda x: math.log(e_star(x)) * math.exp(norm_logpdf(x, 1, 1)),
                           -40, 40, points=[-3, 0, 3], limit=400, epsabs=1e-13)[0]
    assert power == pytest.approx(r.rate, abs=1e-10)


def test_unequal_variance_univariate_normaliser_by_quadrature():
    null, alt = stats.norm(0, 1), stats.norm(0.5, 1.6)
    r = optimal_rate(null, alt, 1.0)

    def g(x):
        return norm_logpdf(x, 0.5, 1.6) - norm_logpdf(x, 0, 1)

    edges = [-40.0, *crossings(g, [math.log(r.c1), math.log(r.c2)]), 40.0]
    assert len(edges) == 6  # a quadratic log-ratio crosses each level twice

    def e_star(x):
        return min(r.c2, max(r.c1, math.exp(g(x))))

    mass = math.fsum(
        integrate.quad(lambda x: e_star(x) * math.exp(norm_logpdf(x, 0, 1)), a, b,
                       epsabs=1e-15, epsrel=1e-13, limit=400)[0]
        for a, b in zip(edges[:-1], edges[1:], strict=True)
    )
    assert mass == pytest.approx(1.0, abs=1e-12)


def test_rate_increases_with_epsilon_to_kl():
    null, alt = stats.bernoulli(P0), stats.bernoulli(0.7)
    rates = [optimal_rate(null, alt, e).rate for e in (0.1, 0.5, 1.0, 1.6, 2.0, 10.0)]
    assert np.all(np.diff(rates[:4]) > 0)  # clipping binds while ε < log(49/9) = 1.69
    kl = bern_kl(0.7, P0)
    assert rates[3] < kl
    assert rates[4:] == pytest.approx([kl, kl], abs=1e-12)  # flat from there on


def test_tslr_has_log_range_epsilon_and_is_an_e_value():
    eps = 0.8
    laws = make_laws(stats.bernoulli(P0), stats.bernoulli(0.9))
    stat = tslr_statistic(laws, eps)
    assert stat.log_hi - stat.log_lo <= eps + 1e-12
    L = np.log(np.array([0.1 / 0.7, 0.9 / 0.3]))
    e = np.exp(stat.log_e(L))
    assert np.dot([0.7, 0.3], e) <= 1.0 + 1e-15


def test_optimal_refuses_laws_without_exact_normaliser():
    null = stats.multivariate_normal(np.zeros(2), np.eye(2))
    alt = stats.multivariate_normal(np.ones(2), 2 * np.eye(2))
    with pytest.raises(ValueError, match="statistic='tslr'"):
        optimal_rate(null, alt, 1.0)
    with pytest.raises(ValueError, match="statistic='tslr'"):
        optimal_rate(stats.poisson(3), stats.poisson(4), 1.0)


@pytest.mark.parametrize(
    "null, alt, eps, exc, match",
    [
        ("N(0,1)", stats.norm(), 1.0, TypeError, "null must be a frozen scipy.stats"),
        (stats.norm(), stats.bernoulli(0.5), 1.0, ValueError, "both be discrete or both"),
        (stats.norm(), stats.norm(1), 0.0, ValueError,
         r"epsilon must be a real number in \(0, inf\); got 0\.0"),
        (stats.norm(), stats.norm(1), float("nan"), ValueError,
         r"epsilon must be a real number in \(0, inf\); got nan"),
    ],
)
def test_optimal_rate_bad_input(null, alt, eps, exc, match):
    with pytest.raises(exc, match=match):
        optimal_rate(null, alt, eps)
