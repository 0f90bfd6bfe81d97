"""Fixed randomness is a visible choice; a fit with ``random_state=None`` is not replayable.

- any ``random_state`` other than ``None`` raises :class:`~skdptest.FixedRandomStateWarning`
  (a :class:`~skdptest.PrivacyLeakWarning`) at the charge, pointing at the caller's line;
- the rewind attack of issue 18: an estimator fitted with a ``Generator`` carries it, advanced
  past the noise draws, in its pickle; rewinding it replays the release and tells two
  neighbouring data sets apart. Fitted with ``random_state=None``, the pickle, a deep copy and a
  clone of every estimator hold nothing from which its noise can be regenerated (no generator,
  bit generator, seed sequence or legacy ``RandomState``), and the same attack finds nothing.
"""

import copy
import importlib.util
import pickle
import pickletools
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from sklearn.base import clone

import skdptest
from skdptest import FixedRandomStateWarning, PrivacyLeakWarning, PrivateEValueTest

_spec = importlib.util.spec_from_file_location(
    "_skdptest_common_cases", Path(__file__).with_name("test_common.py"))
_common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_common)
CASES, ESTIMATOR_CLASSES = _common.CASES, _common.ESTIMATOR_CLASSES

_RANDOM_TYPES = (np.random.Generator, np.random.BitGenerator, np.random.SeedSequence,
                 np.random.RandomState)


def _random_objects(obj, seen=None):
    """Every generator-like object reachable from ``obj`` (attributes, containers)."""
    seen = set() if seen is None else seen
    if id(obj) in seen or isinstance(obj, (str, bytes, int, float, type(None))):
        return []
    seen.add(id(obj))
    if isinstance(obj, _RANDOM_TYPES):
        return [obj]
    found = []
    children = []
    if isinstance(obj, dict):
        children = list(obj.keys()) + list(obj.values())
    elif isinstance(obj, (list, tuple, set, frozenset)):
        children = list(obj)
    elif isinstance(obj, np.ndarray):
        children = list(obj.ravel()) if obj.dtype == object else []
    elif isinstance(obj, (stats.rv_continuous, stats.rv_discrete)) or type(
            obj).__name__.endswith("_frozen"):
        # A scipy law carries numpy's global RandomState for its own .rvs (never used for the
        # noise, which comes from a fresh OS-entropy generator): look at its parameters only.
        children = [getattr(obj, "args", ()), getattr(obj, "kwds", {})]
    else:
        if hasattr(obj, "__dict__"):
            children.append(vars(obj))
        for slot in getattr(type(obj), "__slots__", ()):
            if hasattr(obj, slot):
                children.append(getattr(obj, slot))
        if hasattr(obj, "__dataclass_fields__"):
            children += [getattr(obj, f) for f in obj.__dataclass_fields__]
    for child in children:
        found += _random_objects(child, seen)
    return found


def _pickled_globals(blob):
    """Module-qualified names that a pickle imports to rebuild its objects."""
    names, strings = [], []
    for opcode, arg, _ in pickletools.genops(blob):
        if opcode.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE"):
            strings.append(arg)
        elif opcode.name == "STACK_GLOBAL":
            names.append(".".join(strings[-2:]))
        elif opcode.name in ("GLOBAL", "INST"):
            names.append(str(arg).replace(" ", "."))
    return names


def _replay(published, make_estimator, X, state, max_rewind):
    """The attacker: rewind a copy of the carried generator k draws and refit on ``X``;
    True when some k reproduces the published release exactly."""
    for k in range(1, max_rewind + 1):
        bit = np.random.PCG64()
        bit.state = state
        bit.advance(-k)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FixedRandomStateWarning)
            replayed = make_estimator(np.random.Generator(bit)).fit(X).result_
        if replayed == published:
            return True
    return False


def _attack(fitted, make_estimator, candidates, max_rewind=16):
    """Which candidate data sets an attacker holding ``pickle(fitted)`` can confirm."""
    stolen = pickle.loads(pickle.dumps(fitted))
    generators = [g for g in _random_objects(stolen) if isinstance(g, np.random.Generator)]
    if not generators:
        return None  # nothing to rewind
    state = generators[0].bit_generator.state
    return [_replay(stolen.result_, make_estimator, X, state, max_rewind)
            for X in candidates]


def _evalue_case():
    null, alternative = stats.norm(0, 1), stats.norm(1, 1)
    rng = np.random.default_rng(3)
    X0 = rng.normal(0.5, 1.0, size=(50, 1))
    X1 = X0.copy()
    X1[0, 0] = X0[0, 0] - 3.0  # the neighbour: one row replaced

    def make(random_state):
        return PrivateEValueTest(null, alternative, epsilon=1.0, random_state=random_state)
    return make, X0, X1


