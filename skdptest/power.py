"""Power planning without spending privacy budget.

Choosing ε and the number of rows n is a design decision that must be made
*before* the private data are touched: every fit of an estimator on private data
is charged to its :class:`~skdptest.PrivacyBudget`, so tuning ε by trial fits on
the real data spends the budget the final test needs (doc/power.md).

This module answers the planning questions on data that are not private:

- :func:`simulate_power`: the rejection rate of any estimator (all five public
  tests) over a grid of parameters, by Monte Carlo on synthetic or public pilot
  data drawn by a user-supplied generator. Nothing is charged: the simulated
  copies run with ``budget=None`` (a budget set on the estimator is removed from
  the copies, with a warning).
- :func:`solve_n`, :func:`solve_epsilon`: the smallest n (or ε) whose simulated
  power reaches a target, by a doubling then bisection search.
- :func:`evalue_power`, :func:`evalue_solve_n`: the *exact* power
  P_Q(E >= 1/α) of :class:`~skdptest.PrivateEValueTest` with
  ``statistic="exact"``, computed from the public laws alone by summing over the
  law of the release (no simulation, no data).
- :func:`interval_width`, :func:`solve_n_width`: the expected width of a
  ``confidence_interval`` (:class:`~skdptest.DPBinomialTest`,
  :class:`~skdptest.DPBoundedMeanTest`) at n, and the smallest n reaching a target
  width, by the same simulation.
- :func:`plot_power`: power curves from a :func:`simulate_power` table.

Privacy: these functions never see private data and release nothing; the only
privacy-relevant rule is that the data passed to them must be synthetic or
public (a pilot sample that is itself private would need its own budget).
"""

from __future__ import annotations

import math
import numbers
import sys
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from scipy import stats
from sklearn.base import clone
from sklearn.model_selection import ParameterGrid

from ._interval import check_confidence_level
from ._noise import log_geometric_mixture
from ._params import (
    Interval,
    InvalidParameterError,
    NoneValue,
    Options,
    RandomState,
    check_value,
    validate_parameters,
)
from ._warnings import FixedRandomStateWarning
from .evalue._evalue import PrivateEValueTest, check_laws, resolve_statistic
from .evalue._exact import BinaryExact
from .evalue._lattice import _REL_GUARD, LatticeExact
from .evalue._laws import make_laws

__all__ = [
    "IntervalWidth",
    "PowerSolution",
    "evalue_power",
    "evalue_solve_n",
    "interval_width",
    "plot_power",
    "simulate_power",
    "solve_epsilon",
    "solve_n",
    "solve_n_width",
]

# Repeats of one parameter combination are dispatched in blocks of this size: large
# enough to amortise the dispatch cost of a process or dask worker, small enough to
# balance the load. Seeds are per repeat, so the block size never changes a result.
_BLOCK = 25

# Two-sided 95 % normal quantile of the Wilson interval.
_Z95 = float(stats.norm.ppf(0.975))


# --------------------------------------------------------------------------------------
# Monte Carlo power
# --------------------------------------------------------------------------------------


def _strip_budgets(estimator):
    """Names of the (possibly nested) ``budget`` parameters that are set."""
    params = estimator.get_params(deep=True)
    return sorted(k for k, v in params.items()
                  if (k == "budget" or k.endswith("__budget")) and v is not None)


def _seed_params(estimator):
    """Names of the (possibly nested) ``random_state`` parameters."""
    params = estimator.get_params(deep=True)
    return sorted(k for k in params if k == "random_state" or k.endswith("__random_state"))


def _result_of(fitted):
    """The ``result_`` of a fitted estimator or of the last step of a Pipeline."""
    if hasattr(fitted, "result_"):
        return fitted.result_
    if hasattr(fitted, "steps"):
        return fitted.steps[-1][1].result_
    raise TypeError(
        f"estimator {type(fitted).__name__} has no result_ after fit: simulate_power "
        "needs a skdptest test (or a Pipeline ending in one)."
    )


def _check_data(out, n_samples):
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise TypeError(
            "data_generator must return a tuple (X, y) (y=None for one-sample tests); "
            f"got an object of type {type(out).__name__}."
        )
    X, y = out
    if np.shape(X)[0] != n_samples:
        raise ValueError(
            f"data_generator returned X with {np.shape(X)[0]} rows for n_samples="
            f"{n_samples}; it must return exactly n_samples rows."
        )
    return X, y


def _simulation_clone(estimator, est_params=None):
    """One clone of ``estimator`` for a block of repeats, budget removed.

    A block refits this one clone (only its generator changes between repeats): a fit
    recomputes everything from the parameters and the data (the estimator contract,
    sklearn's ``check_fit_idempotent``), and cloning per repeat deep-copied the
    parameters (frozen scipy laws) at about half the cost of a cheap fit.
    """
    est = clone(estimator)
    # budget=None: synthetic data are not private and the simulation must never
    # charge a real ledger (simulate_power already warned if one was set).
    est.set_params(**{**(est_params or {}), **{k: None for k in _strip_budgets(est)}})
    return est, _seed_params(est)


