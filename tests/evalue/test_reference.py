"""The oracles of ``_reference.py`` that compute one law in two ways agree.

Test files kept their own computations of the discrete Laplace law (scipy's, its pmf
written with tanh(r/2) or with (1 − e^{−r}) / (1 + e^{−r}), the law of a difference of
geometric variables, the cdf written out), of its tail cut and of its chi-square
audit; ``_reference.py`` keeps each under its own name, and these checks show that
they are one law.
"""

import math

import numpy as np
import pytest
from scipy import stats

from skdptest._noise import quantise_rate
from tests.evalue._reference import (
    chi2_pvalue_written,
    dlaplace_cdf,
    dlaplace_log_pmf,
    dlaplace_pmf_scipy,
    geometric_audit_pvalue,
    geometric_difference_pmf,
    geometric_pmf_written,
    tail_cut_closed_form,
    tail_cut_search,
)

RATES = [0.1, 0.3, quantise_rate(0.7), 1.0, 2.0]


@pytest.mark.parametrize("rate", RATES)
def test_the_discrete_laplace_pmfs_and_cdf_are_one_law(rate):
    z = np.arange(-40, 41)
    ref = dlaplace_pmf_scipy(z, rate)
    np.testing.assert_allclose(np.exp(dlaplace_log_pmf(z, rate)), ref, rtol=1e-12)
    np.testing.assert_allclose(geometric_pmf_written(z, rate), ref, rtol=1e-12)
    np.testing.assert_allclose(geometric_difference_pmf(z, rate), ref, rtol=1e-12)
    cdf = dlaplace_cdf(np.arange(-41, 41), rate)
    np.testing.assert_allclose(np.diff(cdf), ref, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(cdf, stats.dlaplace.cdf(np.arange(-41, 41), rate), rtol=1e-12)


@pytest.mark.parametrize("rate", RATES)
@pytest.mark.parametrize("tol", [1e-15, 1e-16])
def test_both_tail_cuts_bound_the_exact_tail(rate, tol):
    """Both bounds hold and are below tol; the closed form, without tanh(r/2), is the
    looser one, so its cut is at least the searched one."""
    m, tail = tail_cut_search(rate, tol)
    cut, bound = tail_cut_closed_form(rate, tol)
    for c, b in ((m, tail), (cut, bound)):
        exact = 2 * math.tanh(rate / 2) * math.exp(-rate * (c + 1)) / -math.expm1(-rate)
        assert exact <= b * (1 + 1e-12) and b < tol
        k = np.arange(c + 1, c + 1 + math.ceil(60 / rate))  # the rest is < e^-60 of it
        assert 2 * math.fsum(dlaplace_pmf_scipy(k, rate)) <= b * (1 + 1e-9)
    assert m <= cut


@pytest.mark.parametrize("eps, half_width", [(0.7, 5), (2.0, 3)])
def test_the_two_chi_square_audits_agree_at_the_quantised_rate(eps, half_width):
    z = stats.dlaplace.rvs(quantise_rate(eps), size=20000, random_state=3)
    assert geometric_audit_pvalue(z, eps, half_width) == pytest.approx(
        chi2_pvalue_written(z, quantise_rate(eps), half_width), rel=1e-9)