def test_the_rewind_attack_replays_a_release_fitted_with_a_generator():
    # The positive control: with a Generator (even one seeded from OS entropy, which users
    # believe safe), the pickle carries it and the attacker tells the neighbours apart.
    make, X0, X1 = _evalue_case()
    wins = 0
    for _ in range(3):
        fitted = make(np.random.default_rng())
        with pytest.warns(FixedRandomStateWarning):
            fitted.fit(X0)
        assert _attack(fitted, make, [X0, X1]) == [True, False]
        wins += 1
    assert wins == 3


def test_the_rewind_attack_finds_nothing_after_a_fit_with_none():
    make, X0, X1 = _evalue_case()
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)  # None never warns
        fitted = make(None).fit(X0)
    assert _attack(fitted, make, [X0, X1]) is None


@pytest.fixture(scope="module", params=ESTIMATOR_CLASSES,
                ids=[c.__name__ for c in ESTIMATOR_CLASSES])
def fit_with_none(request):
    """``(fitted, warnings)``: each estimator fitted once with ``random_state=None``, every
    warning recorded; the two tests below only read it (copies, pickles, the record)."""
    kwargs, data = CASES[request.param.__name__]
    X, y = data()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        fitted = request.param(**kwargs).fit(X, y)
    return fitted, record


def test_nothing_replayable_is_kept_after_a_fit_with_none(fit_with_none):
    fitted, _ = fit_with_none
    cls = type(fitted)
    copies = [pickle.loads(pickle.dumps(fitted)), copy.deepcopy(fitted), clone(fitted)]
    if not isinstance(fitted, skdptest._base.BaseStreamingTest):
        copies.append(fitted)  # a live stream keeps its generator in memory, never in copies
    for copied in copies:
        assert _random_objects(copied) == []
    # The pickle rebuilds no more numpy.random objects than the unfitted estimator's (whose
    # only ones are the global RandomState inside scipy laws, if any).
    def numpy_random(estimator):
        return sorted(n for n in _pickled_globals(pickle.dumps(estimator))
                      if n.startswith("numpy.random"))
    assert numpy_random(fitted) == numpy_random(clone(fitted))
    # The same attack as above: nothing to rewind.
    assert _attack(fitted, lambda rs: cls(**CASES[cls.__name__][0], random_state=rs),
                   []) is None


def _fixed_random_state_cases():
    # Every estimator with an int seed. A Generator or a RandomState takes the same path
    # (the base class converts and warns at the charge; only _base.py reads random_state),
    # so in the default run they are checked for one estimator of each base class
    # (test_common's WITH_BUDGET), for every estimator in the slow run.
    for cls in ESTIMATOR_CLASSES:
        for kind in (0, "generator", "legacy"):
            marks = () if kind == 0 or cls.__name__ in _common.WITH_BUDGET else pytest.mark.slow
            yield pytest.param(cls, kind, marks=marks, id=f"{kind}-{cls.__name__}")


@pytest.mark.parametrize(("cls", "random_state"), list(_fixed_random_state_cases()))
def test_any_fixed_random_state_warns_at_the_callers_line(cls, random_state):
    kwargs, data = CASES[cls.__name__]
    X, y = data()
    random_state = {"generator": np.random.default_rng(),
                    "legacy": np.random.RandomState(0)}.get(random_state, random_state)
    estimator = cls(**kwargs, random_state=random_state)
    with pytest.warns(FixedRandomStateWarning, match="replayable") as record:
        estimator.fit(X, y)
    assert issubclass(FixedRandomStateWarning, PrivacyLeakWarning)
    fixed = [w for w in record if issubclass(w.category, FixedRandomStateWarning)]
    assert len(fixed) == 1  # once per charge, not once per noise draw
    assert fixed[0].filename == __file__  # the user's line, not a frame of the package
    assert "for tests and reproducible examples only" in str(fixed[0].message)


def test_random_state_none_raises_no_fixed_randomness_warning(fit_with_none):
    _, record = fit_with_none
    assert not [w for w in record if issubclass(w.category, FixedRandomStateWarning)]


def test_the_documented_switch_silences_only_fixed_randomness():
    make, X0, _ = _evalue_case()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=skdptest.FixedRandomStateWarning)
        make(0).fit(X0)
        warnings.warn("another leak", PrivacyLeakWarning, stacklevel=1)
    assert [str(w.message) for w in record] == ["another leak"]
