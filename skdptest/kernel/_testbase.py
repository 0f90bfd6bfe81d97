"""The kernel family's shared test policy: limits, refusals before the charge, progress.

Used by the kernel tests' base (:mod:`._kernelbase`) and by every route: the common
parameter limits (``MAX_PERMUTATIONS``, ``DEFAULT_MAX_MEMORY``), the memory refusal and
the routes that fit, warnings for ignored parameters, the private median's memory and
data copy in a plan, and the running-time plan (``max_time``, automatic progress; :mod:`._timing`).
Everything here reads parameters and public sizes only.
"""

from __future__ import annotations

import functools
import inspect
from types import MappingProxyType

from .._params import InvalidParameterError
from .._warnings import warn_leak
from ._kernels import median_memory_bytes, uses_private_median
from ._timing import (
    AUTO_PROGRESS_SECONDS,
    check_max_time,
    format_seconds,
    predicted_seconds,
)

__all__ = [
    "DEFAULT_MAX_MEMORY",
    "MAX_PERMUTATIONS",
    "check_memory",
    "fitting_routes",
    "plan_time",
    "predicted_note",
    "warn_ignored",
    "with_median_and_data",
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


def plan_time(work, params, what):
    """``(progress, predicted seconds)`` of a release, before the charge.

    ``max_time`` refuses a fit predicted to take longer (:func:`._timing.check_max_time`);
    ``verbose=None`` shows the progress when the prediction exceeds
    ``AUTO_PROGRESS_SECONDS``, ``verbose=1`` always, ``verbose=0`` never. The prediction
    is made from public sizes and the machine's speed on public inputs only.
    """
    predicted = check_max_time(work, params["max_time"], what)
    verbose = params["verbose"]
    if verbose == 0:
        return False, predicted
    if verbose is None and predicted_seconds(
            work, threshold=AUTO_PROGRESS_SECONDS) <= AUTO_PROGRESS_SECONDS:
        return False, predicted
    if predicted is None:
        predicted = predicted_seconds(work)
    return True, predicted


def fitting_routes(routes, limit):
    """The refusal's hint: which of ``routes`` (``(description, planned bytes)``, from
    parameters and public sizes) fit within ``limit``."""
    fit = [f"{what} (about {need / 2**30:.3g} GiB)" for what, need in routes if need <= limit]
    if fit:
        return " Routes within max_memory: " + "; ".join(fit) + "."
    return (" No other route fits within max_memory either (" + "; ".join(
        f"{what}: about {need / 2**30:.3g} GiB" for what, need in routes) + ").")


def with_median_and_data(memory, params, n, n_features):
    """A release's plan with the private median (it runs first, its arrays freed
    before the statistics), a float64 copy of the validated data and 1 MiB of small
    arrays and Python objects (the group codes, the noise, the result)."""
    if uses_private_median(params["kernel"], params["kernel_params"]):
        memory = max(memory, median_memory_bytes(n))
    return memory + 16 * n * (n_features + 1) + 2**20


def warn_ignored(estimator, params, ignored):
    """Warn (``PrivacyLeakWarning``, at the user's line) for each parameter set away
    from its default that this fit ignores or overrides.

    ``ignored`` lists ``(name, why)``: ``why`` says what the fit does instead and how
    to avoid the warning, from parameters and public sizes only. Called in the plan,
    before the charge.
    """
    defaults = _init_defaults(type(estimator))
    for name, why in ignored:
        value, default = params[name], defaults[name]
        if value is default or (type(value) is type(default) and value == default):
            continue
        warn_leak(f"{type(estimator).__name__}: {name}={value!r} is ignored: {why}")


@functools.lru_cache(maxsize=64)
def _init_defaults(cls):
    """``{name: default}`` of ``cls.__init__`` (keyed by the class, a public value: the
    signature is read once per class, not on every fit)."""
    return MappingProxyType({name: p.default for name, p in
                             inspect.signature(cls.__init__).parameters.items()})


def cyclic_ignores_permutations(params, auto_reason, n, relabel_words):
    """The ``(name, why)`` entry of :func:`warn_ignored` for ``n_permutations`` on a
    cyclic fit: which setting chose the ``n - 1`` cyclic shifts (``auto_reason``: why
    ``cyclic='auto'`` did) and how to get ``relabel_words`` (random relabellings or
    permutations) instead. Public sizes and parameters only."""
    why = "cyclic=True" if params["cyclic"] is True else (
        f"cyclic='auto' with {auto_reason} means cyclic=True")
    return ("n_permutations", f"{why}, which uses all n - 1 = {n - 1} cyclic shifts of one "
            f"random order instead. Set cyclic=False for {relabel_words}, or leave "
            "n_permutations at its default.")


def predicted_note(plan):
    if plan.predicted_seconds is None:
        return ""
    return f", predicted about {format_seconds(plan.predicted_seconds)}"
