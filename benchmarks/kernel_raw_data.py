"""Power on raw (unscaled) real data: the bandwidth aggregate against fixed bandwidths.

Cases (scikit-learn's bundled data sets):

- breast cancer: dpMMD, malignant vs benign on three raw columns (mean radius, mean
  texture, mean area: scales 10, 20 and 600);
- diabetes: dpHSIC, bmi (scaled by scikit-learn to spread 0.05) vs the raw target
  (spread 77), r = 0.59.

Each repetition draws a fresh SUBSAMPLE of ``N_SUB`` rows (60 or 150) without replacement (so that
the power is not 0 or 1 on the full data) and fresh permutations and noise; epsilon = 1,
alpha = 0.05. Columns:

- ``aggregate raw``: the new default (public bandwidth grid, one DP p-value), raw data;
- ``fixed raw``: the previous default ``gamma = 1 / n_features`` on raw data;
- ``median std``: the same DP test on standardised data with the (non-private) median
  heuristic bandwidth of the subsample (reference);
- ``non-private tuned``: the permutation test without noise (epsilon = 1e9) with the best
  bandwidth of the grid for that case, chosen on the full data set (an oracle).

Run: ``python benchmarks/kernel_raw_data.py [reps]``; the table is saved to
``benchmarks/results/kernel_raw_data.txt``.
"""

from __future__ import annotations

import pathlib
import sys
import time

import numpy as np
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.metrics.pairwise import euclidean_distances

from skdptest import DPHSICTest, DPMMDTest
from skdptest.kernel._bandwidth import bandwidth_grid

REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 200
N_SUB = {"mmd": 60, "hsic": 150}
B = 200
ALPHA = 0.05


def _std(a):
    return (a - a.mean(axis=0)) / a.std(axis=0)


def _median_gamma(a):
    d = euclidean_distances(a)
    return 1.0 / np.median(d[np.triu_indices(len(a), 1)]) ** 2


def _mmd(X, y, seed, **kw):
    return DPMMDTest(epsilon=kw.pop("epsilon", 1.0), n_permutations=B, random_state=seed,
                     **kw).test(X, y).reject


def _hsic(x, t, seed, **kw):
    return DPHSICTest(epsilon=kw.pop("epsilon", 1.0), n_permutations=B, random_state=seed,
                      **kw).test(x, t).reject


def _oracle_mmd(X, y):
    # best grid bandwidth on the full data: largest non-private statistic margin
    best = min(bandwidth_grid("rbf", X.shape[1]), key=lambda g: DPMMDTest(
        kernel_params={"gamma": g}, epsilon=1e9, n_permutations=200,
        random_state=0).test(X[::3], y[::3]).pvalue)
    return float(best)


def _oracle_hsic(x, t):
    pairs = [(gx, gy) for gx in bandwidth_grid("rbf", 1) for gy in bandwidth_grid("rbf", 1)]
    return min(pairs, key=lambda p: DPHSICTest(
        kernel_params={"gamma": p[0]}, y_kernel_params={"gamma": p[1]}, epsilon=1e9,
        n_permutations=100, cyclic=True, random_state=0).test(x[::3], t[::3]).pvalue)


def main():
    rng = np.random.default_rng(2024)
    rows = []
    bc = load_breast_cancer()
    X, y = bc.data[:, [0, 1, 3]], bc.target
    g_or = _oracle_mmd(X, y)
    counts, t0 = np.zeros(4), time.perf_counter()
    for rep in range(REPS):
        idx = rng.choice(len(X), N_SUB["mmd"], replace=False)
        Xs, ys = X[idx], y[idx]
        Z = _std(Xs)
        counts += [_mmd(Xs, ys, rep),
                   _mmd(Xs, ys, rep, kernel_params={"gamma": None}),
                   _mmd(Z, ys, rep, kernel_params={"gamma": _median_gamma(Z)}),
                   _mmd(Xs, ys, rep, kernel_params={"gamma": g_or}, epsilon=1e9)]
    rows.append(("breast cancer dpMMD", counts / REPS, time.perf_counter() - t0))

    db = load_diabetes()
    x, t = db.data[:, [2]], db.target.reshape(-1, 1)
    gx, gy = _oracle_hsic(x, t)
    counts, t0 = np.zeros(4), time.perf_counter()
    for rep in range(REPS):
        idx = rng.choice(len(x), N_SUB["hsic"], replace=False)
        xs, ts = x[idx], t[idx]
        zx, zt = _std(xs), _std(ts)
        counts += [_hsic(xs, ts, rep),
                   _hsic(xs, ts, rep, kernel_params={"gamma": None},
                         y_kernel_params={"gamma": None}),
                   _hsic(zx, zt, rep, kernel_params={"gamma": _median_gamma(zx)},
                         y_kernel_params={"gamma": _median_gamma(zt)}),
                   _hsic(xs, ts, rep, kernel_params={"gamma": gx},
                         y_kernel_params={"gamma": gy}, epsilon=1e9)]
    rows.append(("diabetes dpHSIC", counts / REPS, time.perf_counter() - t0))

    se = np.sqrt(0.25 / REPS)
    lines = [f"Power at epsilon = 1, alpha = {ALPHA}: {REPS} repetitions, each a fresh "
             f"subsample of {N_SUB['mmd']} (dpMMD) or {N_SUB['hsic']} (dpHSIC) rows (without "
             "replacement), fresh permutations "
             f"(B = {B}; dpHSIC aggregate: cyclic, B = n - 1) and fresh noise. "
             f"Standard error <= {se:.3f}.",
             f"{'case':<22}{'aggregate raw':>15}{'fixed raw':>11}{'median std':>12}"
             f"{'non-private tuned':>19}{'time (s)':>10}"]
    for name, p, secs in rows:
        lines.append(f"{name:<22}{p[0]:>15.3f}{p[1]:>11.3f}{p[2]:>12.3f}{p[3]:>19.3f}"
                     f"{secs:>10.1f}")
    text = "\n".join(lines)
    print(text)
    out = pathlib.Path(__file__).parent / "results" / "kernel_raw_data.txt"
    out.write_text(text + "\n")


if __name__ == "__main__":
    main()
