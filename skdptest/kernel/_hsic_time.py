"""dpHSIC's running-time prediction (public sizes only) and its progress report.

The prediction is made in the plan, before the budget is charged, from public sizes
(n, the numbers of features, B, the grids, the route) and this machine's speed: a
count of the route's dominant operations (kernel exponentials, FFTs, complex
multiply-adds of the spectra products, gathered products of the permutation traces)
times per-operation CPU costs measured once per process by a ~0.1 s micro-benchmark on
public arrays (never on the data), taken only when the reference costs already predict
more than half a second, times the machine's current load factor (the one-minute load
average over the available cores: a fit sharing two cores with ten busy processes takes
about five times its CPU time with per-thread sharing; under autogroup scheduling a
process gets about the same share whatever its thread count: on 2 cores at load 10-12 a
default fit took 3.3-3.9 times its CPU time). ``max_time`` refuses, before the charge,
a fit predicted to take longer; ``verbose=None`` prints progress when the prediction
exceeds :data:`AUTO_PROGRESS_SECONDS`. Nothing printed is derived from the data.
"""

from __future__ import annotations

import math
import os
import sys
import time

import numpy as np

from .._params import InvalidParameterError
from ._hsic_aggregate import _DOUBLED_MAX
from ._kernels import exp_of_exponents

__all__ = ["AUTO_PROGRESS_SECONDS", "HSICProgress", "check_time", "predict_seconds"]

# verbose=None prints progress when a fit is predicted to take longer than this.
AUTO_PROGRESS_SECONDS = 10.0
# Reference per-operation costs in seconds (measured on the project's 2-core machine);
# replaced by this machine's measured costs when they predict more than _CALIBRATE_ABOVE.
_REFERENCE = {"exp": 1.5e-8, "fft": 1.0e-9, "mac": 1.0e-9, "einsum": 4.0e-9,
              "gather": 3.0e-9, "diag": 4.0e-8}
_CALIBRATE_ABOVE = 0.5
_measured = None