def _run_block(estimator, data_generator, n_samples, est_params, seeds):
    """Fit a clone on fresh synthetic draws; one (data, noise) seed pair per repeat.

    Returns a list of (reject, log e-value or NaN, rows used) per repeat.
    """
    est, seed_names = _simulation_clone(estimator, est_params)
    out = []
    for seq in seeds:
        data_seq, noise_seq = seq.spawn(2)
        X, y = _check_data(data_generator(n_samples, np.random.default_rng(data_seq)),
                           n_samples)
        noise = np.random.default_rng(noise_seq)
        est.set_params(**{k: noise for k in seed_names})
        with warnings.catch_warnings():
            # Synthetic, public data: a fixed seed per repeat is the point here, not a leak.
            warnings.simplefilter("ignore", FixedRandomStateWarning)
            result = _result_of(est.fit(X, y))
        if hasattr(result, "log_e_value"):
            log_e = float(result.log_e_value)
        elif hasattr(result, "log_e_process"):
            log_e = float(result.log_e_process[-1]) if result.log_e_process else 0.0
        else:
            log_e = math.nan
        out.append((bool(result.reject), log_e, int(result.n_samples),
                    hasattr(result, "log_e_process")))
    return out


def _wilson(k, n, z=_Z95):
    """Wilson score interval for a binomial proportion k / n."""
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    # the bounds are exactly 0 at k = 0 and 1 at k = n (avoid rounding residues)
    return (0.0 if k == 0 else max(0.0, centre - half),
            1.0 if k == n else min(1.0, centre + half))


def _combinations(param_grid, n_samples):
    if param_grid is None:
        grid = [{}]
    elif isinstance(param_grid, Mapping) or isinstance(param_grid, list):
        try:
            grid = list(ParameterGrid(param_grid))
        except (TypeError, ValueError) as exc:
            raise InvalidParameterError(f"param_grid is invalid: {exc}") from exc
    else:
        raise InvalidParameterError(
            "param_grid must be None, a dict of lists or a list of such dicts; got an "
            f"object of type {type(param_grid).__name__}."
        )
    combos = []
    for combo in grid:
        combo = dict(combo)
        n = combo.pop("n_samples", n_samples)
        if n is None:
            raise InvalidParameterError(
                "n_samples is not set: give it in param_grid (e.g. {'n_samples': [100, "
                "500]}) or as the n_samples argument; it is the number of rows passed to "
                "data_generator."
            )
        n = check_value(n, [Interval(Integral, 1, None)], "n_samples")
        for name in ("budget", "random_state"):
            if name in combo:
                raise InvalidParameterError(
                    f"param_grid must not set {name}: simulate_power sets random_state "
                    "per repeat and never charges a budget."
                )
        combos.append((n, combo))
    return combos


