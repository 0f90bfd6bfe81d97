"""DPKolmogorovSmirnovTest: private two-sample and goodness-of-fit KS tests.

The statistic is an exact integer (a scaled KS distance on an integer lattice), floored
onto a coarser power-of-two grid, and released with exact discrete Laplace noise; the
null law of the released integer is simulated without the data (random label
arrangements, or uniform draws), so the p-value is a Monte Carlo-exact (B + 1) rank
p-value and a function of the release and of public quantities only.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from scipy import stats
from sklearn.utils.multiclass import type_of_target

from .._base import BasePrivateTest, validate_input
from .._budget import PrivacyBudget
from .._noise import RATE_BITS, discrete_laplace, quantise_rate
from .._params import (
    HasMethods,
    InstanceOf,
    Interval,
    InvalidParameterError,
    NoneValue,
    RandomState,
)
from .._permutation import dp_permutation_pvalue, permutation_noise, privacy_xi
from .._recorder import NoisedQuantity, NoisePlan, observe
from ._results import ClassicalTestResult

__all__ = ["DPKolmogorovSmirnovTest", "ks_grid_statistic", "ks_plan_noise",
           "ks_uniform_lattice"]

#: The largest ε the noise is calibrated at (more ε than this only rounds the rate
#: above the exact sampler's range; the release is then this-ε-DP, hence ε-DP).
MAX_EPSILON = 2.0**20
#: Most Monte Carlo draws per fit.
MAX_RESAMPLES = 10**6
# Simulated statistics are computed in blocks of about this many lattice entries.
_BLOCK = 1 << 21


@dataclass(frozen=True)
class KSNoise:
    """The public noise plan of a KS release.

    Attributes
    ----------
    exponent : int
        The grid is g = 2**-exponent: the released integer is floor(D / g), computed
        exactly from the integer lattice statistic.
    integer_sensitivity : int
        ceil(Δ / g): the sensitivity of floor(D / g) when D has sensitivity Δ.
    rate : float
        Discrete Laplace rate, a multiple of 2**-RATE_BITS, at most ε / integer_sensitivity.
    """

    exponent: int
    integer_sensitivity: int
    rate: float


def _target(epsilon):
    # Integer sensitivity that balances the floor's relative excess (~1/target) against
    # the rate's quantisation (~2**-RATE_BITS target / ε), as permutation_noise does.
    return max(1.0, min(2.0**12, math.sqrt(epsilon * 2.0 ** (RATE_BITS - 1))))


def ks_plan_noise(sensitivity, epsilon):
    """Grid and discrete Laplace rate for a KS distance of sensitivity 1 / ``sensitivity``.

    Parameters
    ----------
    sensitivity : int
        s >= 1 with Δ = 1 / s the sensitivity of D (s = smallest group size, or n).
    epsilon : float
        ε > 0 (capped at ``MAX_EPSILON``).

    Returns
    -------
    KSNoise
        g = 2**-exponent the largest power of two <= Δ / target; the floors of two
        reals at most Δ apart differ by at most ceil(Δ / g) (exact integer arithmetic).
    """
    s = int(sensitivity)
    epsilon = min(float(epsilon), MAX_EPSILON)
    exponent = max(0, math.ceil(math.log2(s * _target(epsilon))))
    while (1 << exponent) < s * _target(epsilon):  # guard against log2 rounding
        exponent += 1
    dint = -(-(1 << exponent) // s)
    try:
        rate = quantise_rate(epsilon / dint)
    except ValueError as exc:
        raise _TinyEpsilon(str(exc)) from exc
    return KSNoise(exponent=exponent, integer_sensitivity=dint, rate=rate)


class _TinyEpsilon(ValueError):
    """ε so small that the rate falls below the exact sampler's grid."""


def _floor_scaled(lattice, exponent, denominator):
    """floor(lattice 2**exponent / denominator), exactly (Python integers), as int64."""
    out = (np.asarray(lattice).astype(object) << exponent) // denominator
    return np.asarray(out, dtype=np.int64)


