"""The contract in skdptest/_base.py: seeding, frozen streams, what pickles carry."""

import copy
import pickle

import numpy as np
import pytest
from scipy import stats

from skdptest import InvalidParameterError, PrivacyBudget, PrivateEProcess, PrivateEValueTest
from skdptest._validation import check_generator


def _stream(**kw):
    return PrivateEProcess(stats.bernoulli(0.3), stats.bernoulli(0.6), schedule=[10],
                           alpha=1e-12, **kw)


def test_random_state_none_ignores_numpy_global_state():
    # Replaying np.random.seed must not replay the noise of random_state=None.
    draws = []
    for _ in range(2):
        np.random.seed(0)  # noqa: NPY002 - the global state is what is tested
        draws.append(check_generator(None).integers(0, 2**63, size=4))
    assert not np.array_equal(draws[0], draws[1])


def test_random_state_none_releases_differ_after_the_same_global_seed():
    X = np.random.default_rng(0).normal(size=(200, 1))
    releases = set()
    for _ in range(3):
        np.random.seed(0)  # noqa: NPY002 - the global state is what is tested
        releases.add(PrivateEValueTest().fit(X).result_.log_e_value)
    assert len(releases) == 3


def test_int_seed_is_reproducible_and_score_uses_a_separate_stream():
    X = np.random.default_rng(0).normal(size=(200, 1))
    a, b = PrivateEValueTest(random_state=3).fit(X), PrivateEValueTest(random_state=3).fit(X)
    assert a.result_.log_e_value == b.result_.log_e_value
    assert a.score(X) != a.result_.log_e_value  # the score draws its own noise


@pytest.mark.parametrize("change", [dict(epsilon=100.0), dict(alpha=0.5),
                                    dict(schedule=[1]), dict(random_state=5)])
def test_changing_a_parameter_mid_stream_raises(change):
    budget = PrivacyBudget(1000.0)
    proc = _stream(budget=budget, random_state=0).partial_fit(np.zeros((15, 1)))
    before = proc.result_
    proc.set_params(**change)
    with pytest.raises(InvalidParameterError, match="changed while a stream is running"):
        proc.partial_fit(np.zeros((15, 1)))
    assert proc.result_ is before and len(budget) == 1
    proc.fit(np.zeros((15, 1)))  # a new stream, charged again, with the new value
    assert len(budget) == 2


def test_budget_may_change_mid_stream_without_effect_on_the_noise():
    proc = _stream(random_state=0).partial_fit(np.zeros((15, 1)))
    proc.set_params(budget=PrivacyBudget(1.0)).partial_fit(np.zeros((15, 1)))
    assert proc.result_.n_samples == 30


@pytest.mark.parametrize("copier", [lambda e: pickle.loads(pickle.dumps(e)), copy.deepcopy],
                         ids=["pickle", "deepcopy"])
def test_a_copy_never_carries_the_running_stream(copier):
    proc = _stream(random_state=0).partial_fit(np.zeros((15, 1)))  # 5 rows pending
    twin = copier(proc)
    assert "_stream" not in vars(twin) and "_stream" in vars(proc)
    assert twin.result_ == proc.result_
    with pytest.raises(RuntimeError, match="copied or unpickled while its stream"):
        twin.partial_fit(np.zeros((15, 1)))
    twin.fit(np.zeros((15, 1)))  # a new stream is fine
    proc.partial_fit(np.zeros((15, 1)))  # the original goes on
    assert proc.result_.n_samples == 30


def test_stream_state_holds_no_generator_outside_the_live_stream():
    proc = _stream(random_state=0).partial_fit(np.zeros((15, 1)))
    state = pickle.loads(pickle.dumps(proc)).__dict__
    assert not any(isinstance(v, np.random.Generator) for v in state.values())
    assert not any(isinstance(v, np.ndarray) and v.size == 5 for v in state.values())
