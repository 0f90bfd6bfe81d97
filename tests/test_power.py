"""Tests of skdptest.power: power planning on synthetic data, never charged.

- the table's shape and columns, for all five public estimators (dpHSIC's and the
  GTM's, which take dpMMD's branch, in the slow suite);
- determinism for a seed, independence from n_jobs (1 vs 2) and from the joblib
  backend (a dask LocalCluster: slow);
- a budget set on the estimator is never charged (removed from the clones, warned);
- the simulated type-I error of DPMMDTest under the null is <= alpha within a
  binomial tolerance (slow; the same check flags an invalid test by default);
- the exact e-value power against an independent brute-force double sum over the
  count and the noise, and against simulation of the estimator itself (slow);
- the searches (solve_n on the exact planner, evalue_solve_n) are monotone and
  return the exact crossing.
"""

import functools
import math
import sys
from unittest import mock

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.base import clone

from skdptest import (
    DPHSICTest,
    DPMMDTest,
    GeneralizedThresholdMechanism,
    InvalidParameterError,
    PrivacyBudget,
    PrivateEProcess,
    PrivateEValueTest,
)
from skdptest._noise import quantise_rate
from skdptest.power import (
    PowerSolution,
    _search,
    evalue_power,
    evalue_solve_n,
    plot_power,
    simulate_power,
    solve_epsilon,
    solve_n,
)

P, Q = stats.bernoulli(0.3), stats.bernoulli(0.5)


def bernoulli_draw(prob):
    def draw(n, rng):
        return rng.binomial(1, prob, size=(n, 1)), None

    return draw


def two_groups_null(n, rng):
    # both groups from one law: the null of the two-sample test
    return rng.normal(size=(n, 1)), np.arange(n) % 2


def paired(n, rng):
    x = rng.normal(size=(n, 1))
    return x, x[:, 0] + rng.normal(size=n)


def normal_one_sample(n, rng):
    return rng.normal(size=(n, 1)), None


def shifted(n, rng):
    return rng.normal(size=(n, 1)) + 3.0, None


BASE = ["n_samples", "n_repeats", "rejection_rate", "se", "ci_low", "ci_high"]


# -- table -----------------------------------------------------------------------------


@pytest.mark.parametrize("estimator, draw, extra", [
    (PrivateEValueTest(P, Q, statistic="exact"), bernoulli_draw(0.5), ["mean_log_e_value"]),
    (PrivateEProcess(P, Q), bernoulli_draw(0.5), ["mean_log_e_value",
                                                  "median_stopping_time"]),
    (DPMMDTest(n_permutations=20), two_groups_null, []),
    # slow: a fit whose result has no e-value takes the same branch as dpMMD's above
    pytest.param(DPHSICTest(n_permutations=20, kernel_params={"gamma": 0.5},
                            y_kernel_params={"gamma": 0.5}), paired, [],
                 marks=pytest.mark.slow),
    pytest.param(GeneralizedThresholdMechanism(), shifted, [], marks=pytest.mark.slow),
], ids=["evalue", "eprocess", "mmd", "hsic", "gtm"])
def test_table_columns_for_every_estimator(estimator, draw, extra):
    table = simulate_power(estimator, draw, param_grid={"epsilon": [1.0, 2.0],
                                                        "n_samples": [30, 60]},
                           n_repeats=3, random_state=0)
    assert list(table.columns) == ["n_samples", "epsilon", *BASE[1:], *extra]
    assert table.shape == (4, len(BASE) + 1 + len(extra))
    assert sorted(zip(table["n_samples"], table["epsilon"], strict=True)) == [
        (30, 1.0), (30, 2.0), (60, 1.0), (60, 2.0)]
    assert (table["n_repeats"] == 3).all()
    rate = table["rejection_rate"]
    assert ((rate * 3).round(12) % 1 == 0).all()  # a count out of 3
    assert (table["ci_low"] <= rate).all() and (rate <= table["ci_high"]).all()
    se = np.sqrt(rate * (1 - rate) / 3)
    np.testing.assert_allclose(table["se"], se)
    if "median_stopping_time" in extra:
        # rows consumed by completed batches: 0 when no batch completed
        assert ((table["median_stopping_time"] >= 0)
                & (table["median_stopping_time"] <= table["n_samples"])).all()