def ks_grid_statistic(arrangements, sizes, exponent):
    """floor(2**exponent max_{i<j} sup_t |F_i − F_j|) of label arrangements, exact.

    Parameters
    ----------
    arrangements : ndarray of int, shape (n_rows, N)
        Group codes 0..k−1 along the sorted pooled sample.
    sizes : tuple of int
        Group sizes (n_0, ..., n_{k−1}).
    exponent : int
        Grid exponent.

    Returns
    -------
    ndarray of int64, shape (n_rows,)
        For two groups of sizes m, n, sup |F_1 − F_2| = max_k |n A_k − m B_k| / (m n)
        (A_k, B_k the counts of each group among the first k), and likewise per pair.
    """
    arrangements = np.asarray(arrangements)
    out = np.zeros(arrangements.shape[:-1], dtype=np.int64)
    for i in range(len(sizes)):
        for j in range(i + 1, len(sizes)):
            steps = np.where(arrangements == i, np.int64(sizes[j]),
                             np.where(arrangements == j, -np.int64(sizes[i]), np.int64(0)))
            lattice = np.abs(np.cumsum(steps, axis=-1)).max(axis=-1)
            out = np.maximum(out, _floor_scaled(lattice, exponent, sizes[i] * sizes[j]))
    return out


def ks_uniform_lattice(codes, bits):
    """n 2^bits sup_t |F_q(t) − t| of q = codes / 2^bits (rows sorted ascending).

    The supremum over t in [0, 1] is max_i max(i/n − q_(i), q_(i) − (i − 1)/n), exact
    with ties; scaled by n 2^bits it is an integer, computed in int64 (n 2^bits < 2^61).

    Parameters
    ----------
    codes : ndarray of int64, shape (n_rows, n)
        Sorted lattice codes in [0, 2^bits).
    bits : int
        Lattice resolution.

    Returns
    -------
    ndarray of int64, shape (n_rows,)
    """
    n = codes.shape[-1]
    i = np.arange(1, n + 1, dtype=np.int64) << bits
    scaled = codes * np.int64(n)
    upper = (i - scaled).max(axis=-1)
    lower = (scaled - (i - (np.int64(1) << bits))).max(axis=-1)
    return np.maximum(upper, lower)


def _uniform_bits(n, exponent):
    # q-lattice 2^-bits at least 4x finer than the release grid 2^-exponent, and
    # n 2^bits < 2^61 so that every lattice term fits in int64.
    return max(1, min(exponent + 2, 61 - n.bit_length()))


@dataclass(frozen=True)
class _KSPlan:
    mode: str  # "two-sample" (k >= 2 groups) or "one-sample"
    n_samples: int
    sizes: tuple  # group sizes; (n,) one-sample
    classes: object
    codes: object  # group code per row
    bits: int  # one-sample lattice
    smallest: int  # Δ = 1 / smallest
    noise: KSNoise


