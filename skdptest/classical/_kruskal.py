"""DPKruskalWallisTest: the ε-DP Kruskal–Wallis test with absolute deviations."""

from __future__ import annotations

from ._rank import (
    GroupRankTest,
    check_null_work,
    kruskal_sensitivity,
    kruskal_twice_statistic,
    monte_carlo_pvalue,
    noisy,
    null_rank_sums,
    rank_constraints,
    rank_plan,
    release_integer,
    tie_broken_ranks,
)
from ._results import ClassicalTestResult

__all__ = ["DPKruskalWallisTest"]


class DPKruskalWallisTest(GroupRankTest):
    r"""ε-DP Kruskal–Wallis test: do k >= 2 groups differ in location?

    The rows of ``X`` are ranked with ties broken at random and the absolute-deviation
    statistic of Couch et al. (2019),

    .. math:: T = \sum_j n_j \,\bigl|\bar R_j - (N + 1)/2\bigr|

    (:math:`\bar R_j` the mean rank of group j), is released with exact discrete
    Laplace noise; the p-value is Monte Carlo-exact: the noisy T is compared with
    ``n_resamples`` draws of T under random ranks plus the same noise.

    Parameters
    ----------
    epsilon : float, default=1.0
        Privacy parameter ε > 0 of one fit (or one score).
    alpha : float, default=0.05
        Level of the test: reject when ``pvalue <= alpha``.
    n_resamples : int, default=2000
        Number B of simulated null releases; the p-value is a multiple of 1/(B + 1).
        The work is O(B N); ``B * N`` above 2**31 is refused before the charge.
    budget : PrivacyBudget, default=None
        Ledger charged ε before every fit and score.
    random_state : None, int, RandomState instance or Generator, default=None
        Source of the tie-breaking, the noise and the simulated null. For tests and reproducible
        examples only: any value other than ``None`` raises
        :class:`~skdptest.FixedRandomStateWarning` (whoever holds the seed, the generator or a
        pickle of the estimator can replay the noise, and equal seeds correlate the noise of
        different fits). ``None`` draws fresh OS entropy and keeps nothing from which the noise
        could be regenerated.

    Attributes
    ----------
    result_ : ClassicalTestResult
        The private result of the last fit: ``statistic`` (the noisy T, a multiple
        of 1/2), ``pvalue``, ``reject``, ``alternative`` (always ``"two-sided"``: T
        measures any departure), ``sensitivity`` (= 2 (N − n_min)).
    classes_ : ndarray of shape (n_groups,)
        The group labels, sorted (public).
    n_features_in_ : int
        Number of columns of X seen during fit.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of the columns of X seen during fit, when X has string column names.
    privacy_spent_ : PrivacySpent
        What the last charge cost: ``epsilon``, ``delta`` and the privacy profile
        declared to the ledger. This estimator declares ``"pure"``: its release is
        ε-DP. It is not one continuous Laplace draw, so the
        ``"laplace"`` profile (a tighter zCDP) is not claimed; the ``"zcdp"`` and
        ``"rdp"`` accountants charge it as generic pure DP (see "Privacy profiles" in
        the privacy-budget guide).

    See Also
    --------
    DPMannWhitneyTest : two groups, one- or two-sided.

    Notes
    -----
    **Hypothesis.** H0: the rows are exchangeable between the groups (for example
    independent draws from one law, ties allowed). Power against groups that differ
    in location. ``X`` usually has one column; with several columns the rows are
    ordered lexicographically (first column first).

    **Privacy.** Pure ε-DP with respect to replacing one row's value, the group
    labels public (so the sizes n_j and N are public). Private group sizes are not
    supported. With :math:`S_j` the rank sum of group j,
    :math:`T = \sum_j |S_j - n_j (N + 1)/2|`. Moving a row of group g from rank r
    to r' > r shifts the d = r' − r rows in between by one: :math:`S_g` gains
    d − c_g and every other :math:`S_j` loses c_j (c_j its rows among them), so
    :math:`\sum_j |\Delta S_j| = 2 (d - c_g) \le 2 (N - n_g)` and the sensitivity of
    T is :math:`2 (N - n_{\min})` (checked by exhaustive search on small tied data;
    for two groups T = 2 abs(U − n1 n2/2) and the bound 2 max(n1, n2) is attained).
    The integer 2T is released with discrete Laplace noise of rate
    ``quantise_rate(ε / (4 (N − n_min)))``; ``statistic`` is half of it. The order
    of the ties is drawn independently of the data, so the release is ε-DP for each
    order and so is the mixture. ``pvalue`` and ``reject`` are functions of the
    release and of the simulated null, which is drawn before the data are read from
    public quantities only.

    **Validity (Monte Carlo-exact).** With ties broken at random, under H0 the
    ranks are a uniformly random permutation of 1..N whatever the law of the data;
    the B simulated releases and the observed one are i.i.d., so
    p = (1 + #{T_b ≥ T}) / (B + 1) satisfies P(p ≤ u) ≤ u at every n.

    **Power.** At ε = 1, α = 0.05, three normal groups with means 0, 0.35 and 0.70
    need about 55–56 rows per group for 80 % power (the public Kruskal–Wallis test about
    42); see benchmarks/classical_power_rank.py.

    **Cost.** O(N log N) for the ranks plus O(B N) for the simulated null.

    References
    ----------
    .. [1] W. H. Kruskal and W. A. Wallis, "Use of ranks in one-criterion variance
       analysis", J. Amer. Statist. Assoc., 1952.
    .. [2] S. Couch, Z. Kazan, K. Shi, A. Bray and A. Groce, "Differentially private
       nonparametric hypothesis testing", ACM CCS 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest import DPKruskalWallisTest
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 1)) + np.repeat([0.0, 0.5, 1.0], 100)[:, None]
    >>> y = np.repeat(["a", "b", "c"], 100)
    >>> test = DPKruskalWallisTest(epsilon=1.0).fit(X, y)
    >>> test.classes_.tolist(), test.result_.sensitivity
    (['a', 'b', 'c'], 400.0)
    >>> test.result_.pvalue  # doctest: +SKIP
    0.0004997501249375312
    """

    _parameter_constraints = rank_constraints()
    _statistic_label = "2T"

    def __init__(self, *, epsilon=1.0, alpha=0.05, n_resamples=2000, budget=None,
                 random_state=None):
        self.epsilon = epsilon
        self.alpha = alpha
        self.n_resamples = n_resamples
        self.budget = budget
        self.random_state = random_state

    def _plan(self, params, X, y):
        classes, codes, sizes = self._groups(y)
        check_null_work(params["n_resamples"], X.shape[0], type(self).__name__)
        sensitivity = kruskal_sensitivity(sizes)  # of T; the noised 2T has twice that
        return rank_plan(params["epsilon"], sensitivity, 2 * sensitivity, classes, codes,
                         sizes)

    def _release(self, prep, rng):
        params, plan = prep.params, prep.plan
        sizes, b = plan.sizes.astype("int64"), params["n_resamples"]
        n = int(sizes.sum())
        # the null first: public work, drawn before the data are read
        sums = null_rank_sums(rng, sizes, b)
        null_2t = abs(2 * sums - sizes * (n + 1)).sum(axis=1)
        null = noisy(rng, null_2t, plan.rate, size=b)
        ranks = tie_broken_ranks(rng, prep.X)
        released = release_integer(rng, self._statistic_label,
                                   kruskal_twice_statistic(ranks, plan.codes, sizes), plan.rate)
        pvalue = monte_carlo_pvalue(released, null, "greater")
        return ClassicalTestResult(
            statistic=released / 2.0, pvalue=float(pvalue), alternative="two-sided",
            sensitivity=float(plan.sensitivity), reject=bool(pvalue <= params["alpha"]),
            alpha=params["alpha"], epsilon=params["epsilon"], delta=0.0,
            n_samples=prep.n_samples, method="DP Kruskal-Wallis (absolute deviations)",
        )
