"""How close the running-time predictions of the default kernel tests come to the fit.

For the default DPMMDTest (the 19-bandwidth aggregate, B = 2000, two groups, d = 2) and,
with ``--hsic``, the default DPHSICTest (19 x 19 cyclic aggregate, one column each) and,
with ``--features``, DPMMDTest(method="features") (d = 10, D = 64), at each size: the
prediction made in the plan (before the charge; wall seconds) and the CPU-second
prediction behind it, against the fit's wall and CPU time (``time.process_time``, every
thread). On a machine shared with other jobs the CPU comparison is the one the load does
not change; the wall one depends on how the load average at the start matches the share
the fit then gets. The one-minute load average is printed at the start of each fit.

Run: ``python benchmarks/timing_prediction.py --mmd 500 1000 2000 4000 --hsic 500 1000 2000
--features 20000 100000``
"""

import argparse
import os
import time
import warnings

import numpy as np

from skdptest import DPHSICTest, DPMMDTest
from skdptest.kernel import _hsic_time, _timing
from skdptest.kernel._route_aggregate import mmd_work


def _row(name, n, predicted, wall, predicted_cpu, cpu, load):
    print(f"{name:>6} {n:>6} {predicted:>9.2f} {wall:>8.2f} {wall / predicted:>6.2f} "
          f"{predicted_cpu:>9.2f} {cpu:>8.2f} {cpu / predicted_cpu:>6.2f} {load:>6.2f}",
          flush=True)


def mmd(n):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 2))
    y = np.repeat([0, 1], [n // 2, n - n // 2])
    est = DPMMDTest(verbose=0, random_state=0)
    _timing._CACHE.clear()  # calibrate now, under the load the fit will see
    load = os.getloadavg()[0]
    rates = _timing.machine_rates(n)
    work = mmd_work(n, 2, 2, est.n_permutations, n_bandwidths=19)
    predicted = rates.seconds(work)
    t0, c0 = time.perf_counter(), time.process_time()
    est.fit(X, y)
    _row("dpMMD", n, predicted, time.perf_counter() - t0, rates.cpu_seconds(work),
         time.process_time() - c0, load)


def features(n):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 10))
    y = np.repeat([0, 1], [n // 2, n - n // 2])
    est = DPMMDTest(method="features", verbose=0, random_state=0)
    _timing._CACHE.clear()
    load = os.getloadavg()[0]
    rates = _timing.machine_rates(n)
    work = mmd_work(n, 10, 2, est.n_permutations, feature_dims=2 * est.n_components)
    t0, c0 = time.perf_counter(), time.process_time()
    est.fit(X, y)
    _row("feat", n, rates.seconds(work), time.perf_counter() - t0, rates.cpu_seconds(work),
         time.process_time() - c0, load)


def hsic(n):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 1))
    y = x + rng.normal(size=(n, 1))
    est = DPHSICTest(verbose=0, random_state=0)
    _hsic_time._measured = None  # calibrate now
    load = os.getloadavg()[0]
    predicted = est._prepare(x, y, reset=True).plan.predicted_seconds
    factor = _hsic_time._load_factor()
    t0, c0 = time.perf_counter(), time.process_time()
    est.fit(x, y)
    _row("dpHSIC", n, predicted, time.perf_counter() - t0, predicted / factor,
         time.process_time() - c0, load)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mmd", type=int, nargs="*", default=[500, 1000, 2000, 4000])
    parser.add_argument("--hsic", type=int, nargs="*", default=[])
    parser.add_argument("--features", type=int, nargs="*", default=[])
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # the fixed random_state's warning
    print(f"# cores: {len(os.sched_getaffinity(0))}")
    print(f"{'test':>6} {'N':>6} {'pred s':>9} {'wall s':>8} {'ratio':>6} {'pred CPU':>9} "
          f"{'CPU s':>8} {'ratio':>6} {'load':>6}")
    for n in args.mmd:
        mmd(n)
    for n in args.features:
        features(n)
    for n in args.hsic:
        hsic(n)


if __name__ == "__main__":
    main()
