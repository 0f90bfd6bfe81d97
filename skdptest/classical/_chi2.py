"""Private tests on declared categories: χ² goodness of fit and contingency independence.

``DPChiSquareTest`` releases the cell counts with exact discrete Laplace noise and
computes Pearson's statistic on them (Gaboardi, Lim, Rogers and Vadhan 2016); its null is
simulated exactly (multinomial counts plus the same noise). ``DPContingencyTest`` tests
independence of two declared categorical variables with the DP permutation p-value of
Kim and Schrab on a bounded-sensitivity table distance: the permutation conditions on the
(unreleased) margins, so its level holds at every n whatever the margins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np

from .._base import BasePrivateTest, validate_input
from .._budget import PrivacyBudget
from .._noise import discrete_laplace, quantise_rate
from .._params import (
    InstanceOf,
    Interval,
    InvalidParameterError,
    NoneValue,
    RandomState,
)
from .._permutation import dp_permutation_pvalue, permutation_noise, privacy_xi
from .._recorder import NoisedQuantity, NoisePlan, observe
from ._results import ChiSquareTestResult, ClassicalTestResult

__all__ = ["DPChiSquareTest", "DPContingencyTest", "contingency_distance",
           "pearson_statistic"]

#: The largest ε the noise is calibrated at (a larger ε only adds privacy).
MAX_EPSILON = 2.0**20
#: Most Monte Carlo draws or permutations per fit.
MAX_RESAMPLES = 10**6
#: Most rows of a contingency test (its integer statistic stays below 2**53).
MAX_TABLE_ROWS = 2**25
# Simulated tables are formed in blocks of about this many entries.
_BLOCK = 1 << 21

_CATEGORIES = [NoneValue(), InstanceOf(list, tuple, np.ndarray,
                                       description="a list of categories")]


def _category_list(values, name):
    """The declared categories as a tuple of distinct hashable scalars."""
    values = list(np.asarray(values, dtype=object).ravel()) if isinstance(
        values, np.ndarray) else list(values)
    if len(values) < 2:
        raise InvalidParameterError(f"{name} must list at least 2 categories.")
    try:
        distinct = len(set(values)) == len(values)
    except TypeError as exc:
        raise InvalidParameterError(f"{name} must hold hashable values (numbers or "
                                    "strings).") from exc
    if not distinct:
        raise InvalidParameterError(f"{name} must not repeat a category.")
    for v in values:
        if isinstance(v, float) and math.isnan(v):
            raise InvalidParameterError(f"{name} must not contain NaN.")
    return tuple(values)


def _encode(column, categories, name):
    """Codes 0..k−1 of a column of labels; refuses a label outside ``categories``
    (before the charge) without saying which or how many."""
    lookup = {c: i for i, c in enumerate(categories)}
    codes = np.fromiter((lookup.get(v, -1) for v in column.tolist()), dtype=np.int64,
                        count=column.shape[0])
    if np.any(codes < 0):
        raise ValueError(f"{name} holds a value outside the declared categories; declare "
                         "every category (a public list) or remove such rows first.")
    return codes


def _check_labels(est, X, y, reset, n_columns):
    """Validate label data (numbers or strings, no NaN) for the estimator ``est``; return
    (X, y, the label columns)."""
    if y is None:
        X = validate_input(est, X, reset=reset, numeric=False, dtype=None)
        columns = [X[:, j] for j in range(X.shape[1])]
    else:
        X, y = validate_input(est, X, y, reset=reset, numeric=False, dtype=None,
                             y_numeric=False)
        columns = [X[:, j] for j in range(X.shape[1])] + [np.asarray(y).ravel()]
    if len(columns) != n_columns:
        raise ValueError(
            f"{type(est).__name__} needs {n_columns} label column(s) in X (and y); got "
            f"{len(columns)}.")
    for col in columns:
        if col.dtype.kind == "f" and np.any(np.isnan(col)):
            raise ValueError("Input contains NaN.")
        if col.dtype.kind == "O" and any(isinstance(v, float) and math.isnan(v)
                                         for v in col.tolist()):
            raise ValueError("Input contains NaN.")
    return X, y, columns


def pearson_statistic(counts, expected):
    """Σ_j (c_j − e_j)² / e_j along the last axis (counts may be noisy, even negative)."""
    counts = np.asarray(counts, dtype=np.float64)
    return ((counts - expected) ** 2 / expected).sum(axis=-1)


def _epsilon(params):
    return min(params["epsilon"], MAX_EPSILON)


class _DeclaredCategoriesTest(BasePrivateTest):
    """What the two tests on labels of declared categories share: the public
    ``categories_``, the score −log p, and scikit-learn tags saying that the input is
    labels (numbers or strings), not a numeric 2-D array, so scikit-learn's generic
    checks (random float matrices) do not apply."""

    def _fitted_attributes(self, prep, result):
        return {"categories_": prep.plan.categories}

    def _score_value(self, result):
        return -math.log(result.pvalue)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.categorical = True
        tags.input_tags.string = True
        return tags


@dataclass(frozen=True)
class _GOFPlan:
    categories: tuple
    probabilities: object
    codes: object
    rate: float


class DPChiSquareTest(_DeclaredCategoriesTest):
    r"""Differentially private χ² goodness-of-fit test on declared categories.

    H0: the rows are i.i.d. draws of a categorical variable whose law on the declared
    ``categories`` is ``probabilities`` (fully specified; nothing estimated). ``X`` holds
    one column of labels (numbers or strings); a label outside ``categories`` is refused
    before anything is charged.

    Parameters
    ----------
    categories : list
        The public list of categories (at least 2, distinct). Required.
    probabilities : array-like of shape (n_categories,), default=None
        Null probabilities, all > 0, summing to 1 (up to 1e-9; they are then
        normalised). ``None``: uniform.
    epsilon : float, default=1.0
        Privacy parameter ε > 0 of one fit (or one score).
    n_resamples : int, default=999
        Number B of Monte Carlo draws of the null; the p-value is a multiple of
        1 / (B + 1).
    alpha : float, default=0.05
        Level of the test.
    budget : PrivacyBudget, default=None
        Ledger charged ε before every fit and score.
    random_state : None, int, RandomState instance or Generator, default=None
        Source of the noise and of the Monte Carlo draws. For tests and reproducible examples only:
        any value other than ``None`` raises :class:`~skdptest.FixedRandomStateWarning` (whoever
        holds the seed, the generator or a pickle of the estimator can replay the noise, and equal
        seeds correlate the noise of different fits). ``None`` draws fresh OS entropy and keeps
        nothing from which the noise could be regenerated.

    Attributes
    ----------
    result_ : ChiSquareTestResult
        The private result: ``noisy_counts`` (the release), ``statistic`` (Pearson's χ²
        on the noisy counts), ``pvalue``.
    categories_ : tuple
        The declared categories (public), in the order of ``noisy_counts``.
    n_features_in_ : int
        Number of features seen during fit (always 1).
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of features seen during fit, when X has string column names.
    privacy_spent_ : PrivacySpent
        What the last charge cost: ``epsilon``, ``delta`` and the privacy profile
        declared to the ledger. This estimator declares ``"pure"``: its release is
        ε-DP. It is not one continuous Laplace draw, so the
        ``"laplace"`` profile (a tighter zCDP) is not claimed; the ``"zcdp"`` and
        ``"rdp"`` accountants charge it as generic pure DP (see "Privacy profiles" in
        the privacy-budget guide).

    Notes
    -----
    Privacy: pure ε-DP with respect to replacing one row (n public). Replacing a row
    moves one unit from one cell count to another: the count vector has L1 sensitivity
    2 (checked by enumeration in the tests). Each count gets independent exact discrete
    Laplace noise of rate ε/2 (rounded down onto the exact sampler's grid), so the noisy
    vector's probability changes by at most :math:`e^{(ε/2)(1 + 1)} = e^ε` between
    neighbours.

    Released fields, jointly: the noisy counts (integers). ``statistic``
    (:math:`\sum_j (\tilde c_j - n p_j)^2 / (n p_j)`), ``pvalue`` and ``reject`` are
    functions of the noisy counts and of Monte Carlo draws independent of the data.
    ``sensitivity`` (2, in L1), ``categories_``, ``n_samples``, ``alpha``, ``epsilon``
    are public.

    Validity (Monte Carlo-exact at every n): under H0 the counts are multinomial
    (n, p); the B simulated vectors are multinomial(n, p) draws plus independent noise
    of the same law, so the B + 1 statistics are exchangeable and
    p = (1 + #{b : Q_b >= Q}) / (B + 1) has P(p <= α) <= α. Treating the noisy counts
    as exact (the χ² law) is not valid: it rejects a true null far too often at small
    n ε.

    References
    ----------
    .. [1] M. Gaboardi, H. W. Lim, R. Rogers and S. P. Vadhan, "Differentially private
       chi-squared hypothesis testing: goodness of fit and independence testing",
       ICML 2016.

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest import DPChiSquareTest
    >>> rng = np.random.default_rng(0)
    >>> X = rng.choice(["a", "b", "c"], p=[0.5, 0.3, 0.2], size=(2000, 1))
    >>> test = DPChiSquareTest(categories=["a", "b", "c"], epsilon=1.0).fit(X)
    >>> test.decision()
    True
    >>> len(test.result_.noisy_counts)
    3
    """

    def __init__(self, categories=None, probabilities=None, *, epsilon=1.0, n_resamples=999,
                 alpha=0.05, budget=None, random_state=None):
        self.categories = categories
        self.probabilities = probabilities
        self.epsilon = epsilon
        self.n_resamples = n_resamples
        self.alpha = alpha
        self.budget = budget
        self.random_state = random_state

    _parameter_constraints = {
        "categories": _CATEGORIES,
        "probabilities": [NoneValue(), InstanceOf(list, tuple, np.ndarray,
                                                  description="an array of probabilities")],
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "n_resamples": [Interval(Integral, 1, MAX_RESAMPLES)],
        "alpha": [Interval(Real, 0, 1, closed="neither")],
        "budget": [NoneValue(), InstanceOf(PrivacyBudget)],
        "random_state": [RandomState()],
    }

    def _check_params(self, params):
        params = dict(params)
        if params["categories"] is None:
            raise InvalidParameterError("categories must be given: the public list of "
                                        "categories of the test.")
        cats = _category_list(params["categories"], "categories")
        k = len(cats)
        if params["probabilities"] is None:
            probs = np.full(k, 1.0 / k)
        else:
            try:
                probs = np.asarray(params["probabilities"], dtype=np.float64).ravel()
            except (TypeError, ValueError) as exc:
                raise InvalidParameterError("probabilities must hold real numbers.") from exc
            if probs.size != k:
                raise InvalidParameterError(
                    f"probabilities must have one value per category ({k}); got "
                    f"{probs.size}.")
            if not (np.all(np.isfinite(probs)) and np.all(probs > 0)):
                raise InvalidParameterError("probabilities must be finite and > 0.")
            if abs(probs.sum() - 1.0) > 1e-9:
                raise InvalidParameterError("probabilities must sum to 1.")
            probs = probs / probs.sum()
        params["categories"], params["probabilities"] = cats, probs
        rate = _epsilon(params) / 2.0
        if rate < 2.0**-20:
            raise InvalidParameterError("epsilon is too small for the exact sampler "
                                        "(epsilon / 2 < 2**-20).")
        return params

    def _validate_input(self, X, y, reset):
        if y is not None:
            raise ValueError("DPChiSquareTest takes one column of labels X; y must be "
                             "None.")
        X, _, _ = _check_labels(self, X, None, reset, 1)
        return X, None

    def _plan(self, params, X, y):
        codes = _encode(X[:, 0], params["categories"], "X")
        return _GOFPlan(params["categories"], params["probabilities"], codes,
                        quantise_rate(_epsilon(params) / 2.0))

    def _release(self, prep, rng):
        params, plan = prep.params, prep.plan
        n, k, b = prep.n_samples, len(plan.categories), params["n_resamples"]
        counts = np.bincount(plan.codes, minlength=k)
        observe("cell counts", counts)  # grey-box audit (else a no-op)
        noisy = counts + discrete_laplace(rng, plan.rate, size=k)
        expected = n * plan.probabilities
        observed = pearson_statistic(noisy, expected)
        exceed = 0
        rows = max(1, _BLOCK // k)
        for start in range(0, b, rows):
            size = min(rows, b - start)
            sim = rng.multinomial(n, plan.probabilities, size=size)
            sim = sim + discrete_laplace(rng, plan.rate, size=(size, k))
            exceed += int(np.count_nonzero(pearson_statistic(sim, expected) >= observed))
        pvalue = (1 + exceed) / (b + 1)
        return ChiSquareTestResult(
            reject=bool(pvalue <= params["alpha"]), alpha=params["alpha"],
            epsilon=params["epsilon"], delta=0.0, n_samples=n,
            method="DP chi-square goodness of fit", statistic=float(observed),
            pvalue=pvalue, alternative="two-sided", sensitivity=2.0,
            noisy_counts=tuple(int(v) for v in noisy))

    def _noise_plan(self, prep):
        """What a fit noises (the grey-box audit hook, doc/contributing.md): the cell
        counts (L1 sensitivity 2, one draw of rate <= ε/2 per cell: scale >= 2/ε), then
        the blocks of the simulated null (added to data-free multinomial counts:
        sensitivity 0), one draw per block."""
        eps, k = _epsilon(prep.params), len(prep.plan.categories)
        blocks = -(-prep.params["n_resamples"] // max(1, _BLOCK // k))
        return NoisePlan((
            NoisedQuantity("cell counts", "discrete_laplace", 2.0, eps),
            NoisedQuantity("simulated null (no data)", "discrete_laplace", 0.0, eps,
                           draws=blocks, value=0),
        ))



def contingency_distance(tables, row_sums, col_sums):
    """Σ_ij |n N_ij − R_i C_j| (= n² times the L1 distance between the table's joint
    frequencies and the product of its margins), exact in int64.

    Parameters
    ----------
    tables : ndarray of int, shape (..., r, c)
        Cell counts N.
    row_sums, col_sums : ndarray of int
        Margins R (length r) and C (length c) of every table; n = ΣR.

    Returns
    -------
    ndarray of int64, shape (...)
    """
    n = int(np.sum(row_sums))
    outer = np.outer(row_sums, col_sums).astype(np.int64)
    return np.abs(np.asarray(tables, dtype=np.int64) * np.int64(n) - outer).sum(axis=(-2, -1))


@dataclass(frozen=True)
class _TablePlan:
    categories: tuple
    rows: object
    cols: object


class DPContingencyTest(_DeclaredCategoriesTest):
    r"""Differentially private test of independence of two declared categorical variables.

    H0: the rows are i.i.d. pairs (U, V) with U independent of V, each on its declared
    categories; the margins of U and V are unknown (any law). ``X`` holds two columns of
    labels (U, V), or one column U with ``y`` = V. A label outside the declared
    categories is refused before anything is charged.

    Parameters
    ----------
    categories : pair of lists
        ``(categories of U, categories of V)``: the public lists (each at least 2
        distinct values). Required.
    epsilon : float, default=1.0
        Privacy parameter ε > 0 of one fit (or one score).
    n_resamples : int, default=999
        Number B of random permutations; the p-value is a multiple of 1 / (B + 1).
    alpha : float, default=0.05
        Level of the test.
    budget : PrivacyBudget, default=None
        Ledger charged ε before every fit and score.
    random_state : None, int, RandomState instance or Generator, default=None
        Source of the permutations and of the noise. For tests and reproducible examples only: any
        value other than ``None`` raises :class:`~skdptest.FixedRandomStateWarning` (whoever holds
        the seed, the generator or a pickle of the estimator can replay the noise, and equal seeds
        correlate the noise of different fits). ``None`` draws fresh OS entropy and keeps nothing
        from which the noise could be regenerated.

    Attributes
    ----------
    result_ : ClassicalTestResult
        The private result: ``pvalue`` (the release) and ``reject``; ``statistic`` is
        ``None`` (no noisy statistic is released, see Notes).
    categories_ : tuple of two tuples
        The declared categories (public).
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of features seen during fit, when X has string column names.
    privacy_spent_ : PrivacySpent
        What the last charge cost: ``epsilon``, ``delta`` and the privacy profile
        declared to the ledger. This estimator declares ``"pure"``: its release is
        ε-DP. It is not one continuous Laplace draw, so the
        ``"laplace"`` profile (a tighter zCDP) is not claimed; the ``"zcdp"`` and
        ``"rdp"`` accountants charge it as generic pure DP (see "Privacy profiles" in
        the privacy-budget guide).

    Notes
    -----
    Statistic: with N the r × c table of counts and R, C its margins,
    :math:`T = \sum_{ij} |n N_{ij} - R_i C_j|` (n² times the L1 distance between the
    joint frequencies and the product of the margins), an integer.

    Privacy: pure ε-DP with respect to replacing one row (n public), by the DP
    permutation p-value of Kim and Schrab [2]_ (``skdptest._permutation``): T on the
    observed table and on B tables whose V column is randomly permuted against U, each
    floored onto a grid and given independent exact discrete Laplace noise of scale
    2Δ/ε; only the p-value leaves the estimator. Its premise is that every permuted
    statistic moves by at most Δ between neighbours. Replacing row i changes, in a
    table permuted by π, two pairs: row i's U and row π⁻¹(i)'s V, that is two unit
    moves of the table (‖ΔN‖₁ <= 4) while each margin moves by at most 2 in L1; then
    :math:`\|\Delta(R C^\top)\|_1 \le \|\Delta R\|_1 \|C\|_1 + \|R'\|_1 \|\Delta C\|_1
    \le 4n`, so Δ = 4n + 4n = 8n (the observed table: 6n). Brute force on small
    tables in the tests never exceeds it.

    Released fields, jointly: the p-value (and ``reject``, a function of it).
    ``categories_``, ``n_samples``, ``alpha``, ``epsilon``, ``sensitivity`` (8n, in
    units of T) are public.

    Validity (exact at every n, over the unknown margins): under H0 the pairs
    (U_i, V_π(i)) of a uniformly random permutation π have the same joint law as the
    data, whatever the margins, so the B + 1 statistics are exchangeable; with
    independent noise the rank p-value (ties counted against H0) satisfies
    P(p <= α) <= α (Kim and Schrab, Theorem 2). The test conditions on the margins
    (the permutation keeps them) instead of estimating them: a plug-in of noisy margins
    into a simulated null is only asymptotically valid and is not used.

    Cost: O(B n) for the permuted tables.

    References
    ----------
    .. [1] M. Gaboardi, H. W. Lim, R. Rogers and S. P. Vadhan, "Differentially private
       chi-squared hypothesis testing: goodness of fit and independence testing",
       ICML 2016.
    .. [2] I. Kim and A. Schrab, "Differentially Private Permutation Tests:
       Applications to Kernel Methods", arXiv:2310.19043, 2023.

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest import DPContingencyTest
    >>> rng = np.random.default_rng(0)
    >>> u = rng.integers(0, 2, size=2000)
    >>> v = np.where(rng.random(2000) < 0.3, 1 - u, u)  # V depends on U
    >>> test = DPContingencyTest(categories=([0, 1], [0, 1]), epsilon=1.0)
    >>> test.fit(np.c_[u, v]).decision()
    True
    """

    def __init__(self, categories=None, *, epsilon=1.0, n_resamples=999, alpha=0.05,
                 budget=None, random_state=None):
        self.categories = categories
        self.epsilon = epsilon
        self.n_resamples = n_resamples
        self.alpha = alpha
        self.budget = budget
        self.random_state = random_state

    _parameter_constraints = {
        "categories": [NoneValue(), InstanceOf(list, tuple,
                                               description="a pair of category lists")],
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "n_resamples": [Interval(Integral, 1, MAX_RESAMPLES)],
        "alpha": [Interval(Real, 0, 1, closed="neither")],
        "budget": [NoneValue(), InstanceOf(PrivacyBudget)],
        "random_state": [RandomState()],
    }

    def _check_params(self, params):
        params = dict(params)
        cats = params["categories"]
        if cats is None:
            raise InvalidParameterError("categories must be given: a pair (categories of "
                                        "the first variable, categories of the second).")
        if len(cats) != 2 or isinstance(cats[0], str) or isinstance(cats[1], str):
            raise InvalidParameterError("categories must be a pair of lists (one per "
                                        "variable).")
        params["categories"] = (_category_list(cats[0], "categories[0]"),
                                _category_list(cats[1], "categories[1]"))
        return params

    def _validate_input(self, X, y, reset):
        X, y, _ = _check_labels(self, X, y, reset, 2)
        return X, y

    def _plan(self, params, X, y):
        n = int(X.shape[0])
        if n > MAX_TABLE_ROWS:
            raise ValueError(f"DPContingencyTest takes at most {MAX_TABLE_ROWS} rows.")
        u = X[:, 0]
        v = X[:, 1] if y is None else np.asarray(y).ravel()
        cats = params["categories"]
        rows = _encode(u, cats[0], "the first variable")
        cols = _encode(v, cats[1], "the second variable")
        try:  # the noise is planned now: a tiny ε refuses before the charge
            permutation_noise(8.0 * n, _epsilon(params))
        except ValueError as exc:
            raise InvalidParameterError(f"epsilon is too small: {exc}") from exc
        return _TablePlan(cats, rows, cols)

    def _release(self, prep, rng):
        params, plan = prep.params, prep.plan
        n, b = prep.n_samples, params["n_resamples"]
        r, c = len(plan.categories[0]), len(plan.categories[1])
        row_sums = np.bincount(plan.rows, minlength=r)
        col_sums = np.bincount(plan.cols, minlength=c)
        stats = np.empty(b + 1, dtype=np.int64)
        observed = np.bincount(plan.rows * c + plan.cols, minlength=r * c).reshape(r, c)
        stats[0] = contingency_distance(observed, row_sums, col_sums)
        per = max(1, _BLOCK // max(n, r * c))
        for start in range(0, b, per):
            size = min(per, b - start)
            perm = rng.permuted(np.broadcast_to(plan.cols, (size, n)), axis=1)
            offsets = (np.arange(size, dtype=np.int64) * (r * c))[:, None]
            cells = (offsets + plan.rows[None, :] * c + perm).ravel()
            tables = np.bincount(cells, minlength=size * r * c).reshape(size, r, c)
            stats[1 + start:1 + start + size] = contingency_distance(tables, row_sums,
                                                                     col_sums)
        pvalue, _ = dp_permutation_pvalue(stats.astype(np.float64), 8.0 * n,
                                          _epsilon(params), 0.0, rng)
        return ClassicalTestResult(
            reject=bool(pvalue <= params["alpha"]), alpha=params["alpha"],
            epsilon=params["epsilon"], delta=0.0, n_samples=n,
            method="DP contingency independence (permutation, L1 distance)",
            statistic=None, pvalue=float(pvalue), alternative="two-sided",
            sensitivity=8.0 * n)

    def _noise_plan(self, prep):
        """What a fit noises (the grey-box audit hook, doc/contributing.md): the B + 1
        table distances floored on the grid g of the DP permutation p-value, each moving
        by at most Δ_int = ceil(8n / g) steps, with discrete Laplace noise of rate
        <= ε / (2 Δ_int) (factor 2: the permutation theorem pays twice). The
        permutations are not noise."""
        eps = _epsilon(prep.params)
        noise = permutation_noise(8.0 * prep.n_samples, eps)
        return NoisePlan((NoisedQuantity(
            "permutation statistics", "discrete_laplace", noise.integer_sensitivity,
            privacy_xi(eps, 0.0), factor=2.0, unit=noise.grid),))



