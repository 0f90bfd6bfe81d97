"""Fixtures of the e-value tests."""

from collections import OrderedDict

import pytest

from skdptest.evalue import _cache


@pytest.fixture(autouse=True)
def _private_plan_cache(request):
    """Tests that use ``monkeypatch`` (noise mutants, spies) plan with an empty, private
    plan cache, dropped afterwards: plans are keyed by the laws' values, so a mutant
    would otherwise reuse the honest plans of earlier tests (and be vacuous), and leave
    its own plans behind for later tests. Other tests share the process's cache."""
    if "monkeypatch" not in request.fixturenames:
        yield
        return
    shared = _cache._PLANS
    _cache._PLANS = OrderedDict()
    try:
        yield
    finally:
        _cache._PLANS = shared
