"""Random-feature dpMMD against its dense-product equivalent (issue 20, item 4).

For each N (d = 10, D = 64 frequencies, i.e. 2 D = 128 features per row, B = 2000, two
equal groups), in a fresh worker process:

- ``features``: the B + 1 statistics of ``method="features"``
  (:func:`skdptest.kernel._features.feature_mmd_statistics` on the quantised feature
  rows: relabelling draws, count corrections and products), and one whole
  ``DPMMDTest(method="features").fit`` (feature map and noise included);
- ``dense``: the dense product the statistics are equivalent to, measured in the same
  worker, interleaved with the features: the float64 ``(N x 2D)^T (N x (B + 1))``
  product ``Phi^T V``, in blocks of 4096 rows of ``V`` (a block of random values reused,
  so that no 16 GB ``V`` is formed and nothing but the products is timed), and the
  same in the other orientation ``V^T Phi``; the ratio is taken against the faster.

Then the same three on one thread (BLAS limited to one thread, so the statistics run
their key blocks on the calling thread), in CPU seconds (``time.process_time``): on a
machine shared with other jobs, wall time measures the load as much as the code.
Each time is the best of ``--repeats`` (one at N = 10^6); the worker's peak RSS
(``ru_maxrss``) is reported with its RSS after the data were made. Results are printed
and appended to ``benchmarks/results/kernel_features_speed.txt``.

Usage::

    python benchmarks/kernel_features_speed.py --sizes 10000 100000 --repeats 3
    python benchmarks/kernel_features_speed.py --sizes 1000000 --repeats 1
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
D, DIM, B = 64, 10, 2000


def _worker(spec):
    import warnings

    import numpy as np

    from skdptest import DPMMDTest, FixedRandomStateWarning
    from skdptest._threads import limit_blas
    from skdptest.kernel import _features as feat

    n, repeats = spec["n"], spec["repeats"]
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, DIM))
    y = np.repeat([0, 1], [n // 2, n - n // 2])
    omega = feat.draw_frequencies("rbf", 1.0 / DIM, DIM, D, rng)
    F = feat.feature_map(X, omega)
    Phi = F.astype(np.float64)
    block = 4096
    V = rng.random((block, B + 1))
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0

    def dense_t():  # Phi^T V, (2D x N) (N x (B + 1))
        out = np.zeros((2 * D, B + 1))
        for r0 in range(0, n, block):
            fb = Phi[r0:r0 + block]
            out += fb.T @ V[:len(fb)]
        return out

    def dense_n():  # V^T Phi, ((B + 1) x N) (N x 2D)
        out = np.zeros((B + 1, 2 * D))
        for r0 in range(0, n, block):
            fb = Phi[r0:r0 + block]
            out += V[:len(fb)].T @ fb
        return out

    def stats():
        return feat.feature_mmd_statistics(F, y, B, np.random.default_rng(1), kind="fourier")

    def fit():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FixedRandomStateWarning)
            DPMMDTest(method="features", n_components=D, n_permutations=B, epsilon=1.0,
                      kernel_params={"gamma": 1.0 / DIM}, random_state=2).fit(X, y)

    times = {"dense_t": [], "dense_n": [], "stats": [], "fit": [float("nan")]}
    runs = (("dense_t", dense_t), ("stats", stats), ("dense_n", dense_n))
    if n <= spec["fit_max"]:
        runs += (("fit", fit),)
        times["fit"] = []
    for _ in range(repeats):  # interleaved: the same machine load for each
        for name, f in runs:
            t0 = time.perf_counter()
            f()
            times[name].append(time.perf_counter() - t0)
    # CPU seconds on one thread (BLAS and the library's workers), less sensitive to
    # other jobs on the machine than wall time
    cpu = {"cpu_stats": [], "cpu_dense_t": [], "cpu_dense_n": []}
    with limit_blas():
        for _ in range(repeats):
            for name, f in (("cpu_dense_t", dense_t), ("cpu_stats", stats),
                            ("cpu_dense_n", dense_n)):
                t0 = time.process_time()
                f()
                cpu[name].append(time.process_time() - t0)
    times.update(cpu)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    load = os.getloadavg()[0]
    return {"n": n, **{k: min(v) for k, v in times.items()}, "base_mb": base,
            "peak_mb": peak, "load": load,
            "plan_mb": feat.feature_mmd_memory_bytes(n, DIM, D, 2, B) / 2**20}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker")
    ap.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--fit-max", type=int, default=10**6,
                    help="time the whole fit only up to this N (the statistics always)")
    ap.add_argument("--out", default=os.path.join(HERE, "results",
                                                  "kernel_features_speed.txt"))
    ap.add_argument("--note", default="")
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(_worker(json.loads(args.worker))))
        return
    lines = [f"# kernel_features_speed.py --sizes {' '.join(map(str, args.sizes))} "
             f"--repeats {args.repeats}  ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
             f"{'; ' + args.note if args.note else ''})",
             f"# d = {DIM}, D = {D} (2D = {2 * D} features), B = {B}; times in s (best of "
             "repeats); ratio = stats / min(dense); load = 1-min load average at the end",
             "# cpu: CPU seconds with one thread (BLAS limited to 1), cpu ratio = cpu stats / "
             "min(cpu dense)",
             f"{'N':>9} {'stats':>8} {'fit':>8} {'PhiT.V':>8} {'VT.Phi':>8} {'ratio':>6} "
             f"{'cpu st':>8} {'cpu PtV':>8} {'cpu VtP':>8} {'cpu r':>6} "
             f"{'base MB':>8} {'peak MB':>8} {'plan MB':>8} {'load':>5}"]
    print("\n".join(lines), flush=True)
    for n in args.sizes:
        spec = json.dumps({"n": n, "repeats": args.repeats if n < 10**6 else 1,
                           "fit_max": args.fit_max})
        res = subprocess.run([sys.executable, __file__, "--worker", spec],
                             capture_output=True, text=True, check=True)
        r = json.loads(res.stdout.strip().splitlines()[-1])
        line = (f"{n:>9} {r['stats']:8.2f} {r['fit']:8.2f} {r['dense_t']:8.2f} "
                f"{r['dense_n']:8.2f} {r['stats'] / min(r['dense_t'], r['dense_n']):6.2f} "
                f"{r['cpu_stats']:8.2f} {r['cpu_dense_t']:8.2f} {r['cpu_dense_n']:8.2f} "
                f"{r['cpu_stats'] / min(r['cpu_dense_t'], r['cpu_dense_n']):6.2f} "
                f"{r['base_mb']:8.0f} {r['peak_mb']:8.0f} {r['plan_mb']:8.0f} "
                f"{r['load']:5.1f}")
        lines.append(line)
        print(line, flush=True)
    with open(args.out, "a") as fh:
        fh.write("\n".join(lines) + "\n\n")


if __name__ == "__main__":
    main()