def test_wilson_interval_matches_the_closed_form():
    table = simulate_power(PrivateEValueTest(P, Q, statistic="exact"), bernoulli_draw(0.5),
                           n_samples=40, n_repeats=30, random_state=3)
    k, n, z = round(table["rejection_rate"][0] * 30), 30, stats.norm.ppf(0.975)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert table["ci_low"][0] == pytest.approx(max(0, centre - half))
    assert table["ci_high"][0] == pytest.approx(min(1, centre + half))


def test_a_block_refits_one_clone_as_fresh_clones_would(monkeypatch):
    # simulate_power clones once per block of repeats and refits that clone; a refit
    # must give what a fresh clone gives (an e-process: fit must drop the old stream)
    import skdptest.power as power

    clones = []
    monkeypatch.setattr(power, "clone", lambda est: clones.append(est) or clone(est))
    est = PrivateEProcess(P, Q, epsilon=0.5)
    table = simulate_power(est, bernoulli_draw(0.45), n_samples=60, n_repeats=6,
                           random_state=2)
    assert len(clones) == 1
    rejects, log_e = [], []
    for seq in np.random.SeedSequence(2).spawn(1)[0].spawn(6):
        data_seq, noise_seq = seq.spawn(2)
        X, _ = bernoulli_draw(0.45)(60, np.random.default_rng(data_seq))
        result = clone(est).set_params(random_state=np.random.default_rng(noise_seq)
                                       ).fit(X).result_
        rejects.append(result.reject)
        log_e.append(result.log_e_process[-1] if result.log_e_process else 0.0)
    assert table["rejection_rate"][0] == np.mean(rejects)
    assert table["mean_log_e_value"][0] == pytest.approx(np.mean(log_e), rel=1e-12)


# -- seeds and parallelism -------------------------------------------------------------

GRID = {"n_samples": [40, 80], "epsilon": [0.5, 2.0]}


def _evalue_table(block=None, **kwargs):
    # block=3 splits each combination's 6 repeats into two blocks, so the blocks of one
    # combination can finish out of order on parallel workers; the reference tables use
    # the default block (one per combination): the block size must not change a result
    import skdptest.power as power

    with mock.patch.object(power, "_BLOCK", block or power._BLOCK):
        return simulate_power(PrivateEValueTest(P, Q, statistic="exact"),
                              bernoulli_draw(0.45), param_grid=GRID, n_repeats=6, **kwargs)


@functools.cache
def _reference_table(seed):
    return _evalue_table(random_state=seed)


def test_seeded_runs_are_identical_and_seeds_matter():
    pd.testing.assert_frame_equal(_reference_table(7), _evalue_table(random_state=7))
    other = _reference_table(8)
    assert not _reference_table(7)["mean_log_e_value"].equals(other["mean_log_e_value"])


def test_results_do_not_depend_on_n_jobs():
    # threads: the same dispatch (blocks finishing out of order) without the seconds a
    # process pool takes to start; the process pool (pickled estimator and generator
    # closure) is checked in the slow test below
    import joblib

    with joblib.parallel_config(backend="threading"):
        got = _evalue_table(block=3, random_state=7, n_jobs=2)
    pd.testing.assert_frame_equal(_reference_table(7), got)


@pytest.mark.slow
def test_results_do_not_depend_on_n_jobs_with_processes():
    pd.testing.assert_frame_equal(_reference_table(7),
                                  _evalue_table(block=3, random_state=7, n_jobs=2))


# The joblib dispatch of blocks (out of order) is checked by default with threads above;
# dask's backend (a LocalCluster, ~1 s to start) runs in the slow suite.
@pytest.mark.slow
def test_dask_backend_gives_the_same_table():
    distributed = pytest.importorskip(
        "dask.distributed", reason="dask[distributed] is not installed (the test extra)")
    import joblib

    expected = _reference_table(7)
    with distributed.LocalCluster(n_workers=2, processes=False, threads_per_worker=1,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster), joblib.parallel_config(backend="dask"):
        got = _evalue_table(block=3, random_state=7)
    pd.testing.assert_frame_equal(got, expected)


