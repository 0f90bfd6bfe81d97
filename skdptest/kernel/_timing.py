"""Running-time predictions of kernel releases, from public sizes, before the charge.

A fit's time is predicted from its public shape (N, the number of features, the group
sizes' count, B, the route and the bandwidth grid) and from this machine's speed on the
building blocks of the release, measured on public random inputs (never the data):
the triangular quadratic forms with mask coefficients (:func:`._mmd.triangular_quadratic_forms`,
the dominant cost), one ``exp`` of a distance matrix and the relabelling draws. The
measurement runs once per process and BLAS thread count (kept
``CALIBRATION_SECONDS``), and only when a prediction could matter: a bound from an
optimistic and a pessimistic machine decides the rest without it.

Used for the automatic progress (``verbose=None``: progress on stderr when a fit is
predicted to take more than ``AUTO_PROGRESS_SECONDS``) and for ``max_time``, which
refuses before the charge a fit predicted to take longer. The prediction and the
measurement read no private value, so neither the refusal nor the progress depends on
the data.
"""

from __future__ import annotations

import math
import time

import numpy as np

from .._params import InvalidParameterError
from .._threads import blas_threads

__all__ = [
    "AUTO_PROGRESS_SECONDS",
    "MachineRates",
    "check_max_time",
    "machine_rates",
]

# A fit predicted above this many seconds shows its progress by itself (verbose=None).
AUTO_PROGRESS_SECONDS = 10.0
# A measurement of the machine is reused this long (seconds), per BLAS thread count.
CALIBRATION_SECONDS = 60.0
# Size of the public calibration problem (rows of K, coefficient rows).
_CAL_N, _CAL_C = 288, 240
# Bounds on the machine (work units per second) that decide without measuring: no
# machine is faster than FAST, none much slower than SLOW (a 2-core machine loaded by
# five times as many processes measured tri 2.8e9, exp 7e7, mask 1e8).
_FAST = {"tri": 2e11, "exp": 2e9, "mask": 2e9}
_SLOW = {"tri": 1e9, "exp": 2e7, "mask": 2e7}
_CACHE = {}


class MachineRates:
    """Work units per second of the building blocks: ``tri`` (``N^2 C`` of the
    triangular forms), ``exp`` (Gram entries evaluated from distances) and ``mask``
    (relabelling entries drawn)."""

    def __init__(self, tri, exp, mask):
        self.tri, self.exp, self.mask = float(tri), float(exp), float(mask)

    def seconds(self, work):
        """Seconds of ``work`` (a dict of units per building block)."""
        return (work.get("tri", 0.0) / self.tri + work.get("exp", 0.0) / self.exp
                + work.get("mask", 0.0) / self.mask)


def _best_of(func, repeats=2):
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        func()
        best = min(best, time.perf_counter() - t0)
    return max(best, 1e-6)


def _measure():
    # public random inputs: a kernel-like matrix, masks, distances (never the data)
    from ._kernels import gram_from_distances
    from ._relabel import _MaskRows, _tie_generator, _two_group_masks
    from ._route_exact import triangular_quadratic_forms

    rng = np.random.default_rng(0)
    n, c = _CAL_N, _CAL_C
    D = rng.random((n, n))
    K = np.exp(-D)
    np.fill_diagonal(K, 1.0)
    masks = _two_group_masks(n, n // 2, c, rng, _tie_generator(rng))
    rows = _MaskRows(masks, 2.0 / n, -2.0 / n)
    out = np.empty_like(D)
    triangular_quadratic_forms(K, rows, 4.0 / n)  # warm-up (threads started)
    t_tri = _best_of(lambda: triangular_quadratic_forms(K, rows, 4.0 / n))
    t_exp = _best_of(lambda: gram_from_distances(D, 0.5, out))
    t_mask = _best_of(lambda: _two_group_masks(n, n // 2, c, rng, _tie_generator(rng)))
    return MachineRates(n * n * c / t_tri, n * n / t_exp, n * c / t_mask)


def machine_rates():
    """This machine's :class:`MachineRates`, measured on public inputs (cached)."""
    key = blas_threads()
    now = time.monotonic()
    hit = _CACHE.get(key)
    if hit is not None and now - hit[0] < CALIBRATION_SECONDS:
        return hit[1]
    rates = _measure()
    _CACHE[key] = (now, rates)
    return rates


def predicted_seconds(work, *, threshold=None):
    """Predicted seconds of ``work``, or a bound that already decides ``threshold``.

    With ``threshold``, the machine is measured only when the optimistic and the
    pessimistic bounds fall on either side of it; otherwise the bound on the decided
    side is returned (the pessimistic one when even it stays below).
    """
    if threshold is not None:
        slow = MachineRates(**_SLOW).seconds(work)
        if slow <= threshold:
            return slow
        fast = MachineRates(**_FAST).seconds(work)
        if fast > threshold:
            return fast
    return machine_rates().seconds(work)


def check_max_time(work, max_time, what):
    """Refuse (before the charge) a fit predicted to take more than ``max_time`` seconds.

    Returns the prediction (None when ``max_time`` is None and nothing was measured).
    """
    if max_time is None:
        return None
    seconds = predicted_seconds(work, threshold=max_time)
    if seconds > max_time:
        seconds = machine_rates().seconds(work)  # the message quotes the measured one
        raise InvalidParameterError(
            f"{what} is predicted to take about {_format(seconds)} on this machine, above "
            f"max_time={max_time:g} s (a prediction from public sizes; nothing was "
            "charged). Raise max_time, lower n_permutations, or use method='features' "
            "for large N."
        )
    return seconds


def _format(seconds):
    if seconds < 120:
        return f"{seconds:.3g} s"
    if seconds < 7200:
        return f"{seconds / 60:.3g} min"
    return f"{seconds / 3600:.3g} h"


def format_seconds(seconds):
    """A duration for messages (s, min or h)."""
    return _format(seconds)
