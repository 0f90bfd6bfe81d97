"""Default DPHSICTest at growing n: route, planned memory, peak RSS, predicted and actual time.

Each size runs in a fresh Python process (its peak RSS, ``ru_maxrss``, is the fit's plus
the interpreter's and the libraries'). Data: x ~ N(0, 1), y = x + N(0, 1) (one column
each), default parameters (the 19 x 19 cyclic bandwidth aggregate), ``verbose=0``.

    python benchmarks/hsic_default_scale.py 2000 4000 20000

Prints one table row per n (results in benchmarks/results/hsic_default_scale.txt).
"""

import json
import subprocess
import sys

_CHILD = r"""
import json, resource, time, warnings
import numpy as np
from skdptest import DPHSICTest
n = int(__import__("sys").argv[1])
rng = np.random.default_rng(n)
x = rng.normal(size=(n, 1))
y = x[:, 0] + rng.normal(size=n)
est = DPHSICTest(verbose=0)
t0 = time.perf_counter()
plan = est._prepare(x, y, reset=True).plan
t_plan = time.perf_counter() - t0
t0, c0 = time.perf_counter(), time.process_time()
est.fit(x, y)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({"n": n, "method": est.result_.method, "plan_gib": plan.memory_bytes / 2**30,
                  "block": plan.blocked, "predicted_s": plan.predicted_seconds,
                  "plan_s": t_plan, "wall_s": wall, "cpu_s": cpu,
                  "rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                  "reject": bool(est.result_.reject)}))
"""


def main(sizes):
    print(f"{'n':>7} {'route':<34} {'plan GiB':>8} {'RSS GiB':>8} {'predicted s':>11} "
          f"{'wall s':>8} {'CPU s':>8} {'wall/pred':>9}")
    for n in sizes:
        out = subprocess.run([sys.executable, "-c", _CHILD, str(n)], capture_output=True,
                             text=True, check=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        print(f"{r['n']:>7} {r['method']:<34} {r['plan_gib']:>8.3f} {r['rss_gib']:>8.3f} "
              f"{r['predicted_s']:>11.1f} {r['wall_s']:>8.1f} {r['cpu_s']:>8.1f} "
              f"{r['wall_s'] / r['predicted_s']:>9.2f}", flush=True)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [2000, 4000])