@pytest.mark.slow
def test_dask_process_workers_give_the_same_table():
    distributed = pytest.importorskip(
        "dask.distributed", reason="dask[distributed] is not installed (the test extra)")
    import joblib

    expected = _evalue_table(random_state=12)
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster), joblib.parallel_config(backend="dask"):
        got = _evalue_table(block=3, random_state=12)
    pd.testing.assert_frame_equal(got, expected)


def test_verbose_prints_one_line_per_combination(capsys):
    _evalue_table(block=3, random_state=0, verbose=1)  # a line once both blocks are done
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 4
    assert all(line.startswith("[simulate_power] ") for line in lines)
    assert "n_samples=80, epsilon=2.0: rejection rate" in "".join(lines)


# -- budget ----------------------------------------------------------------------------


def test_a_budget_on_the_estimator_is_never_charged():
    budget = PrivacyBudget(epsilon=0.5)
    est = PrivateEValueTest(P, Q, statistic="exact", epsilon=2.0, budget=budget)
    with pytest.warns(UserWarning, match="does not charge a privacy budget.*budget is "
                                         "removed"):
        table = simulate_power(est, bernoulli_draw(0.5), n_samples=30, n_repeats=10,
                               random_state=0)
    assert len(table) == 1
    assert budget.ledger == [] and budget.spent == (0.0, 0.0)
    assert est.budget is budget and not hasattr(est, "result_")  # the original untouched
    with pytest.warns(UserWarning, match="do not charge a privacy budget"):
        solve_n(est, bernoulli_draw(0.5), power=0.5, n_min=10, n_max=40, n_repeats=5,
                random_state=0)
    assert budget.ledger == []


# -- validity: type-I error ------------------------------------------------------------


def _binomial_upper(alpha, n_repeats):
    # alpha plus 3 binomial standard errors: a valid test exceeds it with
    # probability about 0.1 %; an invalid one (rate 0.5) is far above it.
    return alpha + 3 * math.sqrt(alpha * (1 - alpha) / n_repeats)


# Slow (200 fits): in the default suite dpMMD's level follows from its parts, each checked
# exactly: its relabelled statistics equal a brute-force computation on the same draws
# (tests/kernel/test_mmd.py::test_all_paths_match_brute_force), its p-value is the DP
# permutation p-value of those statistics (test_golden_value_through_the_estimator_at_huge_
# epsilon, tests/kernel/test_routes_contract.py), whose level under exchangeable statistics
# is test_permutation.py's type-I check (with its mutant); the check used here flags an
# invalid test (test_the_type_one_check_flags_an_invalid_test).
@pytest.mark.slow
def test_type_one_error_of_dpmmd_under_the_null():
    # a fixed bandwidth (the default bandwidth aggregate is checked in the slow test below)
    n_repeats, alpha = 200, 0.05
    est = DPMMDTest(n_permutations=39, alpha=alpha, kernel_params={"gamma": 0.5})
    table = simulate_power(est, two_groups_null, param_grid={"n_samples": [40]},
                           n_repeats=n_repeats, random_state=0)
    assert table["rejection_rate"][0] <= _binomial_upper(alpha, n_repeats)


def _two_groups_null_heavy(n, rng):
    return rng.standard_t(2, size=(n, 2)), np.arange(n) % 2


@pytest.mark.slow
@pytest.mark.parametrize("draw", [two_groups_null, _two_groups_null_heavy])
def test_type_one_error_of_dpmmd_default_kernel(draw):
    n_repeats, alpha = 400, 0.05
    table = simulate_power(DPMMDTest(n_permutations=59, alpha=alpha), draw,
                           param_grid={"n_samples": [40], "epsilon": [0.5, 4.0]},
                           n_repeats=n_repeats, random_state=1, n_jobs=2)
    assert (table["rejection_rate"] <= _binomial_upper(alpha, n_repeats)).all()


def test_the_type_one_check_flags_an_invalid_test():
    # The toy test rejects when a noisy mean is > 0: about half the time under the
    # null, so the check used above must fail for it.
    from tests._toy import ToyMeanTest

    table = simulate_power(ToyMeanTest(epsilon=1.0), normal_one_sample, n_samples=40,
                           n_repeats=200, random_state=0)
    assert table["rejection_rate"][0] > _binomial_upper(0.05, 200)


