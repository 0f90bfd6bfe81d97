"""Paired power of the default dpMMD: cyclic shifts (``cyclic=True``) against random
relabellings (``cyclic=False``, B = 2000), on the same data sets.

Each repetition draws a fresh data set (two equal groups, d = 2), fits both routes on it
(epsilon = 1, alpha = 0.05, independent seeds) and records the two decisions. Printed:
each route's power with its standard error, the paired difference with its standard error
(from the discordant pairs) and the discordant counts.

Usage::

    python benchmarks/mmd_cyclic_power.py --sizes 1000 --reps 100
"""

from __future__ import annotations

import argparse
import math
import os
import time
import warnings

import numpy as np

from skdptest import DPMMDTest, FixedRandomStateWarning

ALTERNATIVES = {
    # name -> (description, sampler(rng, m) of the second group); the first is N(0, I)
    "mean shift": ("N(0, I) vs N(0.12 1, I)", lambda rng, m: rng.normal(0.12, 1.0, (m, 2))),
    "scale change": ("N(0, I) vs N(0, 1.15^2 I)", lambda rng, m: rng.normal(0, 1.15, (m, 2))),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000])
    parser.add_argument("--reps", type=int, default=100)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    warnings.simplefilter("ignore", FixedRandomStateWarning)
    print(f"dpMMD default aggregate, epsilon = 1, alpha = 0.05, two equal groups, d = 2; "
          f"{args.reps} fresh data sets per row; load average {os.getloadavg()[0]:.2f}")
    print("| N | alternative | power cyclic (SE) | power random B=2000 (SE) | "
          "difference (SE) | only cyclic / only random | CPU s per fit cyclic / random |")
    print("|--:|:--|--:|--:|--:|--:|--:|")
    for n in args.sizes:
        for k, (name, (desc, sampler)) in enumerate(ALTERNATIVES.items()):
            rng = np.random.default_rng([args.seed, n, k])
            m = n // 2
            rej = np.zeros((args.reps, 2), dtype=bool)
            cpu = [0.0, 0.0]
            for r in range(args.reps):
                X = np.vstack([rng.normal(size=(m, 2)), sampler(rng, n - m)])
                y = np.repeat([0, 1], [m, n - m])
                for j, cyclic in enumerate((True, False)):
                    seed = int(rng.integers(2**32))
                    c0 = time.process_time()
                    res = DPMMDTest(cyclic=cyclic, verbose=0, random_state=seed).fit(X, y).result_
                    cpu[j] += time.process_time() - c0
                    rej[r, j] = res.reject
            p = rej.mean(axis=0)
            se = np.sqrt(p * (1 - p) / args.reps)
            only_c = int(np.sum(rej[:, 0] & ~rej[:, 1]))
            only_r = int(np.sum(~rej[:, 0] & rej[:, 1]))
            diff = (only_c - only_r) / args.reps
            se_diff = math.sqrt(max(only_c + only_r - (only_c - only_r) ** 2 / args.reps,
                                    0.0)) / args.reps
            print(f"| {n} | {name}: {desc} | {p[0]:.2f} ({se[0]:.2f}) | {p[1]:.2f} "
                  f"({se[1]:.2f}) | {diff:+.2f} ({se_diff:.2f}) | {only_c} / {only_r} | "
                  f"{cpu[0] / args.reps:.2f} / {cpu[1] / args.reps:.2f} |", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
