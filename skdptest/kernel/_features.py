"""Random Fourier feature statistics for dpMMD and dpHSIC (``method="features"``).

The names of the feature routes, in three modules: the feature maps and their
certified radius (:mod:`._feature_map`, whose notes give the float-safety and
the diameter arguments), the relabelling masks and their exact sums
(:mod:`._feature_masks`) and the statistics, rounding bounds and memory plans
(:mod:`._feature_stats`). Every name stays importable from here.
"""

from __future__ import annotations

from ._feature_map import (  # noqa: F401 - re-exported
    _COARSE_BITS,
    _FINE_RADIUS,
    _QBITS,
    _RADIUS2_INT,
    _SQUARED_BLOCK_ELEMENTS,
    _U,
    BLOCK_ROWS,
    FEATURE_KERNELS,
    FEATURE_MAPS,
    FEATURE_RADIUS,
    MAX_COMPONENTS,
    MAX_EXACT_ROWS,
    MAX_KEY_BYTES,
    MAX_MASK_BYTES,
    _gamma,
    _shrink_rows,
    check_feature_kernel,
    draw_frequencies,
    feature_map,
    feature_shape,
    fourier_bits,
    make_features,
    max_exact_rows,
    spectral_gamma,
    squared_feature_map,
)
from ._feature_masks import (  # noqa: F401 - re-exported
    _EMPTY,
    _GATHER_ROWS,
    _LOCATE_BYTES,
    _POPCOUNT,
    _SELECT,
    _SPLIT_ROWS,
    KEY_BLOCK,
    SubsetDraw,
    _chunk_columns,
    _join,
    _masked_sums,
    _popcount_rows,
    _popcount_words,
    _split,
    subset_masks,
    subset_sums,
)
from ._feature_stats import (  # noqa: F401 - re-exported
    _planned_flips,
    _squared_block_bytes,
    feature_hsic_abs_error,
    feature_hsic_memory_bytes,
    feature_hsic_statistics,
    feature_mmd_abs_error,
    feature_mmd_memory_bytes,
    feature_mmd_statistics,
    group_feature_sums,
    mmd_statistics_from_sums,
)

__all__ = [
    "FEATURE_KERNELS",
    "FEATURE_RADIUS",
    "MAX_COMPONENTS",
    "check_feature_kernel",
    "FEATURE_MAPS",
    "draw_frequencies",
    "feature_hsic_abs_error",
    "feature_hsic_memory_bytes",
    "feature_hsic_statistics",
    "feature_map",
    "feature_shape",
    "fourier_bits",
    "make_features",
    "max_exact_rows",
    "spectral_gamma",
    "squared_feature_map",
    "feature_mmd_abs_error",
    "feature_mmd_memory_bytes",
    "feature_mmd_statistics",
    "group_feature_sums",
    "mmd_statistics_from_sums",
    "SubsetDraw",
    "subset_masks",
    "subset_sums",
]