# -- exact e-value power ---------------------------------------------------------------


def _brute_force_power(p, q, n, epsilon, alpha):
    """P_Q(f_Q(Y)/f_P(Y) >= 1/α), Y = Binom(n, ·) + Z, by a direct double sum."""
    r = quantise_rate(epsilon)
    reach = int(70 / r) + 1
    y = np.arange(-reach, n + reach + 1)
    k = np.arange(n + 1)
    noise = math.tanh(r / 2) * np.exp(-r * np.abs(y[:, None] - k[None, :]))
    f_q = noise @ stats.binom.pmf(k, n, q)
    f_p = noise @ stats.binom.pmf(k, n, p)
    return float(f_q[f_q >= f_p / alpha].sum())


@pytest.mark.parametrize("p, q, n, epsilon, alpha", [
    (0.3, 0.5, 50, 0.5, 0.05), (0.3, 0.5, 200, 1.0, 0.05), (0.5, 0.3, 120, 2.0, 0.1),
    (0.2, 0.25, 300, 0.3, 0.01), (0.4, 0.6, 1, 1.0, 0.05),
])
def test_evalue_power_matches_a_brute_force_sum(p, q, n, epsilon, alpha):
    got = evalue_power(stats.bernoulli(p), stats.bernoulli(q), n, epsilon, alpha=alpha)
    assert got == pytest.approx(_brute_force_power(p, q, n, epsilon, alpha), abs=1e-12)


def test_evalue_power_under_the_null_is_at_most_alpha():
    # Markov: P_P(E >= 1/α) <= α E_P[E] = α, exactly, at every n and ε
    for n, eps in [(10, 0.5), (100, 1.0), (500, 4.0)]:
        assert evalue_power(P, P, n, eps) == 0.0 or evalue_power(P, P, n, eps) <= 0.05
        assert evalue_power(Q, P, n, eps) <= evalue_power(P, Q, n, eps) + 1


def _simulated_vs_exact(n, epsilon, n_repeats, seed):
    exact = evalue_power(P, stats.bernoulli(0.4), n, epsilon)
    table = simulate_power(PrivateEValueTest(P, stats.bernoulli(0.4), statistic="exact"),
                           bernoulli_draw(0.4), param_grid={"n_samples": [n],
                                                            "epsilon": [epsilon]},
                           n_repeats=n_repeats, random_state=seed)
    return exact, table["rejection_rate"][0], table["se"][0]


# Slow, beside the 3000-fit checks below: by default, test_evalue_power_matches_a_brute_force_
# sum checks the planner's sum P_Q(f_Q(Y) >= f_P(Y) / alpha), and tests/evalue/test_evalue.py::
# test_exact_statistic_is_the_likelihood_ratio_of_the_noisy_count that the estimator's exact
# statistic is f_Q(Y) / f_P(Y) of its noisy count, from the same draws.
@pytest.mark.slow
def test_exact_power_agrees_with_simulation_quick():
    # 300 fits: SE <= 0.029, tolerance 4 SE (the sharp 0.03 check is marked slow)
    exact, simulated, _ = _simulated_vs_exact(150, 1.0, 300, seed=1)
    assert abs(simulated - exact) <= 4 * math.sqrt(exact * (1 - exact) / 300)


@pytest.mark.slow
@pytest.mark.parametrize("n, epsilon", [(60, 2.0), (150, 1.0), (300, 0.5), (500, 0.25)])
def test_exact_power_within_0_03_of_simulation(n, epsilon):
    # 3000 fits: SE <= 0.0092, so the 0.03 target is more than 3 SE
    exact, simulated, _ = _simulated_vs_exact(n, epsilon, 3000, seed=n)
    assert 0.03 > 3 * math.sqrt(0.25 / 3000)
    assert abs(simulated - exact) <= 0.03


def test_evalue_power_of_a_lattice_model_is_a_probability_that_grows_with_n():
    null, alt = stats.norm(0, 1), stats.norm(0.4, 1)
    powers = [evalue_power(null, alt, n, 1.0) for n in (10, 40, 160)]
    assert 0 <= powers[0] < powers[1] < powers[2] <= 1
    assert evalue_power(null, null, 40, 1.0) <= 0.05


# -- searches --------------------------------------------------------------------------


