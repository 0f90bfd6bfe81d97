"""DPHSICTest: the differentially private permutation HSIC test (dpHSIC).

The estimator: its parameters, input checks and the choice of a route. The shared
release is :class:`._kernelbase.KernelTestBase`'s; the routes (``plan``,
``statistics``) are the kernel routes of :mod:`._hsic_routes` (exact, cyclic, aggregate;
blocked: :mod:`._route_hsic_blocked`) and random features (:mod:`._route_features`,
dask: :mod:`._route_dask`).
"""

from __future__ import annotations

import numpy as np

from .._base import check_numeric, validate_input
from .._params import Boolean, InvalidParameterError, Options
from ._distributed import is_dask, validate_dask_input
from ._hsic_aggregate import hsic_aggregate_statistics, hsic_cyclic_statistics
from ._hsic_bounds import hsic_abs_error, hsic_sensitivity, hsic_squared_sensitivity
from ._hsic_exact import hsic_memory_bytes, hsic_permutation_statistics
from ._hsic_routes import HSICKernelRoutes
from ._hsic_traces import (  # _resolve_*: reachable here for benchmarks/kernel_speed.py
    _resolve_backend,  # noqa: F401
    _resolve_precision,  # noqa: F401
    draw_permutations,
)
from ._kernelbase import BOUND_CONSTRAINT, COMMON_CONSTRAINTS, KernelTestBase
from ._kernels import KERNEL_CONSTRAINT, KERNEL_PARAMS_CONSTRAINT
from ._route_dask import HSICDaskFeaturesRoute
from ._route_features import HSICFeaturesRoute
from ._testbase import DEFAULT_MAX_MEMORY

__all__ = [
    "DPHSICTest",
    "draw_permutations",
    "hsic_aggregate_statistics",
    "hsic_abs_error",
    "hsic_cyclic_statistics",
    "hsic_memory_bytes",
    "hsic_permutation_statistics",
    "hsic_sensitivity",
    "hsic_squared_sensitivity",
]


