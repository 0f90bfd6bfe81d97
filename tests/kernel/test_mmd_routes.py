"""dpMMD routes: the aggregate's shared distances, the held single-bandwidth kernel."""

import numpy as np
import pytest

import skdptest.kernel._mmd as mmd_mod
import skdptest.kernel._route_exact as exact_mod
import skdptest.kernel._testbase as testbase_mod
from skdptest import DPMMDTest
from skdptest.kernel._bandwidth import bandwidth_grid
from skdptest.kernel._kernels import gram_distances, gram_from_distances, resolve_kernel
from skdptest.kernel._mmd import (
    aggregate_holds_distances,
    column_quadratic_forms,
    mmd_aggregate_memory_bytes,
    mmd_aggregate_statistics,
    mmd_memory_bytes,
)


@pytest.mark.parametrize("name", ["rbf", "laplacian"])
def test_gram_from_shared_distances_is_the_kernel_bit_for_bit(name):
    # one distance evaluation per fit, one exp per bandwidth: the same Gram values as
    # the kernel's own evaluation (rows of huge norm included, the recomputed ones)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(70, 3))
    X[4] *= 1e7
    X[11] *= 1e13
    D = gram_distances(name, X)
    kernel = resolve_kernel(name, None, None, X)
    for gamma in bandwidth_grid(name, 3)[::3]:
        K = kernel.with_gamma(gamma)(X)
        np.testing.assert_array_equal(gram_from_distances(D, gamma, np.empty_like(D)), K)


def _stats(X, codes, B, seed, **kw):
    kernel = resolve_kernel("rbf", None, None, X)
    rng = np.random.default_rng(seed)
    out = mmd_aggregate_statistics(X, codes, B, rng, kernel, bandwidth_grid("rbf", X.shape[1]),
                                   kernel_name="rbf", **kw)
    return out, rng.bit_generator.state


@pytest.mark.parametrize("sizes", [[20, 27], [9, 10, 12]])
def test_held_aggregate_matches_per_bandwidth_fits(sizes):
    # the held route (shared distances, masks drawn once) against 19 independent
    # single-bandwidth computations with copies of the generator
    rng = np.random.default_rng(3)
    X = rng.normal(size=(sum(sizes), 2)) * 5.0
    codes = np.repeat(np.arange(len(sizes)), sizes)
    held, state = _stats(X, codes, 40, 1)
    kernel = resolve_kernel("rbf", None, None, X)
    per = []
    for gamma in bandwidth_grid("rbf", 2):
        k = kernel.with_gamma(gamma)
        s = mmd_mod.mmd_permutation_statistics(X, codes, 40, np.random.default_rng(1), k)
        K = k(X)
        h, _ = mmd_mod.mmd_centre(np.trace(K) - K.sum() / len(X), np.bincount(codes),
                                  1.0, True)
        per.append(s - h)
    np.testing.assert_allclose(held, np.max(per, axis=0), rtol=0, atol=1e-7)
    assert state == _stats(X, codes, 40, 1, max_kernel_bytes=0)[1]


def test_held_aggregate_several_column_chunks(monkeypatch):
    # B + 1 statistics in several chunks: chunk by chunk, the same values
    rng = np.random.default_rng(5)
    X = rng.normal(size=(30, 2))
    codes = np.repeat([0, 1], 15)
    one, _ = _stats(X, codes, 50, 2)
    monkeypatch.setattr(exact_mod, "MAX_COLUMN_BYTES", 8 * 30 * 7)  # 7 columns per chunk
    several, _ = _stats(X, codes, 50, 2)
    np.testing.assert_allclose(one, several, rtol=0, atol=1e-12)


