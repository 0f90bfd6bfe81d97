"""Privacy accountants of the ledger: privacy profiles, filters and batch reports.

A spend is recorded with its ε, its δ and the *privacy profile* of the release:

``"pure"``
    Any ε-DP release (the generic profile every estimator may declare). Its privacy
    loss is dominated by binary randomized response with parameter ε, which is the
    worst case of pure ε-DP (Kairouz, Oh and Viswanath 2015, Theorem 2.2; by the
    data-processing inequality its Rényi divergences and its privacy loss
    distribution bound those of any ε-DP release). A discrete Laplace release of a
    quantity whose sensitivity is one step of its grid *is* randomized response
    (its privacy loss takes only the values ±ε), so this profile is exact for it.
``"laplace"``
    A release that is one continuous Laplace draw of scale sensitivity/ε added to a
    real-valued quantity, or a post-processing of it.

Accountants (fixed when a ledger is created) turn a spend into a *loss* that the
ledger sums exactly and compares with a fixed limit, in O(1):

``"basic"``
    loss = ε; the limit is the total ε (and δ adds up separately).
``"zcdp"``
    loss = ρ, the zCDP of the release: ε²/2 for ``"pure"`` (Bun and Steinke 2016,
    Proposition 3.3) and ε + exp(-ε) - 1 for ``"laplace"`` (exact: Harrison and
    Manurangsi 2026, Theorem 1). The limit ρ* is the largest ρ whose conversion to
    (ε, δ)-DP (Canonne, Kamath and Steinke 2020, Proposition 12, through
    ``dp_accounting``) does not exceed the target.
``"rdp"``
    loss = the Rényi divergence of one fixed order α (chosen when the ledger is
    created): randomized response's for ``"pure"``, the Laplace mechanism's
    (Mironov 2017, Proposition 6) for ``"laplace"``. The limit is the largest
    loss whose conversion at that order does not exceed the target.

Why a fixed limit on running sums is valid when ε is chosen adaptively: the Rényi
filter of Feldman and Zrnic (2021, Theorem 3.1) says that if the Rényi divergences
of order α of adaptively chosen releases always add up to at most B, the whole
interaction is (α, B)-RDP. The zCDP check Σρ_i ≤ ρ* is that filter at every order
α > 1 at once (B = αρ*), hence ρ*-zCDP; the RDP check is the filter at its one order.
Choosing the order *after* the fact (the minimum over orders) is valid only for a
batch declared in advance, and so is the privacy-loss-distribution composition of
:func:`batch_epsilon`.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "ACCOUNTANTS",
    "PROFILES",
    "batch_epsilon",
    "default_order",
    "loss",
    "loss_limit",
    "rdp_batch_epsilon",
    "rdp_epsilon",
    "rdp_laplace",
    "rdp_pure",
    "rho",
    "zcdp_epsilon",
]

ACCOUNTANTS = ("basic", "zcdp", "rdp")
PROFILES = ("pure", "laplace")

# The limit is computed a little below the exact solution so that the ledger's relative
# slack for rounding (1e-9) never admits a composed ε above the target.
_LIMIT_MARGIN = 1e-8


def _dp_accounting():
    try:
        from dp_accounting.pld import common, privacy_loss_distribution
        from dp_accounting.rdp import rdp_privacy_accountant
    except ImportError as exc:  # pragma: no cover - a core dependency
        raise ImportError(
            "The 'zcdp' and 'rdp' accountants and budget reports need the dp-accounting "
            "package: pip install dp-accounting"
        ) from exc
    return common, privacy_loss_distribution, rdp_privacy_accountant


def _orders():
    return list(_dp_accounting()[2].DEFAULT_RDP_ORDERS)


def rho(epsilon, profile):
    """zCDP parameter ρ of one release.

    Parameters
    ----------
    epsilon : float
        The release's ε (> 0).
    profile : {"pure", "laplace"}
        Its privacy profile.

    Returns
    -------
    float
        ε²/2 for ``"pure"``; ε + exp(-ε) - 1 for ``"laplace"``.

    Examples
    --------
    >>> from skdptest._accountants import rho
    >>> rho(0.1, "pure"), round(rho(0.1, "laplace"), 10)
    (0.005000000000000001, 0.004837418)
    """
    if profile == "pure":
        return epsilon * epsilon / 2
    if epsilon < 1e-3:
        # ε + expm1(-ε) cancels; its series alternates, so the partial sum ending on a
        # positive term is an upper bound.
        return epsilon**2 / 2 - epsilon**3 / 6 + epsilon**4 / 24
    return epsilon + math.expm1(-epsilon)


def rdp_pure(epsilon, order):
    """Rényi divergence of order ``order`` of randomized response with parameter ε.

    The largest Rényi divergence any ε-DP release can have (see the module notes).
    """
    a = float(order)
    # p = e^ε/(1 + e^ε), q = 1 - p: D = log(q e^{αε} + p e^{-αε})/(α - 1), written with
    # log1p and expm1 so that small ε keeps its relative precision.
    p = 1 / (1 + math.exp(-epsilon))
    q = 1 - p if epsilon > 1 else math.exp(-epsilon) * p
    if a * epsilon > 700:  # e^{αε} overflows: log(q) + αε dominates
        return (math.log(q) + a * epsilon) / (a - 1)
    return math.log1p(q * math.expm1(a * epsilon) + p * math.expm1(-a * epsilon)) / (a - 1)


def rdp_laplace(epsilon, order):
    """Rényi divergence of order ``order`` of the Laplace mechanism of parameter ε.

    Mironov (2017), Proposition 6: ε + log(1 + (α - 1)(exp((1 - 2α)ε) - 1)/(2α - 1))/(α - 1).
    """
    a = float(order)
    return epsilon + math.log1p((a - 1) * math.expm1((1 - 2 * a) * epsilon) / (2 * a - 1)) / (
        a - 1
    )


def rdp(epsilon, profile, order):
    """Rényi divergence of one release of the given profile at ``order``."""
    return rdp_pure(epsilon, order) if profile == "pure" else rdp_laplace(epsilon, order)


def loss(accountant, epsilon, profile, order=0.0):
    """What a release of (ε, profile) adds to a ledger's running sum."""
    if accountant == "basic":
        return epsilon
    if accountant == "zcdp":
        return rho(epsilon, profile)
    return rdp(epsilon, profile, order)


