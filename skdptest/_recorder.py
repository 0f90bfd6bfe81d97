"""Recording of noise draws and noised quantities, for the grey-box privacy audit.

Every noise draw of the library goes through :mod:`skdptest._noise`; each of its draw
functions reports ``(kind, parameter, size)`` here, and a release reports the value it
is about to noise with :func:`observe`. Nothing is kept unless a recorder is active
(:func:`recording`, used by ``skdptest.audit.grey_box_audit``): when none is, a report
reads one context variable and returns, so releases cost the same and draw the same.
The recorder is context-local (:mod:`contextvars`): fits in other threads, or in other
asynchronous tasks, are not recorded by it.

An estimator declares what it noises with the hook ``_noise_plan(prep) -> NoisePlan``
(doc/contributing.md, 'Obligations of a new test'): one :class:`NoisedQuantity` per
noised value, with its sensitivity and the ε share its noise buys. The audit replays a
fit on two neighbouring data sets with identical randomness and compares the records
with the declaration.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "SCALE_KINDS",
    "NoiseDraw",
    "NoisePlan",
    "NoiseRecord",
    "NoisedQuantity",
    "max_change",
    "observe",
    "record_draw",
    "recording",
]

_ACTIVE = contextvars.ContextVar("skdptest_noise_record", default=None)

#: Draw kinds whose parameter sets the amount of noise, and the scale it gives in the
#: units of the noised quantity (a larger scale is more noise).
SCALE_KINDS = {
    "laplace": lambda scale: scale,
    "exponential": lambda mean: mean,
    "gaussian": lambda sigma: sigma,
    "discrete_laplace": lambda rate: 1.0 / rate,
}


@dataclass(frozen=True)
class NoiseDraw:
    """One call of a draw function of :mod:`skdptest._noise`.

    Attributes
    ----------
    kind : str
        ``"laplace"``, ``"exponential"``, ``"gaussian"``, ``"discrete_laplace"`` (also
        two-sided geometric), ``"poisson"``, ``"bernoulli"`` or ``"choice"``.
    param : float or tuple of float
        The law's parameter as passed (scale, mean, sigma, rate, λ, probability), or the
        selection probabilities of a ``"choice"``.
    size : int, tuple or None
        The requested shape.
    outcome : int or None
        The selected index of a ``"choice"`` (None for the other kinds).
    """

    kind: str
    param: Any
    size: Any
    outcome: Any = None

    @property
    def scale(self):
        """The noise scale in the units of the noised quantity (None for other kinds)."""
        to_scale = SCALE_KINDS.get(self.kind)
        return None if to_scale is None else float(to_scale(float(self.param)))


@dataclass(frozen=True)
class NoisedQuantity:
    """One value a release noises, as its estimator declares it (the audit hook).

    Attributes
    ----------
    label : str
        The name under which the release reports the pre-noise value
        (:func:`observe`), or a description when ``value`` is given.
    kind : str
        The draw kind of its noise (see :class:`NoiseDraw`).
    sensitivity : float
        Largest change of the value between neighbouring data sets, in the units the
        noise is added in (grid steps for integer releases).
    epsilon : float
        The ε share the noise buys.
    factor : float, default=1.0
        The noise must have scale at least ``factor * sensitivity / epsilon`` (2 for
        the noises of a permutation p-value and for the step noises of a sparse-vector
        search, whose proofs pay twice). For a ``"choice"`` (exponential mechanism)
        the check is on the selection probabilities instead: their log ratio between
        neighbours is at most ``epsilon``.
    draws : int or None, default=1
        Number of draw calls of ``kind`` that belong to this quantity, in order;
        ``None``: every remaining draw of that kind.
    value : object, default=None
        The pre-noise value, when the hook can compute it from the prepared data alone
        (without the release's randomness); ``None``: the release reports it with
        :func:`observe` under ``label``.
    unit : float, default=1.0
        What one unit of the value and of the noise is worth (the power-of-two grid of
        an integer release); the release reports the unit it used, and a release that
        counts in other units than its plan declares is flagged.
    """

    label: str
    kind: str
    sensitivity: float
    epsilon: float
    factor: float = 1.0
    draws: int | None = 1
    value: Any = None
    unit: float = 1.0

    @property
    def required_scale(self):
        """``factor * sensitivity / epsilon``: the least noise scale the claim needs."""
        return self.factor * self.sensitivity / self.epsilon

    def public(self):
        """The declaration without its value (what must not depend on the data)."""
        return (self.label, self.kind, float(self.sensitivity), float(self.epsilon),
                float(self.factor), self.draws, float(self.unit))


@dataclass(frozen=True)
class NoisePlan:
    """What one fit noises: the return value of an estimator's ``_noise_plan(prep)``.

    Attributes
    ----------
    quantities : tuple of NoisedQuantity
        In the order of their draws.
    sequential : bool, default=False
        Whether the release may stop drawing where its outcome is decided (a threshold
        search, an e-process that stops): the draws on one neighbour are then a prefix
        of those on the other, and declared quantities may go undrawn.
    """

    quantities: tuple = ()
    sequential: bool = False


@dataclass
class NoiseRecord:
    """What one fit drew (``draws``, in order) and observed (label -> list of
    ``(value, unit)``)."""

    draws: list = field(default_factory=list)
    observations: dict = field(default_factory=dict)


def _freeze(value):
    if value is None or isinstance(value, (int, float, str)):
        return value
    arr = np.asarray(value)
    if arr.ndim == 0:
        return arr.item()
    return tuple(arr.ravel().tolist())


def record_draw(kind, param, size=None, outcome=None):
    """Report one draw to the active recorder (no-op when none is active)."""
    record = _ACTIVE.get()
    if record is not None:
        record.draws.append(NoiseDraw(kind, _freeze(param), _freeze(size), outcome))


def observe(label, value, unit=1.0):
    """Report the value a release is about to noise (no-op when no recorder is active).

    Parameters
    ----------
    label : str
        The label of the :class:`NoisedQuantity` that declares it.
    value : int, float or array-like
        The pre-noise value (copied).
    unit : float, default=1.0
        What one unit of the value (and of its noise) is worth: the grid step of an
        integer release.
    """
    record = _ACTIVE.get()
    if record is not None:
        arr = np.array(value, dtype=object if isinstance(value, int) else None, copy=True)
        record.observations.setdefault(label, []).append((arr, float(unit)))


@contextlib.contextmanager
def recording():
    """Record the draws and observations of the code run inside (this context only).

    Yields
    ------
    NoiseRecord
        Filled as the code runs.

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest import _noise
    >>> with recording() as rec:
    ...     _ = _noise.laplace(np.random.default_rng(0), 2.0, size=3)
    >>> rec.draws[0].kind, rec.draws[0].scale, rec.draws[0].size
    ('laplace', 2.0, 3)
    """
    record = NoiseRecord()
    token = _ACTIVE.set(record)
    try:
        yield record
    finally:
        _ACTIVE.reset(token)


def max_change(value0, value1):
    """max |value0 − value1| elementwise (exact for Python integers); equal entries,
    infinite ones included, count 0. ``nan`` when the shapes differ."""
    a, b = np.asarray(value0), np.asarray(value1)
    if a.shape != b.shape:
        return math.nan
    if a.dtype == object or b.dtype == object:  # Python integers: exact
        diffs = [abs(int(x) - int(y)) for x, y in zip(a.ravel(), b.ravel(), strict=True)]
        return float(max(diffs, default=0))
    a, b = a.astype(float), b.astype(float)
    with np.errstate(invalid="ignore"):
        d = np.where(a == b, 0.0, np.abs(a - b))
    return float(np.max(d, initial=0.0))
