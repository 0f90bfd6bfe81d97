"""Running-time predictions of kernel releases, from public sizes, before the charge.

A fit's time is predicted from its public shape (N, the number of features, the group
sizes' count, B, the route and the bandwidth grid) and from this machine's speed on the
building blocks of the release, measured on public random inputs (never the data):
the triangular quadratic forms with mask coefficients (:func:`._mmd.triangular_quadratic_forms`,
the dominant cost), one ``exp`` of a distance matrix and the relabelling draws.

The building blocks are timed in CPU seconds (a short measurement's wall time depends on
whether the scheduler let it run; its CPU time does not), on a problem of the fit's own
size up to ``_CAL_MAX_N`` rows (the triangular product's speed per unit grows with N,
about 2.5x from 288 to 2000 rows: a fixed small problem made the default aggregate's
prediction 3x pessimistic), then turned into wall seconds by :func:`wall_factor`: the
work is spread over the BLAS thread count in force, each thread getting a core or its
share of the cores with the current load. The measurement runs once per process, BLAS
thread count and size step (kept ``CALIBRATION_SECONDS``), and only when a prediction
could matter: a bound from an optimistic and a pessimistic machine decides the rest
without it.

Used for the automatic progress (``verbose=None``: progress on stderr when a fit is
predicted to take more than ``AUTO_PROGRESS_SECONDS``) and for ``max_time``, which
refuses before the charge a fit predicted to take longer. The prediction and the
measurement read no private value, so neither the refusal nor the progress depends on
the data.
"""

from __future__ import annotations

import math
import os
import time

import numpy as np

from .._params import InvalidParameterError
from .._threads import blas_threads

__all__ = [
    "AUTO_PROGRESS_SECONDS",
    "MachineRates",
    "calibration_size",
    "check_max_time",
    "machine_rates",
    "wall_factor",
]

# A fit predicted above this many seconds shows its progress by itself (verbose=None).
AUTO_PROGRESS_SECONDS = 10.0
# A measurement of the machine is reused this long (seconds), per BLAS thread count.
CALIBRATION_SECONDS = 60.0
# The public calibration problem: min(N, _CAL_MAX_N) rows (to the nearest multiple of
# _CAL_STEP, at least _CAL_MIN_N), _CAL_C coefficient rows: small beside the fits whose
# time it predicts, and large enough that the product's speed per unit grows little
# beyond it (figures: benchmarks/results/timing_prediction.txt).
_CAL_MIN_N, _CAL_MAX_N, _CAL_STEP, _CAL_C = 256, 1024, 128, 512
# Bounds on the machine (work units per wall second) that decide without measuring: no
# machine is faster than FAST, none much slower than SLOW (a 2-core machine loaded by
# five times as many processes measured tri 2.8e9, exp 7e7, mask 1e8).
_FAST = {"tri": 2e11, "exp": 2e9, "mask": 2e9}
_SLOW = {"tri": 1e9, "exp": 2e7, "mask": 2e7}
_CACHE = {}


class MachineRates:
    """Work units per second of the building blocks: ``tri`` (``N^2 C`` of the
    triangular forms), ``exp`` (Gram entries evaluated from distances) and ``mask``
    (relabelling entries drawn), and the wall seconds per CPU second of the threaded
    release (:func:`wall_factor`; 1 for the wall-time bounds)."""

    def __init__(self, tri, exp, mask, factor=1.0):
        self.tri, self.exp, self.mask = float(tri), float(exp), float(mask)
        self.factor = float(factor)

    def cpu_seconds(self, work):
        """CPU seconds of ``work`` (a dict of units per building block)."""
        return (work.get("tri", 0.0) / self.tri + work.get("exp", 0.0) / self.exp
                + work.get("mask", 0.0) / self.mask)

    def seconds(self, work):
        """Wall seconds of ``work``."""
        return self.cpu_seconds(work) * self.factor