def test_evalue_solve_n_returns_the_exact_crossing_and_is_monotone():
    alt = stats.bernoulli(0.4)
    ns = []
    for target in (0.5, 0.8, 0.95):
        solution = evalue_solve_n(P, alt, 1.0, power=target)
        assert isinstance(solution, PowerSolution) and solution.se == 0.0
        n = solution.value
        assert solution.power == evalue_power(P, alt, n, 1.0)
        assert n in set(solution.table["n_samples"])
        assert evalue_power(P, alt, n, 1.0) >= target > evalue_power(P, alt, n - 1, 1.0)
        ns.append(n)
    assert ns == sorted(ns) and len(set(ns)) == 3
    # more privacy (smaller ε) needs more rows
    assert (evalue_solve_n(P, alt, 0.25, power=0.8).value
            > evalue_solve_n(P, alt, 1.0, power=0.8).value)


def test_search_on_the_exact_planner_brackets_within_rtol():
    alt = stats.bernoulli(0.4)

    def power_at(n):
        return evalue_power(P, alt, n, 1.0)

    exact = evalue_solve_n(P, alt, 1.0, power=0.8).value
    n, seen = _search(power_at, 10, 10_000, 0.8, integer=True, rtol=0.05)
    assert power_at(n) >= 0.8 and exact <= n <= exact * 1.05 + 1
    failing = [x for x, v in seen.items() if v < 0.8]
    assert max(failing) >= n - max(1, 0.05 * n)


@pytest.mark.slow
def test_solve_n_by_simulation_lands_near_the_exact_answer():
    alt = stats.bernoulli(0.4)
    est = PrivateEValueTest(P, alt, statistic="exact")
    sol = solve_n(est, bernoulli_draw(0.4), power=0.8, n_min=40, n_max=2000,
                  params={"epsilon": 1.0}, n_repeats=100, rtol=0.1, random_state=0)
    assert isinstance(sol, PowerSolution) and sol.power >= 0.8
    assert list(sol.table["n_samples"]) == sorted(sol.table["n_samples"])
    # its exact power is near the target (the simulated rate has SE ~ 0.04)
    assert abs(evalue_power(P, alt, sol.value, 1.0) - 0.8) <= 0.15


def test_solve_epsilon_finds_a_passing_epsilon():
    est = PrivateEValueTest(P, stats.bernoulli(0.5), statistic="exact")
    sol = solve_epsilon(est, bernoulli_draw(0.5), power=0.8, n_samples=150,
                        epsilon_min=0.1, n_repeats=30, rtol=0.3, random_state=0)
    assert sol.power >= 0.8 and 0.05 <= sol.value <= 100
    below = sol.table[sol.table["epsilon"] < sol.value]
    assert (below["rejection_rate"] < 0.8).all()


def test_unreachable_targets_raise():
    with pytest.raises(ValueError, match="not reached at n_max=20"):
        evalue_solve_n(P, stats.bernoulli(0.31), 0.1, power=0.9, n_max=20)
    with pytest.raises(ValueError, match="not reached at n_samples=20"):
        solve_n(PrivateEValueTest(P, stats.bernoulli(0.31), statistic="exact"),
                bernoulli_draw(0.31), n_min=10, n_max=20, n_repeats=5, random_state=0)


# -- bad input -------------------------------------------------------------------------