def simulate_power(estimator, data_generator, *, param_grid=None, n_samples=None,
                   n_repeats=200, random_state=None, n_jobs=None, verbose=0):
    """Rejection rate of a private test on synthetic data, over a parameter grid.

    For each parameter combination, ``n_repeats`` fits of a clone of ``estimator``
    (one clone per block of repeats, refitted with a fresh generator each time) run
    on fresh draws ``X, y = data_generator(n_samples, rng)``; the table gives the
    rejection rate (the power under an alternative, the type-I error under a null)
    with its binomial standard error and Wilson 95 % interval. No budget is charged.

    Parameters
    ----------
    estimator : skdptest estimator
        The test to plan (any of the five public tests, or a Pipeline ending in
        one). It is cloned; its own state is not modified. Its ``budget``, if set,
        is removed from the clones with a warning: synthetic or public pilot data
        are not private, and the simulation must not spend the real budget.
    data_generator : callable
        ``data_generator(n_samples, rng) -> (X, y)``: draws ``n_samples`` rows of
        synthetic (or public) data from a ``numpy.random.Generator``; ``y=None``
        for one-sample tests. It must draw all its randomness from ``rng`` for
        the results to be reproducible.
    param_grid : dict or list of dicts, default=None
        Parameter combinations, as in :class:`~sklearn.model_selection.ParameterGrid`
        (e.g. ``{"epsilon": [0.5, 1, 2], "n_samples": [100, 500]}``). The key
        ``n_samples`` goes to ``data_generator``; every other key to
        ``estimator.set_params`` (nested names such as ``"test__epsilon"`` work
        for pipelines). ``budget`` and ``random_state`` may not be set.
        ``None``: one combination, the estimator as given.
    n_samples : int, default=None
        Rows per draw for combinations whose ``param_grid`` entry has no
        ``n_samples``.
    n_repeats : int, default=200
        Fits per combination. The standard error of a rate p is
        sqrt(p (1 − p) / n_repeats): 0.035 at p = 0.5 for 200 repeats.
    random_state : int, numpy Generator or None, default=None
        Seed of the simulation (data and noise). One
        :class:`numpy.random.SeedSequence` child per (combination, repeat), so the
        table does not depend on ``n_jobs`` nor on the joblib backend. ``None``
        seeds from the OS.
    n_jobs : int, default=None
        Parallel jobs, through :class:`joblib.Parallel` (``None``: one, unless a
        ``joblib.parallel_config`` context says otherwise; it also selects the
        backend, e.g. ``backend="dask"`` for a dask cluster).
    verbose : int, default=0
        ``>= 1``: one line on stderr per finished combination.

    Returns
    -------
    table : pandas.DataFrame
        One row per combination: ``n_samples``, the other parameters (one column
        each), ``n_repeats``, ``rejection_rate``, ``se`` (binomial standard error
        sqrt(p (1 − p) / n_repeats)), ``ci_low``, ``ci_high`` (Wilson 95 %);
        for e-value tests ``mean_log_e_value`` (nats); for e-processes
        ``median_stopping_time`` (median of ``result_.n_samples``: rows consumed
        up to the decision, or all rows when the process did not stop) and
        ``mean_log_e_value`` (the final log e-process).

    Warns
    -----
    UserWarning
        If ``estimator`` has a budget: it is not charged (removed from the clones).

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import stats
    >>> from skdptest import PrivateEValueTest
    >>> from skdptest.power import simulate_power
    >>> test = PrivateEValueTest(stats.bernoulli(0.3), stats.bernoulli(0.5),
    ...                          statistic="exact")
    >>> def draw(n, rng):
    ...     return rng.binomial(1, 0.5, size=(n, 1)), None
    >>> table = simulate_power(test, draw, param_grid={"n_samples": [50, 200]},
    ...                        n_repeats=20, random_state=0)
    >>> list(table["n_samples"])
    [50, 200]
    >>> bool(table["rejection_rate"].iloc[1] > table["rejection_rate"].iloc[0])
    True
    """
    if not (hasattr(estimator, "fit") and hasattr(estimator, "get_params")):
        raise InvalidParameterError(
            "estimator must be a scikit-learn style estimator with fit and get_params; "
            f"got an object of type {type(estimator).__name__}."
        )
    if not callable(data_generator):
        raise InvalidParameterError(
            "data_generator must be a callable data_generator(n_samples, rng) -> (X, y); "
            f"got an object of type {type(data_generator).__name__}."
        )
    n_repeats = check_value(n_repeats, [Interval(Integral, 1, None)], "n_repeats")
    verbose = check_value(verbose, [Interval(Integral, 0, None)], "verbose")
    n_jobs = check_value(n_jobs, [NoneValue(), Interval(Integral, None, None)], "n_jobs")
    if n_jobs == 0:
        raise InvalidParameterError("n_jobs must not be 0 (None, a positive int or -1).")
    combos = _combinations(param_grid, n_samples)
    if not _seed_params(estimator):
        raise InvalidParameterError(
            f"estimator {type(estimator).__name__} has no random_state parameter: "
            "simulate_power must seed each fit's noise."
        )
    budgets = _strip_budgets(estimator)
    if budgets:
        warnings.warn(
            f"simulate_power does not charge a privacy budget: the estimator's "
            f"{', '.join(budgets)} is removed from the simulated copies (synthetic or "
            "public pilot data are not private). Nothing was charged to it.",
            UserWarning, stacklevel=2,
        )
    root = _root_sequence(random_state)
    # One child per combination, one grandchild per repeat: every fit's seeds are fixed
    # by (random_state, combination index, repeat index) alone.
    per_combo = [child.spawn(n_repeats) for child in root.spawn(len(combos))]
    tasks = [(i, per_combo[i][s:s + _BLOCK])
             for i in range(len(combos)) for s in range(0, n_repeats, _BLOCK)]
    remaining = [math.ceil(n_repeats / _BLOCK)] * len(combos)
    records = [[] for _ in combos]
    start = time.perf_counter()
    parallel = Parallel(n_jobs=n_jobs, return_as="generator")
    outputs = parallel(
        delayed(_run_block)(estimator, data_generator, combos[i][0], combos[i][1], seeds)
        for i, seeds in tasks
    )
    rows = [None] * len(combos)
    for (i, _), block in zip(tasks, outputs, strict=True):
        records[i].extend(block)
        remaining[i] -= 1
        if remaining[i] == 0:
            rows[i] = _summarise(combos[i], records[i])
            if verbose:
                done = sum(r is not None for r in rows)
                shown = ", ".join(f"{k}={v!r}" for k, v in
                                  {"n_samples": combos[i][0], **combos[i][1]}.items())
                print(f"[simulate_power] {done}/{len(combos)} {shown}: rejection rate "
                      f"{rows[i]['rejection_rate']:.3f} ± {rows[i]['se']:.3f} "
                      f"({time.perf_counter() - start:.1f} s)", file=sys.stderr)
    return pd.DataFrame(rows)


def _root_sequence(random_state):
    random_state = check_value(random_state, [RandomState()], "random_state")
    if random_state is None:
        return np.random.SeedSequence()
    if isinstance(random_state, np.random.Generator):
        return np.random.SeedSequence(int(random_state.integers(0, 2**63)))
    if isinstance(random_state, np.random.RandomState):
        return np.random.SeedSequence(int(random_state.randint(0, 2**31)))
    return np.random.SeedSequence(random_state)


def _summarise(combo, records):
    n, params = combo
    rejects = [r[0] for r in records]
    k, m = int(sum(rejects)), len(rejects)
    p = k / m
    low, high = _wilson(k, m)
    row = {"n_samples": n, **params, "n_repeats": m, "rejection_rate": p,
           "se": math.sqrt(p * (1 - p) / m), "ci_low": low, "ci_high": high}
    log_e = [r[1] for r in records]
    if not any(math.isnan(v) for v in log_e):
        row["mean_log_e_value"] = float(np.mean(log_e))
    if all(r[3] for r in records):
        row["median_stopping_time"] = float(np.median([r[2] for r in records]))
    return row


