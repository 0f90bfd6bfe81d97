"""Memoised scalar functions for the planners' root searches.

``scipy.optimize.brentq(f, lo, hi)`` starts by evaluating f at both ends of the
bracket, which the bracketing loops before it have just evaluated. Remembering the
values of one search's function returns the very same floats without recomputing
them: the root and every iterate are unchanged. The memo lives as long as the one
search (a local closure over public quantities: laws, ε, targets), never longer.
"""

from __future__ import annotations

import functools
import math

__all__ = ["remember"]


def remember(f):
    """``f`` (a pure function of one float) with its values kept, keyed by the exact
    float (its sign included, so -0.0 and 0.0 are kept apart)."""
    values = {}

    @functools.wraps(f)
    def remembered(x):
        key = (x, math.copysign(1.0, x))
        if key not in values:
            values[key] = f(x)
        return values[key]

    return remembered