def test_bad_input_names_the_argument():
    est = PrivateEValueTest(P, Q, statistic="exact")
    draw = bernoulli_draw(0.5)
    with pytest.raises(InvalidParameterError, match="n_samples is not set"):
        simulate_power(est, draw)
    with pytest.raises(InvalidParameterError, match="n_repeats must be"):
        simulate_power(est, draw, n_samples=10, n_repeats=0)
    with pytest.raises(InvalidParameterError, match="data_generator must be a callable"):
        simulate_power(est, "draw", n_samples=10)
    with pytest.raises(InvalidParameterError, match="estimator must be"):
        simulate_power(object(), draw, n_samples=10)
    with pytest.raises(InvalidParameterError, match="param_grid must not set random_state"):
        simulate_power(est, draw, param_grid={"random_state": [0], "n_samples": [10]})
    with pytest.raises(InvalidParameterError, match="param_grid must be None"):
        simulate_power(est, draw, param_grid=3)
    with pytest.raises(InvalidParameterError, match="random_state must be"):
        simulate_power(est, draw, n_samples=10, random_state=-1)
    with pytest.raises(InvalidParameterError, match="n_jobs must not be 0"):
        simulate_power(est, draw, n_samples=10, n_jobs=0)
    with pytest.raises(TypeError, match="data_generator must return a tuple"):
        simulate_power(est, lambda n, rng: rng.normal(size=(n, 1)), n_samples=10,
                       n_repeats=1)
    with pytest.raises(ValueError, match="exactly n_samples rows"):
        simulate_power(est, lambda n, rng: (np.zeros((n + 1, 1)), None), n_samples=10,
                       n_repeats=1)
    with pytest.raises(InvalidParameterError, match="statistic must be one of 'exact'"):
        evalue_power(P, Q, 10, 1.0, statistic="optimal")
    with pytest.raises(InvalidParameterError, match="n_samples must be an int"):
        evalue_power(P, Q, 0, 1.0)
    with pytest.raises(InvalidParameterError, match="epsilon must be"):
        evalue_power(P, Q, 10, -1.0)
    with pytest.raises(InvalidParameterError, match="null and alternative must be given"):
        evalue_power(None, None, 10, 1.0)
    with pytest.raises(InvalidParameterError, match="power must be"):
        evalue_solve_n(P, Q, 1.0, power=1.0)
    with pytest.raises(InvalidParameterError, match="params must not set n_samples"):
        solve_n(est, draw, params={"n_samples": 5})


# -- plot ------------------------------------------------------------------------------


def test_plot_power_without_matplotlib_is_a_clear_import_error(monkeypatch):
    # matplotlib.pyplot unimportable (installed or not): the drawing itself, and its
    # import (~1 s), are in the slow test below
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match="plot_power needs matplotlib"):
        plot_power(_reference_table(7), x="n_samples", hue="epsilon")


@pytest.mark.slow
def test_plot_power_returns_axes_or_a_clear_import_error(monkeypatch):
    table = _reference_table(7)
    try:
        import matplotlib
    except ImportError:
        with pytest.raises(ImportError, match="plot_power needs matplotlib"):
            plot_power(table, x="n_samples", hue="epsilon")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ax = plot_power(table, x="n_samples", hue="epsilon", target=0.8)
    assert len(ax.get_lines()) == 3  # two curves and the target line
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["epsilon=0.5",
                                                                   "epsilon=2.0"]
    plt.close(ax.figure)
    with pytest.raises(InvalidParameterError, match="hue='delta' is not a column"):
        plot_power(table, hue="delta")
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match="plot_power needs matplotlib"):
        plot_power(table)


def _groups(n, rng, shift, k=2):
    y = np.arange(n) % k
    return rng.normal(size=(n, 1)) + shift * y[:, None], y


#: Every everyday test, with a data generator under an alternative it detects.
_CLASSICAL_PLANS = {
    "DPBinomialTest": (dict(null_proportion=0.3, alternative="greater"),
                       lambda n, rng: (rng.binomial(1, 0.6, size=(n, 1)), None)),
    "DPSubsampleAggregateTest": (dict(effect_size=1.0),
                                 lambda n, rng: (rng.normal(1.0, 1.0, size=(n, 1)), None)),
    "DPMannWhitneyTest": (dict(n_resamples=199), lambda n, rng: _groups(n, rng, 1.0)),
    "DPKruskalWallisTest": (dict(n_resamples=199), lambda n, rng: _groups(n, rng, 1.0, k=3)),
    "DPWilcoxonTest": (dict(n_resamples=199),
                       lambda n, rng: (rng.normal(1.0, 1.0, size=(n, 1)), None)),
    "DPKolmogorovSmirnovTest": (dict(n_resamples=199), lambda n, rng: _groups(n, rng, 1.5)),
    "DPChiSquareTest": (dict(categories=[0, 1, 2], n_resamples=199),
                        lambda n, rng: (rng.choice(3, p=[0.6, 0.2, 0.2], size=(n, 1)), None)),
    "DPContingencyTest": (dict(categories=([0, 1], [0, 1]), n_resamples=199),
                          lambda n, rng: (np.repeat(rng.integers(0, 2, size=(n, 1)), 2, 1),
                                          None)),
    "DPBoundedMeanTest": (dict(bounds=(-3.0, 3.0)),
                          lambda n, rng: (np.clip(rng.normal(1.0, 1.0, size=(n, 1)), -3, 3),
                                          None)),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(_CLASSICAL_PLANS))
