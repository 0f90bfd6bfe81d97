"""DPMMDTest: the differentially private permutation MMD test (dpMMD).

The estimator: its parameters, its input checks (labels, groups) and the choice of a
route from parameters and public sizes. The shared release (ε split, noise, p-value,
result) is :class:`._kernelbase.KernelTestBase`'s; each route is an object with
``plan`` and ``statistics`` in its own module: one kernel (:mod:`._route_mmd_exact`,
computing with :mod:`._route_exact` and :mod:`._relabel`), the bandwidth aggregate
(:mod:`._route_mmd_aggregate`), random features (:mod:`._route_features`; dask input:
:mod:`._route_dask`). The names below stay importable from here.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils.multiclass import type_of_target

from .._params import Boolean, InvalidParameterError, Options
from ._bandwidth import mmd_centre, uses_aggregate
from ._distributed import (
    dask_labels,
    is_dask,
    stack_dask_samples,
    validate_dask_input,
)
from ._kernelbase import BOUND_CONSTRAINT, COMMON_CONSTRAINTS, KernelTestBase
from ._kernels import KERNEL_CONSTRAINT, KERNEL_PARAMS_CONSTRAINT
from ._relabel import (
    KEY16_MAX_ROWS,
    _in_row_blocks,
    _MaskRows,
    _relabelled_codes,
    _tie_generator,
    _two_group_masks,
    _two_group_rows,
    draw_assignments,
)
from ._route_aggregate import (
    aggregate_holds_distances,
    mmd_aggregate_memory_bytes,
    mmd_aggregate_statistics,
)
from ._route_dask import MMDDaskFeaturesRoute
from ._route_exact import (
    column_quadratic_forms,
    mmd_abs_error,
    mmd_memory_bytes,
    mmd_permutation_statistics,
    mmd_sensitivity,
    mmd_squared_sensitivity,
    triangular_quadratic_forms,
)
from ._route_features import MMDFeaturesRoute
from ._route_mmd_aggregate import MMDAggregateRoute
from ._route_mmd_cyclic import MMDCyclicRoute, cyclic_applies, held_cyclic_fits
from ._route_mmd_cyclic_blocked import MMDCyclicBlockedRoute
from ._route_mmd_exact import MMDExactRoute, MMDPlan
from ._testbase import (
    DEFAULT_MAX_MEMORY,
    check_memory,
    cyclic_ignores_permutations,
    fitting_routes,
    warn_ignored,
)

__all__ = [
    "DPMMDTest",
    "mmd_abs_error",
    "mmd_memory_bytes",
    "mmd_permutation_statistics",
    "mmd_sensitivity",
    "mmd_squared_sensitivity",
]

# Re-exported for the kernel tests and benchmarks.
_REEXPORTED = (KEY16_MAX_ROWS, _in_row_blocks, _MaskRows, _relabelled_codes, _tie_generator,
               _two_group_masks, _two_group_rows, draw_assignments, aggregate_holds_distances,
               mmd_aggregate_memory_bytes, mmd_aggregate_statistics, column_quadratic_forms,
               triangular_quadratic_forms, mmd_centre, DEFAULT_MAX_MEMORY, check_memory,
               fitting_routes, warn_ignored)


_STACK_HINT = (
    "To test two samples X1 and X2, stack them and label the rows: "
    "X = np.vstack([X1, X2]); y = np.repeat([0, 1], [len(X1), len(X2)]), "
    "or call DPMMDTest(...).test_samples(X1, X2)."
)


_MMDPlan = MMDPlan  # the plan of every dpMMD route (_route_mmd_exact)


def _two_sample_error(message):
    return ValueError(f"{message} {_STACK_HINT}")


class DPMMDTest(KernelTestBase):
    r"""Differentially private permutation MMD two-sample (and k-sample) test.

    Tests H0: all groups of rows of ``X`` (given by the labels ``y``) come
    from the same distribution, with the dpMMD test of Kim & Schrab [1]_: the
    plug-in (V-statistic) MMD on the observed labels and on ``n_permutations``
    random relabellings, each privatised by independent Laplace noise of
    scale :math:`2\Delta/\xi`, :math:`\xi = \varepsilon + \log(1/(1-\delta))`,
    and the rank p-value of the noisy observed statistic.

    Privacy: (``epsilon``, ``delta``)-DP for one fit (or one ``score``) under
    the neighbouring relation *replace one row of* ``X`` *within its group*
    (the group sizes, hence the labels' counts, are public). ``delta = 0``
    gives pure ``epsilon``-DP.

    **Released** (everything that leaves a fit): ``result_.pvalue`` and
    ``result_.reject`` (a function of it), ``gamma_`` (= ``result_.gamma``)
    with ``kernel_params={"gamma": "median"}``, and public quantities
    (``classes_``, the sizes behind ``sensitivity``, ``n_permutations``,
    ``noise_scale``...). The noisy observed statistic is *not* released: it
    shares its noise with the p-value, and the permutation theorem covers the
    p-value only. Joint argument: the bandwidth is an (``0.05 epsilon``)-DP
    exponential mechanism on the pooled rows (labels unused); the p-value is
    (``0.95 epsilon``, ``delta``)-DP given the bandwidth (Theorem 2 of [1]_);
    by sequential composition the pair is (``epsilon``, ``delta``)-DP. Without
    the median heuristic the permutation release gets all of ``epsilon``.

    Parameters
    ----------
    kernel : str, sklearn.gaussian_process.kernels.Kernel or callable, default="rbf"
        A name from ``sklearn.metrics.pairwise.PAIRWISE_KERNEL_FUNCTIONS``
        (rbf, laplacian, chi2 and cosine have a known bound; linear and
        polynomial need ``kernel_bound``; sigmoid and additive_chi2 are refused
        as not positive definite), a stationary scikit-learn Gaussian-process
        kernel (bound ``k(x, x)``; zero or non-finite hyperparameters are
        refused), or a callable ``kernel(X, Y, **kernel_params)`` returning the
        Gram matrix (needs ``kernel_bound``). A callable is *not* assumed
        positive definite: its values are mapped into
        ``[-kernel_bound, kernel_bound]`` (NaN to 0, then clipped) and the test
        privatises the squared MMD with a sensitivity valid for any kernel
        bounded by ``kernel_bound`` (see Notes; less power than the
        positive-definite rule). **Default: the bandwidth aggregate** (rbf or
        laplacian without a ``gamma``): the maximum over a public grid of 19
        bandwidths ``gamma = 2^k / n_features`` of centred statistics, one DP
        p-value, no extra privacy cost and no need to standardise the data
        (see ``skdptest/kernel/_bandwidth.py`` and doc/kernel_tests.md for the
        validity and sensitivity proofs); about 19 times the work of one
        bandwidth with random relabellings, a few products' worth over the
        cyclic group (the default from N = 1000 on, see ``cyclic``).
    kernel_params : dict, default=None
        Keyword arguments of the kernel (``gamma``, ``degree``, ... for named
        kernels; hyperparameters set on a copy of a GP kernel; keyword arguments
        of a callable). An explicit ``{"gamma": g}`` is the single-bandwidth
        test; ``{"gamma": None}`` the previous default ``1 / n_features``;
        ``{"gamma": "aggregate"}`` the default. ``{"gamma": "median"}`` (rbf,
        laplacian) asks for a
        *private* median heuristic: 5 % of ``epsilon`` buys an
        epsilon-DP median of the pooled pairwise distances (exponential
        mechanism over a public grid, labels unused), the rest the test; the
        total charged is still ``(epsilon, delta)``.
    kernel_bound : float, default=None
        Public bound :math:`\kappa` on ``k(x, x)`` (named and scikit-learn
        kernels: checked on the data's diagonal, a violation raises
        ``ValueError`` before any budget is charged) or on ``|k(x, x')|``
        (callables: enforced by clipping). At most ``2**200``.
    epsilon : float, default=1.0
        Privacy loss of one fit, > 0.
    delta : float, default=0.0
        Failure probability, in [0, 1).
    alpha : float, default=0.05
        Level of the test, in (0, 1).
    n_permutations : int, default=2000
        Number B of random relabellings, in [1, 10**6]. With ``cyclic`` in force
        the N - 1 cyclic shifts are used instead, and a value other than the
        default raises :class:`~skdptest.PrivacyLeakWarning`.
    cyclic : bool or "auto", default="auto"
        True: the bandwidth aggregate over the cyclic group: the pooled rows are
        put in one uniformly random order (from the generator, never the data)
        and the relabellings are the N cyclic shifts of the labels in that order
        (B = N - 1, ``n_permutations`` ignored), all computed by FFT in
        O(N^2 log N) per bandwidth instead of O(N^2 B). An exact randomization
        test over a group (under H0 the pooled rows are exchangeable), with the
        same sensitivity; the FFT's certified rounding bound is added to
        ``abs_error``. Any number of groups (the two-group and the k-sample
        statistics are both one quadratic form of the labels); the aggregate
        (rbf or laplacian without a ``gamma``, ``method="exact"``) only:
        otherwise ``True`` is refused.
        False: B random relabellings. "auto" (default): cyclic for the
        aggregate (any number of groups) when min(N - 1, n_permutations) >= 999
        and its memory plan is within ``max_memory``, so the default fit is
        cyclic from N = 1000 on (about 1.5-2 products N x N by N x 2001 at
        N = 1000-4000, see doc/kernel_tests.md); smaller fits, and fits asking
        for fewer than 999 relabellings, keep B random relabellings.
        ``result_.method`` is then "dpMMD cyclic aggregate" (three or more
        groups: "dpMMD k-sample cyclic aggregate"). Where the route that holds
        the distances' diagonals does not fit ``max_memory`` (N above about
        11 000 with the default limit), the same test runs by blocks of
        diagonals in O(N) memory: "dpMMD cyclic aggregate blocked" (the same
        statistic, group and bounds; releases differ in low-order bits).
    max_memory : int, default=4 * 2**30
        Public limit, in bytes, on the planned peak memory of a release, an
        upper bound (see :func:`mmd_memory_bytes`; about 1 GiB at most with the
        default internal chunk sizes, more for huge N or many groups). A fit
        that would need more is refused before the budget is charged, naming
        the routes that fit.
    n_jobs : int, default=None
        Threads (joblib) over the bandwidths of the aggregate (BLAS capped at
        one thread per worker); -1 uses all cores. The release does not
        depend on it: every value is computed by the same calls. Set without
        the aggregate (or ``n_components``/``feature_map`` with
        ``method="exact"``, ``kernel_bound`` with ``method="features"``), it is
        ignored and raises :class:`~skdptest.PrivacyLeakWarning`.
    verbose : {0, 1} or None, default=None
        Progress on stderr (the predicted time, then the aggregate's bandwidths done,
        elapsed, ETA, and a hint on ``n_jobs``); nothing derived from the data.
        ``None`` shows it when the fit is predicted to take more than 10 s, 1 always,
        0 never. The prediction is made before the charge from public sizes (N, the
        number of features and groups, B, the route) and this machine's speed on
        public random inputs (measured once a minute, only when it decides).
    max_time : float, default=None
        Refuse, before the budget is charged, a fit predicted (as for ``verbose``) to
        take more than this many seconds; ``None``: no limit. The refusal names
        ``max_time`` and the predicted time.
    method : {"exact", "features"}, default="exact"
        ``"features"``: random Fourier features (rbf or laplacian ``kernel`` only;
        ``gamma`` numeric, ``"median"`` or, if absent, ``1 / n_features``).
        ``n_components`` frequencies are drawn from the generator (never from the
        data); ``phi(x) = D^{-1/2} [cos(w^T x), sin(w^T x)]`` has norm 1, so the feature
        kernel is positive definite with ``k(x, x) = 1`` and the sensitivity is the
        sqrt-MMD one with feature diameter ``2R`` (``R = 1 + 2^-16`` bounds every
        computed, quantised row exactly): ``2R / min(m, n)`` for two groups. All
        B + 1 statistics come from exact integer feature sums, in O(N D B) time and
        O(N D) memory plus one chunk of relabelling masks. Validity is exact
        (conditionally on the data-independent frequencies the test is a
        permutation test); only the power differs from the exact kernel's. See
        :mod:`skdptest.kernel._features`. **Dask input**: with ``"features"``, ``X``
        may be a dask array or dataframe (numeric) and ``y`` numpy, pandas or dask;
        the feature rows are computed and kept on the workers, which return exact
        integer sums only, and the release is the numpy input's, bit for bit (see
        :mod:`skdptest.kernel._distributed`). ``"exact"`` (and the private median
        bandwidth) refuse dask input with a ``TypeError`` (``ValueError``) before
        the charge.
    n_components : int, default=64
        Number D of random frequencies (2D features) with ``method="features"``,
        in [1, 2**14]; ignored otherwise.
    feature_map : {"fourier", "squared"}, default="fourier"
        With ``method="features"``: ``"fourier"``, the ``2 D`` random Fourier features
        ``phi``; ``"squared"``, the ``D (2 D + 1)`` features of ``phi (x) phi``, whose
        kernel ``(phi(x)^T phi(x'))^2`` is never negative, so the feature diameter is
        about ``sqrt(2)`` instead of 2 and the privacy noise ``sqrt(2)`` times
        smaller (frequencies drawn for ``gamma / 2``: the squared kernel
        approximates the same rbf or laplacian kernel). Costs ``D + 1/2`` times the
        features of ``"fourier"``: the choice for moderate N and small epsilon (see
        :func:`~skdptest.kernel._features.feature_shape`).
    budget : PrivacyBudget, default=None
        Ledger charged ``(epsilon, delta)`` by every ``fit`` and ``score``.
    random_state : None, int, RandomState instance or Generator, default=None
        Source of the relabellings and the noise. For tests and reproducible examples only: any
        value other than ``None`` raises :class:`~skdptest.FixedRandomStateWarning` (whoever holds
        the seed, the generator or a pickle of the estimator can replay the noise, and equal seeds
        correlate the noise of different fits). ``None`` draws fresh OS entropy and keeps nothing
        from which the noise could be regenerated.

    Attributes
    ----------
    result_ : PermutationTestResult
        The private result of the last fit (p-value, decision, public noise
        description).
    classes_ : ndarray of shape (n_groups,)
        Group labels (sorted; public); the first one is the "X sample" of MMD.
    gamma_ : float or None
        The privately chosen ``gamma`` with ``kernel_params={"gamma": "median"}``
        (itself a DP release, covered by the composition above), else None.
    gamma_grid_ : ndarray of shape (19,) or None
        The public bandwidth grid of the aggregate (a function of the kernel
        name and ``n_features`` only), else None. The release's ``method``
        then ends in ``" aggregate"`` and ``sensitivity`` is the aggregate's
        (the usual Delta plus the centring's share).
    n_features_in_ : int
        Number of features seen in ``fit``.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Feature names, when ``X`` is a DataFrame with string column names.
    privacy_spent_ : PrivacySpent
        What the last charge cost: ``epsilon``, ``delta`` and the privacy profile
        declared to the ledger. This estimator declares ``"pure"``: its release is
        ε-DP (or (ε, δ)-DP when ``delta > 0``). It is not one continuous Laplace draw, so the
        ``"laplace"`` profile (a tighter zCDP) is not claimed; the ``"zcdp"`` and
        ``"rdp"`` accountants charge it as generic pure DP (see "Privacy profiles" in
        the privacy-budget guide).

    See Also
    --------
    DPHSICTest : The private permutation independence test.

    Notes
    -----
    **Input.** ``y`` holds group labels: ``y`` must be discrete (a continuous
    ``y``, e.g. a second sample passed as ``y``, is refused), with at least
    two groups and at least two rows in every group. For two samples use
    :meth:`test_samples`, or stack them:
    ``X = np.vstack([X1, X2]); y = np.repeat([0, 1], [len(X1), len(X2)])``.
    ``X`` may be a dask array or dataframe with ``method="features"`` (see
    ``method``); the classes and group sizes are then counted per chunk on the
    workers, and with three or more groups the group codes (one byte per row) are
    gathered to the client, which draws the relabellings.

    **Two groups** (sizes m, n). The statistic is
    :math:`\mathrm{MMD}_b = \|\hat\mu_1 - \hat\mu_2\|_{\mathcal H} = \sqrt{v^\top K v}`
    with :math:`v = (1/m, \dots, 1/m, -1/n, \dots, -1/n)`. Replacing one row
    :math:`x` by :math:`x'` in a group of size :math:`n_g` moves that group's mean
    embedding by :math:`(\phi(x') - \phi(x))/n_g`, so by the triangle inequality
    :math:`\Delta = D / \min(m, n)` with the feature diameter
    :math:`D = \sup \|\phi(x) - \phi(x')\| = \sup \sqrt{k(x,x) + k(x',x') - 2k(x,x')}`.
    For a kernel with values in :math:`[0, \kappa]`, :math:`D = \sqrt{2\kappa}`
    (:math:`\kappa = 1`: :math:`\Delta = \sqrt 2/\min(m, n)`); for any positive
    definite kernel with :math:`k(x, x) \le \kappa`, :math:`D = 2\sqrt\kappa`.
    The bound is attained by two point masses at distance where
    :math:`k(x, x') = 0` with one point moved. Every permuted statistic is the
    same function of relabelled data with the same group sizes, so the same
    :math:`\Delta` holds for all B + 1 values.

    **G >= 3 groups** (sizes :math:`n_g`, :math:`N = \sum n_g`). The statistic is
    the kernel between-group dispersion
    :math:`T = \sqrt{\sum_g (n_g/N)\|\hat\mu_g - \hat\mu\|^2}`, :math:`\hat\mu` the
    pooled mean embedding. It is the norm of the vector
    :math:`(\sqrt{n_g/N}(\hat\mu_g - \hat\mu))_g`. Replacing a row of group h by
    a feature difference :math:`d` changes component h by
    :math:`\sqrt{n_h/N}\,d\,(1/n_h - 1/N)` and every other component by
    :math:`-\sqrt{n_g/N}\,d/N`; the squared norm of the change is
    :math:`\|d\|^2 (N - n_h)/(N^2 n_h)`, hence
    :math:`\Delta = (D/N)\sqrt{(N - n_{\min})/n_{\min}}`. For two groups
    :math:`T = \sqrt{mn}/N\cdot\mathrm{MMD}_b` and the two sensitivities agree,
    so both statistics give the same test.

    **Callable kernels** (not assumed positive definite; values in
    :math:`[-\kappa, \kappa]` by clipping). The square root is then not
    Lipschitz, so the squared statistics (the quadratic forms
    :math:`\sum_{jl} c_{jl} K_{jl}`) are privatised, with
    :math:`\Delta = 8\kappa/n_{\min} - 2\kappa/n_{\min}^2` (two groups) or
    :math:`8\kappa(N - n_{\min})/N^2` (k-sample): replacing row i changes row
    and column i of K by at most :math:`2\kappa` per entry (see
    :func:`mmd_squared_sensitivity`).

    **Floating point.** The noise is calibrated to
    :math:`\Delta + 2\eta`, with :math:`\eta` (``result_.abs_error``) a
    certified bound on the float64 rounding of each statistic computed from
    the Gram values (:func:`mmd_abs_error`): computed statistics on
    neighbouring data then differ by at most :math:`\Delta + 2\eta`.
    Statistics that are not finite are refused (no p-value is computed from a
    NaN comparison). Kernel parameters that give NaN (a zero length scale),
    bounds above ``2**200`` and GP kernels with :math:`k(x,x)` out of range are
    refused before the charge; the rbf kernel recomputes the rows of large
    norm (above ``2**40`` squared) from coordinate differences, so huge values
    do not overflow into NaN.

    **Computation.** All B + 1 statistics are :math:`\mathrm{diag}(V^\top K V)`
    of one coefficient matrix (two groups: each relabelling puts group 0 on
    the positions of the m smallest of N uniform random 32-bit keys, selected
    by ``np.partition``, with exact rejection of ties; more groups:
    ``Generator.permuted`` shuffles its rows); the kernel is evaluated in
    blocks, symmetrically (about half the work of the full product), and the
    N x N matrix is never held unless it fits in ``MAX_KERNEL_BYTES`` (256 MiB,
    N <= 5792: evaluated while the relabellings are drawn in a thread, then one
    triangular product per column chunk). The bandwidth aggregate holds the pooled
    distances instead (same limit): computed once per fit, one ``exp`` and one
    triangular product per bandwidth, the relabellings drawn once for all; over
    the cyclic group (``cyclic``) one ``exp`` and the FFTs of half the cyclic
    diagonals per bandwidth, the labels' spectra once per fit. With
    more than ``MANY_GROUPS`` (16) groups, each relabelling costs one sparse
    one-hot by kernel product instead (O(N^2) rather than O(G N^2)).
    Everything that can refuse the input (parameters, labels, kernel, memory)
    runs before the budget is charged.

    References
    ----------
    .. [1] I. Kim and A. Schrab, "Differentially Private Permutation Tests:
       Applications to Kernel Methods", arXiv:2310.19043, 2023.
    .. [2] A. Gretton, K. Borgwardt, M. Rasch, B. Schoelkopf and A. Smola,
       "A Kernel Two-Sample Test", JMLR 13, 2012.

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest import DPMMDTest
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(size=(200, 2)), rng.normal(1.0, size=(200, 2))])
    >>> groups = np.repeat(["a", "b"], 200)
    >>> result = DPMMDTest(epsilon=1.0, random_state=0).test(X, groups)
    >>> bool(result.reject)
    True
    >>> result.n_permutations
    2000
    """

    _parameter_constraints = {
        "kernel": KERNEL_CONSTRAINT,
        "kernel_params": KERNEL_PARAMS_CONSTRAINT,
        "kernel_bound": BOUND_CONSTRAINT,
        **COMMON_CONSTRAINTS,
        "cyclic": [Boolean(), Options("auto")],
    }

    def __init__(self, *, kernel="rbf", kernel_params=None, kernel_bound=None, epsilon=1.0,
                 delta=0.0, alpha=0.05, n_permutations=2000, cyclic="auto",
                 max_memory=DEFAULT_MAX_MEMORY,
                 n_jobs=None, verbose=None, max_time=None, method="exact", n_components=64,
                 feature_map="fourier", budget=None, random_state=None):
        self.kernel = kernel
        self.kernel_params = kernel_params
        self.kernel_bound = kernel_bound
        self.epsilon = epsilon
        self.delta = delta
        self.alpha = alpha
        self.n_permutations = n_permutations
        self.cyclic = cyclic
        self.max_memory = max_memory
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.max_time = max_time
        self.method = method
        self.n_components = n_components
        self.feature_map = feature_map
        self.budget = budget
        self.random_state = random_state

    def _check_params(self, params):
        params = super()._check_params(params)
        if params["cyclic"] is True and (params["method"] == "features" or not uses_aggregate(
                params["kernel"], params["kernel_params"])):
            raise InvalidParameterError(
                "cyclic=True needs the bandwidth aggregate (kernel 'rbf' or 'laplacian' "
                "without a 'gamma' in kernel_params, method='exact'; any number of "
                "groups); use cyclic='auto' or False.")
        return params

    def _validate_input(self, X, y, reset):
        if y is not None and np.ndim(y) == 2 and np.shape(y)[1] > 1:
            raise _two_sample_error(
                f"DPMMDTest takes group labels y of shape (n_samples,); got an array of "
                f"shape {np.shape(y)}, which looks like a second sample."
            )
        if is_dask(X):  # lazily: metadata only (finiteness and labels in the plan)
            return validate_dask_input(self, X, y, reset, labels=True)
        if is_dask(y):  # X in memory: the labels (N values) are brought to it
            y = y.compute()
        # the core's checks (numeric dtype, the library's refusals): any label dtype
        X, y = super()._validate_input(X, y, reset)
        return X.astype(np.float64, copy=False), y

    def _plan(self, params, X, y):
        labels = None
        if is_dask(X):
            self._refuse_dask(params)
            # per-chunk distinct labels and counts from the workers (after their NaN
            # checks): the public classes and sizes; the labels' kind is their classes'
            labels = dask_labels(X, y)
            y = labels.classes
        kind = type_of_target(y)
        if kind == "unknown":
            raise ValueError(
                f"Unknown label type: DPMMDTest needs discrete group labels y (got an "
                f"array of dtype {np.asarray(y).dtype} that holds neither numbers nor "
                "strings)."
            )
        if kind not in ("binary", "multiclass"):
            raise _two_sample_error(
                f"DPMMDTest needs discrete group labels y; got {kind} values (a second "
                "sample or a continuous variable is not a grouping)."
            )
        if labels is None:
            classes, codes = np.unique(y, return_inverse=True)
            codes = codes.ravel()
        else:  # the per-row labels stay on the workers (codes: the lazy DaskLabels)
            classes, codes = labels.classes, labels
        if classes.size < 2:
            raise ValueError(
                f"DPMMDTest needs at least 2 groups in y; got {classes.size} class "
                f"({X.shape[0]} sample(s))."
            )
        sizes = np.bincount(codes) if labels is None else labels.sizes
        if sizes.min() < 2:
            raise _two_sample_error(
                f"DPMMDTest needs at least 2 rows in every group of y; the smallest of "
                f"the {classes.size} groups has {int(sizes.min())} row."
            )
        groups = (classes, codes, sizes)
        self._warn_method_ignores(params)
        if params["method"] == "features":
            route = MMDDaskFeaturesRoute() if is_dask(X) else MMDFeaturesRoute()
            return route.plan(params, X, groups)
        if not uses_aggregate(params["kernel"], params["kernel_params"]):
            self._warn_ignored(params, [
                ("n_jobs", "it parallelises the bandwidth aggregate only (kernel_params "
                 "without 'gamma'); one bandwidth runs on the BLAS threads in force (leave "
                 "n_jobs=None).")])
            return MMDExactRoute().plan(params, X, groups)
        n, n_groups = int(sizes.sum()), int(classes.size)
        if not cyclic_applies(params, n, X.shape[1], n_groups, True):
            return MMDAggregateRoute().plan(params, X, groups)
        self._warn_ignored(params, [cyclic_ignores_permutations(
            params, "the bandwidth aggregate and min(n - 1, n_permutations) >= 999", n,
            "random relabellings")])
        held = held_cyclic_fits(params, n, X.shape[1])
        return (MMDCyclicRoute() if held else MMDCyclicBlockedRoute()).plan(params, X, groups)

    def _fitted_attributes(self, prep, result):
        return {"classes_": prep.plan.classes, "gamma_": result.gamma,
                "gamma_grid_": prep.plan.gammas}

    def test_samples(self, X1, X2, *more):
        """Test whether two (or more) samples come from the same distribution.

        Stacks the samples, labels their rows ``0, 1, ...`` in order, fits
        (one charge of ``(epsilon, delta)``) and returns the result: the same
        release as ``fit(np.vstack([X1, X2, ...]), np.repeat([0, 1, ...],
        sizes))`` with the same ``random_state``. ``classes_`` is then
        ``[0, 1, ...]``.

        Parameters
        ----------
        X1, X2, *more : array-like of shape (n_i, n_features)
            The samples (at least two rows each, the same number of features).

        Returns
        -------
        result : PermutationTestResult
            The private result (also in ``result_``).

        Examples
        --------
        >>> import numpy as np
        >>> from skdptest import DPMMDTest
        >>> rng = np.random.default_rng(0)
        >>> X1, X2 = rng.normal(size=(100, 3)), rng.normal(0.5, size=(120, 3))
        >>> res = DPMMDTest(epsilon=2.0, random_state=0).test_samples(X1, X2)
        >>> bool(res.reject)
        True
        """
        if any(is_dask(s) for s in (X1, X2, *more)):  # stacked lazily, labelled 0, 1, ...
            return self.test(*stack_dask_samples((X1, X2, *more)))
        samples = []
        for i, sample in enumerate((X1, X2, *more)):
            arr = sample if hasattr(sample, "iloc") else np.asarray(sample)
            if np.ndim(arr) != 2:
                raise ValueError(
                    f"test_samples takes 2-D samples of shape (n_i, n_features); sample "
                    f"{i} has shape {np.shape(arr)} (reshape a single feature with "
                    "x.reshape(-1, 1))."
                )
            samples.append(arr)
        widths = {np.shape(s)[1] for s in samples}
        if len(widths) != 1:
            raise ValueError(
                f"test_samples needs the same number of features in every sample; got "
                f"{[np.shape(s)[1] for s in samples]}."
            )
        sizes = [np.shape(s)[0] for s in samples]
        if all(hasattr(s, "iloc") for s in samples):
            import pandas as pd  # only when the samples are DataFrames

            X = pd.concat(samples, ignore_index=True)
        else:
            X = np.vstack([np.asarray(s) for s in samples])
        return self.test(X, np.repeat(np.arange(len(samples)), sizes))
