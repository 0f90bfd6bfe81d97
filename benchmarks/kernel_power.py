"""Power of dpMMD / dpHSIC against epsilon, next to two baselines.

Methods (all at level alpha = 0.05, B random permutations, one set of B + 1
non-private statistics per repetition shared by the methods, each method
adding its own noise with the shipped framework
``skdptest._permutation.dp_permutation_pvalue``):

- ``dp``: the shipped statistic (sqrt of the V-statistic MMD^2 or HSIC_b),
  independent Laplace noise of scale 2 Delta / epsilon on each of the B + 1
  values (Kim & Schrab);
- ``naive``: the same statistic, each of the B + 1 releases made
  epsilon / (B + 1)-DP by the Laplace mechanism (basic composition): scale
  Delta (B + 1) / epsilon;
- ``ustat`` (MMD only): the unbiased U-statistic MMD^2_u in the same DP
  permutation framework; its sensitivity under replacing one row for a kernel
  with values in [0, 1] is 4 / min(m, n) (each of the 2 (m - 1) within-group
  and n cross terms touching the row moves by at most 1).

Settings (kernel_tests.md): the perturbed-uniform densities (one bump,
amplitude ``a``; d = 1 for MMD, the (x1, y1) pair for HSIC), data multiplied
by 4, Gaussian kernel exp(-||x - y||^2 / d) (sklearn's rbf default); and a
Gaussian mean / variance shift (MMD) or Gaussian dependence (HSIC).
epsilon runs log-spaced from 1/n to sqrt(n).

Usage::

    python benchmarks/kernel_power.py            # default grid (~10 min on 2 cores)
    python benchmarks/kernel_power.py --quick    # small grid
    python benchmarks/kernel_power.py --mmd-sizes 500 1500 3000 --reps 100
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from sklearn.metrics.pairwise import rbf_kernel

from skdptest._permutation import dp_permutation_pvalue
from skdptest.kernel._hsic import hsic_permutation_statistics, hsic_sensitivity
from skdptest.kernel._kernels import resolve_kernel
from skdptest.kernel._mmd import (
    draw_assignments,
    mmd_permutation_statistics,
    mmd_sensitivity,
)

ALPHA = 0.05


# -- perturbed uniform densities -------------------------------------------------------------

def _bump(t):
    """G(t): two smooth bumps of opposite sign (integrates to 0)."""
    t = np.asarray(t, dtype=float)
    out = np.zeros_like(t)
    u = 4 * t + 3
    m = np.abs(u) < 1
    out[m] += np.exp(-1 / (1 - u[m] ** 2))
    u = 4 * t + 1
    m = np.abs(u) < 1
    out[m] -= np.exp(-1 / (1 - u[m] ** 2))
    return out


def perturbed_uniform(n, dim, amplitude, rng):
    """n points of f(x) = 1 + a e^d prod_r G(x_r - 1) on [0, 1]^d (rejection)."""
    out = np.empty((0, dim))
    while len(out) < n:
        x = rng.uniform(size=(2 * n, dim))
        f = 1 + amplitude * math.e ** dim * np.prod(_bump(x - 1), axis=1)
        keep = rng.uniform(size=2 * n) * (1 + amplitude) < f
        out = np.vstack([out, x[keep]])
    return out[:n]


# -- data sets ---------------------------------------------------------------------------------

def mmd_data(setting, n, rng):
    if setting == "perturbed":
        X = perturbed_uniform(n, 1, 0.2, rng)
        Y = rng.uniform(size=(n, 1))
        return 4 * X, 4 * Y
    if setting == "mean_shift":
        return rng.normal(size=(n, 1)), rng.normal(0.3, 1.0, size=(n, 1))
    if setting == "var_shift":
        return rng.normal(size=(n, 1)), rng.normal(0.0, 1.4, size=(n, 1))
    raise ValueError(setting)


def hsic_data(setting, n, rng):
    if setting == "perturbed":
        XY = 4 * perturbed_uniform(n, 2, 1.0, rng)
        return XY[:, :1], XY[:, 1:]
    if setting == "gaussian":
        x = rng.normal(size=(n, 1))
        return x, 0.3 * x + rng.normal(size=(n, 1))
    raise ValueError(setting)


# -- statistics ----------------------------------------------------------------------------------

def mmd_v_and_u(X, Y, n_perm, rng):
    """B + 1 V-statistic sqrt(MMD_b^2) and U-statistic MMD^2_u, same relabellings."""
    Z = np.vstack([X, Y])
    m, n = len(X), len(Y)
    # the shipped relabellings (draw_assignments), so both statistics see the same ones
    codes = np.repeat([0, 1], [m, n])
    S = (draw_assignments(codes, n_perm, rng) == 0).astype(np.float64).T
    K = rbf_kernel(Z)
    KS = K @ S
    r = K.sum(axis=1)
    sxx = np.einsum("ij,ij->j", S, KS)
    sr = S.T @ r
    sxy = sr - sxx
    syy = r.sum() - 2 * sr + sxx
    v = np.sqrt(np.maximum(sxx / m**2 + syy / n**2 - 2 * sxy / (m * n), 0))
    u = (sxx - m) / (m * (m - 1)) + (syy - n) / (n * (n - 1)) - 2 * sxy / (m * n)
    return v, u


def check_against_shipped(rng_seed=0):
    """The benchmark's V-statistics equal the shipped ones (same relabellings)."""
    rng = np.random.default_rng(rng_seed)
    X, Y = mmd_data("mean_shift", 60, rng)
    v, _ = mmd_v_and_u(X, Y, 20, np.random.default_rng(5))
    Z = np.vstack([X, Y])
    k = resolve_kernel("rbf", None, None, Z)
    shipped = mmd_permutation_statistics(Z, np.repeat([0, 1], 60), 20,
                                         np.random.default_rng(5), k)
    np.testing.assert_allclose(v, shipped, rtol=1e-10)


