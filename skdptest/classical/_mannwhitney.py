"""DPMannWhitneyTest: the ε-DP Mann–Whitney (Wilcoxon rank-sum) test of two groups."""

from __future__ import annotations

from sklearn.utils import ClassifierTags

from ._rank import (
    ALTERNATIVE,
    GroupRankTest,
    check_null_work,
    mann_whitney_sensitivity,
    mann_whitney_u,
    monte_carlo_pvalue,
    noisy,
    null_rank_sums,
    rank_constraints,
    rank_plan,
    release_integer,
    tie_broken_ranks,
)
from ._results import ClassicalTestResult

__all__ = ["DPMannWhitneyTest"]


class DPMannWhitneyTest(GroupRankTest):
    r"""ε-DP Mann–Whitney test: do two groups differ in location (stochastic order)?

    The rows of ``X`` are ranked with ties broken at random, U (the number of pairs
    in which a row of the first group is ranked above a row of the second) is
    released with exact discrete Laplace noise, and the p-value is Monte Carlo-exact:
    the noisy U is compared with ``n_resamples`` draws of U under random ranks plus
    the same noise.

    Parameters
    ----------
    alternative : {"two-sided", "greater", "less"}, default="two-sided"
        ``"greater"``: the first group (``classes_[0]``) tends to take larger values
        than the second; ``"less"``: smaller; ``"two-sided"``: either (scipy's
        ``mannwhitneyu(x, y)`` with ``x`` the first group).
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
        The private result of the last fit: ``statistic`` (the noisy U), ``pvalue``,
        ``reject``, ``alternative``, ``sensitivity`` (= max(n1, n2)).
    classes_ : ndarray of shape (2,)
        The two group labels, sorted; ``classes_[0]`` is the first group (public).
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
    DPKruskalWallisTest : k groups (for two groups its statistic is 2 abs(U − n1 n2/2)).
    DPWilcoxonTest : one sample or pairs (signed ranks).

    Notes
    -----
    **Hypothesis.** H0: the rows are exchangeable between the two groups (for
    example independent draws from one law, continuous or not: ties are allowed).
    The test has power against one group being stochastically larger. ``X`` usually
    has one column; with several columns the rows are ordered lexicographically (the
    first column decides, later columns only order rows equal in the earlier ones).

    **Privacy.** Pure ε-DP with respect to replacing one row's value, the group
    labels being public (so are the group sizes n1, n2 and N = n1 + n2): the
    relation of a study whose group assignment is known, such as a randomised
    trial's arms. Private group sizes are not supported. U is an integer of
    sensitivity max(n1, n2): changing a row of the first group moves only its n2
    pairs with the second group (and conversely); attained. The ties' random order
    is drawn independently of the data, so for each order the release
    U + K, K ~ discrete Laplace of rate ``quantise_rate(ε / max(n1, n2))``
    (``skdptest/_noise.py``, exact integer sampling), is ε-DP, hence so is the
    mixture. The released integer is the only private value: ``pvalue`` and
    ``reject`` are functions of it and of the simulated null, which is drawn before
    the data are read from public quantities only (N, n1, n2, ε, B).

    **Validity (Monte Carlo-exact).** With ties broken at random, under H0 the
    ranks are a uniformly random permutation of 1..N whatever the law of the data.
    The B simulated releases (random ranks plus independent noise of the same law)
    and the observed release are then i.i.d., so the rank p-value
    (1 + #{T_b ≥ T}) / (B + 1) (two-sided: on abs(2T − n1 n2)) satisfies
    P(p ≤ u) ≤ u at every n, for every B.

    **Power.** At ε = 1, α = 0.05 and a normal shift of d = 0.5, about 75 rows per
    group give 80 % power two-sided, about 64 one-sided (the public Mann–Whitney test
    needs about 67 / 55); see benchmarks/classical_power_rank.py.

    **Cost.** O(N log N) for the ranks plus O(B N) for the simulated null. The
    sort's running time depends mildly on the number of distinct values (an open
    timing channel; the null and the noise are public work).

    References
    ----------
    .. [1] H. B. Mann and D. R. Whitney, "On a test of whether one of two random
       variables is stochastically larger than the other", Ann. Math. Statist., 1947.
    .. [2] S. Couch, Z. Kazan, K. Shi, A. Bray and A. Groce, "Differentially private
       nonparametric hypothesis testing", ACM CCS 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest import DPMannWhitneyTest
    >>> rng = np.random.default_rng(0)
    >>> X = np.concatenate([rng.normal(0.0, 1.0, 300), rng.normal(1.0, 1.0, 300)])
    >>> y = np.repeat(["control", "treated"], 300)
    >>> result = DPMannWhitneyTest(epsilon=1.0).test(X.reshape(-1, 1), y)
    >>> result.sensitivity, result.alternative
    (300.0, 'two-sided')
    >>> result.pvalue  # doctest: +SKIP
    0.0004997501249375312
    """

    _min_groups = _max_groups = 2
    _statistic_label = "U"
    _parameter_constraints = {**rank_constraints(), "alternative": [ALTERNATIVE]}

    def __init__(self, *, alternative="two-sided", epsilon=1.0, alpha=0.05, n_resamples=2000,
                 budget=None, random_state=None):
        self.alternative = alternative
        self.epsilon = epsilon
        self.alpha = alpha
        self.n_resamples = n_resamples
        self.budget = budget
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # The only tag that says "y holds exactly two labels" (sklearn's checks then
        # pass binary y); estimator_type stays None: no classifier API is implied.
        tags.classifier_tags = ClassifierTags(multi_class=False)
        return tags

    def _plan(self, params, X, y):
        classes, codes, sizes = self._groups(y)
        check_null_work(params["n_resamples"], X.shape[0], type(self).__name__)
        sensitivity = mann_whitney_sensitivity(sizes)
        return rank_plan(params["epsilon"], sensitivity, sensitivity, classes, codes, sizes)

    def _release(self, prep, rng):
        params, plan = prep.params, prep.plan
        n1, n2 = (int(s) for s in plan.sizes)
        b = params["n_resamples"]
        # the null first: public work, drawn before the data are read
        null_u = null_rank_sums(rng, plan.sizes, b)[:, 0] - n1 * (n1 + 1) // 2
        null = noisy(rng, null_u, plan.rate, size=b)
        ranks = tie_broken_ranks(rng, prep.X)
        released = release_integer(rng, self._statistic_label,
                                   mann_whitney_u(ranks, plan.codes == 0), plan.rate)
        pvalue = monte_carlo_pvalue(released, null, params["alternative"], n1 * n2)
        return ClassicalTestResult(
            statistic=float(released), pvalue=float(pvalue), alternative=params["alternative"],
            sensitivity=float(plan.sensitivity), reject=bool(pvalue <= params["alpha"]),
            alpha=params["alpha"], epsilon=params["epsilon"], delta=0.0,
            n_samples=prep.n_samples, method="DP Mann-Whitney U",
        )
