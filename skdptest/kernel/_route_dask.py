"""The random-features routes on dask input (plan, statistics): :mod:`._route_features`
with the feature rows made on the workers.

dpMMD: only exact per-chunk sums come back (:func:`._distributed.dask_feature_mmd_statistics`;
the client holds masks, packed slices and the returned sums). dpHSIC: a permutation
pairs rows of different chunks, so no per-chunk sums exist: the quantised feature rows
(never the raw rows) are gathered, ``4 n (Mx + My)`` bytes.
"""

from __future__ import annotations

from ._distributed import (
    check_finite,
    dask_feature_mmd_statistics,
    dask_feature_rows,
    dask_mmd_memory_bytes,
)
from ._route_features import HSICFeaturesRoute, MMDFeaturesRoute

__all__ = ["HSICDaskFeaturesRoute", "MMDDaskFeaturesRoute"]


class MMDDaskFeaturesRoute(MMDFeaturesRoute):
    """dpMMD features on a dask array: sums on the workers."""

    name = "dask features"

    def memory(self, params, X, n, n_dims, n_groups):
        # the client's share: masks, packed slices, returned sums
        return dask_mmd_memory_bytes(n, len(X.chunks[0]), n_dims, n_groups,
                                     params["n_permutations"])

    def feature_statistics(self, plan, X, omega, rng):
        return dask_feature_mmd_statistics(X, plan.codes, omega, plan.n_permutations, rng,
                                           kind=plan.features[3])


class HSICDaskFeaturesRoute(HSICFeaturesRoute):
    """dpHSIC features on dask input: the feature rows gathered to the client."""

    name = "dask features"

    def check_input(self, X, y):
        check_finite(X, y)  # NaN / infinity refused on the workers, before the charge

    def feature_rows(self, X, omega, kind):
        return dask_feature_rows(X, omega, kind)
