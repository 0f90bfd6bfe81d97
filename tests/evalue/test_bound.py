"""The finite-n certificate: no ε-DP e-value of two-point rows beats the exact
likelihood ratio of the count plus two-sided geometric noise (up to the grid slack)."""

import math

import numpy as np
import pytest
from scipy import integrate, optimize, stats

from skdptest.evalue import _bound
from skdptest.evalue._bound import _dual, two_point_epower_bound
from tests.evalue._reference import binomial_laws, dp_walks, geometric_kl, kl_columns


@pytest.mark.parametrize("n, p, q, eps", [(8, 0.3, 0.7, 1.0), (8, 0.3, 0.5, 1.0),
                                          (7, 0.2, 0.6, 0.5), (6, 0.4, 0.9, 2.0)])
def test_lp_over_all_walks_is_attained_by_the_geometric_mechanism(n, p, q, eps):
    """Independent of the dynamic programme: the LP over every extreme ray of the cone
    (2^n walks) plus the tents has the geometric mechanism's KL as its optimum, and the
    dual vector bounds F on every walk."""
    P, Q = binomial_laws(n, p, q)
    s = np.arange(n + 1)
    tents = np.exp(-eps * np.abs(s[None, :] - s[:, None]))
    cols = np.vstack([dp_walks(n, eps), tents])
    res = optimize.linprog(-kl_columns(cols, P, Q), A_eq=cols.T, b_eq=np.ones(n + 1),
                           bounds=(0, None), method="highs")
    assert res.status == 0
    geo = geometric_kl(n, p, q, eps)
    assert -res.fun == pytest.approx(geo, rel=1e-9, abs=1e-12)
    u_sign, u_log = _dual(np.log(P), np.log(Q), eps)
    u = u_sign * np.exp(u_log)
    assert np.all(kl_columns(cols, P, Q) <= cols @ u + 1e-12 * (cols @ Q))
    assert math.fsum(u) == pytest.approx(geo, rel=1e-12)


@pytest.mark.parametrize("n, p, q, eps", [(40, 0.3, 0.7, 1.0), (60, 0.3, 0.5, 1.0),
                                          (30, 0.3, 0.6, 0.5), (25, 0.2, 0.25, 2.0)])
def test_certificate_holds_and_matches_the_geometric_mechanism(n, p, q, eps):
    r = two_point_epower_bound(n, p, q, eps)
    assert r.certified
    assert r.geometric == pytest.approx(geometric_kl(n, p, q, eps), rel=1e-10)
    assert r.upper == pytest.approx(r.geometric + r.delta, rel=1e-15)
    assert r.delta == pytest.approx(0.02 + 1e-9)


def test_bound_is_below_the_asymptotic_rate_and_reaches_kl_without_privacy():
    """E_Q[log E] <= n R_ε at every n; as ε grows the optimum tends to n KL(Q || P)."""
    p, q, n = 0.3, 0.7, 50
    eps = 1.0
    c1 = 1 / (1 - p + p * math.exp(eps))  # both outcomes clipped (evalues.md)
    rate = eps * q + math.log(c1)
    assert two_point_epower_bound(n, p, q, eps).geometric < n * rate
    kl = q * math.log(q / p) + (1 - q) * math.log((1 - q) / (1 - p))
    assert two_point_epower_bound(n, p, q, 40.0).geometric == pytest.approx(n * kl, rel=1e-9)


def test_continuous_laplace_release_is_dominated():
    """Another ε-DP e-value (exact LR of S + Laplace(1/ε)) has e-power below the bound."""
    n, p, q, eps = 30, 0.3, 0.7, 1.0
    P, Q = binomial_laws(n, p, q)
    k = np.arange(n + 1)

    def dens(y, w):
        return float(np.sum(w * stats.laplace.pdf(y, k, 1 / eps)))

    def integrand(y):
        fq = dens(y, Q)
        return fq * math.log(fq / dens(y, P))

    edges = [-60.0, *k.tolist(), n + 60.0]
    kl = math.fsum(integrate.quad(integrand, a, b, epsabs=1e-13)[0]
                   for a, b in zip(edges[:-1], edges[1:], strict=True))
    r = two_point_epower_bound(n, p, q, eps)
    assert 0 < r.geometric - kl < 0.5
    assert kl < r.upper


def test_a_perturbed_dual_fails_the_certificate(monkeypatch):
    """The check can fail: lowering one coordinate of u makes some walk violate it."""
    real = _bound._dual

    def lowered(log_p, log_q, eps):
        sign, log = real(log_p, log_q, eps)
        u = sign * np.exp(log)
        u[len(u) // 2] -= 1e-4
        return np.sign(u), np.log(np.abs(u))

    monkeypatch.setattr(_bound, "_dual", lowered)
    r = two_point_epower_bound(40, 0.3, 0.7, 1.0)
    assert not r.certified and r.upper == math.inf


@pytest.mark.parametrize("seed", range(4))
def test_walk_programme_agrees_with_brute_force(seed):
    """The dynamic programme's verdict (some walk makes Σ φ c(ρ) positive) equals the
    brute-force maximum over all walks and all normalisations, for random duals."""
    n, p, q, eps = 7, 0.3, 0.7, 1.0
    P, Q = binomial_laws(n, p, q)
    rng = np.random.default_rng(seed)
    u_sign, u_log = _dual(np.log(P), np.log(Q), eps)
    u = u_sign * np.exp(u_log) + rng.normal(scale=0.02, size=n + 1)
    rho = np.linspace(-6, 6, 121)
    verdict = _bound._walk_max_sign(np.log(P), np.log(Q), (np.sign(u), np.log(np.abs(u))),
                                    rho, 0.0, eps)
    walks = dp_walks(n, eps)  # every walk up to scale: the sign of Σ φ c is scale-free
    c = Q[None, :] * (1 + rho[:, None]) - np.exp(rho)[:, None] * P[None, :] - u[None, :]
    brute = (c @ walks.T).max(axis=1) > 0
    assert np.array_equal(verdict, brute)
    assert verdict.any() and not verdict.all()  # both outcomes occur: the check is live
