"""Pairwise distances for the kernel tiles: scikit-learn's values without its checks.

scikit-learn validates both arrays on every call of ``euclidean_distances`` or
``manhattan_distances`` (on a small tile, more work than the distances themselves),
and the blocked kernels call them once per tile. On finite, non-empty 2-D
float64 ndarrays these functions run scikit-learn's own float64 operations directly (bit
for bit its values: the releases do not change); any other input goes through
scikit-learn (its conversions, its refusals).
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.distance import cdist
from sklearn.metrics.pairwise import euclidean_distances, manhattan_distances

__all__ = ["euclidean", "l1_distances", "squared_euclidean"]


def _plain_pair(X, Y):
    """Whether ``X`` and ``Y`` (or None) are finite 2-D float64 ndarrays of equal width:
    the inputs scikit-learn's pairwise checks pass through unchanged."""
    arrays = (X,) if Y is None or Y is X else (X, Y)
    return (all(type(A) is np.ndarray and A.dtype == np.float64 and A.ndim == 2
                and A.size > 0 for A in arrays)
            and arrays[-1].shape[1] == X.shape[1]
            and all(np.isfinite(A).all() for A in arrays))


def squared_euclidean(X, Y=None):
    """``euclidean_distances(X, Y, squared=True)`` bit for bit, without its checks.

    Finite 2-D float64 arrays take scikit-learn's float64 expansion directly (the same operations
    in the same order: ``-2 X Y^T + ||x||^2 + ||y||^2``, clipped at 0, a zero diagonal
    when ``Y`` is ``X``); anything else goes through scikit-learn.
    """
    if not _plain_pair(X, Y):
        return euclidean_distances(X, Y, squared=True)
    Yv = X if Y is None else Y
    XX = np.einsum("ij,ij->i", X, X)[:, None]
    YY = XX.T if Yv is X else np.einsum("ij,ij->i", Yv, Yv)[None, :]
    D = -2 * (X @ Yv.T)
    D += XX
    D += YY
    np.maximum(D, 0.0, out=D)
    if Yv is X:
        np.fill_diagonal(D, 0.0)
    return D


def euclidean(X, Y=None):
    """``euclidean_distances(X, Y)`` bit for bit (the square root, in place, of
    :func:`squared_euclidean`)."""
    if not _plain_pair(X, Y):
        return euclidean_distances(X, Y)
    D = squared_euclidean(X, Y)
    return np.sqrt(D, out=D)


def l1_distances(X, Y=None):
    """``manhattan_distances(X, Y)`` bit for bit (scipy's ``cdist``), without its checks
    on finite 2-D float64 arrays (see :func:`squared_euclidean`)."""
    if not _plain_pair(X, Y):
        return manhattan_distances(X, Y)
    return cdist(X, X if Y is None else Y, "cityblock")
