"""The kernel family's shared refusal policy (parameters and public sizes only).

The limits every kernel test accepts (``MAX_PERMUTATIONS``, ``DEFAULT_MAX_MEMORY``), the
memory refusal before the charge with the routes that fit, and the warning for
parameters a fit ignores. dpHSIC imports them from here (not from dpMMD's module:
no ``_hsic -> _mmd`` import); dpMMD may import them too.
"""

from __future__ import annotations

import inspect

from .._params import InvalidParameterError
from .._warnings import warn_leak

__all__ = [
    "DEFAULT_MAX_MEMORY",
    "MAX_PERMUTATIONS",
    "check_memory",
    "fitting_routes",
    "warn_ignored",
]

# Largest accepted n_permutations (public): B + 1 statistics and noise draws.
MAX_PERMUTATIONS = 10**6
# Default public limit on a release's estimated peak memory (max_memory).
DEFAULT_MAX_MEMORY = 4 * 2**30


def check_memory(needed, limit, what, hint=""):
    """Refuse (before the charge) a release whose estimated peak memory exceeds the limit."""
    if needed > limit:
        raise InvalidParameterError(
            f"{what} needs about {needed / 2**30:.3g} GiB of memory ({needed} bytes), above "
            f"max_memory={limit} bytes ({limit / 2**30:.3g} GiB).{hint} Raise max_memory if "
            "the machine has that much memory free."
        )


def fitting_routes(routes, limit):
    """The refusal's hint: which of ``routes`` (``(description, planned bytes)``, from
    parameters and public sizes) fit within ``limit``."""
    fit = [f"{what} (about {need / 2**30:.3g} GiB)" for what, need in routes if need <= limit]
    if fit:
        return " Routes within max_memory: " + "; ".join(fit) + "."
    return (" No other route fits within max_memory either (" + "; ".join(
        f"{what}: about {need / 2**30:.3g} GiB" for what, need in routes) + ").")


def warn_ignored(estimator, params, ignored):
    """Warn (``PrivacyLeakWarning``, at the user's line) for each parameter set away
    from its default that this fit ignores or overrides.

    ``ignored`` lists ``(name, why)``: ``why`` says what the fit does instead and how
    to avoid the warning, from parameters and public sizes only. Called in the plan,
    before the charge.
    """
    defaults = inspect.signature(type(estimator).__init__).parameters
    for name, why in ignored:
        value, default = params[name], defaults[name].default
        if value is default or (type(value) is type(default) and value == default):
            continue
        warn_leak(f"{type(estimator).__name__}: {name}={value!r} is ignored: {why}")