# --------------------------------------------------------------------------------------
# Search for the smallest n or ε
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PowerSolution:
    """Result of every planner: :func:`solve_n`, :func:`solve_epsilon`, :func:`evalue_solve_n`.

    Attributes
    ----------
    value : int or float
        The smallest n (an int) or ε found whose simulated power reaches the target.
    power : float
        Its simulated power (rejection rate).
    se : float
        Binomial standard error of ``power`` (0.0 where the power is computed exactly).
    table : pandas.DataFrame
        Every point evaluated by the search, sorted by the searched parameter.

    Examples
    --------
    >>> from scipy import stats
    >>> from skdptest.power import evalue_solve_n
    >>> plan = evalue_solve_n(stats.bernoulli(0.3), stats.bernoulli(0.6), epsilon=1.0,
    ...                       power=0.8)
    >>> plan.power >= 0.8, plan.se, plan.value in set(plan.table["n_samples"])
    (True, 0.0, True)
    """

    value: float
    power: float
    se: float
    table: pd.DataFrame


def _search(power_at, lo, hi_max, target, *, integer, rtol):
    """Smallest x in [lo, hi_max] with power_at(x) >= target, power assumed monotone.

    Doubling from ``lo`` brackets the answer, then bisection (on the integers, or
    geometric for reals) narrows it until hi − lo <= max(1, rtol·hi) (integers) or
    hi / lo <= 1 + rtol (reals). Returns (x, power at x) or None if hi_max fails.
    """
    seen = {}

    def f(x):
        if x not in seen:
            seen[x] = power_at(x)
        return seen[x]

    if f(lo) >= target:
        return lo, seen
    fail, x = lo, lo
    while True:
        x = min(hi_max, 2 * x)
        if f(x) >= target:
            ok = x
            break
        if x >= hi_max:
            return None, seen
        fail = x
    while True:
        if integer:
            if ok - fail <= max(1, rtol * ok):
                break
            mid = (fail + ok) // 2
        else:
            if ok / fail <= 1 + rtol:
                break
            mid = math.sqrt(fail * ok)
        if f(mid) >= target:
            ok = mid
        else:
            fail = mid
    return ok, seen


def _solve(estimator, data_generator, name, power, lo, hi, fixed, n_repeats, random_state,
           n_jobs, verbose, integer, rtol):
    power = check_value(power, [Interval(Real, 0, 1, closed="neither")], "power")
    rtol = check_value(rtol, [Interval(Real, 0, None, closed="neither")], "rtol")
    # Common random numbers: every point of the search reuses one seed, so the same
    # synthetic draws and noise streams are compared across n (or ε); this keeps the
    # simulated power curve far closer to monotone than independent seeds would.
    seed = _root_sequence(random_state).generate_state(1)[0]
    tables = {}

    def power_at(x):
        grid = {**{k: [v] for k, v in fixed.items()}, name: [x]}
        table = simulate_power(estimator, data_generator, param_grid=grid,
                               n_repeats=n_repeats, random_state=int(seed), n_jobs=n_jobs,
                               verbose=verbose)
        tables[x] = table
        return float(table["rejection_rate"].iloc[0])

    with warnings.catch_warnings():
        if _strip_budgets(estimator):  # warn once, not at every point of the search
            warnings.warn(
                "solve_n/solve_epsilon do not charge a privacy budget: the estimator's "
                "budget is removed from the simulated copies.", UserWarning, stacklevel=3)
        warnings.filterwarnings("ignore", message="simulate_power does not charge")
        value, _ = _search(power_at, lo, hi, power, integer=integer, rtol=rtol)
    table = pd.concat(tables.values(), ignore_index=True).sort_values(name,
                                                                     ignore_index=True)
    if value is None:
        raise ValueError(
            f"the target power {power} is not reached at {name}={hi} (simulated power "
            f"{tables[hi]['rejection_rate'].iloc[0]:.3f}); raise the upper bound of the "
            "search or change the other parameters."
        )
    row = tables[value].iloc[0]
    return PowerSolution(value=value, power=float(row["rejection_rate"]),
                         se=float(row["se"]), table=table)


def solve_n(estimator, data_generator, power=0.8, *, n_min=10, n_max=100_000, params=None,
            n_repeats=200, rtol=0.05, random_state=None, n_jobs=None, verbose=0):
    """Smallest number of rows whose simulated power reaches ``power``.

    Doubling from ``n_min`` until the simulated power reaches the target, then
    bisection between the last failing and the first passing n, down to a width of
    ``rtol`` · n. The search assumes power increases with n; every point uses the
    same seed (common random numbers) so the simulated curve is close to monotone.
    The answer has Monte Carlo error: near the target, power changes slowly with n
    and one standard error of the rate (``PowerSolution.se``) can move n noticeably;
    raise ``n_repeats`` for a sharper answer. Nothing is charged (see
    :func:`simulate_power`).

    Parameters
    ----------
    estimator, data_generator :
        As in :func:`simulate_power`.
    power : float, default=0.8
        Target power in (0, 1).
    n_min, n_max : int, default=10, 100000
        Search range.
    params : dict, default=None
        Fixed estimator parameters (e.g. ``{"epsilon": 1.0}``).
    n_repeats, random_state, n_jobs, verbose :
        As in :func:`simulate_power`, per evaluated n.
    rtol : float, default=0.05
        Relative width at which the bisection stops.

    Returns
    -------
    solution : PowerSolution
        ``value`` is the n found; ``table`` every evaluated point.

    Raises
    ------
    ValueError
        If the power at ``n_max`` is below the target.

    Examples
    --------
    >>> from skdptest import DPBinomialTest
    >>> from skdptest.power import solve_n
    >>> def draw(n, rng):
    ...     return rng.binomial(1, 0.7, size=(n, 1)), None
    >>> plan = solve_n(DPBinomialTest(alternative="greater"), draw, 0.8, n_max=1000,
    ...                n_repeats=20, random_state=0)
    >>> 10 <= plan.value <= 1000, plan.power >= 0.8
    (True, True)
    """
    n_min = check_value(n_min, [Interval(Integral, 1, None)], "n_min")
    n_max = check_value(n_max, [Interval(Integral, n_min, None)], "n_max")
    return _solve(estimator, data_generator, "n_samples", power, n_min, n_max,
                  _fixed(params, "n_samples"), n_repeats, random_state, n_jobs, verbose,
                  True, rtol)


