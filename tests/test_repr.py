"""Reprs a user meets: concise, reproducible, no temporary paths or object addresses."""

import os
import pickle
import re
import tempfile

from scipy import stats

from skdptest import DPMMDTest, PrivacyBudget, PrivateEProcess, PrivateEValueTest


def test_temporary_budget_repr_is_concise():
    budget = PrivacyBudget(epsilon=1.0)
    assert repr(budget) == "PrivacyBudget(epsilon=1.0, delta=0.0, spent=(0.0, 0.0))"
    budget.spend(0.5, label="first")
    assert repr(budget) == "PrivacyBudget(epsilon=1.0, delta=0.0, spent=(0.5, 0.0))"
    # The temporary file's name changes every run: it never appears.
    assert os.path.basename(budget.path) not in repr(budget)
    approx = PrivacyBudget(epsilon=2.0, delta=1e-6)
    approx.spend(0.25, 1e-7)
    assert repr(approx) == "PrivacyBudget(epsilon=2.0, delta=1e-06, spent=(0.25, 1e-07))"


def test_unpickled_temporary_budget_hides_its_path_too():
    # A joblib worker holds an unpickled handle (it does not own the file).
    budget = PrivacyBudget(epsilon=1.0)
    budget.spend(0.125)
    copy = pickle.loads(pickle.dumps(budget))
    assert copy is not budget and copy.path == budget.path
    assert repr(copy) == "PrivacyBudget(epsilon=1.0, delta=0.0, spent=(0.125, 0.0))"


def test_persistent_budget_shows_the_path_the_user_gave(tmp_path):
    path = tmp_path / "ledger.sqlite"
    budget = PrivacyBudget(epsilon=3.0, path=path)
    budget.spend(1.0)
    assert repr(budget) == (
        f"PrivacyBudget(epsilon=3.0, delta=0.0, spent=(1.0, 0.0), path={str(path)!r})"
    )
    # Reopened by path: still the user's path.
    again = PrivacyBudget(epsilon=3.0, path=str(path))
    assert repr(again) == repr(budget)
    os.remove(path)  # a vanished ledger: the repr still never raises
    assert repr(budget) == (
        f"PrivacyBudget(epsilon=3.0, delta=0.0, spent=unavailable, path={str(path)!r})"
    )


def test_user_path_in_the_temp_dir_is_shown():
    # Only the exact temporary-ledger name pattern is hidden, not any file in /tmp.
    fd, path = tempfile.mkstemp(prefix="my-ledger-", suffix=".sqlite")
    os.close(fd)
    os.remove(path)
    try:
        budget = PrivacyBudget(epsilon=1.0, path=path)
        assert repr(budget).endswith(f", path={path!r})")
    finally:
        for suffix in ("", "-journal"):
            if os.path.exists(path + suffix):
                os.remove(path + suffix)


def test_estimator_repr_shows_the_concise_budget():
    budget = PrivacyBudget(epsilon=1.0)
    text = repr(DPMMDTest(budget=budget, n_permutations=99))
    # (line breaks are the pretty printer's business; compare the words)
    assert " ".join(text.split()) == (
        "DPMMDTest(budget=PrivacyBudget(epsilon=1.0, delta=0.0, spent=(0.0, 0.0)), "
        "n_permutations=99)"
    )


def test_estimator_repr_has_no_object_address():
    text = repr(PrivateEValueTest(stats.bernoulli(0.3), stats.norm(loc=0.5)))
    assert re.search(r"0x[0-9a-f]+", text) is None, text
    assert "null=bernoulli(0.3)" in text and "alternative=norm(loc=0.5)" in text
    mvn = stats.multivariate_normal(mean=[0.0, 0.0])
    text = repr(PrivateEProcess(mvn, mvn))
    assert re.search(r"0x[0-9a-f]+", text) is None and "multivariate_normal(mean=" in text