def _best_time(func, repeat=5):
    # the median of CPU times (a short measurement's wall time misses the load: the
    # scheduler favours a process that has just woken); the load enters by _load_factor
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        func()
        times.append(time.process_time() - t0)
    return sorted(times)[repeat // 2]


def _load_factor():
    """Wall seconds per CPU second a single-threaded fit can expect now: the one-minute
    load average (plus the fit) over the cores available to the process, at least 1."""
    try:
        cores = len(os.sched_getaffinity(0))
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # pragma: no cover - platform dependent
        return 1.0
    return max(1.0, (load + 1.0) / max(1, cores))


def _calibrate():
    """Per-operation costs on this machine, from public arrays (cached per process)."""
    global _measured
    if _measured is None:
        T = -np.geomspace(1e-6, 1e4, 2**17)  # exponents as the grid's (clamped too)
        exp = _best_time(lambda: exp_of_exponents(T.copy())) / T.size
        A = np.linspace(0.0, 1.0, 16 * 4096).reshape(16, 4096)
        fft = _best_time(lambda: np.fft.rfft(A, axis=1)) / (16 * 4096 * 12)
        m = 1025
        FA = np.full((m, 19, 16), 0.5 + 0.25j)
        FB = np.full((m, 16, 19), 0.25 - 0.5j)
        mac = _best_time(lambda: np.matmul(FA, FB)) / (m * 19 * 16 * 19)
        F = A[:, :2049] + 0j
        G = F[::-1].copy()
        einsum = _best_time(lambda: np.einsum("ij,ij->j", F, G)) / F.size
        L = np.linspace(0.0, 1.0, 1024 * 1024).reshape(1024, 1024)
        p = np.arange(1024)[::-1].copy()
        gather = _best_time(lambda: np.einsum("ij,ij->", L[:64], L.take(p[:64], axis=0)
                                              .take(p, axis=1))) / (64 * 1024)
        # the cyclic diagonals of a matrix out of cache, 256 at a time as _diagonal_spectra
        # gathers them (the 64-row gather above stays in cache: about 10x less per entry)
        idx = (p[::-1][None, :] + np.arange(256)[:, None]) % 1024
        diag = _best_time(lambda: L[p[::-1][None, :], idx]) / idx.size
        _measured = {"exp": exp, "fft": fft, "mac": mac, "einsum": einsum,
                     "gather": gather, "diag": diag}
    return _measured


def _counts(route, n, d_x, d_y, n_x, n_y, n_permutations, backend_numba=False):
    """Dominant operation counts of a route (public sizes only)."""
    n2, B = float(n) * n, n_permutations
    fft = float(n) * n * max(math.log2(n), 1.0)  # one length-n transform per row
    dims = d_x + d_y
    if route == "cyclic aggregate blocked":
        # exponentials (x twice), their centring, transposes and copies (about a
        # quarter of an exponential per element), spectra, the pair products
        return {"exp": (2 * n_x + n_y + 0.5 * dims + 1.5 * n_x + 0.5 * n_y) * n2,
                "fft": (n_x + n_y) * fft, "mac": n_x * n_y * n2 / 2}
    if route == "cyclic aggregate":
        # From profiles at n = 500, 1000 and 2000 (CPU seconds in units of the
        # calibration): each side's distances once (x: up to _DOUBLED_MAX rows; above,
        # every x Gram matrix is evaluated with its distances, 0.8 more), one exp per
        # Gram matrix with its multiply, trace and sum (1.3), the x centring and
        # conjugated spectra (1.3 per x entry); the diagonals' transforms read through a
        # doubled copy up to _DOUBLED_MAX rows (strided: 3.5 contiguous transforms, the
        # copy 1.5 gathers per entry), gathered by blocks above (1.3 calibrated diagonal
        # gathers per entry, 1.6 transforms); the spectra products one einsum per x
        # bandwidth over every y spectrum (1.1 calibrated elements per multiply-add).
        doubled = n <= _DOUBLED_MAX
        return {"exp": (1.3 * (n_x + n_y) + (1.3 if doubled else 2.1) * n_x
                        + 0.5 * dims) * n2,
                "fft": (3.5 if doubled else 1.6) * (n_x + n_y) * fft,
                "gather": (1.5 if doubled else 0.0) * (n_x + n_y) * n2,
                "diag": (0.0 if doubled else 1.3) * (n_x + n_y) * n2,
                "einsum": 1.1 * n_x * n_y * n2 / 2}
    if route == "aggregate":
        # random permutations, every pair in float64 (stacked_permutation_traces): one
        # gather of each x Gram matrix per permutation, then one real matrix product
        # against every y Gram matrix (measured at n = 200-800: about half a calibrated
        # complex multiply-add per real one, the products being thin)
        return {"exp": (n_x + 2 * n_y) * n2, "gather": n_x * n2 * (B + 1),
                "mac": 0.5 * n_x * n_y * n2 * (B + 1)}
    if route == "cyclic":
        return {"exp": 2 * n2, "fft": 2 * fft, "einsum": n2 / 2}
    if route == "exact":  # the blocked exact path: float32 pass over B permutations
        factor = 0.3 if backend_numba else 1.0
        return {"exp": 3 * n2, "gather": factor * n2 * (B + 1) / 2}
    return {}


def predict_seconds(route, n, d_x, d_y, n_x=1, n_y=1, n_permutations=0, *,
                    backend_numba=False, workers=1):
    """Predicted running time, in seconds, of a dpHSIC release (public sizes only).

    ``route`` is the release's route (``result_.method`` without ``"dpHSIC "``:
    "cyclic aggregate blocked", "cyclic aggregate", "aggregate", "cyclic", "exact");
    other routes (random features) return 0.0 (not predicted). ``workers`` bandwidths run
    at once (``n_jobs``) divide the aggregate's bandwidth work.
    """
    counts = _counts(route, n, d_x, d_y, n_x, n_y, n_permutations, backend_numba)
    costs = _REFERENCE
    total = sum(costs[k] * v for k, v in counts.items())
    if total > _CALIBRATE_ABOVE:
        costs = _calibrate()
        total = sum(costs[k] * v for k, v in counts.items()) * _load_factor()
    if "aggregate" in route:
        total /= max(1, min(int(workers), n_x))
    return total


def check_time(predicted, max_time, what):
    """Refuse (before the charge) a fit predicted to take longer than ``max_time``."""
    if max_time is not None and predicted > max_time:
        raise InvalidParameterError(
            f"{what} is predicted to take about {predicted:.3g} s on this machine, above "
            f"max_time={max_time} s. Raise max_time (or leave it None), or choose a "
            "cheaper route: kernel_params={'gamma': g} and y_kernel_params={'gamma': g} "
            "(one bandwidth pair), method='features', or fewer rows."
        )


class HSICProgress:
    """Progress of a long dpHSIC release on stderr: the predicted time first, then steps
    done, elapsed time and ETA. ``verbose`` 1 always prints, 0 never, None when the
    prediction exceeds :data:`AUTO_PROGRESS_SECONDS`. Public counts and times only."""

    def __init__(self, verbose, predicted, total, what, *, every=1.0):
        if verbose is None:
            verbose = 1 if predicted > AUTO_PROGRESS_SECONDS else 0
        self.verbose, self.total, self.what = int(verbose), max(1, int(total)), what
        self.predicted, self.every = float(predicted), float(every)
        self.done, self.start, self._last = 0, time.perf_counter(), -math.inf

    def message(self, text):
        if self.verbose:
            print(f"[skdptest] {text}", file=sys.stderr, flush=True)

    def begin(self, text):
        if self.predicted > 0:
            text += f"; predicted {self.predicted:.3g} s"
        self.message(text)

    def step(self, k=1):
        self.done += k
        if not self.verbose or self.done <= 0:
            return
        now = time.perf_counter()
        elapsed = now - self.start
        if self.done < self.total - 1e-9 and now - self._last < self.every * max(
                1.0, elapsed / 20):
            return
        self._last = now
        eta = elapsed / self.done * (self.total - self.done)
        self.message(f"{self.what} {self.done:.0f}/{self.total} done, {elapsed:.1f} s "
                     f"elapsed, ETA {eta:.1f} s")