def solve_epsilon(estimator, data_generator, power=0.8, *, n_samples, epsilon_min=0.01,
                  epsilon_max=100.0, params=None, n_repeats=200, rtol=0.05,
                  random_state=None, n_jobs=None, verbose=0):
    """Smallest ε whose simulated power at ``n_samples`` rows reaches ``power``.

    Doubling ε from ``epsilon_min``, then geometric bisection until the bracket's
    ratio is at most 1 + ``rtol``. Same assumptions and caveats as :func:`solve_n`.

    Parameters
    ----------
    estimator, data_generator :
        As in :func:`simulate_power`.
    power : float, default=0.8
        Target power in (0, 1).
    n_samples : int
        Rows per synthetic draw.
    epsilon_min, epsilon_max : float, default=0.01, 100
        Search range (> 0).
    params : dict, default=None
        Other fixed estimator parameters.
    n_repeats, random_state, n_jobs, verbose :
        As in :func:`simulate_power`, per evaluated ε.
    rtol : float, default=0.05
        Relative width at which the bisection stops.

    Returns
    -------
    solution : PowerSolution
        ``value`` is the ε found; ``table`` every evaluated point.

    Raises
    ------
    ValueError
        If the power at ``epsilon_max`` is below the target.

    Examples
    --------
    >>> from skdptest import DPBinomialTest
    >>> from skdptest.power import solve_epsilon
    >>> def draw(n, rng):
    ...     return rng.binomial(1, 0.7, size=(n, 1)), None
    >>> plan = solve_epsilon(DPBinomialTest(alternative="greater"), draw, 0.8,
    ...                      n_samples=100, n_repeats=20, random_state=0)
    >>> 0.01 <= plan.value <= 100, plan.power >= 0.8
    (True, True)
    """
    n_samples = check_value(n_samples, [Interval(Integral, 1, None)], "n_samples")
    lo = check_value(epsilon_min, [Interval(Real, 0, None, closed="neither")], "epsilon_min")
    hi = check_value(epsilon_max, [Interval(Real, lo, None)], "epsilon_max")
    fixed = {**_fixed(params, "epsilon"), "n_samples": n_samples}
    return _solve(estimator, data_generator, "epsilon", power, lo, hi, fixed, n_repeats,
                  random_state, n_jobs, verbose, False, rtol)


def _fixed(params, searched):
    if params is None:
        return {}
    if not isinstance(params, Mapping):
        raise InvalidParameterError(
            f"params must be a dict of fixed parameter values; got an object of type "
            f"{type(params).__name__}."
        )
    if searched in params:
        raise InvalidParameterError(f"params must not set {searched}: it is searched.")
    return dict(params)


# --------------------------------------------------------------------------------------
# Planning the width of a confidence interval
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IntervalWidth:
    """Result of :func:`interval_width` and :func:`solve_n_width`.

    Attributes
    ----------
    n_samples : int
        Rows per simulated fit (the n found, for :func:`solve_n_width`).
    mean_width : float
        Mean width of ``result_.confidence_interval(confidence_level)`` over the
        simulated fits (the expected width, sampling and noise together).
    se : float
        Monte Carlo standard error of ``mean_width``.
    median_width : float
        Median width.
    confidence_level : float
        The level of the planned intervals.
    table : pandas.DataFrame
        One row per evaluated n (``n_samples``, ``mean_width``, ``se``,
        ``median_width``), sorted by n.

    Examples
    --------
    >>> from skdptest import DPBinomialTest
    >>> from skdptest.power import interval_width
    >>> def draw(n, rng):
    ...     return rng.binomial(1, 0.5, size=(n, 1)), None
    >>> plan = interval_width(DPBinomialTest(alternative="greater"), draw, 100,
    ...                       n_repeats=5, random_state=0)
    >>> plan.n_samples, plan.confidence_level, plan.table.shape[0]
    (100, 0.95, 1)
    """

    n_samples: int
    mean_width: float
    se: float
    median_width: float
    confidence_level: float
    table: pd.DataFrame


def _widths(estimator, data_generator, n_samples, level, seeds):
    """Widths of the intervals of fits of a clone on fresh draws (budget removed, one
    (data, noise) seed pair per repeat, as in :func:`simulate_power`)."""
    est, seed_names = _simulation_clone(estimator)
    out = []
    for seq in seeds:
        data_seq, noise_seq = seq.spawn(2)
        X, y = _check_data(data_generator(n_samples, np.random.default_rng(data_seq)),
                           n_samples)
        noise = np.random.default_rng(noise_seq)
        est.set_params(**{k: noise for k in seed_names})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FixedRandomStateWarning)
            result = _result_of(est.fit(X, y))
        if not hasattr(result, "confidence_interval"):
            raise TypeError(
                f"{type(result).__name__} has no confidence_interval: interval planning "
                "needs DPBinomialTest or DPBoundedMeanTest.")
        out.append(result.confidence_interval(level).width)
    return np.asarray(out)


