"""Default DPMMDTest at growing N: route, planned memory, peak RSS, predicted and actual time.

Each size runs in a fresh Python process (its peak RSS, ``ru_maxrss``, is the fit's plus
the interpreter's and the libraries'). Data: two groups of N / 2 rows, d = 2, a mean
shift of 0.1 in the second; default parameters (the 19-bandwidth aggregate over the N
cyclic shifts; by blocks of diagonals where the held route does not fit ``max_memory``),
``verbose=1`` so that the plan makes its time prediction (progress goes to stderr).
The last column is the random-relabelling aggregate's predicted time (``cyclic=False``,
B = 2000, what ``"auto"`` ran above N = 11 000 before the blocked route), from the same
calibration.

    python benchmarks/mmd_default_scale.py 4000 12000 20000

Prints one table row per N (results in benchmarks/results/mmd_default_scale.txt).
"""

import json
import subprocess
import sys

_CHILD = r"""
import json, os, resource, time
import numpy as np
from skdptest import DPMMDTest
from skdptest.kernel import _timing
from skdptest.kernel._route_aggregate import mmd_work
n = int(__import__("sys").argv[1])
rng = np.random.default_rng(n)
X = rng.normal(size=(n, 2))
y = np.arange(n) % 2
X[y == 1] += 0.1
est = DPMMDTest(verbose=1)
plan = est._prepare(X, y, reset=True).plan
t0, c0 = time.perf_counter(), time.process_time()
est.fit(X, y)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
random = _timing.predicted_seconds(mmd_work(n, 2, 2, 2000, n_bandwidths=19))
print(json.dumps({"n": n, "method": est.result_.method, "plan_gib": plan.memory_bytes / 2**30,
                  "predicted_s": plan.predicted_seconds, "wall_s": wall, "cpu_s": cpu,
                  "rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                  "random_s": random, "load": os.getloadavg()[0]}))
"""


def main(sizes):
    print(f"{'N':>7} {'route':<32} {'plan GiB':>8} {'RSS GiB':>8} {'pred s':>8} "
          f"{'wall s':>8} {'CPU s':>8} {'wall/pred':>9} {'load':>5} {'random pred s':>13}")
    for n in sizes:
        out = subprocess.run([sys.executable, "-c", _CHILD, str(n)], capture_output=True,
                             text=True, check=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        print(f"{r['n']:>7} {r['method']:<32} {r['plan_gib']:>8.3f} {r['rss_gib']:>8.3f} "
              f"{r['predicted_s']:>8.1f} {r['wall_s']:>8.1f} {r['cpu_s']:>8.1f} "
              f"{r['wall_s'] / r['predicted_s']:>9.2f} {r['load']:>5.1f} "
              f"{r['random_s']:>13.0f}", flush=True)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [4000, 12000])
