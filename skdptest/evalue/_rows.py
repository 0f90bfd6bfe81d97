"""Input validation of the e-value tests and the integer row sums of their releases.

- :func:`validate_rows`: numeric 2-D rows (or 1-D rows for univariate laws), numpy,
  pandas or dask; refuses non-numeric data with a ``ValueError`` naming X before
  anything else.
- :class:`RowTable`: for finite discrete laws, the per-row integer floor of the
  float-safe release of every support value, computed once in the public plan; a
  batch's integer sum is then Σ_v count(v)·code(v), the counts by one equality pass per
  support value (a ``bincount`` for supports of more than 8 values), instead of four
  scipy ``logpmf`` calls per row; the support check before the charge is the same
  equality counts adding up to n (doc/evalues.md, 'Cost per row').
- :func:`integer_sum`: S = Σ_i floor(t_i / h) of a block of rows (exact Python int);
  summed over dask chunks on the workers, only these integers come back.
"""

from __future__ import annotations

import math

import numpy as np

from .._base import non_numeric_error, validate_input
from .._dask import (
    check_n_features,
    column_names,
    is_dask,
    refuse_non_numeric_columns,
    with_known_chunks,
)
from .._noise import floor_to_grid
from ._laws import _DiscreteLaws

__all__ = ["RowTable", "check_finite", "integer_sum", "is_dask", "validate_rows"]


def _law_dim(law):
    """Dimension of one row under a frozen law (1 for univariate scipy laws)."""
    return int(getattr(law, "dim", 1)) if law is not None else None


def _refuse_dtype(dtype):
    raise non_numeric_error(dtype)


def validate_rows(est, X, reset, finite=True):
    """Validated rows of an e-value test: 2-D, numeric, finite.

    ``finite=False`` leaves the finiteness check to the caller, who must run it before
    the charge (:class:`RowTable` ``.check`` refuses NaN and infinity in the same pass
    that checks the support; :func:`check_finite` otherwise): it saves a pass over X.

    One rule for 1-D input: when the null is univariate (given, with dimension 1), a
    1-D ``X`` is read as one column (n rows); with the default laws (dimension = the
    number of columns) 1-D input is ambiguous and refused by scikit-learn's message.

    Dask input (array or dataframe) is validated lazily: dtype and width from the
    metadata, the number of rows from the chunk sizes (public, like n for numpy);
    finiteness and the support of the null are checked per chunk on the workers in the
    plan, before the charge (as for numpy, those checks read the data before charging:
    they release nothing but a refusal).
    """
    univariate = est.null is not None and _law_dim(est.null) == 1
    # numeric categories are values of the law (dataframes checked before validate_data,
    # which would pass categorical strings on as an object array)
    refuse_non_numeric_columns(X, "X", numeric_categories=True)
    if is_dask(X):
        return _validate_dask(est, X, reset, univariate)
    if univariate and np.ndim(X) == 1 and not hasattr(X, "dtypes"):
        X = X.to_frame() if hasattr(X, "to_frame") else np.asarray(X).reshape(-1, 1)
    if hasattr(X, "dtype") and getattr(X.dtype, "kind", "f") in "mMSUVc":
        _refuse_dtype(X.dtype)
    if _plain(est, X, reset):
        return check_finite(X) if finite else X
    # The core's one validation path (masked arrays, object arrays read by element type,
    # huge integers, numeric strings: the library's messages, never a value).
    X = validate_input(est, X, reset=reset, ensure_all_finite=False)
    return check_finite(X) if finite else X


def _plain(est, X, reset):
    """A plain numeric 2-D ndarray that ``validate_data`` would return unchanged: do its
    bookkeeping by hand (``n_features_in_``, no feature names) and skip its overhead
    (dataframe detection, signature inspection: about 0.4 ms a call). Anything else, or
    a case where scikit-learn would warn or refuse, returns ``False``."""
    if type(X) is not np.ndarray or X.ndim != 2 or X.dtype.kind not in "biuf" \
            or X.shape[0] < 1 or X.shape[1] < 1:
        return False
    names = "feature_names_in_" in vars(est)
    if reset:
        est.n_features_in_ = int(X.shape[1])
        if names:  # fitted on a dataframe before: scikit-learn drops the old names
            del est.feature_names_in_
        return True
    return not names and getattr(est, "n_features_in_", None) == X.shape[1]


