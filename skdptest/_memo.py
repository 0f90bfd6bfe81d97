"""Memoised scalar functions for one search (a root search, a bisection).

``scipy.optimize.brentq(f, lo, hi)`` starts by evaluating f at both ends of the
bracket, which the bracketing loops before it have just evaluated; a bisection's final
interpolation reads the ends of its last bracket again. Remembering the values of one
search's function returns the very same floats without recomputing them: the result
and every iterate are unchanged. The memo lives as long as the one search (a local
closure), never longer, so nothing computed for one fit is kept for another.
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
