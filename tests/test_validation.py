"""skdptest._validation.check_generator: the cached int-seed path equals the uncached one."""

import numpy as np
import pytest
from sklearn.utils import check_random_state

from skdptest._validation import _int_seed_words, check_generator


def _reference_generator(random_state, stream=0):
    """The derivation before the cache: seed a RandomState, draw four words, every call."""
    rs = check_random_state(random_state)
    words = [int(w) for w in rs.randint(0, 2**32, size=4, dtype=np.uint64)]
    return np.random.default_rng(words + [int(stream)])


def _same_generator(got, want):
    assert got.bit_generator.state == want.bit_generator.state
    assert np.array_equal(got.integers(0, 2**63, size=8), want.integers(0, 2**63, size=8))


SEEDS = [0, 1, 7, 12345, 2**31, 2**32 - 1, True, False, np.int64(5), np.int32(7),
         np.uint32(2**32 - 1), np.uint64(3), np.int8(0)]


@pytest.mark.parametrize("seed", SEEDS, ids=repr)
@pytest.mark.parametrize("stream", [0, 1])
def test_int_seeds_give_the_uncached_generator(seed, stream):
    for _ in range(2):  # the first call fills the cache, the second reads it
        _same_generator(check_generator(seed, stream), _reference_generator(seed, stream))


def test_equal_int_seeds_of_other_types_share_words():
    assert _int_seed_words(True) == _int_seed_words(1) == _int_seed_words(int(np.int64(1)))
    _same_generator(check_generator(np.int64(9)), check_generator(9))


def test_streams_differ_under_one_seed():
    assert check_generator(3, 0).integers(2**62) != check_generator(3, 1).integers(2**62)


@pytest.mark.parametrize("seed", [-1, 2**32, 2**70, np.int8(-1), np.uint64(2**64 - 1)],
                         ids=repr)
def test_refused_seeds_raise_every_time(seed):
    for _ in range(2):  # an error is never cached as a value
        with pytest.raises(ValueError, match=r"Seed must be between 0 and 2\*\*32 - 1"):
            check_generator(seed)


def test_random_state_instances_are_not_cached():
    # A RandomState is advanced by each derivation: two calls give different generators,
    # as before, and the same ones as the uncached derivation on an equal RandomState.
    rs, ref = np.random.RandomState(4), np.random.RandomState(4)
    first, second = check_generator(rs), check_generator(rs)
    _same_generator(first, _reference_generator(ref))
    _same_generator(second, _reference_generator(ref))
    assert first.bit_generator.state != second.bit_generator.state


def test_generators_pass_through_and_none_is_fresh():
    g = np.random.default_rng(0)
    assert check_generator(g) is g
    a, b = check_generator(None), check_generator(None)
    assert a.bit_generator.state != b.bit_generator.state


def test_each_call_returns_a_new_generator():
    first, second = check_generator(11), check_generator(11)
    assert first is not second
    first.random(5)  # advancing one leaves the next call's generator untouched
    _same_generator(check_generator(11), _reference_generator(11))
    _same_generator(second, _reference_generator(11))


def test_the_cache_is_bounded():
    assert _int_seed_words.cache_info().maxsize == 256
