"""The library's warnings and the one way to raise them.

Every warning the library raises goes through :func:`warn_leak` (or
``warnings.warn`` with ``stacklevel=find_stack_level()``), so that it points at
the user's line, not at a frame inside the package, and carries no value read
from private data: a warning's text and its existence may depend on parameters
and public shapes only.

After the budget is charged the numeric work runs under :func:`quiet_numerics`
(numpy's error state set to ``"ignore"``), so that no floating-point warning
(overflow, invalid value, underflow) can tell neighbouring data sets apart.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import warnings

import numpy as np

__all__ = [
    "FixedRandomStateWarning",
    "PrivacyLeakWarning",
    "find_stack_level",
    "quiet_numerics",
    "quietly",
    "warn_fixed_random_state",
    "warn_leak",
]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class PrivacyLeakWarning(UserWarning):
    """A choice that weakens or silently changes the privacy of a release.

    Raised for fixed randomness (see :class:`FixedRandomStateWarning`), for
    parameters that a fit ignores or overrides, and for options that read
    private data without charging for it. Its text never contains a value read
    from private data.

    Examples
    --------
    >>> import warnings
    >>> import numpy as np
    >>> from skdptest import DPBinomialTest, PrivacyLeakWarning
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     _ = DPBinomialTest(random_state=0).fit(np.ones((10, 1)))
    >>> any(issubclass(w.category, PrivacyLeakWarning) for w in caught)
    True
    """


class FixedRandomStateWarning(PrivacyLeakWarning):
    """``random_state`` is not ``None``: the noise of the release is replayable.

    Whoever holds the seed, the generator or a pickle of the estimator can
    regenerate the noise and subtract it; equal seeds across fits draw equal
    (correlated) noise, so the budget's composition no longer holds.
    ``random_state`` is for tests and reproducible examples only. Silence it
    there, and only there, with the standard filter::

        warnings.filterwarnings("ignore", category=skdptest.FixedRandomStateWarning)

    Examples
    --------
    >>> import warnings
    >>> import numpy as np
    >>> from skdptest import DPBinomialTest, FixedRandomStateWarning, PrivacyLeakWarning
    >>> issubclass(FixedRandomStateWarning, PrivacyLeakWarning)
    True
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     _ = DPBinomialTest(random_state=0).fit(np.ones((10, 1)))
    >>> [w.category.__name__ for w in caught]
    ['FixedRandomStateWarning']
    """


def find_stack_level():
    """The ``stacklevel`` that points at the first frame outside the package.

    As pandas' ``find_stack_level``: walk out of skdptest's own frames so that a
    warning names the user's line (``warnings.warn`` counts this function's
    caller as level 1).
    """
    frame = inspect.currentframe()
    level = 0
    try:
        while frame is not None:
            filename = os.path.abspath(frame.f_code.co_filename)
            if not filename.startswith(_PACKAGE_DIR + os.sep):
                break
            frame = frame.f_back
            level += 1
    finally:
        del frame
    # level counts this function's own frame; warnings.warn's stacklevel=1 is its caller.
    return max(level, 1)


def warn_leak(message, category=PrivacyLeakWarning):
    """Raise a privacy warning at the user's line. ``message`` must be public."""
    warnings.warn(message, category, stacklevel=find_stack_level())


def warn_fixed_random_state(estimator_name, random_state):
    """Warn that a fixed ``random_state`` makes the release's noise replayable."""
    if random_state is None:
        return
    kind = type(random_state).__name__
    warn_leak(
        f"{estimator_name} got random_state of type {kind}: its noise is replayable. "
        "Whoever holds the seed, the generator or a pickle of the estimator can "
        "regenerate the noise and remove it, and equal seeds across fits (clone, "
        "GridSearchCV) draw correlated noise, so the budget's composition no longer "
        "holds. random_state is for tests and reproducible examples only: leave it "
        "None for real data. Silence this in tests with warnings.filterwarnings("
        "'ignore', category=skdptest.FixedRandomStateWarning).",
        FixedRandomStateWarning,
    )


@contextlib.contextmanager
def quiet_numerics():
    """numpy's floating-point error state set to ``"ignore"`` for the block.

    numpy's error state is per thread (a context variable): work handed to
    other threads enters it again (``skdptest._threads`` does so for its
    workers).
    """
    with np.errstate(all="ignore"):
        yield


def quietly(func):
    """Decorator: run ``func`` under :func:`quiet_numerics`."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with np.errstate(all="ignore"):
            return func(*args, **kwargs)

    return wrapper
