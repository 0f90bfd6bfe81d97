"""Temporary ledgers (``path=None``) skip fsync; persistent ledgers keep SQLite's durability.

A temporary ledger is a mkstemp file that only its creating process and that process's
children know, deleted when the creator exits: its connections run ``PRAGMA synchronous
= OFF`` and keep a truncated rollback journal (``journal_mode = TRUNCATE``). A killed
process still loses nothing (the writes are in the OS's page cache, and the journal keeps
each transaction atomic). The file stays an ordinary ledger, reopened and verified by path.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import random
import signal
import sqlite3
import time

import pytest

from skdptest import PrivacyBudget, _budget

FORK = multiprocessing.get_context("fork")


class _Watched(sqlite3.Connection):
    """A connection that records, when closed, the settings its commits ran under."""

    seen: list = []

    def close(self):
        mode = self.execute("PRAGMA journal_mode").fetchone()[0]
        sync = self.execute("PRAGMA synchronous").fetchone()[0]
        _Watched.seen.append((mode, sync))
        super().close()


@pytest.fixture
def watched(monkeypatch):
    """The (journal_mode, synchronous) of every ledger connection closed meanwhile."""
    _Watched.seen = []

    def connect(uri):
        return sqlite3.connect(
            uri, uri=True, timeout=_budget._BUSY_TIMEOUT, isolation_level=None,
            factory=_Watched,
        )

    monkeypatch.setattr(_budget, "_open_connection", connect)
    return _Watched.seen


def test_temporary_ledger_writes_without_fsync(watched):
    budget = PrivacyBudget(epsilon=1.0)
    assert watched == [("truncate", 0)]  # the creation: synchronous = OFF
    budget.spend(0.25)
    with budget.reserve(0.5):
        budget.spend(0.25)
    # spend, reserve, spend, release: every write transaction.
    assert watched[1:] == [("truncate", 0)] * 4
    watched.clear()
    assert budget.spent == (0.5, 0.0)
    assert len(budget.ledger) == 2
    # Reads write nothing: they skip the two pragmas (SQLite's defaults show).
    assert watched == [("delete", 2)] * 2


def test_persistent_ledger_keeps_full_durability(tmp_path, watched):
    path = tmp_path / "ledger.sqlite"
    budget = PrivacyBudget(epsilon=1.0, path=path)
    budget.spend(0.25)
    with budget.reserve(0.5):
        budget.spend(0.25)
    again = PrivacyBudget(epsilon=1.0, path=path)  # reopened by path: durable too
    again.spend(0.1)
    # SQLite's defaults on every connection: fsync (FULL = 2), journal deleted per commit.
    assert watched and set(watched) == {("delete", 2)}
    assert sorted(os.listdir(tmp_path)) == ["ledger.sqlite"]  # no journal left beside it


def test_default_ledger_and_pickles_keep_the_setting(tmp_path, watched):
    budget = PrivacyBudget(epsilon=1.0)
    persistent = PrivacyBudget(epsilon=1.0, path=tmp_path / "ledger.sqlite")
    # A temporary ledger's pickle (a joblib worker's copy) skips fsync as its creator
    # does; a persistent one's does not; a pickle without the key (older skdptest) is
    # durable.
    assert pickle.loads(pickle.dumps(budget))._durable is False
    assert pickle.loads(pickle.dumps(persistent))._durable is True
    state = budget.__getstate__()
    del state["durable"]
    old = PrivacyBudget.__new__(PrivacyBudget)
    old.__setstate__(state)
    assert old._durable is True
    watched.clear()
    pickle.loads(pickle.dumps(budget)).spend(0.25)
    old.spend(0.25)
    assert watched == [("truncate", 0), ("delete", 2)]
    assert len(budget) == 2


def test_temporary_ledger_file_is_an_ordinary_ledger():
    budget = PrivacyBudget(epsilon=2.0, delta=1e-6)
    for i in range(5):
        budget.spend(0.1, 1e-8 * i, label=f"release {i}", profile="laplace" if i % 2 else "pure")
    with budget.reserve(0.3):
        budget.spend(0.1)
    with open(budget.path, "rb") as file:
        header = file.read(100)
    assert header[18:20] == b"\x01\x01"  # a rollback-journal database, as before (not WAL)
    # Reopened by path (a durable handle), every entry verifies: chain, count, sums.
    reopened = PrivacyBudget(epsilon=2.0, delta=1e-6, path=budget.path)
    assert reopened.ledger == budget.ledger
    assert reopened.spent == budget.spent
    reopened.spend(0.1, label="by path")
    assert [e.label for e in budget.ledger][-1] == "by path"
    assert budget.loss_spent == reopened.loss_spent


def _spend_until_killed(budget, ack_fd, pickled):
    if pickled:
        budget = pickle.loads(budget)
    while True:
        budget.spend(0.01, label="loop")
        os.write(ack_fd, b"x")  # acknowledged: the spend returned


def test_kill_9_mid_spend_on_a_temporary_ledger_loses_nothing():
    # The children spend without fsync on the creator's handle, inherited by fork, then
    # unpickled (a joblib worker's copy); each is killed at a random moment.
    budget = PrivacyBudget(epsilon=1e6)
    assert budget._durable is False
    rng = random.Random(0)
    acked = n_kills = 0
    for pickled in (False, True):
        read_fd, write_fd = os.pipe()
        target = pickle.dumps(budget) if pickled else budget
        child = FORK.Process(target=_spend_until_killed, args=(target, write_fd, pickled))
        child.start()
        os.close(write_fd)
        time.sleep(rng.uniform(0.05, 0.15))
        os.kill(child.pid, signal.SIGKILL)
        child.join(30)
        assert child.exitcode == -signal.SIGKILL
        n_kills += 1
        while chunk := os.read(read_fd, 65536):
            acked += len(chunk)
        os.close(read_fd)
    entries = budget.ledger  # verifies the chain, the count and the exact sums
    # Every acknowledged spend is recorded; at most one more per kill (committed just
    # before the kill landed), never a half-written one.
    assert acked > 0
    assert acked <= len(entries) <= acked + n_kills
    assert all(e.epsilon == 0.01 for e in entries)
    budget.spend(0.5, label="after the kills")  # the ledger is still writable
    assert len(budget) == len(entries) + 1


def test_temporary_ledger_is_built_as_a_ledger_at_a_path(tmp_path, monkeypatch):
    # A temporary ledger starts from the image of an empty ledger (_empty_ledger_image)
    # plus its totals row; a ledger at a path runs every CREATE statement itself. With the
    # same random id, the files are equal but for the header's commit counters (bytes
    # 24-27 and 92-95: one commit more for the image).
    monkeypatch.setattr(_budget.secrets, "token_hex", lambda n: "ab" * n)
    made = PrivacyBudget(epsilon=0.5, delta=1e-9)
    built = PrivacyBudget(epsilon=0.5, delta=1e-9, path=tmp_path / "ledger.sqlite")
    assert made._ledger_id == built._ledger_id == "ab" * 16
    with open(made.path, "rb") as a, open(built.path, "rb") as b:
        made_bytes, built_bytes = a.read(), b.read()
    assert len(made_bytes) == len(built_bytes) == 4 * 4096
    differ = [i for i in range(len(made_bytes)) if made_bytes[i] != built_bytes[i]]
    assert differ and set(differ) <= set(range(24, 28)) | set(range(92, 96))
    assert made_bytes[24:28] == made_bytes[92:96]  # the header stays self-consistent
