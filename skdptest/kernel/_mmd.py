"""DPMMDTest: the differentially private permutation MMD test (dpMMD)."""

from __future__ import annotations

import itertools
import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from scipy import sparse
from sklearn.utils.validation import validate_data

from .._base import BasePrivateTest
from ._kernels import (
    MEDIAN_EPSILON_SHARE,
    check_kernel_spec,
    private_median_gamma,
    resolve_kernel,
    uses_private_median,
)
from ._permutation import check_permutation_params, make_result

__all__ = ["DPMMDTest", "mmd_permutation_statistics", "mmd_sensitivity"]

# The pooled N x N kernel matrix is held only when several column chunks reuse
# it and it fits in this many bytes; otherwise kernel blocks are evaluated on
# the fly (blocked path, never holding it).
MAX_KERNEL_BYTES = 256 * 2**20
# With one column chunk and a kernel matrix up to this size, its blocks are
# evaluated while the coefficients are drawn in a thread (then held together).
PREFETCH_KERNEL_BYTES = 32 * 2**20
# Bound on the float64 coefficient matrix V (N x columns) held at once.
MAX_COLUMN_BYTES = 256 * 2**20
# k-sample with more groups than this: one sparse product per relabelling.
MANY_GROUPS = 16
# Rows per kernel block (512-768 measured best for 1000 <= N <= 4000 here).
BLOCK_ROWS = 768


def mmd_sensitivity(group_sizes, diameter):
    """Global sensitivity of the (k-sample) MMD statistic under replacing one row.

    Parameters
    ----------
    group_sizes : array-like of int
        Sizes ``n_1 .. n_G`` of the groups (public).
    diameter : float
        Public bound ``D >= ||phi(x) - phi(x')||`` of the kernel feature map.

    Returns
    -------
    sensitivity : float
        ``D / min(m, n)`` for two groups; ``(D / N) sqrt((N - n_min) / n_min)``
        for three or more (see :class:`DPMMDTest`, Notes).
    """
    sizes = np.asarray(group_sizes, dtype=np.int64)
    n_min = int(sizes.min())
    if sizes.size == 2:
        return float(diameter) / n_min
    n_total = int(sizes.sum())
    return float(diameter) / n_total * math.sqrt((n_total - n_min) / n_min)


