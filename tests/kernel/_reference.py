"""Test oracles of the kernel family (independent computations) and helpers shared by the
dpMMD/dpHSIC test files.

Imported by full name, ``from tests.kernel._reference import ...``: pyproject's pytest
options put the repository root on sys.path (``pythonpath``), and tests/ is a namespace
package, so two families' ``_reference.py`` never clash.
"""

import math

import numpy as np


def _fixed(cls, **kwargs):
    """The single-bandwidth test (scikit-learn's gamma = 1 / n_features), the default
    before the bandwidth aggregate; these tests pin its exact values."""
    for name in ("kernel", "y_kernel") if cls.__name__ == "DPHSICTest" else ("kernel",):
        if kwargs.get(name, "rbf") in ("rbf", "laplacian"):
            kwargs.setdefault(f"{name}_params", {"gamma": None})
    return cls(**kwargs)


def laplace_difference_tail(t, b):
    """P(N1 - N0 >= t) for independent Laplace(b) noises (t >= 0)."""
    t = np.abs(t)
    return 0.5 * (1 + t / (2 * b)) * np.exp(-t / b)


def noise_audit(fit_pvalue, replay_stats, scale, seeds):
    """z-scores of the count of p = 1 (B = 1) against the law at ``scale`` and ``scale/2``.

    With one permutation, p = 1 exactly when T~_1 >= T~_0, i.e. when
    N_1 - N_0 >= T_0 - T_1; the statistics of each seed are replayed from its
    generator, so the expected count is a sum of known probabilities.
    """
    hits, gaps = 0, []
    for seed in seeds:
        t = replay_stats(seed)
        assert t[0] > t[1]  # the formula below is for t >= 0
        hits += fit_pvalue(seed) == 1.0
        gaps.append(t[0] - t[1])

    def z_score(b):
        probs = laplace_difference_tail(np.array(gaps), b)
        return (hits - probs.sum()) / math.sqrt(np.sum(probs * (1 - probs)))

    return z_score(scale), z_score(scale / 2)


def hsic_traces_one_permutation_at_a_time(X, Y, perms, idx, kx, ky, m, g, block_rows):
    """_hsic_exact._exact_traces before the speed-up, one _ExactSum per permutation fed
    block by block (the regression oracle of test_small_fit_paths.py's
    test_hsic_traces_summed_for_many_permutations_at_once_equal_one_at_a_time)."""
    from skdptest.kernel import _hsic_exact as E

    n = len(X)
    chunk = max(1, max(4 * n * n, E._REFINE_MIN_BYTES) // (8 * n * E._ROW_TILE)) * E._ROW_TILE
    sums = [E._ExactSum() for _ in idx]
    sel = [np.asarray(perms[b], dtype=np.intp) for b in idx]
    for c0 in range(0, n, chunk):
        c1 = min(c0 + chunk, n)
        Lc = E._gram_rows(ky, Y, c0, c1)
        for s in range(0, n, block_rows):
            e = min(s + block_rows, n)
            W = E._lower_weights(s, e, n)
            Kw = E._centred_rows(kx, X, m, g, s, e) * W
            for acc, p in zip(sums, sel, strict=True):
                a = p[s:e, None]
                hi = np.maximum(a, p[None, :])
                take = (W > 0) & (hi >= c0) & (hi < c1)
                acc.add(Kw[take] * Lc[hi[take] - c0, np.minimum(a, p[None, :])[take]])
    return np.array([acc.value() for acc in sums])
