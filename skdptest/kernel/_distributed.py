"""Dask input for the random-feature kernel tests (``method="features"``).

What runs where (doc/kernel_tests.md, "Data on a dask cluster"):

- **Validation.** On the client, lazily: the dtype, the width and the row chunk sizes
  (public metadata; unknown sizes are computed, as the row count of a numpy array is
  known). On the workers, in the plan, before the budget is charged: NaN and infinity
  in ``X`` and ``y`` (scikit-learn's messages) and, for dpMMD, each chunk's distinct
  labels and their counts. Only a refusal or those counts come back: the classes and
  group sizes are public in the neighbouring relation (replace one row within its
  group).
- **dpMMD.** The quantised feature rows (a function of each row alone and of the public
  frequencies drawn on the client) are computed on the workers and persisted there; they
  never leave them. Each worker returns its chunk's exact integer group sums, then, for
  every chunk of relabelling masks drawn on the client (the same draws as the numpy
  path), ``masks[:, chunk] @ F_chunk``: ``(rows, M)`` exact integer sums (M features per
  row). The masks' column slices travel packed (1 bit per row). The client adds the per-
  chunk sums (integers below ``2^53``: exact in any order) and finishes with the numpy
  path's code (:func:`~._features.mmd_statistics_from_sums`): the release is the numpy
  input's, bit for bit. With three or more groups the relabellings shuffle the observed
  labels (Fisher-Yates over all N positions, as the numpy path draws them), so the group
  codes (one byte per row) are gathered to the client; X and its features still stay on
  the workers.
- **dpHSIC.** A permutation pairs the x-feature row of one individual with the
  y-feature row of another, anywhere in the data: the cross-covariance of a permuted
  pairing is not a sum of per-chunk terms. The quantised feature rows (never the raw
  rows) are therefore computed on the workers and gathered to the client, ``4 n (Mx +
  My)`` bytes of float32 (M features per row and side), and the numpy permutation loop
  runs there.

The exact kernel paths and the private median bandwidth (all pairs of rows) refuse
dask input before the charge.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.utils import assert_all_finite

from .._base import non_numeric_error
from .._dask import (
    check_n_features,
    column_names,
    is_dask,
    refuse_non_numeric_columns,
    with_known_chunks,
)
from .._params import InvalidParameterError
from .._warnings import quiet_numerics
from ._features import (
    BLOCK_ROWS,
    MAX_KEY_BYTES,
    MAX_MASK_BYTES,
    _chunk_columns,
    _masked_sums,
    feature_shape,
    group_feature_sums,
    make_features,
    mmd_statistics_from_sums,
)

__all__ = [
    "DaskLabels",
    "chunk_group_sums",
    "chunk_masked_sums",
    "dask_feature_mmd_statistics",
    "dask_feature_rows",
    "dask_labels",
    "dask_mmd_memory_bytes",
    "is_dask",
    "refuse_dask",
    "stack_dask_samples",
    "validate_dask_input",
]


@dataclass(frozen=True)
class DaskLabels:
    """The group labels of dask input: public classes and sizes, per-row labels lazy.

    Attributes
    ----------
    y : dask.array.Array of shape (N,)
        The labels, chunked like the rows of ``X`` (they stay on the workers).
    classes : ndarray of shape (G,)
        Sorted distinct labels (public).
    sizes : ndarray of shape (G,)
        Group sizes (public).
    """

    y: Any
    classes: Any
    sizes: Any

    @property
    def size(self):
        return int(self.sizes.sum())


def refuse_dask(estimator, method, kernel_params=()):
    """Refuse dask input where the release needs all rows in memory (before the charge).

    Raises
    ------
    TypeError
        For ``method="exact"`` (the exact Gram matrix pairs every two rows).
    InvalidParameterError
        For a private median bandwidth (``kernel_params={"gamma": "median"}``).
    """
    if method != "features":
        raise TypeError(
            f"{estimator}(method={method!r}) does not take dask input: the exact kernel "
            "test pairs every two rows, in memory. Use method='features' (its feature "
            "sums are computed on the workers), or compute X to a numpy array first.")
    for name, value in kernel_params:
        if isinstance(value, dict) and value.get("gamma") == "median":
            raise InvalidParameterError(
                f"{name}={{'gamma': 'median'}} (the private median bandwidth, over all "
                "pairs of rows) does not take dask input; give a numeric gamma, or leave "
                "it out (1 / n_features).")


def _as_dask_array(X, name):
    """A dask array with known row chunk sizes, and the column names of a dataframe."""
    import dask.array as da

    names = None
    if hasattr(X, "to_dask_array"):  # dask dataframe or series: lengths are public
        if getattr(X, "ndim", 1) == 2:  # categories are labels, not numbers (as
            # validate_data refuses them)
            refuse_non_numeric_columns(X, name, numeric_categories=False)
            names = column_names(X)
        else:  # a series (labels): categories as their values, extension dtypes as numpy
            if getattr(X.dtype, "name", "") == "category":
                X = X.astype(X.dtype.categories.dtype)
            if not isinstance(X.dtype, np.dtype):  # e.g. pandas strings: object, as numpy
                X = X.astype(getattr(X.dtype, "numpy_dtype", None) or object)
        X = X.to_dask_array(lengths=True)
        if names is not None and X.dtype.kind == "O":  # mixed numeric columns
            X = X.astype(np.float64)
    elif not is_dask(X):
        X = da.from_array(np.asarray(X), chunks=-1)  # rechunked to the rows of X later
    return with_known_chunks(X), names


def validate_dask_input(est, X, y, reset, *, labels):
    """Lazily validated dask ``X`` (2-D, numeric) and ``y`` aligned with its row chunks.

    Nothing is computed but chunk sizes: finiteness and the labels' counts are checked
    on the workers in the plan (:func:`dask_labels`, :func:`check_finite`).

    Parameters
    ----------
    est : estimator
        Receives ``n_features_in_`` (and ``feature_names_in_`` for a dataframe with
        string column names) when ``reset``; checked against them otherwise.
    X : dask array or dataframe of shape (n_samples, n_features)
    y : array-like or dask collection of shape (n_samples,) (or (n_samples, k) with
        ``labels=False``)
    reset : bool
    labels : bool
        ``True``: ``y`` holds group labels (any dtype), returned 1-D; ``False``: a
        numeric paired variable, returned 2-D.

    Returns
    -------
    X : dask.array.Array of shape (n_samples, n_features), one column chunk
    y : dask.array.Array chunked like the rows of ``X``
    """
    X, names = _as_dask_array(X, "X")
    if X.ndim != 2:
        raise ValueError(
            f"Expected 2D array, got a {X.ndim}-D dask array instead (X must be of shape "
            "(n_samples, n_features)).")
    if X.dtype.kind not in "biuf":
        raise non_numeric_error(X.dtype, "X")
    n, d = X.shape
    if n < 1 or d < 1:
        raise ValueError(f"Found array with {n} sample(s) and {d} feature(s) while a "
                         "minimum of 1 is required.")
    if y is None:
        raise ValueError(f"{type(est).__name__} requires y to be passed, but the target y "
                         "is None.")
    y, _ = _as_dask_array(y, "y")
    if labels and y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if not labels:
        if y.ndim == 1:
            y = y[:, None]
        if y.dtype.kind not in "biuf":
            raise non_numeric_error(y.dtype, "y")
    if y.ndim != (1 if labels else 2):
        raise ValueError(f"y must be of shape (n_samples,){'' if labels else ' or (n_samples, k)'}"
                         f"; got a dask array of shape {y.shape}.")
    if y.shape[0] != n:
        raise ValueError(f"Found input variables with inconsistent numbers of samples: "
                         f"[{n}, {y.shape[0]}]")
    check_n_features(est, d, names, reset)
    X = X.rechunk({1: -1})
    y = y.rechunk((X.chunks[0],) + ((-1,) if y.ndim == 2 else ()))
    return X, y


def _check_chunk(X, y, count):
    # runs on a worker, before the charge: returns a refusal or the labels' counts only
    assert_all_finite(X, input_name="X")
    assert_all_finite(y, input_name="y")
    return np.unique(y, return_counts=True) if count else None


def _check_chunks(X, y, count):
    import dask

    tasks = [dask.delayed(_check_chunk, pure=False)(xb, yb, count)
             for xb, yb in zip(X.to_delayed().ravel(), y.to_delayed().ravel(), strict=True)]
    return dask.compute(*tasks)


def check_finite(X, y):
    """Refuse NaN or infinity in dask ``X`` or ``y`` (checked per chunk on the workers)."""
    _check_chunks(X, y, False)


def dask_labels(X, y):
    """Public classes and group sizes of dask labels ``y`` (after the finiteness checks).

    Each worker returns its chunk's distinct labels and their counts (``np.unique``);
    the client combines them. The per-row labels stay on the workers.

    Returns
    -------
    labels : DaskLabels
    """
    parts = _check_chunks(X, y, True)
    classes = np.unique(np.concatenate([u for u, _ in parts]))
    sizes = np.zeros(classes.size, dtype=np.int64)
    for u, c in parts:
        np.add.at(sizes, np.searchsorted(classes, u), c)
    return DaskLabels(y=y, classes=classes, sizes=sizes)


def _worker_features(X, omega, kind):
    # On a worker after the charge: a distributed worker does not run in the client's
    # context, so numpy's quiet error state is entered here (cos(inf) or an overflowed
    # angle must not log a warning in the worker's output).
    with quiet_numerics():
        return make_features(X, omega, kind)


def _features(X, omega, kind="fourier"):
    n_dims = feature_shape(omega.shape[1], kind)[0]
    return X.map_blocks(_worker_features, omega, kind, dtype=np.float32,
                        chunks=(X.chunks[0], (n_dims,)))


def dask_feature_rows(X, omega, kind="fourier"):
    """The quantised feature rows of dask ``X``, computed on the workers, gathered.

    Only the float32 feature rows come back (``4 n M`` bytes, M features per row),
    never the raw rows; each row is a function of that row and of the public ``omega``
    alone, so the result is :func:`~._features.make_features` of the numpy rows, bit
    for bit.
    """
    return np.asarray(_features(X, omega, kind).compute())


def chunk_group_sums(F, y, classes):
    """Exact feature sums of each group within one chunk: ``(G, 2 D)`` (on a worker)."""
    return group_feature_sums(F, np.searchsorted(classes, y), classes.size)


def _chunk_codes(y, classes):
    dtype = np.int8 if classes.size < 128 else np.int32
    return np.searchsorted(classes, y).astype(dtype)


def chunk_masked_sums(F, packed, n_rows):
    """``masks @ F`` of one chunk (on a worker): ``(masks, 2 D)`` exact integer sums.

    ``packed`` holds the masks' columns for this chunk's ``n_rows`` rows, 8 per byte
    (``np.packbits`` along the rows); only the sums come back, never a row of ``F``.
    """
    masks = np.unpackbits(packed, axis=1, count=n_rows).view(bool)
    return _masked_sums(F, masks, BLOCK_ROWS)


def dask_feature_mmd_statistics(X, labels, omega, n_permutations, rng, *,
                                max_mask_bytes=None, kind="fourier"):
    """The B + 1 feature MMD statistics of dask ``X``, as the numpy path computes them.

    The feature rows are computed on the workers and persisted there for the whole
    release; the relabellings are drawn on the client from ``rng`` exactly as
    :func:`~._features.feature_mmd_statistics` draws them; the workers return exact
    integer sums only (see the module notes).

    Parameters
    ----------
    X : dask.array.Array of shape (N, d), one column chunk
    labels : DaskLabels
    omega : ndarray of shape (d, D)
        The public frequencies.
    n_permutations : int
    rng : numpy.random.Generator
    max_mask_bytes : int, optional

    Returns
    -------
    statistics : ndarray of shape (n_permutations + 1,)
    """
    import dask

    F = _features(X, omega, kind).persist()  # on the workers, once
    blocks = F.to_delayed().ravel()
    y_blocks = labels.y.to_delayed().ravel()
    edges = np.cumsum((0,) + X.chunks[0])
    classes = labels.classes
    group_sums = _tree_sum([dask.delayed(chunk_group_sums, pure=False)(f, yb, classes)
                            for f, yb in zip(blocks, y_blocks, strict=True)])
    codes = None
    if classes.size > 2:  # the relabellings shuffle the observed codes (see the notes)
        codes = labels.y.map_blocks(_chunk_codes, classes,
                                    dtype=np.int8 if classes.size < 128 else np.int32)
        codes = np.asarray(codes.compute())

    def masked_sums(masks):
        tasks = [dask.delayed(chunk_masked_sums, pure=False)(
                    f, np.packbits(masks[:, a:b], axis=1), b - a)
                 for f, a, b in zip(blocks, edges[:-1], edges[1:], strict=True)]
        return _tree_sum(tasks)

    # the persisted feature rows are released on the workers when F goes out of scope
    return mmd_statistics_from_sums(masked_sums, group_sums, labels.sizes, n_permutations,
                                    rng, codes=codes, max_mask_bytes=max_mask_bytes)


def _exact_sum(parts):
    # integer-valued float64 arrays whose totals stay below 2^53: exact in any order
    out = np.zeros_like(parts[0])
    for part in parts:
        out += part
    return out


def _tree_sum(tasks, fan_in=8):
    """The exact sum of the delayed per-chunk arrays, added on the workers in a tree
    (``fan_in`` at a time), so that one array comes back to the client, not one per
    chunk; integer sums, so the order does not change a bit."""
    import dask

    while len(tasks) > 1:
        tasks = [dask.delayed(_exact_sum, pure=False)(tasks[i:i + fan_in])
                 for i in range(0, len(tasks), fan_in)]
    return np.asarray(dask.compute(tasks[0])[0])


def dask_mmd_memory_bytes(n, n_chunks, n_dims, n_groups, n_permutations,
                          max_mask_bytes=None):
    """Estimated peak memory, in bytes, of a dask feature dpMMD release on the client.

    One chunk of relabelling masks as the numpy path draws it (two groups: bool masks
    and at most ``MAX_KEY_BYTES`` of keys; more groups: int8 labels and bool masks, plus
    the gathered codes, up to 4 bytes a row), its packed column slices (1 bit per
    entry, plus the graph's copies: counted twice), the sums that come back (one
    ``(rows, n_dims)`` float64 array: the per-chunk sums are added on the workers) and
    their few temporaries, and the B + 1 statistics with their noise. ``n_dims`` is the
    number of features per row (``2 D`` fourier, ``D (2 D + 1)`` squared); the feature
    rows stay on the workers (each holds ``4 n_dims`` bytes per row of its chunks).
    """
    if max_mask_bytes is None:
        max_mask_bytes = MAX_MASK_BYTES
    n_masks = 1 if n_groups == 2 else n_groups - 1
    per = min(_chunk_columns(n, n_masks, max_mask_bytes), n_permutations + 1)
    entries = n * n_masks * per
    if n_groups == 2:
        masks = entries + min(MAX_KEY_BYTES, 2 * entries)
    else:
        masks = 3 * entries + 4 * n
    packed = 2 * (entries // 8 + n_chunks * n_masks * per)
    sums = 8 * n_dims * (n_masks * per + n_groups) * 6
    return masks + packed + sums + 64 * (n_permutations + 1)


def stack_dask_samples(samples):
    """``X, y`` of :meth:`DPMMDTest.test_samples` for dask samples, built lazily.

    The samples are concatenated (dataframes as arrays) and labelled ``0, 1, ...`` in
    order; ``y`` is chunked like the rows of ``X``. Nothing is computed but chunk sizes.
    """
    import dask.array as da

    arrays = []
    for i, sample in enumerate(samples):
        arr, _ = _as_dask_array(sample, "X")
        if arr.ndim != 2:
            raise ValueError(
                f"test_samples takes 2-D samples of shape (n_i, n_features); sample {i} "
                f"has shape {arr.shape} (reshape a single feature with x.reshape(-1, 1)).")
        arrays.append(arr)
    widths = [a.shape[1] for a in arrays]
    if len(set(widths)) != 1:
        raise ValueError(f"test_samples needs the same number of features in every "
                         f"sample; got {widths}.")
    X = da.concatenate(arrays, axis=0)
    y = np.repeat(np.arange(len(arrays)), [a.shape[0] for a in arrays])
    return X, da.from_array(y, chunks=(X.chunks[0],))