def test_held_aggregate_values_do_not_depend_on_threads(monkeypatch):
    from threadpoolctl import threadpool_limits

    import skdptest.kernel._relabel as relabel_mod
    import skdptest.kernel._route_aggregate as aggregate_mod

    # 240 rows with the thread thresholds lowered (was 900 rows, above them: 2 exp
    # blocks of 768 rows): the exp in 5 blocks of 48 rows and the relabelling columns
    # in row blocks, both on 1, 2 and 3 threads
    monkeypatch.setattr(aggregate_mod, "_TWO_THREADS_MIN", 0)
    monkeypatch.setattr(relabel_mod, "_TWO_THREADS_MIN", 0)
    monkeypatch.setattr(exact_mod, "BLOCK_ROWS", 48)
    rng = np.random.default_rng(6)
    X = rng.normal(size=(240, 2))
    codes = np.repeat([0, 1], 120)
    runs = []
    for limit in (1, 2, 3):
        with threadpool_limits(limits=limit, user_api="blas"):
            runs.append(_stats(X, codes, 60, 4)[0])
    np.testing.assert_array_equal(runs[0], runs[1])
    np.testing.assert_array_equal(runs[0], runs[2])


def test_single_bandwidth_holds_the_kernel_wherever_it_fits(monkeypatch):
    # one column chunk and a kernel above the old 32 MiB prefetch size: held, the
    # triangular product (the symmetric blocking only when the kernel does not fit)
    rng = np.random.default_rng(7)
    X = rng.normal(size=(200, 2))
    kernel = resolve_kernel("rbf", {"gamma": 0.5}, None, X)
    V = np.where(rng.random((200, 5)) < 0.5, 0.01, -0.01)
    calls = []
    real = mmd_mod.triangular_quadratic_forms
    monkeypatch.setattr(exact_mod, "triangular_quadratic_forms",
                        lambda *a: calls.append(1) or real(*a))
    held = column_quadratic_forms(X, kernel, [V], 1, max_kernel_bytes=8 * 200 * 200)
    assert calls == [1]
    blocked = column_quadratic_forms(X, kernel, [V], 1, max_kernel_bytes=8 * 200 * 200 - 1)
    assert calls == [1]
    np.testing.assert_allclose(held, np.einsum("ij,ik,kj->j", V, kernel(X), V), rtol=1e-12)
    np.testing.assert_allclose(blocked, held, rtol=1e-12)


def test_aggregate_memory_plan_is_public_and_counts_the_buffers():
    assert aggregate_holds_distances(5792, 2, 2000)
    assert not aggregate_holds_distances(5793, 2, 2000)
    assert not aggregate_holds_distances(1000, 17, 2000)  # many groups: per bandwidth
    one = mmd_aggregate_memory_bytes(4000, 2, 2000)
    assert one >= 3 * 8 * 4000**2
    assert mmd_aggregate_memory_bytes(4000, 2, 2000, 2) == one + 8 * 4000**2
    assert mmd_aggregate_memory_bytes(8000, 2, 2000) == mmd_memory_bytes(8000, 2, 2000)


def test_default_release_is_unchanged_by_the_route(monkeypatch):
    # the held route and the per-bandwidth route give the same p-value (statistics
    # equal up to rounding, far inside one grid step of the noise)
    rng = np.random.default_rng(8)
    X = np.vstack([rng.normal(size=(40, 2)), rng.normal(0.4, size=(40, 2))])
    y = np.repeat([0, 1], 40)
    held = DPMMDTest(n_permutations=99, random_state=3).test(X, y)
    monkeypatch.setattr(exact_mod, "MAX_KERNEL_BYTES", 0)
    assert DPMMDTest(n_permutations=99, random_state=3).test(X, y) == held


