"""Empirical privacy audit of the five public estimators, and of the mutants it catches.

Fits each estimator N_TRIALS times on each of two worst-case neighbouring data sets
(built in tests/test_audit.py from the estimators' docstrings) and reports the
audit's lower bound ε_lb (95 % confidence, held-out event selection, Clopper–Pearson)
next to the claimed ε. A row whose ε_lb exceeds the claimed ε refutes the claim.

Run: python benchmarks/privacy_audit.py  (about 4 minutes on one core); writes
benchmarks/results/privacy_audit.txt.
"""

import importlib.util
import time
from pathlib import Path

import numpy as np
import pytest

from skdptest.audit import attainable_floats_differ, epsilon_lower_bound

ROOT = Path(__file__).resolve().parents[1]
# The neighbours and mutants are defined once, in the test file, and reused here.
_spec = importlib.util.spec_from_file_location("_audit_cases", ROOT / "tests" / "test_audit.py")
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)


def row(label, r, seconds):
    eps = "-" if r.claimed_epsilon is None else f"{r.claimed_epsilon:g}"
    verdict = "REFUTED" if r.contradicted else "ok"
    return (f"{label:<48} {eps:>7} {r.epsilon_lb:>7.3f} {r.n_trials:>7} {verdict:>8} "
            f"{seconds:>6.1f}s  {r.event[:60]}")


def main():
    lines = ["Privacy audit (skdptest.audit.epsilon_lower_bound, confidence 0.95, "
             f"{cases.N_TRIALS} fits per neighbour)",
             f"{'release':<48} {'claim ε':>7} {'ε_lb':>7} {'trials':>7} {'verdict':>8} "
             f"{'time':>7}  event"]
    for name in cases._worst_cases():
        t = time.perf_counter()
        r = cases._audit(name)
        lines.append(row(f"{name} (shipped)", r, time.perf_counter() - t))
        print(lines[-1], flush=True)
    for name in ("PrivateEValueTest", "PrivateEProcess"):
        with pytest.MonkeyPatch.context() as mp:
            cases._halve_noise(mp)
            t = time.perf_counter()
            r = cases._audit(name)
        lines.append(row(f"{name} (mutant: halved noise)", r, time.perf_counter() - t))
        print(lines[-1], flush=True)

    import skdptest as s

    def global_seed(seed):
        np.random.seed(0)  # noqa: NPY002 - the mutant's noise comes from numpy's global state
        return s.DPMMDTest(n_permutations=19,
                           random_state=np.random.randint(2**31))  # noqa: NPY002

    t = time.perf_counter()
    r = cases._audit("DPMMDTest", make=global_seed)
    lines.append(row("DPMMDTest (mutant: seeded from np.random)", r, time.perf_counter() - t))
    print(lines[-1], flush=True)

    X0, X1 = np.zeros((10, 1)), np.r_[np.ones(1), np.zeros(9)][:, None]
    for leak, label in ((False, "mock permutation test (p-value only)"),
                        (True, "mock permutation test (mutant: + T0 + N0)")):
        t = time.perf_counter()
        r = epsilon_lower_bound(lambda q, leak=leak: cases._MockPermutationTest(
            leak=leak, random_state=q), X0, X1, n_trials=cases.N_TRIALS, random_state=0,
            view=cases._denoise_view if leak else cases.release_view)
        lines.append(row(label, r, time.perf_counter() - t))
        print(lines[-1], flush=True)

    rng = np.random.default_rng(4)
    v0, v1 = rng.laplace(0.0, 1 / 3, 4000), 1 / 3 + rng.laplace(0.0, 1 / 3, 4000)
    f = attainable_floats_differ(v0, v1, epsilon=1.0, random_state=0)
    lines.append(row("float Laplace x + rng.laplace (mutant: low bits)", f.audit, 0.0))
    print(lines[-1], flush=True)
    out = ROOT / "benchmarks" / "results" / "privacy_audit.txt"
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