def _width_row(n, widths):
    return {"n_samples": int(n), "mean_width": float(widths.mean()),
            "se": float(widths.std(ddof=1) / math.sqrt(widths.size))
            if widths.size > 1 else math.nan,
            "median_width": float(np.median(widths))}


def _check_width_args(estimator, n_repeats, confidence_level):
    n_repeats = check_value(n_repeats, [Interval(Integral, 2, None)], "n_repeats")
    level = check_confidence_level(confidence_level)
    if _strip_budgets(estimator):
        warnings.warn("interval planning does not charge a privacy budget: the "
                      "estimator's budget is removed from the simulated copies.",
                      UserWarning, stacklevel=3)
    return n_repeats, level


def interval_width(estimator, data_generator, n_samples, *, confidence_level=0.95,
                   n_repeats=200, random_state=None):
    """Expected width of an estimator's confidence interval at ``n_samples`` rows.

    A clone of ``estimator`` (:class:`~skdptest.DPBinomialTest` or
    :class:`~skdptest.DPBoundedMeanTest`, with its ε, bounds, bet and alternative) is
    fitted ``n_repeats`` times on fresh draws of ``data_generator`` and the widths of
    ``result_.confidence_interval(confidence_level)`` averaged. Nothing is charged;
    the data must be synthetic or public (see :func:`simulate_power`).

    Parameters
    ----------
    estimator : DPBinomialTest or DPBoundedMeanTest
        The planned test (cloned; budget removed with a warning).
    data_generator : callable
        ``data_generator(n_samples, rng) -> (X, y)`` as in :func:`simulate_power`.
    n_samples : int
        Rows per fit.
    confidence_level : float, default=0.95
        Level of the intervals.
    n_repeats : int, default=200
        Simulated fits (at least 2).
    random_state : int, numpy Generator or None, default=None
        Seed of the simulation (data and noise).

    Returns
    -------
    IntervalWidth

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest import DPBinomialTest
    >>> from skdptest.power import interval_width
    >>> def draw(n, rng):
    ...     return rng.binomial(1, 0.3, size=(n, 1)), None
    >>> plan = interval_width(DPBinomialTest(epsilon=1.0), draw, 1000, n_repeats=20,
    ...                       random_state=0)
    >>> 0.04 < plan.mean_width < 0.07
    True
    """
    n_samples = check_value(n_samples, [Interval(Integral, 1, None)], "n_samples")
    n_repeats, level = _check_width_args(estimator, n_repeats, confidence_level)
    seeds = _root_sequence(random_state).spawn(n_repeats)
    row = _width_row(n_samples, _widths(estimator, data_generator, n_samples, level, seeds))
    return IntervalWidth(n_samples=n_samples, mean_width=row["mean_width"], se=row["se"],
                         median_width=row["median_width"], confidence_level=level,
                         table=pd.DataFrame([row]))


def solve_n_width(estimator, data_generator, width, *, confidence_level=0.95, n_min=10,
                  n_max=100_000, n_repeats=200, rtol=0.05, random_state=None):
    """Smallest n whose simulated expected interval width is at most ``width``.

    Doubling from ``n_min``, then bisection down to ``rtol`` · n, on
    :func:`interval_width` with one seed for every n (common random numbers, so the
    simulated width curve is close to monotone). The answer has Monte Carlo error
    (``se``); nothing is charged.

    Parameters
    ----------
    estimator, data_generator, confidence_level, n_repeats, random_state :
        As in :func:`interval_width`.
    width : float
        Target expected width (> 0, in the parameter's unit).
    n_min, n_max : int, default=10, 100000
        Search range.
    rtol : float, default=0.05
        Relative width at which the bisection stops.

    Returns
    -------
    IntervalWidth
        At the n found; ``table`` holds every evaluated n.

    Raises
    ------
    ValueError
        If the expected width at ``n_max`` is still above ``width``.

    Examples
    --------
    >>> from skdptest import DPBinomialTest
    >>> from skdptest.power import solve_n_width
    >>> def draw(n, rng):
    ...     return rng.binomial(1, 0.5, size=(n, 1)), None
    >>> plan = solve_n_width(DPBinomialTest(alternative="greater"), draw, 0.3,
    ...                      n_repeats=5, rtol=0.5, random_state=0)
    >>> plan.mean_width <= 0.3
    True
    """
    width = check_value(width, [Interval(Real, 0, None, closed="neither")], "width")
    n_min = check_value(n_min, [Interval(Integral, 1, None)], "n_min")
    n_max = check_value(n_max, [Interval(Integral, n_min, None)], "n_max")
    rtol = check_value(rtol, [Interval(Real, 0, None, closed="neither")], "rtol")
    n_repeats, level = _check_width_args(estimator, n_repeats, confidence_level)
    seed = _root_sequence(random_state).generate_state(1)[0]
    rows = {}

    def minus_width(n):
        seeds = np.random.SeedSequence(int(seed)).spawn(n_repeats)
        rows[n] = _width_row(n, _widths(estimator, data_generator, n, level, seeds))
        return -rows[n]["mean_width"]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # warned once above
        value, _ = _search(minus_width, n_min, n_max, -width, integer=True, rtol=rtol)
    table = pd.DataFrame(sorted(rows.values(), key=lambda r: r["n_samples"]))
    if value is None:
        raise ValueError(
            f"the target width {width} is not reached at n_max={n_max} (expected width "
            f"{rows[n_max]['mean_width']:.4g}); raise n_max or change the other "
            "parameters.")
    row = rows[value]
    return IntervalWidth(n_samples=int(value), mean_width=row["mean_width"], se=row["se"],
                         median_width=row["median_width"], confidence_level=level,
                         table=table)