def _block_edges(n):
    # Symmetric blocking does (1 + 1/n_blocks)/2 of the full product's work; at least
    # three blocks once they stay large enough for BLAS (measured fastest at N = 1000-2000).
    n_blocks = max(1, -(-n // BLOCK_ROWS), 3 if n >= 768 else (2 if n >= 512 else 1))
    return np.linspace(0, n, n_blocks + 1).round().astype(int)


def column_quadratic_forms(X, kernel, columns, n_chunks, *, max_kernel_bytes=None):
    """``diag(V^T K V)`` for every column chunk ``V`` produced by ``columns``.

    ``K`` is the kernel matrix of ``X``. Symmetric blocking: only the blocks
    ``K[r, s]`` with ``r <= s`` are used (off-diagonal ones twice), so the
    floating-point work is ``(1 + 1/n_blocks) N^2 C`` instead of the ``2 N^2 C``
    of one ``N x N`` by ``N x C`` product, and each kernel block is evaluated
    once. With a single column chunk the kernel matrix is held only if it fits
    in ``PREFETCH_KERNEL_BYTES`` (32 MiB, N <= 2048; its blocks are then
    evaluated while the chunk is drawn in a thread), else its blocks are
    evaluated on the fly; with several chunks it is held, to be reused, only if
    it fits in ``max_kernel_bytes``, and otherwise re-evaluated block by block
    for every chunk.

    Parameters
    ----------
    X : ndarray of shape (N, d)
    kernel : ResolvedKernel
    columns : iterable of ndarray of shape (N, c)
        Coefficient matrices, consumed one at a time.
    n_chunks : int
        Number of chunks ``columns`` yields.

    Returns
    -------
    q : ndarray of shape (sum of c,)
    """
    if max_kernel_bytes is None:
        max_kernel_bytes = MAX_KERNEL_BYTES
    n = len(X)
    edges = _block_edges(n)
    pairs = [(i, j) for i in range(len(edges) - 1) for j in range(i, len(edges) - 1)]
    columns = iter(columns)
    first = None
    if n_chunks > 1 and 8 * n * n <= max_kernel_bytes:
        K = kernel(X)

        def block(i, j):
            return K[edges[i]:edges[i + 1], edges[j]:edges[j + 1]]
    elif n_chunks == 1 and 8 * n * n <= min(PREFETCH_KERNEL_BYTES, max_kernel_bytes):
        # Small kernel, one chunk: draw the coefficients in a thread while the
        # (mostly single-threaded: exp) kernel blocks are evaluated; numpy's
        # bounded integers and partition release the GIL.
        with ThreadPoolExecutor(1) as pool:
            first = pool.submit(next, columns)
            blocks = {(i, j): _kernel_block(X, kernel, edges, i, j) for i, j in pairs}
            first = first.result()

        def block(i, j):
            return blocks[i, j]
    else:
        def block(i, j):
            return _kernel_block(X, kernel, edges, i, j)

    out = []
    for V in columns if first is None else itertools.chain([first], columns):
        q = np.zeros(V.shape[1])
        for i, j in pairs:
            P = block(i, j) @ V[edges[j]:edges[j + 1]]
            part = np.einsum("ij,ij->j", V[edges[i]:edges[i + 1]], P)
            if i == j:
                q += part
            else:
                q += 2.0 * part
        out.append(q)
    return np.concatenate(out)


def _kernel_block(X, kernel, edges, i, j):
    rows = X[edges[i]:edges[i + 1]]
    if i == j:
        return kernel(rows)
    return kernel(rows, X[edges[j]:edges[j + 1]])


def _smallest_int_dtype(n_values):
    for dtype in (np.int8, np.int16, np.int32):
        if n_values <= np.iinfo(dtype).max:
            return dtype
    return np.int64  # pragma: no cover


def _two_group_masks(n, m, n_rows, rng, tie_rng):
    """``n_rows`` uniformly random ``m``-subsets of ``range(n)`` as boolean masks.

    Each row gets ``n`` i.i.d. uniform 32-bit keys (one bulk draw) and the
    ``m`` smallest are selected with ``np.partition`` (O(n), no sorting and no
    sequential shuffle: about twice as fast as ``Generator.permuted`` at
    n = 1000). The keys are exchangeable, so the selected set is uniform over
    the ``m``-subsets whenever the ``m``-th smallest key is unique; a row with a
    tie there (probability about ``n 2^-32``) is redrawn from ``tie_rng``
    (rejection keeps the law exact). Redraws never touch ``rng``, so the
    relabellings do not depend on how the rows are chunked.
    """
    keys = rng.integers(0, 2**32, size=(n_rows, n), dtype=np.uint32)
    masks = keys <= np.partition(keys, m - 1, axis=1)[:, m - 1:m]
    for r in np.flatnonzero(np.count_nonzero(masks, axis=1) != m):
        while True:
            row = tie_rng.integers(0, 2**32, size=n, dtype=np.uint32)
            masks[r] = row <= np.partition(row, m - 1)[m - 1]
            if np.count_nonzero(masks[r]) == m:
                break
    return masks


def _two_group_coefficients(masks, first, second):
    """Rows ``first`` where ``masks`` is True, ``second`` elsewhere (float64).

    One multiply-add pass (3x faster than ``np.where``); the slope is nudged
    by ulps so that ``slope + second`` rounds to ``first`` exactly.
    """
    slope = first - second
    for _ in range(4):
        if slope + second == first:
            break
        slope = np.nextafter(slope, np.inf if slope + second < first else -np.inf)
    out = np.multiply(masks, slope)
    if slope + second != first:  # pragma: no cover - not seen in float64
        out[:] = np.where(masks, first, second)
        return out
    out += second
    return out


def _tie_generator(rng):
    # Drawn once per call, before any relabelling, whatever the chunking.
    return np.random.default_rng(int(rng.integers(2**63)))


def draw_assignments(codes, n_permutations, rng):
    """Label assignments: row 0 the observed codes, rows 1..B uniform relabellings.

    Each row b >= 1 is an independent uniformly random rearrangement of the
    observed codes, depending only on the public group sizes and ``rng``. Two
    groups: a uniform subset of the positions for group 0 (the ``m`` smallest
    of ``N`` random 32-bit keys, see :func:`_two_group_masks`). Three or more
    groups: numpy's ``Generator.permuted`` (one Fisher-Yates shuffle per row).
    The estimator draws its coefficient matrices the same way, in chunks,
    which consumes ``rng`` identically and gives the same relabellings.
    """
    codes = np.asarray(codes)
    sizes = np.bincount(codes)
    out = np.empty((n_permutations + 1, codes.size), dtype=_smallest_int_dtype(sizes.size))
    out[0] = codes
    tie_rng = _tie_generator(rng) if sizes.size == 2 else None
    out[1:] = _relabelled_codes(codes, sizes, n_permutations, False, rng, tie_rng)
    return out


def _two_group_rows(codes, sizes, n_rows, first_is_observed, rng, tie_rng):
    """Coefficient rows ``1/m`` (group 0) and ``-1/n`` (group 1), relabelled."""
    first, second = 1.0 / sizes[0], -1.0 / sizes[1]
    start = 1 if first_is_observed else 0
    masks = np.empty((n_rows, codes.size), dtype=bool)
    masks[start:] = _two_group_masks(codes.size, int(sizes[0]), n_rows - start, rng, tie_rng)
    if first_is_observed:
        masks[0] = codes == 0
    return _two_group_coefficients(masks, first, second)


def _relabelled_codes(codes, sizes, n_rows, first_is_observed, rng, tie_rng):
    """``n_rows`` relabelled code rows, drawn as by :func:`draw_assignments`."""
    if sizes.size != 2:
        return _permuted_rows(codes.astype(_smallest_int_dtype(sizes.size)), n_rows,
                              first_is_observed, rng)
    out = np.empty((n_rows, codes.size), dtype=np.int8)
    start = 1 if first_is_observed else 0
    masks = _two_group_masks(codes.size, int(sizes[0]), n_rows - start, rng, tie_rng)
    out[start:] = ~masks
    if first_is_observed:
        out[0] = codes
    return out


def _permuted_rows(template, n_rows, first_is_observed, rng):
    """``n_rows`` copies of ``template``, each shuffled (row 0 kept if observed)."""
    out = np.empty((n_rows, template.size), dtype=template.dtype)
    out[:] = template
    start = 1 if first_is_observed else 0
    rng.permuted(out[start:], axis=1, out=out[start:])
    return out


def _ksample_many_groups(X, kernel, codes, sizes, n_stats, rng):
    """k-sample statistics for many groups: O(N^2) per relabelling.

    ``sum_g 1_g^T K 1_g / (N n_g)`` from one sparse (G x N one-hot) by dense
    (N x N) product per relabelling, instead of G matrix columns each.
    """
    n = codes.size
    K = kernel(X)
    grand = K.sum() / n**2
    weights = 1.0 / (n * sizes.astype(np.float64))
    template = codes.astype(_smallest_int_dtype(sizes.size))
    A = _permuted_rows(template, n_stats, True, rng)
    rows = np.arange(n)
    ones = np.ones(n)
    out = np.empty(n_stats)
    for b, a in enumerate(A):
        onehot = sparse.csr_matrix((ones, (a, rows)), shape=(sizes.size, n))
        M = onehot @ K  # M[g, i] = sum_{j in g} K[j, i]
        out[b] = np.dot(weights[a], M[a, rows]) - grand
    return out


def mmd_permutation_statistics(X, codes, n_permutations, rng, kernel, *, ksample=None,
                               max_kernel_bytes=None, max_column_bytes=None):
    """The B + 1 (non-private) MMD statistics: observed first, then permuted.

    Two groups (``ksample=False``): ``MMD_b = sqrt(v^T K v)`` with ``v`` equal to
    ``1/m`` on group 0 and ``-1/n`` on group 1. Three or more groups (or
    ``ksample=True``): ``sqrt(sum_g (n_g / N) ||mu_g - mu||^2)`` with ``mu_g`` the
    group mean embeddings and ``mu`` the pooled one (for two groups this equals
    ``sqrt(m n) / N * MMD_b``).

    Parameters
    ----------
    X : ndarray of shape (N, d)
    codes : ndarray of shape (N,)
        Group codes ``0 .. G - 1``.
    n_permutations : int
    rng : numpy.random.Generator
        Source of the relabellings (consumed as by :func:`draw_assignments`).
    kernel : ResolvedKernel

    Returns
    -------
    statistics : ndarray of shape (n_permutations + 1,)
    """
    if max_column_bytes is None:
        max_column_bytes = MAX_COLUMN_BYTES
    codes = np.asarray(codes)
    n = codes.size
    sizes = np.bincount(codes)
    n_groups = sizes.size
    if ksample is None:
        ksample = n_groups > 2
    n_cols = n_groups if ksample else 1
    n_stats = n_permutations + 1
    per_chunk = max(1, int(max_column_bytes // (8 * n * n_cols)))
    starts = range(0, n_stats, per_chunk)

    if ksample and n_groups > MANY_GROUPS and 8 * n * n <= (
            MAX_KERNEL_BYTES if max_kernel_bytes is None else max_kernel_bytes):
        stat2 = _ksample_many_groups(X, kernel, codes, sizes, n_stats, rng)
    elif ksample:
        weights = 1.0 / np.sqrt(n * sizes.astype(np.float64))
        groups = np.arange(n_groups)
        tie_rng = _tie_generator(rng) if n_groups == 2 else None

        def columns():
            yield np.full((n, 1), 1.0 / n)
            for start in starts:
                A = _relabelled_codes(codes, sizes, min(per_chunk, n_stats - start),
                                      start == 0, rng, tie_rng)
                onehot = A.T[:, :, None] == groups
                yield (onehot * weights).reshape(n, -1)

        q = column_quadratic_forms(X, kernel, columns(), len(starts) + 1,
                                   max_kernel_bytes=max_kernel_bytes)
        stat2 = q[1:].reshape(n_stats, n_groups).sum(axis=1) - q[0]
    else:
        tie_rng = _tie_generator(rng)

        def columns():
            # (rows, N) C-ordered; its transpose is the (N, rows) coefficient
            # matrix, used by BLAS without a copy.
            for start in starts:
                yield _two_group_rows(codes, sizes, min(per_chunk, n_stats - start),
                                      start == 0, rng, tie_rng).T

        stat2 = column_quadratic_forms(X, kernel, columns(), len(starts),
                                       max_kernel_bytes=max_kernel_bytes)
    return np.sqrt(np.maximum(stat2, 0.0))


class DPMMDTest(BasePrivateTest):
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

    Parameters
    ----------
    kernel : str, sklearn.gaussian_process.kernels.Kernel or callable, default="rbf"
        A name from ``sklearn.metrics.pairwise.PAIRWISE_KERNEL_FUNCTIONS``
        (rbf, laplacian, chi2 and cosine have a known bound; linear and
        polynomial need ``kernel_bound``; sigmoid and additive_chi2 are refused
        as not positive definite), a stationary scikit-learn Gaussian-process
        kernel (bound ``k(x, x)``), or a callable ``kernel(X, Y, **kernel_params)``
        returning the Gram matrix (needs ``kernel_bound``). The default rbf
        bandwidth is data independent: ``gamma = 1 / n_features``.
    kernel_params : dict, default=None
        Keyword arguments of the kernel (``gamma``, ``degree``, ... for named
        kernels; hyperparameters set on a copy of a GP kernel; keyword arguments
        of a callable). ``{"gamma": "median"}`` (rbf, laplacian) asks for a
        *private* median heuristic: 5 % of ``epsilon`` buys an
        epsilon-DP median of the pooled pairwise distances (exponential
        mechanism over a public grid, labels unused), the rest the test; the
        total charged is still ``(epsilon, delta)``.
    kernel_bound : float, default=None
        Public bound :math:`\kappa \geq k(x, x)` for every possible row. Needed
        for kernels without a known bound; it is checked on the data (a
        violation raises ``ValueError`` before any budget is charged). With a
        user bound the kernel is only assumed positive definite.
    epsilon : float, default=1.0
        Privacy loss of one fit, > 0.
    delta : float, default=0.0
        Failure probability, in [0, 1).
    alpha : float, default=0.05
        Level of the test.
    n_permutations : int, default=2000
        Number B of random relabellings.
    budget : PrivacyBudget, default=None
        Ledger charged ``(epsilon, delta)`` by every ``fit`` and ``score``.
    random_state : int, RandomState, Generator or None, default=None
        Seeds the relabellings and the noise. Use ``None`` for real releases.

    Attributes
    ----------
    result_ : PermutationTestResult
        The private result of the last fit.
    classes_ : ndarray of shape (n_groups,)
        Group labels (sorted); the first one is the "X sample" of MMD.
    gamma_ : float or None
        The privately chosen ``gamma`` with ``kernel_params={"gamma": "median"}``
        (itself a DP release), else None.
    n_features_in_ : int
        Number of features seen in ``fit``.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Feature names, when ``X`` is a DataFrame with string column names.

    See Also
    --------
    DPHSICTest : The private permutation independence test.

    Notes
    -----
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
    so both statistics give the same test. All B + 1 statistics are
    :math:`\mathrm{diag}(V^\top K V)` of one coefficient matrix (two groups: each
    relabelling puts group 0 on the positions of the m smallest of N uniform
    random 32-bit keys, selected by ``np.partition``, with exact rejection of
    ties; more groups: ``Generator.permuted`` shuffles its rows); the kernel is
    evaluated in blocks, symmetrically (about half the work of the full
    product), and the N x N matrix is never held unless it is small (32 MiB:
    its blocks are then evaluated while the relabellings are drawn in a thread)
    or several column chunks must reuse it and it fits in ``MAX_KERNEL_BYTES``
    (256 MiB). With more than
    ``MANY_GROUPS`` (16) groups, each relabelling costs one sparse one-hot by
    kernel product instead (O(N^2) rather than O(G N^2)).

    Only the noisy statistic, the p-value and public quantities are stored:
    neither the statistic without noise nor the noise draws.

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

    _requires_y = True

    def __init__(self, *, kernel="rbf", kernel_params=None, kernel_bound=None, epsilon=1.0,
                 delta=0.0, alpha=0.05, n_permutations=2000, budget=None, random_state=None):
        self.kernel = kernel
        self.kernel_params = kernel_params
        self.kernel_bound = kernel_bound
        self.epsilon = epsilon
        self.delta = delta
        self.alpha = alpha
        self.n_permutations = n_permutations
        self.budget = budget
        self.random_state = random_state

    def _check_params(self):
        check_permutation_params(self)
        check_kernel_spec(self.kernel, self.kernel_params, self.kernel_bound)

    def _privacy_cost(self):
        return float(self.epsilon), float(self.delta)

    def _validate_input(self, X, y, reset):
        X, y = validate_data(self, X, y, reset=reset, dtype="numeric", y_numeric=False)
        return X.astype(np.float64, copy=False), y

    def _check_data(self, X, y):
        classes, codes = np.unique(y, return_inverse=True)
        if classes.size < 2:
            raise ValueError(
                f"DPMMDTest needs at least 2 groups in y; got {classes.size} class "
                f"({X.shape[0]} sample(s))."
            )
        kernel = resolve_kernel(self.kernel, self.kernel_params, self.kernel_bound, X)
        self._classes, self._codes, self._resolved_kernel = classes, codes.ravel(), kernel

    def _run(self, X, rng):
        kernel = self.__dict__.pop("_resolved_kernel")
        codes = self.__dict__.pop("_codes")
        sizes = np.bincount(codes)
        noise_epsilon, gamma = float(self.epsilon), None
        if uses_private_median(self.kernel, self.kernel_params):
            # labels are not used: the bandwidth is invariant under relabelling
            eps_bw = MEDIAN_EPSILON_SHARE * float(self.epsilon)
            noise_epsilon -= eps_bw
            gamma = private_median_gamma(X, self.kernel, eps_bw, rng)
            kernel = resolve_kernel(self.kernel, {**self.kernel_params, "gamma": gamma},
                                    self.kernel_bound, X)
        stats = mmd_permutation_statistics(X, codes, int(self.n_permutations), rng, kernel)
        sensitivity = mmd_sensitivity(sizes, kernel.diameter)
        result = make_result(
            stats, sensitivity, epsilon=self.epsilon, delta=self.delta, alpha=self.alpha,
            n_samples=X.shape[0], rng=rng, noise_epsilon=noise_epsilon,
            method="dpMMD" if sizes.size == 2 else "dpMMD k-sample",
        )
        return result, gamma

    def _fit_private(self, X, y, rng):
        self.classes_ = self.__dict__.pop("_classes")
        result, self.gamma_ = self._run(X, rng)
        return result

    def _score_private(self, X, y, rng):
        self.__dict__.pop("_classes")
        return -math.log(self._run(X, rng)[0].p_value)
