"""Batch schedules of the private e-process (public: functions of the laws and ε).

A schedule is an iterator of batch sizes. Validity does not depend on it (each
batch e-value is valid whatever its size); power and the granularity of the
stopping time do.
"""

from __future__ import annotations

import math
from itertools import count

from scipy import optimize

__all__ = ["auto_schedule", "fixed_schedule", "geometric_schedule", "paper_schedule"]


def geometric_schedule(first, ratio):
    """Batch ends ⌈first · ratio^j⌉: sizes are their differences (each ≥ 1)."""
    end = 0
    for j in count():
        new_end = max(end + 1, math.ceil(first * ratio**j))
        yield new_end - end
        end = new_end


def fixed_schedule(sizes):
    """The given batch sizes, then the last one repeated."""
    sizes = list(sizes)
    yield from sizes
    while True:
        yield sizes[-1]


def auto_schedule(rate, exact=False):
    """The default batch sizes, in units of 1/R rows (R the per-row rate).

    Merged statistics pay a noise compensator per batch, so their batches grow
    geometrically (ratio 1.5) from a first batch carrying about 4 nats of expected
    evidence. The exact likelihood-ratio batches pay no compensator, only the
    information lost to one noise draw per batch, so they start at 3 nats and
    continue with batches of 1.5 nats growing by 15 % per batch, which keeps the
    overshoot of the stopping time small. Tuned by simulation on the Bernoulli
    rows of the paper's table (benchmarks/eprocess_stopping.py).
    """
    if not exact:
        return geometric_schedule(max(1.0, 4.0 / rate), 1.5)

    def sizes():
        yield max(1, math.ceil(3.0 / rate))
        for j in count():
            yield max(1, math.ceil(1.5 / rate * 1.15**j))

    return sizes()


def paper_schedule(rate, c, rho):
    """Algorithm 1 of Jacobsen et al. (reconstructed from the paper's summary).

    Batch ends t_1 = ρλ + ρ²λC / (μ(ρλ − 1)²), t_{j+1} = ρ(λ t_j − j C / μ) with
    C = −log(1 − c²λ²), μ = R_ε, c = log(E_max/E_min)/ε <= 1, guaranteeing
    E_Q[log Ẽ_N] >= E_Q[N] μ / ρ for stopping times N >= t_1. The summary does not
    fix λ; we take the λ in (1/ρ, min(1, 1/c)) that minimises t_1.

    Returns
    -------
    sizes : iterator of int
        The batch sizes.
    bet : float
        The λ used (the merging bet of every batch).
    """
    hi = min(1.0, 1.0 / c) if c > 0 else 1.0

    def compensator(lam):
        return -math.log1p(-((c * lam) ** 2)) if c * lam < 1 else math.inf

    def t1(lam):
        return rho * lam + rho**2 * lam * compensator(lam) / (rate * (rho * lam - 1) ** 2)

    lo = 1.0 / rho
    res = optimize.minimize_scalar(
        t1, bounds=(lo + 1e-6 * (hi - lo), hi - 1e-6 * (hi - lo)), method="bounded"
    )
    lam = float(res.x)
    C = compensator(lam)

    def sizes():
        end, t = 0, t1(lam)
        for j in count(1):
            new_end = max(end + 1, math.ceil(t))
            yield new_end - end
            end = new_end
            t = max(rho * (lam * t - j * C / rate), end + 1)

    return sizes(), lam
