"""Running time of a Gram matrix evaluation against how spread out the data are.

numpy's ``exp`` is several times slower when its results are subnormal or 0
(exponents below about -708), so a kernel evaluated as ``exp(-gamma d(x, y))``
takes longer when more pairs are far apart: a running time that depends on the
private data (the attacker of the brief sees running times). skdptest's named rbf,
laplacian and chi2 kernels clamp the exponent at ``EXP_FLOOR`` and set those values
to exactly 0 (``kernel/_kernels.py``), so every entry costs the same. This script
times scikit-learn's kernel and skdptest's on data whose pairs are all near
(no underflow), half far, and nearly all far, interleaved, medians of ``--repeats``.

Usage::

    python benchmarks/timing_channel.py
    python benchmarks/timing_channel.py --n 2000 --repeats 31
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.metrics.pairwise import laplacian_kernel, rbf_kernel

from skdptest.kernel._kernels import _pairwise


def _data(n, far_fraction, rng):
    # Clusters 100 apart; gamma = 1: pairs across clusters have exponent -1e4 (0).
    n_clusters = 1 if far_fraction == 0 else max(2, round(1 / (1 - far_fraction)))
    centres = 100.0 * np.arange(n_clusters)
    X = rng.normal(size=(n, 2)) * 0.5
    X[:, 0] += centres[np.arange(n) % n_clusters]
    return X


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    cases = {f: _data(args.n, f, rng) for f in (0.0, 0.5, 0.99)}
    funcs = {
        "sklearn rbf_kernel": lambda X: rbf_kernel(X, gamma=1.0),
        "skdptest rbf": lambda X: _pairwise("rbf", {"gamma": 1.0}, X),
        "sklearn laplacian_kernel": lambda X: laplacian_kernel(X, gamma=1.0),
        "skdptest laplacian": lambda X: _pairwise("laplacian", {"gamma": 1.0}, X),
    }
    times = {(k, f): [] for k in funcs for f in cases}
    for _ in range(args.repeats):
        for f, X in cases.items():
            for k, func in funcs.items():
                t0 = time.perf_counter()
                func(X)
                times[k, f].append(time.perf_counter() - t0)
    print(f"Gram matrix of N = {args.n} rows (ms, median of {args.repeats}); "
          "far = share of pairs whose kernel value underflows")
    print("| kernel | far 0 % | far 50 % | far 99 % | slowest / fastest |")
    print("|---|---:|---:|---:|---:|")
    for k in funcs:
        ms = [1e3 * float(np.median(times[k, f])) for f in cases]
        print(f"| {k} | {ms[0]:.2f} | {ms[1]:.2f} | {ms[2]:.2f} | {max(ms) / min(ms):.2f} |")


if __name__ == "__main__":
    main()