class DPHSICTest(KernelTestBase):
    r"""Differentially private permutation HSIC independence test.

    Tests H0: the rows of ``X`` are independent of the paired rows of ``y``,
    with the dpHSIC test of Kim & Schrab [1]_: the plug-in statistic
    :math:`\sqrt{\mathrm{HSIC}_b}` on the observed pairs and on
    ``n_permutations`` random re-pairings, each privatised by independent
    Laplace noise of scale :math:`2\Delta/\xi`,
    :math:`\xi = \varepsilon + \log(1/(1-\delta))`, and the rank p-value of
    the noisy observed statistic.

    Privacy: (``epsilon``, ``delta``)-DP for one fit (or one ``score``) under
    the neighbouring relation *replace one pair* :math:`(x_i, y_i)`. The
    number of pairs is public. ``delta = 0`` gives pure ``epsilon``-DP.

    **Released** (everything that leaves a fit): ``result_.pvalue`` and
    ``result_.reject`` (a function of it); ``gamma_`` and ``y_gamma_``
    (= ``result_.gamma``, ``result_.y_gamma``) with the private median
    heuristic; public quantities (n, ``n_permutations``, ``sensitivity``,
    ``noise_scale``...). The noisy observed statistic is *not* released (it
    shares its noise with the p-value; the permutation theorem covers the
    p-value only). Joint argument: each private bandwidth is a
    (``0.05 epsilon``)-DP exponential mechanism on one marginal (invariant
    under re-pairing); the p-value is (``epsilon - `` the bandwidth shares,
    ``delta``)-DP given the bandwidths (Theorem 2 of [1]_); by sequential
    composition the whole fit is (``epsilon``, ``delta``)-DP.

    Parameters
    ----------
    kernel : str, sklearn.gaussian_process.kernels.Kernel or callable, default="rbf"
        Kernel on ``X``: see :class:`DPMMDTest` for the accepted forms and
        bounds. Default: the bandwidth aggregate over a public grid (rbf or
        laplacian without a ``gamma``), on both kernels, every pair of the two
        grids (19 x 19), with one DP p-value and no extra privacy cost (see
        :class:`DPMMDTest` and ``skdptest/kernel/_bandwidth.py``). An explicit
        ``gamma`` gives the single-bandwidth test, ``{"gamma": None}`` the
        previous default ``1 / n_features``.
        If either kernel is a callable (not assumed positive definite, values
        clipped to ``[-bound, bound]``), the squared statistic ``HSIC_b`` is
        privatised with a sensitivity valid for any bounded kernels (Notes).
    kernel_params : dict, default=None
        Keyword arguments of ``kernel``. ``{"gamma": "median"}`` (rbf,
        laplacian) asks for a private median heuristic on ``X`` alone, bought
        with 5 % of ``epsilon`` (see :class:`DPMMDTest`); the total charged is
        still ``(epsilon, delta)``.
    kernel_bound : float, default=None
        Public bound on ``k(x, x)`` for kernels without a known one (checked on
        the data), or on ``|k(x, x')|`` for a callable (enforced by clipping).
        At most ``2**200``.
    y_kernel : str, Kernel or callable, default="rbf"
        Kernel on ``y`` (default ``gamma = 1 / n_targets``).
    y_kernel_params : dict, default=None
        Keyword arguments of ``y_kernel`` (``{"gamma": "median"}`` as for
        ``kernel_params``, on ``y`` alone, another 5 % of ``epsilon``).
    y_kernel_bound : float, default=None
        Public bound on ``l(y, y)`` for ``y_kernel``.
    epsilon : float, default=1.0
        Privacy loss of one fit, > 0.
    delta : float, default=0.0
        Failure probability, in [0, 1).
    alpha : float, default=0.05
        Level of the test.
    n_permutations : int, default=2000
        Number B of random re-pairings, in [1, 10**6]. With ``cyclic`` in force
        (``cyclic=True``, or "auto" with the bandwidth aggregate) the n - 1 cyclic
        shifts are used instead, and a value other than the default raises
        :class:`~skdptest.PrivacyLeakWarning` (so do ``n_jobs``, ``n_components``,
        ``feature_map`` and the kernel bounds where the chosen route ignores them).
    cyclic : bool or "auto", default="auto"
        "auto": True when the bandwidth aggregate is used (its 361 bandwidth
        pairs are cheap by FFT only; B = n - 1, so n >= 20 is needed to reject
        at alpha = 0.05), else False. True: instead of random permutations,
        put the rows in a random order and use
        all n cyclic shifts of ``y`` (B = n - 1, ``n_permutations`` ignored): an
        exact randomization test over the cyclic group (the law of i.i.d. pairs
        under H0 is invariant under each shift), computed by FFT in
        O(n^2 log n) in total instead of O(n^2 B).
    max_memory : int, default=4 * 2**30
        Public limit, in bytes, on the planned peak memory of a release, an
        upper bound (see :func:`hsic_memory_bytes`: the exact permutation path
        holds a float32 copy of L, ``4 n^2`` bytes, plus ``4 n (B + 1)`` for the
        permutations and O(n) block temporaries: n = 20 000, B = 2000 plans
        1.89 GiB; the cyclic path float64 n x n matrices, ``24 n^2`` and more;
        the aggregate, ``hsic_aggregate_memory_bytes``, the spectra of its 19 y
        Gram matrices, about ``152 n^2``). When the default cyclic aggregate
        (rbf or laplacian kernels) plans more than ``max_memory`` or 1 GiB (n
        above about 2600 with 19 x 19 bandwidths), it runs by diagonal blocks
        instead (``result_.method`` "dpHSIC cyclic aggregate blocked", see
        ``skdptest/kernel/_hsic_blocked.py``): the same statistic, sensitivity
        and noise, ``O(block n)`` memory per bandwidth plus ``16 n_x n_y (n / 2
        + 1)`` bytes of accumulated spectra: n = 20 000 plans 0.34 GiB and
        n = 10**5 1.7 GiB. A fit that fits no route is refused before the
        budget is charged, naming the routes that fit.
    max_time : float, default=None
        Public limit, in seconds, on the predicted running time of a fit: a fit
        predicted to take longer is refused before the budget is charged. The
        prediction (``skdptest/kernel/_hsic_time.py``) counts the route's
        dominant operations from public sizes (n, the numbers of features, B,
        the grids) and times them on this machine with a ~0.1 s
        micro-benchmark on public arrays; the random-features route is not
        predicted (never refused). None: no limit.
    n_jobs : int, default=None
        Threads (joblib) over the x bandwidths of the aggregate (BLAS capped
        at one thread per worker); -1 uses all cores. The release does not
        depend on it.
    verbose : {0, 1} or None, default=None
        1 prints the predicted running time, then the progress (work units
        done, elapsed, ETA) and one-time hints (``cyclic=True``, ``n_jobs=-1``)
        to stderr; None does so when the fit is predicted to take more than
        10 s (see ``max_time``); 0 prints nothing. Nothing printed is derived
        from the data.
    method : {"exact", "features"}, default="exact"
        ``"features"``: random Fourier features on both sides (``kernel`` and
        ``y_kernel`` rbf or laplacian; each ``gamma`` numeric, ``"median"`` or, if
        absent, ``1 / n_features``), ``n_components`` frequencies per side drawn from
        the generator (never from the data). The statistic is the Frobenius norm of the
        feature cross-covariance, ``sqrt(HSIC_b)`` of the feature kernels (positive
        definite, diameter ``2R``, ``R = 1 + 2^-16``): sensitivity
        ``8 (n - 1) R^2 / n^2``, certified float64 error
        (:func:`~skdptest.kernel._features.feature_hsic_abs_error`), O(n D^2 B) time,
        O(n D) memory. Random permutations only (``cyclic=True`` is refused); the
        result's ``method`` is ``"dpHSIC features"``. **Dask input**: with
        ``"features"``, ``X`` (and ``y``) may be dask arrays or dataframes; a
        permutation pairs rows of different chunks, so no per-chunk sums exist: the
        quantised feature rows (never the raw rows) are computed on the workers and
        gathered to the client (``4 n (Mx + My)`` bytes, M features per row and side),
        where the permutations run; the release is the numpy input's, bit for bit.
        ``"exact"`` (and a private median bandwidth) refuse dask input before the
        charge.
    n_components : int, default=64
        Number D of random frequencies per side (2D features) with
        ``method="features"``, in [1, 2**14]; ignored otherwise.
    feature_map : {"fourier", "squared"}, default="fourier"
        With ``method="features"``: ``"fourier"``, the ``2 D`` random Fourier features
        ``phi``; ``"squared"``, the ``D (2 D + 1)`` features of ``phi (x) phi``, whose
        kernel ``(phi(x)^T phi(x'))^2`` is never negative, so the feature diameter is
        about ``sqrt(2)`` instead of 2 and the privacy noise half as large (both
        sides) (frequencies drawn for ``gamma / 2``: the squared kernel
        approximates the same rbf or laplacian kernel). Costs ``D + 1/2`` times the
        features of ``"fourier"``: the choice for moderate N and small epsilon (see
        :func:`~skdptest.kernel._features.feature_shape`).
    budget : PrivacyBudget, default=None
        Ledger charged ``(epsilon, delta)`` by every ``fit`` and ``score``.
    random_state : None, int, RandomState instance or Generator, default=None
        Source of the permutations and the noise. For tests and reproducible examples only: any
        value other than ``None`` raises :class:`~skdptest.FixedRandomStateWarning` (whoever holds
        the seed, the generator or a pickle of the estimator can replay the noise, and equal seeds
        correlate the noise of different fits). ``None`` draws fresh OS entropy and keeps nothing
        from which the noise could be regenerated.

    Attributes
    ----------
    result_ : PermutationTestResult
        The private result of the last fit.
    gamma_ : float or None
        The privately chosen ``gamma`` of ``kernel`` with
        ``kernel_params={"gamma": "median"}`` (a DP release, covered by the
        composition above), else None.
    y_gamma_ : float or None
        The same for ``y_kernel``.
    gamma_grid_, y_gamma_grid_ : ndarray of shape (19,) or None
        The public bandwidth grids of the aggregate (None for a side with a
        fixed kernel); ``result_.method`` then ends in ``" aggregate"``.
    n_features_in_ : int
        Number of features of ``X`` seen in ``fit``.
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
    DPMMDTest : The private permutation two-sample test.

    Notes
    -----
    :math:`\sqrt{\mathrm{HSIC}_b} = \|\hat C_{xy}\|_{HS}` with the empirical
    cross-covariance operator
    :math:`\hat C = \frac1n\sum_i \phi(x_i)\otimes\psi(y_i) - \hat\mu_x\otimes\hat\mu_y`.
    Write the part of :math:`\hat C` that depends on pair 1 as
    :math:`\frac{n-1}{n^2}[(\phi - m_x)\otimes(\psi - m_y) - m_x\otimes m_y]`,
    :math:`m_x, m_y` the mean embeddings of the other :math:`n-1` pairs.
    Since :math:`\|\phi - m_x\| \le D_x` (a convex combination of feature
    differences), replacing the pair moves :math:`\hat C` by at most
    :math:`\frac{n-1}{n^2}\,2 D_x D_y`, so

    .. math:: \Delta = 2(n - 1) D_x D_y / n^2,

    with :math:`D` the feature diameter of each kernel (:math:`\sqrt{2\kappa}` for
    values in :math:`[0, \kappa]`, :math:`2\sqrt\kappa` for a positive definite
    kernel with :math:`k(x,x)\le\kappa`); two kernels in [0, 1] give
    :math:`4(n-1)/n^2`. For a permuted statistic the replaced pair's ``x`` and
    ``y`` land in two different pairs; the same computation (each affected
    term is a feature difference times a centred feature, of norm at most
    :math:`(n-1)D/n`) gives the same bound, so it holds for all B + 1 values.

    All permuted statistics are exact (up to float64 rounding): with :math:`\tilde K = HKH`,
    :math:`n^2\,\mathrm{HSIC}_b(\pi) = \sum_{ij}\tilde K_{ij} L_{\pi(i)\pi(j)}`.
    Blocked computation (``cyclic=False``, one bandwidth): only a float32 copy
    of L is held; rows of :math:`\tilde K` are computed on the fly from 64-row
    kernel tiles at fixed positions, both matrices read by their lower
    triangles. The float64 value of each statistic is the exactly rounded sum
    of its rounded products (independent of the block size, the backend and
    the thread count). The B permuted traces are streamed from the float32 L
    (a compiled loop when the optional ``numba`` is installed, else numpy
    gathers; ``SKDPTEST_HSIC_BACKEND`` = ``numpy``, ``numba`` or ``auto``)
    with a certified bound :math:`|\hat T_b - T_b| \le \eta` (see
    ``_blocked_error_bound``): each comparison :math:`s_b + N_b \ge \tilde
    s_0` is decided from the enclosure of :math:`s_b` when it can be
    (floating-point addition, square root and division are monotone) and
    from the float64 value otherwise (recomputed by sweeps over float64 L
    rows; about one comparison in a thousand at n = 4000, eps = 1). The
    p-value and the decision are therefore those of the all-float64
    computation for the same seed, with the same privacy and validity;
    ``SKDPTEST_HSIC_PRECISION=float64`` computes every statistic in float64.

    **Callable kernels.** With a callable ``kernel`` or ``y_kernel`` the
    statistic is :math:`\mathrm{HSIC}_b = \langle HKH, L\rangle / n^2` and
    :math:`\Delta = 16\kappa_x\kappa_y/n` for any kernels with
    :math:`|k| \le \kappa_x`, :math:`|l| \le \kappa_y`
    (:func:`hsic_squared_sensitivity`).

    **Floating point.** The noise is calibrated to :math:`\Delta + 2\eta`,
    :math:`\eta` (``result_.abs_error``) a certified bound on the float64
    rounding of each statistic computed from the Gram values
    (:func:`hsic_abs_error`); non-finite statistics are refused. Everything
    that can refuse the input (parameters, kernels, memory) runs before the
    budget is charged.

    References
    ----------
    .. [1] I. Kim and A. Schrab, "Differentially Private Permutation Tests:
       Applications to Kernel Methods", arXiv:2310.19043, 2023.
    .. [2] A. Gretton, K. Fukumizu, C. H. Teo, L. Song, B. Schoelkopf and
       A. Smola, "A Kernel Statistical Test of Independence", NIPS 2007.

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest import DPHSICTest
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 2))
    >>> y = X[:, 0] + 0.5 * rng.normal(size=400)
    >>> result = DPHSICTest(epsilon=1.0, random_state=0).test(X, y)
    >>> bool(result.reject), result.method
    (True, 'dpHSIC cyclic aggregate')
    """

    _kernel_sides = (("kernel", "kernel_params", "kernel_bound"),
                     ("y_kernel", "y_kernel_params", "y_kernel_bound"))

    _parameter_constraints = {
        "kernel": KERNEL_CONSTRAINT,
        "kernel_params": KERNEL_PARAMS_CONSTRAINT,
        "kernel_bound": BOUND_CONSTRAINT,
        "y_kernel": KERNEL_CONSTRAINT,
        "y_kernel_params": KERNEL_PARAMS_CONSTRAINT,
        "y_kernel_bound": BOUND_CONSTRAINT,
        **COMMON_CONSTRAINTS,
        "cyclic": [Boolean(), Options("auto")],
    }

    def __init__(self, *, kernel="rbf", kernel_params=None, kernel_bound=None,
                 y_kernel="rbf", y_kernel_params=None, y_kernel_bound=None, epsilon=1.0,
                 delta=0.0, alpha=0.05, n_permutations=2000, cyclic="auto",
                 max_memory=DEFAULT_MAX_MEMORY, max_time=None, n_jobs=None, verbose=None,
                 method="exact",
                 n_components=64, feature_map="fourier",
                 budget=None, random_state=None):
        self.kernel = kernel
        self.kernel_params = kernel_params
        self.kernel_bound = kernel_bound
        self.y_kernel = y_kernel
        self.y_kernel_params = y_kernel_params
        self.y_kernel_bound = y_kernel_bound
        self.epsilon = epsilon
        self.delta = delta
        self.alpha = alpha
        self.n_permutations = n_permutations
        self.cyclic = cyclic
        self.max_memory = max_memory
        self.max_time = max_time
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.method = method
        self.n_components = n_components
        self.feature_map = feature_map
        self.budget = budget
        self.random_state = random_state

    def _check_params(self, params):
        params = super()._check_params(params)
        if params["method"] == "features" and params["cyclic"] is True:
            raise InvalidParameterError(
                "cyclic=True is not available with method='features' (random "
                "permutations of the feature rows); use cyclic='auto' or False.")
        return params

    def _validate_input(self, X, y, reset):
        if is_dask(X):  # lazily: metadata only (finiteness is checked in the plan)
            return validate_dask_input(self, X, y, reset, labels=False)
        if is_dask(y):  # X in memory: y (n values) is brought to it
            y = y.compute()
        # the core's one validation path (the library's refusals of dates, masked arrays,
        # missing values...) on both variables; y may be 2-D
        X, y = validate_input(self, X, y, reset=reset, multi_output=True, y_numeric=True)
        check_numeric(X, "X")
        y = np.asarray(check_numeric(np.asarray(y), "y"), dtype=np.float64)
        if y.ndim == 1:
            y = y.reshape(-1, 1)
        return X.astype(np.float64, copy=False), y

    def _plan(self, params, X, y):
        n = X.shape[0]
        if n < 2:
            raise ValueError(f"DPHSICTest needs at least 2 samples; got {n} sample.")
        if is_dask(X):
            self._refuse_dask(params)
        self._warn_method_ignores(params)
        if params["method"] == "features":
            route = HSICDaskFeaturesRoute() if is_dask(X) else HSICFeaturesRoute()
            return route.plan(params, X, y)
        return HSICKernelRoutes(self._warn_ignored).plan(params, X, y)

    def _fitted_attributes(self, prep, result):
        grids = prep.plan.grids
        return {"gamma_": result.gamma, "y_gamma_": result.y_gamma,
                "gamma_grid_": None if grids is None or grids[0] == (None,) else
                np.array(grids[0]),
                "y_gamma_grid_": None if grids is None or grids[1] == (None,) else
                np.array(grids[1])}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        return tags
