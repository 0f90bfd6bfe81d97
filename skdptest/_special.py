"""Special functions on small arrays, without scipy's array-API dispatch.

`scipy.special.logsumexp` spends about 0.3 ms per call on namespace inference, promotion
and masked updates, which dominates on the short arrays the library reduces thousands of
times per fit (Tulap mixtures, lattice moment generating functions, Poisson sums).
`logsumexp` here performs scipy 1.17's float operations in the same order on plain
numpy arrays, so its results are bit-identical to scipy's (``tests/test_special.py``
compares them bit for bit and against an exact reference).
"""

import numpy as np

__all__ = ["logsumexp"]


def logsumexp(a, axis=None, b=None):
    """Compute ``log(sum(b * exp(a)))`` stably, as `scipy.special.logsumexp` does.

    Only real input and the parameters the library uses are supported; the result
    equals scipy 1.17's bit for bit, edge cases included (see Notes).

    Parameters
    ----------
    a : array_like
        Real input (integers are promoted to float64).
    axis : None or int, default=None
        Axis over which the sum is taken; None sums all elements.
    b : array_like, optional
        Real weights broadcastable against `a`; where a weight is 0 the corresponding
        element of `a` adds nothing, even if it is infinite or NaN.

    Returns
    -------
    res : numpy.float64 or ndarray
        The log of the sum; a numpy scalar when the result is 0-d. A negative sum
        gives NaN (scipy's behaviour without ``return_sign``).

    See Also
    --------
    scipy.special.logsumexp : The reference implementation.

    Notes
    -----
    The largest element (every element equal to the maximum) is separated from the
    sum: with ``m`` the summed weight of the maxima and ``s`` the shifted sum of the
    others divided by ``m``, the result is ``log1p(s) + log(m) + max``. Where this is
    not finite, the direct ``log(sum(b * exp(a)))`` is returned instead, which gives
    ``-inf`` for empty input or all ``-inf``, ``inf`` for any ``+inf`` and NaN for NaN
    input. The algorithm is that of [1]_.

    References
    ----------
    .. [1] P. Blanchard, D. J. Higham and N. J. Higham, "Accurately computing the
       log-sum-exp and softmax functions", IMA Journal of Numerical Analysis 41(4),
       2021, :doi:`10.1093/imanum/draa038`.

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest._special import logsumexp
    >>> float(logsumexp(np.arange(10.0)))
    9.45862974442671
    >>> logsumexp(np.array([[0.0, 0.0], [1.0, -np.inf]]), axis=1)
    array([0.69314718, 1.        ])
    """
    a, b = _promote(a, b)
    axis = tuple(range(a.ndim)) if axis is None else axis
    if a.size == 0:
        out = _empty_result(a, axis)
    elif b is None:
        # Without weights the stable form cannot overflow, so one error state (cheaper
        # than scipy's two) silences exactly the warnings scipy silences.
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            out = _combine(_stable(a, b, axis), _direct(a, b, axis))
    else:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            out_inf = _direct(a, b, axis)
        with np.errstate(divide="ignore", invalid="ignore"):  # s / m may overflow
            out = _combine(_stable(a, b, axis), out_inf)
    out = out.squeeze(axis=axis)
    return out[()] if out.ndim == 0 else out


def _promote(a, b):
    """Convert `a` and `b` to one floating dtype and shape, as scipy's promotion does."""
    a = np.asarray(a)
    if a.dtype.kind == "c" or (b is not None and np.asarray(b).dtype.kind == "c"):
        raise TypeError("logsumexp supports real input only.")
    if b is None:
        dtype = np.result_type(a, 1.0)
        return np.atleast_1d(np.asarray(a, dtype=dtype)), None
    b = np.asarray(b)
    dtype = np.result_type(a, b, 1.0)
    a = np.asarray(a, dtype=dtype)
    b = np.asarray(b, dtype=dtype)
    if a.shape != b.shape:
        shape = np.broadcast_shapes(a.shape, b.shape)
        a = a if a.shape == shape else np.broadcast_to(a, shape)
        b = b if b.shape == shape else np.broadcast_to(b, shape)
    return np.atleast_1d(a), np.atleast_1d(b)


def _empty_result(a, axis):
    """Return -inf with the reduced axes kept, the log of an empty sum."""
    shape = np.asarray(a.shape)
    # A list indexes several axes (scipy 1.17's tuple index fails for 2-d empty input).
    shape[list(axis) if isinstance(axis, tuple) else axis] = 1
    return np.full(tuple(shape), -np.inf, dtype=a.dtype)


def _direct(a, b, axis):
    """Return ``log(sum(b * exp(a)))`` with the reduced axes kept."""
    b_exp_a = np.exp(a) if b is None else b * np.exp(a)
    # np.add.reduce is what np.sum calls on an ndarray, without its dispatch overhead.
    return np.log(np.add.reduce(b_exp_a, axis=axis, keepdims=True))


def _combine(out, out_inf):
    """Use the direct form where the stable one is not finite (infinite or NaN input,
    all -inf, a negative weighted sum)."""
    return np.where(np.isfinite(out), out, out_inf)


def _stable(a, b, axis):
    """Return the max-separated form with the reduced axes kept (NaN for negative sums)."""
    if b is not None:
        # A zero weight removes its element, even an infinite or NaN one.
        a = np.array(a, copy=True)
        a[b == 0] = -np.inf
    a_max = np.maximum.reduce(a, axis=axis, keepdims=True)
    i_max = a == a_max
    # Every maximum is separated out of the sum and counted (or weighted) in m.
    a = np.array(a, copy=True) if b is None else a
    a[i_max] = -np.inf
    i_max_dt = i_max.astype(a.dtype)
    b_i_max = i_max_dt if b is None else b * i_max_dt
    m = np.add.reduce(b_i_max, axis=axis, dtype=a.dtype, keepdims=True)
    exp = b * np.exp(a - a_max) if b is not None else np.exp(a - a_max)
    s = np.add.reduce(exp, axis=axis, dtype=exp.dtype, keepdims=True)
    s = np.where(s == 0, s, s / m)
    sgn = np.sign(s + 1) * np.sign(m)
    # Negative weights: log1p and log need positive arguments; the sign is kept apart.
    s = np.where(s < -1, -s - 2, s)
    m = np.abs(m)
    out = np.log1p(s) + np.log(m) + a_max
    out[sgn < 0] = np.nan
    return out