def check_finite(X):
    """Refuse NaN and infinity (numpy rows), naming the kind of value only, with the
    library's advice: impute or drop with a public rule before the test (imputation
    that reads the data is itself a release)."""
    if X.dtype.kind != "f":
        return X
    with np.errstate(all="ignore"):
        if math.isfinite(float(np.sum(X))):  # one pass when every value is finite
            return X
        if np.isnan(X).any():
            raise ValueError(
                "Input X contains NaN (missing values). Impute or drop them with a public "
                "rule before the test: an imputation that reads the data (a mean, a "
                "model) is itself a release and must be privatised and charged."
            )
        if not np.isfinite(X).all():
            raise ValueError(
                "Input X contains infinity or a value too large for float64. Clip the "
                "data to public bounds before the test."
            )
    return X


def _validate_dask(est, X, reset, univariate):
    names = None
    if hasattr(X, "to_dask_array"):  # dataframe: lengths give the public chunk sizes
        names = column_names(X)
        X = X.to_dask_array(lengths=True)
    if X.ndim == 1 and univariate:
        X = X[:, None]
    if X.ndim != 2:
        raise ValueError(
            f"Expected 2D array, got a {X.ndim}-D dask array instead (X must be "
            "(n_samples, n_features))."
        )
    if X.dtype.kind not in "biuf":
        _refuse_dtype(X.dtype)
    X = with_known_chunks(X)
    n, d = X.shape
    if n < 1:
        raise ValueError(f"Found array with {n} sample(s) while a minimum of 1 is required.")
    check_n_features(est, d, names, reset)
    return X


