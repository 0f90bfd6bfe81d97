"""Memoisation of public planning computations (laws, statistics, bets, null laws)."""

from __future__ import annotations

from collections import OrderedDict

_PLANS = OrderedDict()  # public planning computations, reused across fits
_PLANS_MAX = 64


def _cached(key, anchors, compute):
    """Memoise a public computation keyed on the identity of the law objects.

    ``anchors`` (the law objects) are stored with the value, so an id is never
    reused while its entry lives.
    """
    hit = _PLANS.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], anchors, strict=True)):
        _PLANS.move_to_end(key)
        return hit[1]
    value = compute()
    _PLANS[key] = (anchors, value)
    while len(_PLANS) > _PLANS_MAX:
        _PLANS.popitem(last=False)
    return value
