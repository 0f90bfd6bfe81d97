"""The ledger on both backends: SQLite files and PostgreSQL servers (``path="postgresql://..."``).

The PostgreSQL tests need a server: ``SKDPTEST_TEST_POSTGRES_URL`` names a database
the tests may create schemas in (``.ci/run`` starts one). Locally they are skipped
without it; with ``CI`` or ``SKDPTEST_REQUIRE_POSTGRES=1`` set, its absence fails.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import secrets
import signal
import time
from urllib.parse import quote

import pytest

from skdptest import BudgetExceededError, PrivacyBudget, _budget
from skdptest._budget import LedgerError, LedgerNotFoundError

URL_ENV = "SKDPTEST_TEST_POSTGRES_URL"
URL = os.environ.get(URL_ENV)
REQUIRED = bool(os.environ.get("CI")) or os.environ.get("SKDPTEST_REQUIRE_POSTGRES") == "1"
needs_server = pytest.mark.skipif(
    URL is None and not REQUIRED, reason=f"{URL_ENV} is not set (no PostgreSQL server)"
)
FORK = multiprocessing.get_context("fork")


def test_server_is_available_where_required():
    # CI must run the PostgreSQL tests, never skip them.
    if not REQUIRED and URL is None:
        pytest.skip(f"{URL_ENV} is not set and neither CI nor SKDPTEST_REQUIRE_POSTGRES is")
    assert URL, f"{URL_ENV} must name a PostgreSQL database in CI"
    import psycopg

    with psycopg.connect(URL, autocommit=True) as con:
        assert con.execute("SELECT 1").fetchone() == (1,)


def _fresh_schema_url():
    """A URL whose search_path is a new, empty schema (one ledger per test)."""
    import psycopg

    schema = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(URL, autocommit=True) as con:
        con.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in URL else "?"
    return f"{URL}{sep}options={quote(f'-csearch_path={schema}')}", schema


def _sql(url, statement, params=()):
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        cur = con.execute(statement, params)
        return cur.fetchall() if cur.description else None


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=needs_server)])
def location(request, tmp_path):
    """A fresh ledger location on each backend (a file path or a URL)."""
    if request.param == "sqlite":
        yield str(tmp_path / "ledger.sqlite")
        return
    url, schema = _fresh_schema_url()
    yield url
    _sql(URL, f"DROP SCHEMA {schema} CASCADE")


def _vanish(location):
    if location.startswith("postgresql://"):
        for table in ("", "_totals", "_spends", "_reservations"):
            _sql(location, f"DROP TABLE skdptest_ledger{table}")
    else:
        os.remove(location)


# -- the same semantics on both backends -------------------------------------------------


def test_spend_refuse_and_reopen(location):
    budget = PrivacyBudget(1.0, 1e-6, path=location)
    budget.spend(0.25, label="first")
    budget.spend(0.5, 1e-7, label="second", profile="laplace")
    with pytest.raises(BudgetExceededError, match=r"asked for epsilon=0\.5, delta=0 \(third\)"):
        budget.spend(0.5, label="third")
    again = PrivacyBudget(1.0, 1e-6, path=location)
    assert [(e.label, e.epsilon, e.delta, e.profile) for e in again.ledger] == [
        ("first", 0.25, 0.0, "pure"), ("second", 0.5, 1e-7, "laplace")]
    assert again.spent == (0.75, 1e-7)
    with pytest.raises(LedgerError, match=r"holds a ledger created with epsilon=1\.0"):
        PrivacyBudget(2.0, 1e-6, path=location)
    with pytest.raises(LedgerError, match=r"created with accountant='basic'"):
        PrivacyBudget(1.0, 1e-6, path=location, accountant="zcdp")


@pytest.mark.parametrize("accountant", ["zcdp", "rdp"])
def test_accountants_agree_across_backends(location, tmp_path, accountant):
    budget = PrivacyBudget(5.0, 1e-6, path=location, accountant=accountant)
    reference = PrivacyBudget(5.0, 1e-6, path=str(tmp_path / "ref.sqlite"),
                              accountant=accountant)
    for ledger in (budget, reference):
        for eps, profile in [(0.3, "pure"), (0.4, "laplace"), (0.2, "pure")] * 3:
            ledger.spend(eps, profile=profile)
    assert (budget.rdp_order, budget.loss_limit) == (reference.rdp_order, reference.loss_limit)
    assert budget.loss_spent == reference.loss_spent
    assert budget.remaining == reference.remaining
    assert budget.report() == reference.report()
    assert [e.loss for e in budget.ledger] == [e.loss for e in reference.ledger]


def test_reservation_holds_and_stale_owner_is_freed(location):
    budget = PrivacyBudget(1.0, path=location)
    other = PrivacyBudget(1.0, path=location)
    with budget.reserve(0.6):
        with pytest.raises(BudgetExceededError, match="some of it reserved"):
            other.spend(0.5)
        budget.spend(0.5)
        assert other.reserved == (pytest.approx(0.1), 0.0)
    assert other.reserved == (0.0, 0.0)
    # A reservation whose process died (killed inside ``reserve``) is freed when needed.
    child = FORK.Process(target=_reserve_and_die, args=(location,))
    child.start()
    child.join(30)
    assert child.exitcode == -signal.SIGKILL
    assert other.reserved == (pytest.approx(0.4), 0.0)
    other.spend(0.4)
    assert other.reserved == (0.0, 0.0)
    assert len(other.ledger) == 2


def _reserve_and_die(location):
    budget = PrivacyBudget(1.0, path=location)
    with budget.reserve(0.4):
        os.kill(os.getpid(), signal.SIGKILL)


def test_vanished_ledger_is_refused(location):
    budget = PrivacyBudget(1.0, path=location)
    budget.spend(0.1)
    _vanish(location)
    with pytest.raises(LedgerNotFoundError, match="no longer exists"):
        budget.spend(0.1)
    with pytest.raises(LedgerNotFoundError, match="no longer exists"):
        _ = budget.ledger


def test_replaced_ledger_is_refused(location):
    budget = PrivacyBudget(1.0, path=location)
    budget.spend(0.9)
    _vanish(location)
    fresh = PrivacyBudget(1.0, path=location)  # a new ledger at the same place
    with pytest.raises(LedgerError, match="is not the ledger this handle was opened on"):
        budget.spend(0.9)
    assert fresh.spent == (0.0, 0.0)


def test_restored_copy_is_refused_by_a_handle_that_saw_more(tmp_path):
    path = tmp_path / "ledger.sqlite"
    budget = PrivacyBudget(1.0, path=str(path))
    budget.spend(0.3)
    backup = path.read_bytes()
    budget.spend(0.3)
    worker = pickle.loads(pickle.dumps(budget))  # carries the anchor
    path.write_bytes(backup)  # an older copy restored over the ledger
    for handle in (budget, worker):
        with pytest.raises(LedgerError, match=r"is behind what this handle already saw "
                           r"\(1 entries now, 2 seen"):
            handle.spend(0.3)
    # The documented limit: a handle opened after the restore has no anchor.
    assert PrivacyBudget(1.0, path=str(path)).spent == (0.3, 0.0)
    # Same count, other chain: a restored copy that was then spent on again.
    other = PrivacyBudget(1.0, path=str(path))
    other.spend(0.2)
    with pytest.raises(LedgerError, match="or another chain head"):
        budget.spend(0.1)


# -- PostgreSQL specifics -------------------------------------------------------------------


@needs_server
def test_foreign_or_other_version_database_is_refused():
    url, schema = _fresh_schema_url()
    try:
        PrivacyBudget(1.0, path=url)
        _sql(url, "UPDATE skdptest_ledger SET application_id = 7")
        with pytest.raises(LedgerError, match=r"not a skdptest privacy ledger \(application_id"):
            PrivacyBudget(1.0, path=url)
        _sql(url, "UPDATE skdptest_ledger SET application_id = %s, user_version = 9",
             (0x534B4450,))
        with pytest.raises(LedgerError, match="is a privacy ledger of schema version 9"):
            PrivacyBudget(1.0, path=url)
    finally:
        _sql(URL, f"DROP SCHEMA {schema} CASCADE")


@needs_server
def test_tampering_on_the_server_is_detected():
    url, schema = _fresh_schema_url()
    try:
        budget = PrivacyBudget(1.0, path=url)
        for _ in range(3):
            budget.spend(0.2)
        _sql(url, "UPDATE skdptest_ledger_spends SET epsilon = 0.1 WHERE id = 2")
        with pytest.raises(LedgerError, match="entry 2 does not match the ledger's hash chain"):
            _ = budget.ledger
        _sql(url, "UPDATE skdptest_ledger_totals SET spent_epsilon = '0'")
        with pytest.raises(LedgerError, match="totals row does not match its integrity digest"):
            budget.spend(0.1)
    finally:
        _sql(URL, f"DROP SCHEMA {schema} CASCADE")


def test_password_never_shown():
    url = "postgresql://someone:s3cr3t@/nodb?host=/nonexistent-skdptest-dir&connect_timeout=1"
    with pytest.raises(LedgerError, match="cannot create the privacy ledger") as info:
        PrivacyBudget(1.0, path=url)
    assert "s3cr3t" not in str(info.value)
    assert "someone:***@" in str(info.value)


@needs_server
def test_password_not_in_repr():
    url, schema = _fresh_schema_url()
    try:
        parts = url.split("://", 1)
        if "@" not in parts[1].split("/", 1)[0]:
            pytest.skip(f"{URL_ENV} names no user (the CI URL does)")
        user, rest = parts[1].split("@", 1)
        with_password = f"{parts[0]}://{user}:s3cr3t@{rest}"  # ignored by trust auth
        budget = PrivacyBudget(1.0, path=with_password)
        budget.spend(0.5)
        assert "s3cr3t" not in repr(budget)
        assert f"{user}:***@" in repr(budget)
        assert budget.path == with_password  # pickles reconnect with it
    finally:
        _sql(URL, f"DROP SCHEMA {schema} CASCADE")


# -- crashes and races: 0 lost, 0 overdrawn, fair -----------------------------------------


def _spend_loop(location, ack_fd, eps):
    budget = PrivacyBudget(1e6, path=location)
    while True:
        budget.spend(eps, label="loop")
        os.write(ack_fd, b"x")  # acknowledged: the spend returned


def _kill_loop(location, n_kills, rng_seed=0):
    import random

    rng = random.Random(rng_seed)
    budget = PrivacyBudget(1e6, path=location)
    acked = 0
    for _ in range(n_kills):
        read_fd, write_fd = os.pipe()
        child = FORK.Process(target=_spend_loop, args=(location, write_fd, 0.01))
        child.start()
        os.close(write_fd)
        time.sleep(rng.uniform(0.05, 0.25))
        os.kill(child.pid, signal.SIGKILL)
        child.join(30)
        while chunk := os.read(read_fd, 65536):
            acked += len(chunk)
        os.close(read_fd)
    entries = budget.ledger  # verifies the chain, the count and the exact sums
    return acked, entries


@pytest.mark.parametrize("n_kills", [pytest.param(2), pytest.param(15, marks=pytest.mark.slow)])
def test_kill_9_mid_spend_loses_nothing(location, n_kills):
    acked, entries = _kill_loop(location, n_kills)
    # Every acknowledged spend is recorded; at most one unacknowledged spend per kill
    # (committed just before the kill landed) is recorded too, never a half-written one.
    assert acked > 0
    assert acked <= len(entries) <= acked + n_kills
    assert all(e.epsilon == 0.01 for e in entries)


def _race_worker(location, queue, start_at):
    budget = PrivacyBudget(1.0, path=location)
    # Each spend's SQLite write locks, timed (this forked worker only): a spend that has to
    # wait takes two, its ticket's transaction and then its own; one that takes no ticket,
    # one. The first is the moment from which the queue orders the spend (see below).
    locks = []
    take_lock = _budget._begin_immediate

    def timed_lock(con, wait):
        taken = take_lock(con, wait)
        if taken:
            locks.append(time.time())
        return taken

    _budget._begin_immediate = timed_lock
    asked = []
    while time.time() < start_at:
        time.sleep(0.001)
    error = None
    while True:
        t_ask = time.time()
        locks.clear()
        try:
            budget.spend(0.01, label=f"{os.getpid()}")
        except BudgetExceededError:
            break
        except Exception as exc:  # reported to the test, which fails on it
            error = repr(exc)
            break
        asked.append((t_ask, list(locks)))
    queue.put((os.getpid(), (asked, error)))


def _race(location, n_proc):
    """Race ``n_proc`` processes spending 0.01 until refused; returns, per pid, each served
    spend's ``(time asked, times of its SQLite write locks)``, and the ledger's entries."""
    PrivacyBudget(1.0, path=location)
    queue = FORK.Queue()
    start_at = time.time() + 0.5
    procs = [FORK.Process(target=_race_worker, args=(location, queue, start_at))
             for _ in range(n_proc)]
    for p in procs:
        p.start()
    results = dict(queue.get(timeout=300) for _ in procs)
    for p in procs:
        p.join(30)
    errors = [error for _, error in results.values() if error is not None]
    assert errors == [], errors[0]
    return {pid: asked for pid, (asked, _) in results.items()}, PrivacyBudget(
        1.0, path=location).ledger


def _max_overtakes(starts, entries):
    """The most spends of other processes recorded between one spend's start (``starts``:
    per pid, one time per served spend, in order) and its own entry."""
    times = [(e.time, int(e.label)) for e in entries]
    worst = 0
    for pid, begun in starts.items():
        mine = [t for t, p in times if p == pid]
        for t_start, t_done in zip(begun, mine, strict=True):
            worst = max(worst, sum(1 for t, p in times if p != pid and t_start < t < t_done))
    return worst


def _out_of_turn(results, entries):
    """How many queued spends were recorded before a spend whose ticket came earlier.

    Tickets are issued in the order of the transactions that write them, so a queued
    spend's first write lock (``results``: per pid, ``(time asked, lock times)``) times its
    ticket; an entry's time is read under its writer's lock, so it times the service.
    """
    done = {}
    for e in entries:
        done.setdefault(int(e.label), []).append(e.time)
    queued = sorted((locks[0], t_done) for pid, spends in results.items()
                    for (_, locks), t_done in zip(spends, done[pid], strict=True)
                    if len(locks) == 2)
    served = [t_done for _, t_done in queued]
    return sum(later < earlier for earlier, later in zip(served[:-1], served[1:], strict=True))


@pytest.mark.parametrize("n_proc", [pytest.param(3), pytest.param(8, marks=pytest.mark.slow)])
def test_race_neither_loses_nor_overdraws(location, n_proc):
    results, entries = _race(location, n_proc)
    served = sum(len(a) for a in results.values())
    # 100 spends of 0.01 fit in 1.0 (relative slack 1e-9); the 101st never does.
    assert served == len(entries) == 100
    assert sum(e.epsilon for e in entries) <= 1.0 + 1e-9
    from_call = _max_overtakes({p: [a for a, _ in s] for p, s in results.items()}, entries)
    if location.startswith("postgresql://"):
        # PostgreSQL grants the table lock in the order the server queued the requests; that
        # moment is not visible here, so this bound from the call (connection set-up
        # included) is measured (at most 8 of 28 with 8 processes), not proven.
        print(f"postgres: {n_proc} processes, at most {from_call} overtakes from the call")
        assert from_call <= 4 * (n_proc - 1)
        return
    locks = [lk for s in results.values() for _, lk in s]
    assert all(len(lk) in (1, 2) for lk in locks)
    waited = sum(len(lk) == 2 for lk in locks)
    from_ticket = _max_overtakes({p: [lk[0] for _, lk in s] for p, s in results.items()},
                                 entries)
    print(f"sqlite: {n_proc} processes, {waited} of 100 spends queued; at most {from_ticket} "
          f"overtakes from the ticket ({from_call} from the call)")
    # The race exercised the queue (32 to 99 spends queued in 50 races of 3 processes);
    # without the queue, none would, and the bound below would hold trivially.
    assert waited >= 10
    # SQLite's queue orders a spend from its first write lock: its ticket's transaction
    # (or, with no ticket, its own, which records it at once). Proof that at most n - 1
    # spends of others are recorded after that moment and before its own entry: an entry's
    # time is read while its writer holds the lock, so one of another process timed after
    # the moment ran after the ticket was committed, and its transaction saw the ticket.
    # It was then not a ticketless spend (that path records only with the queue empty),
    # so it held a ticket, and went ahead only because no live ticket was before its own:
    # its ticket was issued before ours (numbers only grow while ours exists; ours is
    # skipped only once first for 60 s). A spend call holds one ticket at a time, and its
    # transaction records one entry and deletes its ticket (a failed one records nothing),
    # so at most one such entry per other process (dead owners' tickets record none).
    # Retries and pauses after the moment only delay: whoever takes the lock meanwhile is a
    # ticket ahead (counted), a later ticket being issued, or a reservation (no entry).
    # Before the moment (argument checks, connection set-up, and the race for the lock in
    # which tickets are issued) nothing orders the spends: a process that asks again can
    # get its ticket first; from the call, up to 37 overtook with 3 processes (50 races).
    assert from_ticket <= n_proc - 1
    # And among queued spends, exactly first come, first served by ticket (same argument:
    # a later ticket's spend waits until the earlier ticket's spend has deleted it).
    assert _out_of_turn(results, entries) == 0
