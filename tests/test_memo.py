"""skdptest._memo: one search's function values, computed once."""

import math

from skdptest._memo import remember


def test_remember_keeps_values_apart_by_exact_float():
    calls = []
    f = remember(lambda x: calls.append(x) or math.copysign(1.0, x) * (x + 1.0))
    assert [f(0.0), f(-0.0), f(0.0), f(2.5), f(2.5)] == [1.0, -1.0, 1.0, 3.5, 3.5]
    assert calls == [0.0, -0.0, 2.5] and math.copysign(1.0, calls[1]) == -1.0
