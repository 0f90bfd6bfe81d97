"""Dask input shared by the families: lazy checks of rows that may live on a cluster.

Only metadata is read here (dtypes, widths, row chunk sizes: public, as the row count
of a numpy array is); the families check values (finiteness, supports, labels) per
chunk on the workers, in the plan, before the budget is charged.
"""

from __future__ import annotations

import math

import numpy as np

from ._base import masked_error, non_numeric_error
from ._validation import is_dask

__all__ = ["check_n_features", "column_names", "is_dask", "refuse_non_numeric_columns",
           "with_known_chunks"]


def refuse_non_numeric_columns(X, name="X", *, numeric_categories):
    """Refuse a dataframe (pandas or dask) with a non-numeric column, by its dtypes.

    ``numeric_categories``: whether a categorical column whose categories are numbers
    counts as numeric (the e-value rows: values of a law) or not (kernel tests: scikit-
    learn's ``validate_data`` refuses categories). Arrays and series pass unchanged,
    except masked arrays (numpy's, or dask arrays of masked chunks), refused here as by
    :func:`~skdptest._base.check_input`: every later conversion would drop the mask.
    """
    if isinstance(X, np.ma.MaskedArray) or isinstance(getattr(X, "_meta", None),
                                                      np.ma.MaskedArray):
        raise masked_error(name)
    dtypes = getattr(X, "dtypes", None)
    if dtypes is None or not hasattr(dtypes, "__iter__"):
        return
    for dtype in dtypes:
        kind = getattr(getattr(dtype, "numpy_dtype", dtype), "kind", "O")
        if getattr(dtype, "name", "") == "category":
            kind = dtype.categories.dtype.kind if numeric_categories else "O"
        if kind not in "biuf":
            raise non_numeric_error(dtype, name)


def column_names(X):
    """A dataframe's column names as an object array when all are strings, else None."""
    columns = getattr(X, "columns", None)
    if columns is None:
        return None
    columns = list(columns)
    return np.asarray(columns, dtype=object) if all(isinstance(c, str) for c in columns) \
        else None


def with_known_chunks(X):
    """The dask array ``X`` with its row chunk sizes computed if unknown (the row count
    is public)."""
    if any(math.isnan(c) for c in X.chunks[0]):
        X = X.compute_chunk_sizes()
    return X


def check_n_features(est, n_features, names, reset):
    """Record ``n_features_in_`` (and ``feature_names_in_``) at ``reset``; else refuse a
    different width with scikit-learn's message."""
    if reset:
        est.n_features_in_ = int(n_features)
        if names is not None:
            est.feature_names_in_ = names
    elif n_features != est.n_features_in_:
        raise ValueError(
            f"X has {n_features} features, but {type(est).__name__} is expecting "
            f"{est.n_features_in_} features as input."
        )