# --------------------------------------------------------------------------------------
# Exact power of the e-value test
# --------------------------------------------------------------------------------------

# Half-width, in units of 1/rate, of the range of releases summed over: the noise puts
# mass below e^-50 beyond it, so the power is exact up to that (documented) amount.
_PAD_NATS = 50.0
# Releases whose log e-value lies this close to the threshold are re-evaluated with the
# estimator's own log-likelihood-ratio code, so the rejection region is the estimator's.
_RECHECK = 1e-6


def _release_laws(model, n, epsilon):
    """(y, log f_Q(y), log e-value of y as the O(n) recursion computes it, recheck)."""
    if isinstance(model, BinaryExact):
        k = np.arange(n + 1)
        log_p = stats.binom.logpmf(k, n, model.p1)
        log_q = stats.binom.logpmf(k, n, model.q1)
        rate = model.noise_rate(epsilon)
        pad = int(_PAD_NATS / rate) + 1
        y, lq = log_geometric_mixture(log_q, rate, pad)
        lp = log_geometric_mixture(log_p, rate, pad)[1]
        return y, lq, lq - lp, lambda ys: model.log_lr(ys, n, epsilon)
    # LatticeExact: the law of the lattice sum T (trusted windows), with the same
    # conservative guards as LatticeExact.log_lr / expected_log_e.
    log_p, log_q, bound_p, _, rel = model.log_laws(n)
    rate = model.noise_rate(n)
    pad = int(_PAD_NATS / rate) + 1
    y, lq = log_geometric_mixture(log_q, rate, pad)
    lp = log_geometric_mixture(log_p, rate, pad)[1] + math.log1p(_REL_GUARD) - math.log1p(-rel)
    if np.isfinite(bound_p).any():
        lp = np.logaddexp(lp, log_geometric_mixture(bound_p, rate, pad)[1])
    log_e = lq + math.log1p(-_REL_GUARD) - math.log1p(rel) - lp
    return y, lq, log_e, lambda ys: model.log_lr(ys, n)


def _exact_model(null, alternative, epsilon, statistic):
    params = validate_parameters(
        {"null": PrivateEValueTest._parameter_constraints["null"],
         "alternative": PrivateEValueTest._parameter_constraints["alternative"],
         "epsilon": PrivateEValueTest._parameter_constraints["epsilon"],
         "statistic": [Options("exact")]},
        dict(null=null, alternative=alternative, epsilon=epsilon, statistic=statistic),
    )
    if null is None or alternative is None:
        raise InvalidParameterError("null and alternative must be given.")
    params = check_laws(params)
    try:
        _, model = resolve_statistic(params, make_laws(null, alternative).n_features)
    except ValueError as exc:
        raise InvalidParameterError(f"statistic='exact' is not available: {exc}") from exc
    return model, params["epsilon"]


def evalue_power(null, alternative, n_samples, epsilon, *, alpha=0.05, statistic="exact"):
    """Exact power P_Q(E >= 1/α) of :class:`~skdptest.PrivateEValueTest`.

    For ``statistic="exact"`` the release is Y = T + Z: T the count of rows equal to
    the second support point (two-point laws, T ~ Binomial(n, q) under Q) or the
    lattice sum of the quantised optimal statistic (other laws with an exact model),
    Z two-sided geometric at the quantised rate of the estimator. The e-value is
    E(Y) = f_Q(Y) / f_P(Y), and the test rejects when log E(Y) >= log(1/α). The
    power is the sum of f_Q(y) over the rejection region, with f_Q the exact law of
    the release (an O(n + 1/rate) recursion), so it needs no simulation and no data.

    Parameters
    ----------
    null, alternative : frozen scipy.stats distributions
        As in :class:`~skdptest.PrivateEValueTest` (laws with an exact model:
        two-point laws such as Bernoulli pairs; finite discrete laws, Gaussian
        location families and univariate continuous laws through the lattice).
    n_samples : int
        Rows, >= 1.
    epsilon : float
        Privacy parameter ε > 0 of the release.
    alpha : float, default=0.05
        Level of the test.
    statistic : {"exact"}, default="exact"
        Only the exact release has an exact power; for ``"optimal"`` and ``"tslr"``
        use :func:`simulate_power`.

    Returns
    -------
    power : float
        P_Q(E >= 1/α). Exact up to the mass of the noise beyond 50/rate counts
        (below e^-50) and floating-point rounding of the law.

    Examples
    --------
    >>> from scipy import stats
    >>> from skdptest.power import evalue_power
    >>> round(evalue_power(stats.bernoulli(0.3), stats.bernoulli(0.4), 200, 1.0), 3)
    0.689
    """
    model, epsilon = _exact_model(null, alternative, epsilon, statistic)
    n = check_value(n_samples, [Interval(Integral, 1, None)], "n_samples")
    alpha = check_value(alpha, [Interval(Real, 0, 1, closed="neither")], "alpha")
    if isinstance(model, LatticeExact) and model.noise_scale(n) == 0:
        return 0.0  # constant statistic: E = 1 < 1/α, never rejects
    threshold = -math.log(alpha)  # the estimator rejects when log E >= -log α
    y, log_fq, log_e, recheck = _release_laws(model, n, epsilon)
    near = np.flatnonzero(np.abs(log_e - threshold) < _RECHECK)
    if near.size:
        log_e = log_e.copy()
        log_e[near] = recheck(y[near].astype(float))
    mass = np.exp(log_fq[log_e >= threshold])
    return float(min(1.0, math.fsum(mass)))