def wall_factor(threads=None, *, load=None, cores=None):
    """Wall seconds per CPU second of a release on ``threads`` threads (the BLAS thread
    count in force), with ``load`` other runnable processes (the one-minute load
    average) on ``cores`` cores: ``1 / min(threads, cores)`` on an idle machine, and
    ``(load + threads) / (cores threads)`` when the threads share the cores with more
    runnable processes than there are cores."""
    threads = max(1, int(blas_threads() if threads is None else threads))
    if cores is None:
        try:
            cores = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):  # pragma: no cover - platform dependent
            cores = os.cpu_count() or 1
    if load is None:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):  # pragma: no cover - platform dependent
            load = 0.0
    cores = max(1, int(cores))
    return max(1.0 / min(threads, cores), (float(load) + threads) / (cores * threads))


def calibration_size(n=None):
    """Rows of the calibration's triangular product for a fit of ``n`` rows (public)."""
    if n is None:
        return _CAL_MIN_N
    steps = (int(n) + _CAL_STEP // 2) // _CAL_STEP
    return int(max(_CAL_MIN_N, min(_CAL_MAX_N, steps * _CAL_STEP)))


def _cpu_best_of(func, repeats=2):
    best = math.inf
    for _ in range(repeats):
        t0 = time.process_time()  # every thread of the process
        func()
        best = min(best, time.process_time() - t0)
    return max(best, 1e-6)


def _measure(n):
    # public random inputs: a kernel-like matrix, masks, distances (never the data)
    from ._relabel import _MaskRows, _tie_generator, _two_group_masks
    from ._route_aggregate import _gram_and_trace
    from ._route_exact import triangular_quadratic_forms

    rng = np.random.default_rng(0)
    c = _CAL_C
    K = rng.random((n, n))
    np.fill_diagonal(K, 1.0)
    masks = _two_group_masks(n, n // 2, c, rng, _tie_generator(rng))
    rows = _MaskRows(masks, 2.0 / n, -2.0 / n)
    warm = _MaskRows(masks[:c // 4], 2.0 / n, -2.0 / n)
    triangular_quadratic_forms(K, warm, 4.0 / n)  # warm-up (threads started)
    # best of 3: under load a short measurement is sometimes slowed by the processes
    # sharing its cores' caches (seen: 1.3e10 against 2.0-2.3e10 units per CPU second)
    t_tri = _cpu_best_of(lambda: triangular_quadratic_forms(K, rows, 4.0 / n), 3)
    # the aggregate's exp (threaded from 2^19 entries), its sum and trace: K as distances
    out = np.empty_like(K)
    t_exp = _cpu_best_of(lambda: _gram_and_trace(K, 0.5, out))
    t_mask = _cpu_best_of(lambda: _two_group_masks(n, n // 2, c, rng, _tie_generator(rng)))
    return n * n * c / t_tri, n * n / t_exp, n * c / t_mask


def machine_rates(n=None):
    """This machine's :class:`MachineRates` for a fit of ``n`` rows (public), measured on
    public inputs (cached), with the current :func:`wall_factor`."""
    threads = blas_threads()
    key = threads, calibration_size(n)
    now = time.monotonic()
    hit = _CACHE.get(key)
    if hit is None or now - hit[0] >= CALIBRATION_SECONDS:
        hit = _CACHE[key] = (now, _measure(key[1]))
    return MachineRates(*hit[1], factor=wall_factor(threads))


def predicted_seconds(work, *, threshold=None):
    """Predicted wall seconds of ``work``, or a bound that already decides ``threshold``.

    ``work["n"]``, when given, is the fit's row count (the calibration's size). With
    ``threshold``, the machine is measured only when the optimistic and the pessimistic
    bounds fall on either side of it; otherwise the bound on the decided side is
    returned (the pessimistic one when even it stays below).
    """
    if threshold is not None:
        slow = MachineRates(**_SLOW).seconds(work)
        if slow <= threshold:
            return slow
        fast = MachineRates(**_FAST).seconds(work)
        if fast > threshold:
            return fast
    return machine_rates(work.get("n")).seconds(work)


def check_max_time(work, max_time, what):
    """Refuse (before the charge) a fit predicted to take more than ``max_time`` seconds.

    Returns the prediction (None when ``max_time`` is None and nothing was measured).
    """
    if max_time is None:
        return None
    seconds = predicted_seconds(work, threshold=max_time)
    if seconds > max_time:
        seconds = predicted_seconds(work)  # the message quotes the measured one
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