def _two_groups(n, d=2, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)), np.repeat([0, 1], [n // 2, n - n // 2])


def test_max_time_refuses_before_the_charge():
    from skdptest import PrivacyBudget
    from skdptest._params import InvalidParameterError

    X, y = _two_groups(400)
    budget = PrivacyBudget(epsilon=5.0)
    est = DPMMDTest(max_time=1e-3, budget=budget)
    with pytest.raises(InvalidParameterError, match=r"predicted to take about .* above "
                                                    r"max_time=0\.001 s .*nothing was charged"):
        est.fit(X, y)
    assert budget.spent[0] == 0 and not hasattr(est, "result_")
    with pytest.raises(InvalidParameterError, match="max_time"):
        DPMMDTest(method="features", max_time=1e-6).fit(X, y)
    # a generous limit is decided without measuring the machine, and the fit runs
    X, y = _two_groups(40)
    DPMMDTest(max_time=3600.0, n_permutations=50, random_state=0, budget=budget).fit(X, y)
    assert budget.spent[0] == pytest.approx(1.0)


def test_progress_appears_by_itself_for_long_fits(monkeypatch, capsys):
    X, y = _two_groups(60)
    fast = dict(n_permutations=30, random_state=0, kernel_params={"gamma": 1.0})
    DPMMDTest(**fast).fit(X, y)
    assert capsys.readouterr().err == ""  # predicted far below 10 s: silent
    monkeypatch.setattr(testbase_mod, "AUTO_PROGRESS_SECONDS", 0.0)  # every fit is "long"
    DPMMDTest(**fast).fit(X, y)
    err = capsys.readouterr().err
    assert "dpMMD: 31 statistics on N = 60 rows, predicted about" in err and "ETA" in err
    DPMMDTest(verbose=0, **fast).fit(X, y)
    assert capsys.readouterr().err == ""  # verbose=0 silences it
    DPMMDTest(n_permutations=30, cyclic=False, random_state=0).fit(X, y)
    assert "bandwidths 19/19 done" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("n, params, cyclic", [
    (1200, {}, "auto"), (1200, {}, False), (2500, {"gamma": 0.5}, "auto")],
                         ids=["cyclic-aggregate", "aggregate", "one-bandwidth"])
def test_predicted_time_is_within_two_of_the_actual(n, params, cyclic):
    # the issue's requirement on the automatic progress: an estimate within 2x of the
    # final time. The work model and the CPU calibration are checked in CPU seconds
    # (0.67-1.5x: what the load does not change); the wall prediction (CPU seconds over
    # the threads, or their share of the cores under the load average) within 2x.
    # Three (calibration, fit) pairs, the median ratios: one short calibration caught by
    # a transient (seen in CI: the machine measured 1.67x slow, and a fit 1.51x slower
    # than its calibration) says nothing about the work model this test checks
    import time

    from skdptest.kernel import _timing
    from skdptest.kernel._route_aggregate import mmd_work
    from skdptest.kernel._route_mmd_cyclic import MMDCyclicRoute, mmd_cyclic_work

    X, y = _two_groups(n)
    cpu_ratios, wall_ratios = [], []
    for _ in range(3):
        est = DPMMDTest(kernel_params=params or None, verbose=1, random_state=0,
                        cyclic=cyclic)
        _timing._CACHE.clear()  # calibrate now, under the load the fit will see
        plan = est._prepare(X, y, reset=True).plan
        # the default from N = 1000 on is the cyclic aggregate (its own work model)
        assert (type(plan.route) is MMDCyclicRoute) == (cyclic == "auto" and not params)
        if type(plan.route) is MMDCyclicRoute:
            work = mmd_cyclic_work(n, 2, 19)
        else:
            work = mmd_work(n, 2, 2, 2000, n_bandwidths=None if params else 19)
        assert work["n"] == n
        predicted_cpu = _timing.machine_rates(n).cpu_seconds(work)  # the cached one
        t0, c0 = time.perf_counter(), time.process_time()
        est.fit(X, y)
        cpu_ratios.append((time.process_time() - c0) / predicted_cpu)
        wall_ratios.append((time.perf_counter() - t0) / plan.predicted_seconds)
    cpu, wall = sorted(cpu_ratios)[1], sorted(wall_ratios)[1]
    assert 0.67 <= cpu <= 1.5, cpu_ratios
    assert 0.5 <= wall <= 2.0, wall_ratios