class DPKolmogorovSmirnovTest(BasePrivateTest):
    r"""Differentially private Kolmogorov–Smirnov test (two-sample or goodness of fit).

    **Two-sample** (``null=None``): ``X`` holds one column of values and ``y`` two group
    labels. H0: the rows of both groups are i.i.d. draws of one law (any law: continuous,
    discrete or mixed), i.e. the pooled sample is exchangeable given the labels. The
    statistic is :math:`D = \sup_t |\hat F_1(t) - \hat F_2(t)|` after ties are broken at
    random (see Notes).

    **Goodness of fit** (``null`` a frozen continuous scipy law): ``X`` holds one column,
    ``y`` is not used. H0: the rows are i.i.d. draws of the fully specified continuous law
    ``null`` (no parameter estimated from the data). The statistic is
    :math:`D = \sup_t |\hat F(t) - F_0(t)|`, computed on :math:`F_0(x_i)` quantised to a
    fine dyadic lattice (Notes).

    Parameters
    ----------
    null : frozen scipy.stats continuous distribution, default=None
        ``None``: two-sample test. Otherwise the null law of a goodness-of-fit test
        (univariate continuous, e.g. ``stats.norm()``).
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
        Source of the noise, the tie-breaking keys and the Monte Carlo draws. For tests and
        reproducible examples only: any value other than ``None`` raises
        :class:`~skdptest.FixedRandomStateWarning` (whoever holds the seed, the generator or a
        pickle of the estimator can replay the noise, and equal seeds correlate the noise of
        different fits). ``None`` draws fresh OS entropy and keeps nothing from which the noise
        could be regenerated.

    Attributes
    ----------
    result_ : ClassicalTestResult
        The private result of the last fit: ``statistic`` is the noisy D, ``pvalue``
        its Monte Carlo-exact p-value, ``sensitivity`` the sensitivity of D.
    classes_ : ndarray of shape (2,) or None
        The two group labels (two-sample; public); ``None`` for goodness of fit.
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
    Privacy: pure ε-DP with respect to replacing the value of one row. Two-sample: the
    labels and so the group sizes are public (a neighbour changes one row's value, not
    its group). Goodness of fit: n is public.

    Sensitivity. Two-sample: replacing a value of group i moves
    :math:`\hat F_i(t)` by at most 1/n_i at every t and leaves the other groups'
    unchanged, so D (for k groups, the largest pairwise distance) moves by at most
    1 / (smallest group size) = max(1/m, 1/n) for two groups (attained; checked by
    exhaustive search in the tests). The same holds for the tie-broken order, a total
    order on the pairs (value, key). Exactly, D = max_k abs(n A_k − m B_k) / (m n) (A_k, B_k
    the counts of each group among the first k of the order), an integer over m n.
    Goodness of fit: with :math:`q_i = \lfloor 2^b F_0(x_i) \rfloor / 2^b`,
    :math:`D = \sup_t |\hat F_q(t) - t|` moves by at most 1/n when one :math:`q_i`
    changes, whatever the computed :math:`F_0` (any map of a row into [0, 1]), and
    n 2^b D is an integer. Release: S = floor(2^e D), computed exactly in integer
    arithmetic from those integers, with 2^e >= s · T (s the smallest group size or n,
    T about sqrt(ε 2^19), capped at 2^12): if D moves by at most 1/s, S moves by at most
    ceil(2^e / s) (between 724 and 1448 at ε = 1). R = S + K, K exact discrete Laplace
    noise of rate at most ε / ceil(2^e / s) (:func:`skdptest._noise.discrete_laplace`):
    integers only, so no floating-point effect reveals anything. The lattice of F_0 is
    four times finer than the release grid (b = e + 2, within int64).

    Released fields, jointly: one private integer R. ``statistic`` (= R 2^-e, the noisy
    D), ``pvalue`` and ``reject`` are functions of R and of Monte Carlo draws independent
    of the data. ``sensitivity`` (1/s), ``classes_``, ``n_samples``, ``alpha``,
    ``epsilon`` and ``method`` are public.

    Several columns (two-sample only): D is the largest per-column distance (each column
    ordered by (value, key), the keys shared); its sensitivity is unchanged, but its null
    law depends on the columns' dependence, so the p-value is the DP permutation p-value
    of Kim and Schrab (``skdptest._permutation``: B relabellings of the rows, noise of
    twice the scale, only the p-value released; ``statistic`` is then ``None``).

    Validity (Monte Carlo-exact at every n). Two-sample: each row gets an independent
    uniform tie-breaking key (a random permutation of 1..N), and the rows are ordered by
    (value, key). Under H0 the pooled rows are exchangeable given the labels, so the
    sequence of group labels along that order is a uniformly random arrangement of m
    first-group and n second-group labels: exactly, ties included (without the random
    keys, tied values would be ordered by row position and the null law would depend on
    the data's ties). The B simulated statistics are computed on uniformly random
    arrangements. Goodness of fit: under H0, :math:`F_0(x_i)` is uniform on [0, 1) (F_0
    continuous), so the codes :math:`2^b q_i` are uniform on {0, ..., 2^b − 1}; the
    simulated statistics use such codes. (The computed :math:`F_0` differs from the exact
    one by about 1e-16, which moves a code only when :math:`F_0(x)` is that close to a
    lattice point.) Data with tied values have probability 0 under a continuous null:
    they are not refused (a refusal would reveal that ties exist) and only add evidence
    against H0. Each simulated integer gets its own noise draw of the same law, so under
    H0 the B + 1 noisy integers are exchangeable and
    p = (1 + #{j : R_j + K_j >= R}) / (B + 1) satisfies P(p <= α) <= α (ties counted
    against H0).

    Running time: sorting the values (O(n log n)) may depend on their order and ties,
    and scipy's evaluation of the null's cdf may take longer for some values; the rest
    (the simulated null, the noise) is fixed by n, the group sizes, B and ε.

    References
    ----------
    .. [1] J. Awan and Y. Wang, "Simulation-based, finite-sample inference for
       privatized data", JASA 2024 (two-sample KS with public group sizes).
    .. [2] I. Kim and A. Schrab, "Differentially Private Permutation Tests:
       Applications to Kernel Methods", arXiv:2310.19043, 2023.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import stats
    >>> from skdptest import DPKolmogorovSmirnovTest
    >>> rng = np.random.default_rng(0)
    >>> X = np.r_[rng.normal(size=300), rng.normal(1.0, size=300)].reshape(-1, 1)
    >>> y = np.repeat([0, 1], 300)
    >>> DPKolmogorovSmirnovTest(epsilon=1.0).fit(X, y).decision()
    True
    >>> gof = DPKolmogorovSmirnovTest(null=stats.norm(), epsilon=1.0)
    >>> gof.fit(rng.exponential(size=(300, 1))).decision()
    True
    """

    def __init__(self, null=None, *, epsilon=1.0, n_resamples=999, alpha=0.05, budget=None,
                 random_state=None):
        self.null = null
        self.epsilon = epsilon
        self.n_resamples = n_resamples
        self.alpha = alpha
        self.budget = budget
        self.random_state = random_state

    _parameter_constraints = {
        "null": [NoneValue(), HasMethods("cdf", description="a frozen scipy.stats "
                                                            "continuous distribution")],
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "n_resamples": [Interval(Integral, 1, MAX_RESAMPLES)],
        "alpha": [Interval(Real, 0, 1, closed="neither")],
        "budget": [NoneValue(), InstanceOf(PrivacyBudget)],
        "random_state": [RandomState()],
    }

    @property
    def _requires_y(self):
        return self.null is None

    def _check_params(self, params):
        null = params["null"]
        if null is not None:
            dist = getattr(null, "dist", None)
            if not isinstance(dist, stats.rv_continuous) or not hasattr(null, "args"):
                raise InvalidParameterError(
                    "null must be a frozen continuous scipy.stats distribution (for "
                    "example stats.norm()); got " + type(null).__name__ + ".")
        return params

    def _validate_input(self, X, y, reset):
        if self.null is None:
            X, y = validate_input(self, X, y, reset=reset, y_numeric=False)
        else:
            if y is not None:
                raise ValueError("y must be None for a goodness-of-fit test (null is given); "
                                 "leave null=None for a two-sample test.")
            X = validate_input(self, X, reset=reset)
        if self.null is not None and X.shape[1] != 1:
            raise ValueError(
                "A goodness-of-fit DPKolmogorovSmirnovTest needs X with exactly one column "
                f"(one value per row); got {X.shape[1]} columns.")
        return X.astype(np.float64, copy=False), y

    def _plan(self, params, X, y):
        try:  # the noise is planned from public sizes before the charge
            return self._public_plan(params, X, y)
        except _TinyEpsilon as exc:
            raise InvalidParameterError(
                f"epsilon={params['epsilon']!r} is too small for the exact sampler: {exc}"
            ) from exc

    def _public_plan(self, params, X, y):
        epsilon, n = params["epsilon"], int(X.shape[0])
        if params["null"] is not None:
            noise = ks_plan_noise(n, epsilon)
            return _KSPlan("one-sample", n, (n,), None, None,
                           _uniform_bits(n, noise.exponent), n, noise)
        kind = type_of_target(y)
        if kind == "unknown":
            raise ValueError("Unknown label type: DPKolmogorovSmirnovTest needs discrete "
                             "group labels y (numbers or strings).")
        if kind not in ("binary", "multiclass"):
            raise ValueError(
                "DPKolmogorovSmirnovTest needs discrete group labels in y; got "
                f"{kind} values (a second sample or a continuous variable is not a "
                "grouping).")
        classes, codes = np.unique(y, return_inverse=True)
        if classes.size < 2:
            raise ValueError("DPKolmogorovSmirnovTest needs at least 2 groups in y; got 1 "
                             "class.")
        codes = codes.ravel().astype(np.int64)
        sizes = tuple(int(c) for c in np.bincount(codes, minlength=classes.size))
        smallest = min(sizes)
        return _KSPlan("two-sample", n, sizes, classes, codes, 0, smallest,
                       ks_plan_noise(smallest, epsilon))

    def _orders(self, X, rng):
        # One order per column by (value, key); the keys are distinct uniform
        # tie-breaking keys (a random permutation), drawn independently of the data.
        keys = rng.permutation(X.shape[0])
        return [np.lexsort((keys, X[:, j])) for j in range(X.shape[1])]

    def _observed(self, plan, null, X, rng):
        exponent = plan.noise.exponent
        if plan.mode == "two-sample":
            order = self._orders(X, rng)[0]
            return int(ks_grid_statistic(plan.codes[order], plan.sizes, exponent))
        with warnings.catch_warnings():  # no warning may depend on the data
            warnings.simplefilter("ignore")
            cdf = np.asarray(null.cdf(X[:, 0]), dtype=np.float64)
        cdf = np.where(np.isfinite(cdf), np.clip(cdf, 0.0, 1.0), 0.0)
        top = (1 << plan.bits) - 1
        codes = np.minimum(np.floor(cdf * float(1 << plan.bits)), top).astype(np.int64)
        lattice = ks_uniform_lattice(np.sort(codes), plan.bits)
        return int(_floor_scaled(lattice, exponent, plan.n_samples << plan.bits))

    def _simulated(self, plan, rng, count):
        out = np.empty(count, dtype=np.int64)
        rows = max(1, _BLOCK // plan.n_samples)
        exponent = plan.noise.exponent
        for start in range(0, count, rows):
            b = min(rows, count - start)
            if plan.mode == "two-sample":
                base = np.repeat(np.arange(len(plan.sizes)), plan.sizes)
                arr = rng.permuted(np.broadcast_to(base, (b, plan.n_samples)), axis=1)
                out[start:start + b] = ks_grid_statistic(arr, plan.sizes, exponent)
            else:
                codes = np.sort(rng.integers(0, 1 << plan.bits, size=(b, plan.n_samples),
                                             dtype=np.int64), axis=1)
                out[start:start + b] = _floor_scaled(ks_uniform_lattice(codes, plan.bits),
                                                     exponent, plan.n_samples << plan.bits)
        return out

    def _method(self, plan):
        if plan.mode == "one-sample":
            return "DP one-sample Kolmogorov-Smirnov"
        return "DP two-sample Kolmogorov-Smirnov" if len(plan.sizes) == 2 else \
            "DP k-sample Kolmogorov-Smirnov"

    def _result(self, params, plan, statistic, pvalue, method):
        return ClassicalTestResult(
            reject=bool(pvalue <= params["alpha"]), alpha=params["alpha"],
            epsilon=params["epsilon"], delta=0.0, n_samples=plan.n_samples, method=method,
            statistic=statistic, pvalue=pvalue, alternative="two-sided",
            sensitivity=1.0 / plan.smallest)

    def _release_columns(self, prep, rng):
        """d > 1 columns: max over columns of the per-column statistic, with the DP
        permutation p-value of Kim and Schrab (the null law now depends on the columns'
        dependence, so it is not simulated without the data)."""
        params, plan = prep.params, prep.plan
        n_res, n = params["n_resamples"], plan.n_samples
        orders = self._orders(prep.X, rng)
        stat = np.zeros(n_res + 1, dtype=np.int64)
        rows = max(1, _BLOCK // n)
        for start in range(0, n_res + 1, rows):  # blocks of relabellings (bounded memory)
            b = min(rows, n_res + 1 - start)
            labels = rng.permuted(np.broadcast_to(plan.codes, (b, n)), axis=1)
            if start == 0:
                labels[0] = plan.codes  # the observed labelling
            for order in orders:
                stat[start:start + b] = np.maximum(
                    stat[start:start + b],
                    ks_grid_statistic(labels[:, order], plan.sizes, plan.noise.exponent))
        pvalue, _ = dp_permutation_pvalue(stat.astype(np.float64),
                                          plan.noise.integer_sensitivity,
                                          min(params["epsilon"], MAX_EPSILON), 0.0, rng)
        return self._result(params, plan, None, pvalue,
                            self._method(plan) + " (max over columns, DP permutation)")

    def _release(self, prep, rng):
        params, plan = prep.params, prep.plan
        if prep.X.shape[1] > 1:
            return self._release_columns(prep, rng)
        noise, n_res = plan.noise, params["n_resamples"]
        observed = self._observed(plan, params["null"], prep.X, rng)
        # grey-box audit (else a no-op); the same draw call noises the B simulated values
        observe("KS statistic", observed, math.ldexp(1.0, -noise.exponent))
        draws = discrete_laplace(rng, noise.rate, size=n_res + 1)
        released = observed + int(draws[0])
        null = self._simulated(plan, rng, n_res) + draws[1:]
        pvalue = (1 + int(np.count_nonzero(null >= released))) / (n_res + 1)
        return self._result(params, plan, math.ldexp(released, -noise.exponent), pvalue,
                            self._method(plan))

    def _noise_plan(self, prep):
        """What a fit noises (the grey-box audit hook, doc/contributing.md). One column:
        S = floor(2^e D) in steps of 2^-e, sensitivity ``noise.integer_sensitivity``,
        by one call of B + 1 discrete Laplace draws at rate <= ε / sensitivity (the
        first noises S, the others the B data-free simulated statistics). Several
        columns: the B + 1 statistics of the DP permutation p-value, floored on its
        grid, with noise of rate <= ε / (2 Δ_int) (factor 2). The tie-breaking keys
        and the relabellings are not noise."""
        eps, noise = min(prep.params["epsilon"], MAX_EPSILON), prep.plan.noise
        if prep.X.shape[1] > 1:
            perm = permutation_noise(noise.integer_sensitivity, eps)
            return NoisePlan((NoisedQuantity(
                "permutation statistics", "discrete_laplace", perm.integer_sensitivity,
                privacy_xi(eps, 0.0), factor=2.0, unit=perm.grid),))
        return NoisePlan((NoisedQuantity(
            "KS statistic", "discrete_laplace", noise.integer_sensitivity, eps,
            unit=math.ldexp(1.0, -noise.exponent)),))

    def _fitted_attributes(self, prep, result):
        return {"classes_": prep.plan.classes}

    def _score_value(self, result):
        return -math.log(result.pvalue)
