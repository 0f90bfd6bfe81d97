"""PostgreSQL storage of a privacy ledger (the ``postgres`` extra, ``psycopg`` 3).

:class:`skdptest.PrivacyBudget` runs the same transactions, digests and hash chain
on a server ledger as on an SQLite file: this module only adapts a ``psycopg``
connection to the few statements the ledger issues, so the checking and recording
logic exists once, in :mod:`skdptest._budget`.

Layout (schema version 2, as in SQLite): the tables ``skdptest_ledger_totals``,
``skdptest_ledger_spends`` and ``skdptest_ledger_reservations`` hold the same
columns as the SQLite tables ``totals``, ``spends`` and ``reservations``; the
one-row table ``skdptest_ledger`` holds what the SQLite file keeps in its header
(``application_id`` and ``user_version``). One database (or one schema, chosen with
``options=-csearch_path=...`` in the URL) holds one ledger.

Transactions: a check-and-record transaction (SQLite ``BEGIN IMMEDIATE``) is a READ
COMMITTED transaction that first takes ``LOCK TABLE skdptest_ledger IN EXCLUSIVE
MODE``: writers are serialised, and PostgreSQL's lock manager grants a waiting lock
in the order it was asked for (first come, first served), so a process that keeps
asking is served after at most the processes already waiting. Plain reads are
REPEATABLE READ transactions (one consistent snapshot, never blocked by a writer).
A client killed mid-transaction loses its connection, and the server rolls the
transaction back.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

__all__ = ["ServerError", "connect", "create", "is_url", "redact"]

_PREFIX = "skdptest_ledger"
_TABLES = re.compile(r"\b(totals|spends|reservations)\b")

_SCHEMA = (
    f"CREATE TABLE {_PREFIX} (application_id BIGINT NOT NULL, user_version INTEGER NOT NULL)",
    f"""CREATE TABLE {_PREFIX}_totals (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        ledger_id TEXT NOT NULL,
        epsilon DOUBLE PRECISION NOT NULL,
        delta DOUBLE PRECISION NOT NULL,
        spent_epsilon TEXT NOT NULL,
        spent_delta TEXT NOT NULL,
        n_entries BIGINT NOT NULL,
        head TEXT NOT NULL,
        accountant TEXT NOT NULL,
        rdp_order DOUBLE PRECISION NOT NULL,
        loss_limit DOUBLE PRECISION NOT NULL,
        spent_loss TEXT NOT NULL,
        reserved_loss TEXT NOT NULL,
        reserved_delta TEXT NOT NULL,
        n_reservations BIGINT NOT NULL,
        digest TEXT NOT NULL)""",
    f"""CREATE TABLE {_PREFIX}_spends (
        id BIGINT PRIMARY KEY,
        time DOUBLE PRECISION NOT NULL,
        label TEXT NOT NULL,
        epsilon DOUBLE PRECISION NOT NULL,
        delta DOUBLE PRECISION NOT NULL,
        pid BIGINT NOT NULL,
        chain TEXT NOT NULL,
        profile TEXT NOT NULL,
        loss DOUBLE PRECISION NOT NULL,
        reservation BIGINT NOT NULL)""",
    f"""CREATE TABLE {_PREFIX}_reservations (
        id BIGINT PRIMARY KEY,
        pid BIGINT NOT NULL,
        loss_left TEXT NOT NULL,
        delta_left TEXT NOT NULL,
        digest TEXT NOT NULL)""",
)


class ServerError(Exception):
    """A failed statement or connection on a PostgreSQL ledger.

    ``missing`` is true when the ledger's tables do not exist (a vanished ledger).
    """

    def __init__(self, message, missing=False):
        super().__init__(message)
        self.missing = missing


def is_url(path):
    """Whether ``path`` names a PostgreSQL ledger rather than a file."""
    return isinstance(path, str) and path.startswith(("postgresql://", "postgres://"))


def redact(url):
    """``url`` without its password (for messages and reprs)."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        netloc = parts.netloc.rpartition("@")
        user = netloc[0].partition(":")[0]
        return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[2]}"))
    except ValueError:
        return "postgresql://***"