def test_solve_n_plans_every_everyday_test(name):
    import skdptest

    kwargs, data = _CLASSICAL_PLANS[name]
    estimator = getattr(skdptest, name)(epsilon=2.0, **kwargs)
    solution = solve_n(estimator, data, power=0.8, n_min=10, n_max=2000, n_repeats=40,
                       rtol=0.25, random_state=0)
    assert isinstance(solution, PowerSolution)
    assert 10 <= solution.value <= 2000 and solution.power >= 0.8
    assert set(solution.table["n_samples"]) >= {solution.value}


def test_every_everyday_test_has_a_plan():
    import skdptest

    everyday = {name for name in skdptest.__all__
                if getattr(skdptest, name).__module__.startswith("skdptest.classical")
                and name.startswith("DP")}
    assert everyday == set(_CLASSICAL_PLANS)


# --------------------------------------------------------------------------------------
# Planning the width of a confidence interval
# --------------------------------------------------------------------------------------

def test_interval_width_is_the_mean_width_of_the_simulated_fits():
    from skdptest import DPBinomialTest
    from skdptest.power import IntervalWidth, interval_width

    est = DPBinomialTest(epsilon=1.0, alternative="greater")
    plan = interval_width(est, bernoulli_draw(0.3), 200, confidence_level=0.9,
                          n_repeats=6, random_state=4)
    assert isinstance(plan, IntervalWidth) and plan.confidence_level == 0.9
    # the same fits by hand: one (data, noise) seed pair per repeat
    widths = []
    for seq in np.random.SeedSequence(4).spawn(6):
        data_seq, noise_seq = seq.spawn(2)
        X, _ = bernoulli_draw(0.3)(200, np.random.default_rng(data_seq))
        fitted = est.set_params(random_state=np.random.default_rng(noise_seq)).fit(X)
        widths.append(fitted.result_.confidence_interval(0.9).width)
    assert plan.mean_width == pytest.approx(np.mean(widths), rel=1e-12)
    assert plan.se == pytest.approx(np.std(widths, ddof=1) / math.sqrt(6), rel=1e-12)


def test_solve_n_width_reaches_the_target_width():
    from skdptest import DPBinomialTest
    from skdptest.power import solve_n_width

    est = DPBinomialTest(epsilon=1.0, alternative="greater")
    sol = solve_n_width(est, bernoulli_draw(0.5), 0.25, n_min=8, n_max=400, n_repeats=4,
                        rtol=0.3, random_state=0)
    table = sol.table.set_index("n_samples")["mean_width"]
    assert sol.mean_width <= 0.25 and table.index.is_monotonic_increasing
    assert all(table[n] > 0.25 for n in table.index if n < sol.n_samples)
    # non-private reference: the Clopper–Pearson width at θ = 1/2 is 0.37 at n = 30 and
    # 0.18 at n = 120, so the n reaching 0.25 lies between
    assert 30 <= sol.n_samples <= 120


def test_interval_planning_refusals():
    from skdptest import DPBinomialTest
    from skdptest.power import interval_width, solve_n_width

    est = DPBinomialTest(epsilon=1.0, alternative="greater")
    with pytest.raises(InvalidParameterError, match="width"):
        solve_n_width(est, bernoulli_draw(0.5), -1.0)
    with pytest.raises(InvalidParameterError, match="confidence_level"):
        interval_width(est, bernoulli_draw(0.5), 20, confidence_level=1.5)
    with pytest.raises(ValueError, match="target width 0.001 is not reached"):
        solve_n_width(est, bernoulli_draw(0.5), 0.001, n_min=8, n_max=16, n_repeats=2,
                      random_state=0)
    with pytest.raises(TypeError, match="has no confidence_interval"):
        interval_width(DPMMDTest(n_permutations=19), lambda n, rng: (
            rng.normal(size=(n, 2)), np.repeat([0, 1], n // 2)), 20, n_repeats=2,
            random_state=0)