class RowTable:
    """The per-row integers of a finite discrete law pair, by support value.

    ``codes[v - base]`` is floor(clip(t(v), lo, hi) / h), t(v) = log(1 − λ + λ E(L(v)))
    the per-row term of the merged release: exactly what :func:`merged_integer`
    computes row by row (same float operations on the same values), so the release is
    unchanged. Rows outside the null's support (non-integers, values outside the table,
    null mass 0) are refused.
    """

    def __init__(self, laws, stat, bet, noise):
        from ._merge import _log_merge

        lo, hi = laws.null.support()
        qlo, qhi = laws.alternative.support()
        self.base = int(min(lo, qlo))
        xs = np.arange(self.base, int(max(hi, qhi)) + 1, dtype=float)
        lp = laws.null.logpmf(xs)
        self.allowed = np.isfinite(lp)
        L = laws.alternative.logpmf(xs[self.allowed]) - lp[self.allowed]
        terms = np.clip(_log_merge(stat.log_e(L), bet), noise.lo, noise.hi)
        codes = np.zeros(xs.size, dtype=np.int64)
        codes[self.allowed] = floor_to_grid(terms, noise.fine).astype(np.int64)
        self.codes = codes.astype(object)  # exact products with counts
        self.values = xs[self.allowed]  # the null's support, in increasing order
        self.value_codes = [int(c) for c in codes[self.allowed]]

    @classmethod
    def maybe(cls, laws, stat, bet, noise):
        """A table for exact finite discrete laws, else ``None``."""
        if noise is None or not isinstance(laws, _DiscreteLaws) or not laws.exact:
            return None
        return cls(laws, stat, bet, noise)

    #: Tables with at most this many support values count rows by one equality pass per
    #: value (each about one ``x.sum()`` pass); larger ones map values to indices
    #: (a cast and a ``bincount``, about 10-25 passes).
    _EQUALITY_MAX = 8

    def _values_in(self, dtype):
        """The allowed support values as scalars of ``dtype`` (``None`` where a value is
        not exactly representable: no row of that dtype can equal it)."""
        out = []
        for v in self.values:
            if dtype.kind == "b":
                out.append(bool(v) if v in (0, 1) else None)
            elif dtype.kind in "iu":
                info = np.iinfo(dtype)
                out.append(dtype.type(v) if info.min <= v <= info.max else None)
            else:
                w = dtype.type(v)
                out.append(w if float(w) == v else None)
        return out

    @staticmethod
    def _column(X):
        return X[:, 0] if X.ndim == 2 else X

    def _equal_count(self, x, w):
        return 0 if w is None else int(np.count_nonzero(x == w))

    def check(self, X):
        """Refuse rows outside the null's support (``ValueError``, the laws' message;
        NaN or infinity: scikit-learn's message), reading X as cheaply as possible and
        keeping nothing (this runs before the charge).

        For small supports: the rows equal to each allowed value are counted (one
        comparison pass per value) and must add up to n; NaN and ±inf equal no value, so
        this is also the finiteness check.
        """
        x = self._column(X)
        if self.values.size > self._EQUALITY_MAX:
            self._bincount(x)
            return
        inside = sum(self._equal_count(x, w) for w in self._values_in(x.dtype))
        if inside != x.size:
            self._refuse(x)

    @staticmethod
    def _refuse(x):
        check_finite(x)  # NaN / infinity: that message
        _DiscreteLaws._outside()

    def counts(self, X):
        """Number of rows at each allowed support value (aligned with ``values``).

        Small supports: one comparison pass per value but the last, whose count is n
        minus the others. The rows were checked by :meth:`check` before the charge; even
        if they were not, every row is counted at exactly one allowed value, so a row's
        integer stays within the computed extremes (the sensitivity holds regardless).
        """
        x = self._column(X)
        if self.values.size > self._EQUALITY_MAX:
            return self._bincount(x)[self.allowed]
        values = self._values_in(x.dtype)
        counts = [self._equal_count(x, w) for w in values[:-1]]
        return counts + [x.size - sum(counts)]

    def _bincount(self, x):
        """Rows at every table value (``bincount`` of the indices); refuses rows outside
        the support."""
        size = self.codes.size
        if x.dtype.kind == "b":
            idx = x.view(np.uint8).astype(np.intp) - self.base
            inside = True
        else:
            mn, mx = (x.min(), x.max()) if x.size else (self.base, self.base)
            inside = bool(mn >= self.base and mx < self.base + size)
            if x.dtype.kind == "f":
                inside = inside and bool(np.all(np.floor(x) == x))
            idx = (x - self.base).astype(np.intp) if inside else None
        if not inside:
            self._refuse(x)
        counts = np.bincount(idx, minlength=size)
        if counts[~self.allowed].any():
            self._refuse(x)
        return counts

    def integer_sum(self, X):
        """S = Σ_i codes[x_i] (exact Python int): Σ_v count(v)·code(v) over the allowed
        values (exact integer products)."""
        return sum(int(c) * code for c, code in zip(self.counts(X), self.value_codes,
                                                      strict=True) if c)


def integer_sum(X, laws, stat, bet, noise, table=None):
    """S = Σ_i floor(clip(t_i) / h) of the rows of ``X`` (exact Python int): by value
    counts for a table, else fused chunk by chunk (``_merge.fused_integer_sum``: one
    log-ratio per row, temporaries of a few chunks)."""
    from ._merge import fused_integer_sum

    if table is not None:
        return table.integer_sum(X)
    return fused_integer_sum(X, laws, stat, bet, noise)


def check_block(X, laws, table=None):
    """Refusal checks of one block (finite, inside the null's support): returns 0 or
    raises. Run on the workers for dask input, before the charge."""
    if table is not None:
        table.check(X)  # also refuses NaN and infinity
        return 0
    if not np.all(np.isfinite(X)):
        raise ValueError("Input X contains NaN or infinity.")
    laws.check_rows(X)
    return 0