def evalue_solve_n(null, alternative, epsilon, *, power=0.8, alpha=0.05, statistic="exact",
                   n_max=1_000_000):
    """Smallest n whose exact :func:`evalue_power` reaches ``power``.

    Doubling from n = 1, then integer bisection to the exact crossing (the search
    assumes the power increases with n, which holds up to the small discreteness
    of the count; the answer n satisfies ``evalue_power(n) >= power`` and
    ``evalue_power(n - 1) < power`` at the crossing found).

    Parameters
    ----------
    null, alternative, epsilon, alpha, statistic :
        As in :func:`evalue_power`.
    power : float, default=0.8
        Target power in (0, 1).
    n_max : int, default=1000000
        Largest n tried.

    Returns
    -------
    solution : PowerSolution
        The same type as :func:`solve_n`'s: ``value`` the smallest n (an int), ``power``
        its exact power, ``se`` 0.0 (an exact computation, not a simulation) and
        ``table`` every n evaluated by the search (columns ``n_samples``,
        ``rejection_rate``, ``se``), sorted by n.

    Raises
    ------
    ValueError
        If the power at ``n_max`` is below the target.

    Examples
    --------
    >>> from scipy import stats
    >>> from skdptest.power import evalue_solve_n
    >>> solution = evalue_solve_n(stats.bernoulli(0.3), stats.bernoulli(0.4), 1.0, power=0.8)
    >>> solution.value
    271
    >>> bool(solution.power >= 0.8)
    True
    """
    _exact_model(null, alternative, epsilon, statistic)  # validate before searching
    power = check_value(power, [Interval(Real, 0, 1, closed="neither")], "power")
    n_max = check_value(n_max, [Interval(Integral, 1, None)], "n_max")

    def power_at(n):
        return evalue_power(null, alternative, n, epsilon, alpha=alpha, statistic=statistic)

    n, seen = _search(power_at, 1, n_max, power, integer=True, rtol=0.0)
    if n is None:
        raise ValueError(
            f"the target power {power} is not reached at n_max={n_max} (exact power "
            f"{seen[n_max]:.3f}); raise n_max or epsilon."
        )
    table = pd.DataFrame({"n_samples": sorted(seen)})
    table["rejection_rate"] = [float(seen[k]) for k in table["n_samples"]]
    table["se"] = 0.0
    return PowerSolution(value=int(n), power=float(seen[n]), se=0.0, table=table)


# --------------------------------------------------------------------------------------
# Plot
# --------------------------------------------------------------------------------------


def plot_power(table, x="n_samples", hue=None, *, ax=None, target=None):
    """Power curves from a :func:`simulate_power` table, with Wilson 95 % bands.

    Parameters
    ----------
    table : pandas.DataFrame
        Output of :func:`simulate_power`.
    x : str, default="n_samples"
        Column on the horizontal axis.
    hue : str, default=None
        Column whose values get one curve each.
    ax : matplotlib Axes, default=None
        Axes to draw on (a new figure if None).
    target : float, default=None
        Draw a horizontal line at this power.

    Returns
    -------
    ax : matplotlib.axes.Axes
        The axes drawn on.

    Examples
    --------
    matplotlib is optional (not a test dependency), so the plot itself is not run here:

    >>> from skdptest import DPBinomialTest
    >>> from skdptest.power import plot_power, simulate_power
    >>> def draw(n, rng):
    ...     return rng.binomial(1, 0.7, size=(n, 1)), None
    >>> table = simulate_power(DPBinomialTest(alternative="greater"), draw,
    ...                        param_grid={"n_samples": [20, 80]}, n_repeats=20,
    ...                        random_state=0)
    >>> ax = plot_power(table, target=0.8)  # doctest: +SKIP
    """
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # matplotlib is optional
        raise ImportError(
            "plot_power needs matplotlib (pip install matplotlib); the table from "
            "simulate_power has all the numbers without it."
        ) from exc
    if not isinstance(table, pd.DataFrame):
        raise InvalidParameterError(
            f"table must be a pandas DataFrame from simulate_power; got an object of type "
            f"{type(table).__name__}."
        )
    for name, col in (("x", x), ("hue", hue)):
        if col is not None and col not in table.columns:
            raise InvalidParameterError(
                f"{name}={col!r} is not a column of table (columns: {list(table.columns)})."
            )
    if ax is None:
        _, ax = plt.subplots()
    groups = [(None, table)] if hue is None else list(table.groupby(hue, sort=True))
    for key, sub in groups:
        sub = sub.sort_values(x)
        label = None if hue is None else f"{hue}={key}"
        line = ax.plot(sub[x], sub["rejection_rate"], marker="o", label=label)[0]
        ax.fill_between(sub[x], sub["ci_low"], sub["ci_high"], alpha=0.2,
                        color=line.get_color())
    if target is not None:
        ax.axhline(target, color="grey", linestyle="--", linewidth=1)
    if isinstance(table[x].iloc[0], numbers.Real) and table[x].min() > 0 \
            and table[x].max() / table[x].min() >= 10:
        ax.set_xscale("log")
    ax.set_xlabel(x)
    ax.set_ylabel("rejection rate")
    ax.set_ylim(0, 1)
    if hue is not None:
        ax.legend()
    return ax
