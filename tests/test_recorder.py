"""The noise recorder of the grey-box audit (skdptest/_recorder.py): it sees every draw
of skdptest._noise and the values the releases report, only inside ``recording()``, in
its own context, and changes no release."""

import threading

import numpy as np
import pytest

from skdptest import _noise
from skdptest._recorder import NoisedQuantity, max_change, observe, recording
from tests.test_audit import _worst_cases  # the estimators and their neighbours


def test_every_draw_function_reports_its_kind_parameter_and_size():
    rng = np.random.default_rng(0)
    with recording() as rec:
        _noise.laplace(rng, 2.0, size=3)
        _noise.exponential(rng, 1.5)
        _noise.poisson(rng, 4.0, size=(2,))
        _noise.bernoulli(rng, 0.25, 5)
        _noise.gaussian(rng, 0.5)
        k = _noise.choice_index(rng, np.array([0.2, 0.8]))
        _noise.discrete_laplace(rng, 0.5, size=4)
        _noise.two_sided_geometric(rng, 0.25)  # the same sampler: one draw, not two
        observe("count", 7)
        observe("grid values", np.array([1, 2]), unit=0.5)
    kinds = [(d.kind, d.param, d.size) for d in rec.draws]
    assert kinds == [("laplace", 2.0, 3), ("exponential", 1.5, None), ("poisson", 4.0, (2,)),
                     ("bernoulli", 0.25, 5), ("gaussian", 0.5, None),
                     ("choice", (0.2, 0.8), None), ("discrete_laplace", 0.5, 4),
                     ("discrete_laplace", 0.25, None)]
    assert rec.draws[5].outcome == k and rec.draws[5].scale is None
    assert [d.scale for d in rec.draws[6:]] == [2.0, 4.0]
    (count, unit), = rec.observations["count"]
    assert count == 7 and unit == 1.0
    assert rec.observations["grid values"][0][1] == 0.5


def test_nothing_is_recorded_outside_a_recording_and_nesting_restores():
    rng = np.random.default_rng(0)
    _noise.laplace(rng, 1.0)
    with recording() as outer:
        _noise.laplace(rng, 1.0)
        with recording() as inner:
            _noise.exponential(rng, 1.0)
        _noise.poisson(rng, 1.0)
    _noise.laplace(rng, 1.0)
    assert [d.kind for d in outer.draws] == ["laplace", "poisson"]
    assert [d.kind for d in inner.draws] == ["exponential"]


def test_recordings_are_context_local_across_threads():
    # a draw in another thread is not seen by this thread's recorder, and that
    # thread's own recording sees only its draws
    seen = {}

    def worker():
        rng = np.random.default_rng(1)
        _noise.laplace(rng, 3.0)
        with recording() as rec:
            _noise.exponential(rng, 2.0)
        seen["worker"] = [d.kind for d in rec.draws]

    with recording() as mine:
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        _noise.gaussian(np.random.default_rng(2), 1.0)
    assert [d.kind for d in mine.draws] == ["gaussian"]
    assert seen["worker"] == ["exponential"]


@pytest.mark.parametrize("name", ["PrivateEValueTest", "PrivateEProcess", "DPMMDTest",
                                  "DPHSICTest", "GeneralizedThresholdMechanism"])
def test_recording_changes_no_release(name):
    from skdptest.audit import release_view

    factory, X0, _, y0, _ = _worst_cases()[name]

    def fit(seed):
        est = factory(seed)
        return release_view(est.fit(X0) if y0 is None else est.fit(X0, y0))

    plain = [fit(seed) for seed in (3, 4)]
    with recording() as rec:
        recorded = [fit(seed) for seed in (3, 4)]
    assert recorded == plain and rec.draws  # bit for bit, and the draws were seen


def test_declared_quantity_and_max_change():
    q = NoisedQuantity("merged integer", "discrete_laplace", 1024, 0.5, factor=2.0)
    assert q.required_scale == 4096.0
    assert q.public() == ("merged integer", "discrete_laplace", 1024.0, 0.5, 2.0, 1, 1.0)
    # Python integers beyond 2**53 are compared exactly
    big = 2**60
    assert max_change(np.array(big + 1, dtype=object), np.array(big, dtype=object)) == 1.0
    assert max_change([1.0, -np.inf], [3.0, -np.inf]) == 2.0
    assert np.isnan(max_change([1.0], [1.0, 2.0]))