def _psycopg():
    try:
        import psycopg
    except ImportError:  # pragma: no cover - the extra is installed wherever tests run
        raise ServerError(
            "a PostgreSQL ledger needs psycopg 3: pip install 'skdptest[postgres]'"
        ) from None
    return psycopg


class _Rows:
    """The result of a translated PRAGMA (what sqlite3's cursor would give)."""

    def __init__(self, rows):
        self._rows = rows

    def fetchone(self):
        return self._rows[0] if self._rows else None

    def fetchall(self):
        return list(self._rows)


class _Connection:
    """A ``psycopg`` connection that accepts the ledger's SQLite statements."""

    def __init__(self, con, lock_timeout):
        self._con = con
        self._lock_ms = max(int(lock_timeout * 1000), 1)

    def _run(self, sql, params=()):
        psycopg = _psycopg()
        try:
            return self._con.execute(sql, params)
        except psycopg.errors.UndefinedTable as exc:
            raise ServerError(f"PostgreSQL: {exc}".strip(), missing=True) from exc
        except psycopg.Error as exc:
            raise ServerError(f"PostgreSQL: {exc}".strip()) from exc

    def execute(self, sql, params=()):
        if sql == "BEGIN IMMEDIATE":
            self._run("BEGIN ISOLATION LEVEL READ COMMITTED")
            self._run(f"SET LOCAL lock_timeout = {self._lock_ms}")
            return self._run(f"LOCK TABLE {_PREFIX} IN EXCLUSIVE MODE")
        if sql == "BEGIN":
            return self._run("BEGIN ISOLATION LEVEL REPEATABLE READ")
        if sql.startswith("PRAGMA "):
            column = sql.split()[1]
            if column not in ("application_id", "user_version"):
                raise ServerError(f"unsupported statement on a PostgreSQL ledger: {sql!r}")
            rows = self._run(f"SELECT {column} FROM {_PREFIX}").fetchall()
            return _Rows(rows if len(rows) == 1 else [(0,)])
        return self._run(_TABLES.sub(rf"{_PREFIX}_\1", sql).replace("?", "%s"), params)

    def close(self):
        # Closing inside a transaction rolls it back on the server.
        try:
            self._con.close()
        except Exception:  # pragma: no cover - closing a broken connection
            pass


def connect(url, lock_timeout):
    """A connection to the ledger database at ``url`` (creates nothing)."""
    psycopg = _psycopg()
    try:
        con = psycopg.connect(url, autocommit=True, connect_timeout=max(int(lock_timeout), 1))
    except psycopg.Error as exc:
        raise ServerError(f"cannot connect to PostgreSQL: {exc}".strip()) from exc
    return _Connection(con, lock_timeout)


def create(url, lock_timeout, first_row, application_id, version):
    """Create the ledger tables at ``url`` unless they exist.

    ``first_row`` is the totals row of a new ledger. Returns true if this call
    created the ledger, false if one was already there (then reopen it). Two
    processes creating at once are serialised by an advisory transaction lock.
    """
    con = connect(url, lock_timeout)
    try:
        con._run("BEGIN")
        con._run("SELECT pg_advisory_xact_lock(hashtext(%s))", (_PREFIX,))
        exists = con._run("SELECT to_regclass(%s)", (_PREFIX,)).fetchone()[0]
        if exists is not None:
            con._run("COMMIT")
            return False
        for statement in _SCHEMA:
            con._run(statement)
        con._run(f"INSERT INTO {_PREFIX} VALUES (%s, %s)", (application_id, version))
        con.execute(
            "INSERT INTO totals VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            first_row,
        )
        con._run("COMMIT")
        return True
    finally:
        con.close()