def _convert(orders, curve, delta):
    """min over orders of the RDP-to-DP conversion that ``dp_accounting`` uses.

    Canonne, Kamath and Steinke (2020), Proposition 12: at order α > 1.01,
    ε = r + log(1 - 1/α) - log(δα)/(α - 1); vectorised (the ledger's limit is found by
    bisection on it). ``tests/test_budget_accountants.py`` checks it equals
    ``dp_accounting.rdp.compute_epsilon``.
    """
    a = np.asarray(orders, dtype=float)
    r = np.asarray(curve, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        eps = r + np.log1p(-1 / a) - np.log(delta * a) / (a - 1)
    eps = np.where(a > 1.01, eps, np.inf)
    eps = np.where(delta**2 + np.expm1(-r) > 0, 0.0, eps)
    return float(max(0.0, eps.min()))


def zcdp_epsilon(rho_total, delta):
    """ε of (ε, δ)-DP implied by ρ-zCDP (Canonne, Kamath and Steinke 2020, Prop. 12)."""
    if rho_total == 0:
        return 0.0
    orders = np.asarray(_orders())
    return _convert(orders, orders * rho_total, delta)


def rdp_epsilon(loss_total, order, delta):
    """ε of (ε, δ)-DP implied by (α, loss)-RDP at one order α."""
    if loss_total == 0:
        return 0.0
    return _convert([order], [loss_total], delta)


def _solve(convert, epsilon):
    """Largest x with convert(x) <= epsilon (convert increasing), by bisection."""
    low, high = 0.0, 1.0
    while convert(high) <= epsilon:
        low, high = high, 2 * high
    for _ in range(200):
        mid = (low + high) / 2
        if mid in (low, high):
            break
        if convert(mid) <= epsilon:
            low = mid
        else:
            high = mid
    return low * (1 - _LIMIT_MARGIN)


def default_order(epsilon, delta):
    """The Rényi order of a new ``"rdp"`` ledger: the best order for its zCDP limit.

    Many small releases compose like a Gaussian mechanism, whose Rényi curve is
    linear in α; the order that converts the ledger's zCDP limit best is then the
    order that will convert the final sum best.
    """
    rho_limit = loss_limit("zcdp", epsilon, delta)
    orders = np.asarray(_orders())
    costs = [_convert([a], [a * rho_limit], delta) for a in orders]
    return float(orders[int(np.argmin(costs))])


def loss_limit(accountant, epsilon, delta, order=0.0):
    """The limit of a ledger's running sum of losses for a target (ε, δ)."""
    if accountant == "basic":
        return epsilon
    if accountant == "zcdp":
        return _solve(lambda r: zcdp_epsilon(r, delta), epsilon)
    return _solve(lambda r: rdp_epsilon(r, order, delta), epsilon)


def rdp_batch_epsilon(entries, delta):
    """ε of the Rényi composition of ``entries``, best order chosen afterwards (batch)."""
    if not entries:
        return 0.0
    orders = _orders()
    curve = [math.fsum(rdp(e, p, a) * n for e, _, p, n in entries) for a in orders]
    return _convert(orders, curve, delta)


def batch_epsilon(entries, delta):
    """ε of the privacy-loss-distribution composition of ``entries`` at ``delta``.

    ``entries`` are ``(epsilon, delta, profile, count)`` tuples. Valid for the batch
    of releases as if it had been declared in advance, not as an adaptive filter.
    """
    if not entries:
        return 0.0
    common, pld, _ = _dp_accounting()
    total = None
    for eps, d, profile, count in entries:
        if profile == "laplace" and d == 0:
            one = pld.from_laplace_mechanism(1.0 / eps, sensitivity=1.0)
        else:
            one = pld.from_privacy_parameters(common.DifferentialPrivacyParameters(eps, d))
        one = one.self_compose(count) if count > 1 else one
        total = one if total is None else total.compose(one)
    return float(total.get_epsilon_for_delta(delta))


def largest_epsilon(accountant, loss_left, order=0.0):
    """The largest ε of one pure spend whose loss is at most ``loss_left``."""
    if loss_left <= 0:
        return 0.0
    if accountant == "basic":
        return loss_left
    if accountant == "zcdp":
        return math.sqrt(2 * loss_left)
    low, high = 0.0, 1.0
    while rdp_pure(high, order) <= loss_left:
        low, high = high, 2 * high
        if high > 1e6:
            return math.inf
    for _ in range(100):
        mid = (low + high) / 2
        if rdp_pure(mid, order) <= loss_left:
            low = mid
        else:
            high = mid
    return low