def _reject(stats_, sensitivity, epsilon, rng):
    return dp_permutation_pvalue(stats_, sensitivity, epsilon, 0.0, rng).pvalue <= ALPHA


def power_mmd(setting, n, eps_grid, reps, n_perm, seed):
    rng = np.random.default_rng(seed)
    hits = {m: np.zeros(len(eps_grid)) for m in ("dp", "naive", "ustat")}
    delta_v = mmd_sensitivity([n, n], math.sqrt(2))
    delta_u = 4.0 / n
    for _ in range(reps):
        X, Y = mmd_data(setting, n, rng)
        v, u = mmd_v_and_u(X, Y, n_perm, rng)
        for k, eps in enumerate(eps_grid):
            hits["dp"][k] += _reject(v, delta_v, eps, rng)
            hits["naive"][k] += _reject(v, delta_v * (n_perm + 1) / 2, eps, rng)
            hits["ustat"][k] += _reject(u, delta_u, eps, rng)
    return {m: h / reps for m, h in hits.items()}


def power_hsic(setting, n, eps_grid, reps, n_perm, seed):
    rng = np.random.default_rng(seed)
    hits = {m: np.zeros(len(eps_grid)) for m in ("dp", "naive")}
    delta = hsic_sensitivity(n, math.sqrt(2), math.sqrt(2))
    for _ in range(reps):
        X, Y = hsic_data(setting, n, rng)
        kx = resolve_kernel("rbf", None, None, X)
        ky = resolve_kernel("rbf", None, None, Y)
        s = hsic_permutation_statistics(X, Y, n_perm, rng, kx, ky)
        for k, eps in enumerate(eps_grid):
            hits["dp"][k] += _reject(s, delta, eps, rng)
            hits["naive"][k] += _reject(s, delta * (n_perm + 1) / 2, eps, rng)
    return {m: h / reps for m, h in hits.items()}


def _table(title, n, eps_grid, power, reps):
    se = 0.5 / math.sqrt(reps)
    print(f"\n{title}, n = {n} per sample, {reps} reps (max s.e. {se:.3f})")
    print("| method | " + " | ".join(f"eps={e:.3g}" for e in eps_grid) + " |")
    print("|---|" + "---:|" * len(eps_grid))
    for method, p in power.items():
        print(f"| {method} | " + " | ".join(f"{x:.2f}" for x in p) + " |", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mmd-sizes", type=int, nargs="+", default=[500, 1500, 3000])
    parser.add_argument("--hsic-sizes", type=int, nargs="+", default=[200, 500])
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--permutations", type=int, default=200)
    parser.add_argument("--n-eps", type=int, default=6)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.mmd_sizes, args.hsic_sizes, args.reps = [300], [150], 20
    check_against_shipped()
    t0 = time.perf_counter()
    for setting in ("perturbed", "mean_shift", "var_shift"):
        sizes = args.mmd_sizes if setting == "perturbed" else args.mmd_sizes[:1]
        for n in sizes:
            eps = np.geomspace(1 / n, math.sqrt(n), args.n_eps)
            power = power_mmd(setting, n, eps, args.reps, args.permutations, seed=n)
            _table(f"MMD {setting}", n, eps, power, args.reps)
    for setting in ("perturbed", "gaussian"):
        sizes = args.hsic_sizes if setting == "perturbed" else args.hsic_sizes[:1]
        for n in sizes:
            eps = np.geomspace(1 / n, math.sqrt(n), args.n_eps)
            power = power_hsic(setting, n, eps, args.reps, args.permutations, seed=n)
            _table(f"HSIC {setting}", n, eps, power, args.reps)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
