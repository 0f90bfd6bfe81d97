"""The shared privacy-budget ledger.

A :class:`PrivacyBudget` is a *handle* to one ledger stored in an embedded SQLite
database. Copies (``copy.deepcopy``, :func:`sklearn.base.clone`) return the same
handle and pickles carry the database location, so every fit of a grid search,
including fits run in joblib worker processes, charges the same ledger.
"""

from __future__ import annotations

import atexit
import math
import os
import sqlite3
import tempfile
import time
import warnings
from dataclasses import dataclass
from numbers import Real

__all__ = ["BudgetExceededError", "LedgerEntry", "PrivacyBudget", "PrivacyLeakWarning"]

# Relative slack in the comparison ``spent + asked <= total``: sums of decimal
# fractions such as 100 x 0.01 are not exact in binary floating point.
_REL_TOL = 1e-9

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value REAL NOT NULL);
CREATE TABLE IF NOT EXISTS spends (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time REAL NOT NULL,
    label TEXT NOT NULL,
    epsilon REAL NOT NULL,
    delta REAL NOT NULL,
    pid INTEGER NOT NULL
);
"""


class BudgetExceededError(ValueError):
    """Raised when a spend would exceed the total of a :class:`PrivacyBudget`.

    Nothing is recorded when it is raised.
    """


class PrivacyLeakWarning(UserWarning):
    """Warning for an option that reads private data without charging for it."""


@dataclass(frozen=True)
class LedgerEntry:
    """One recorded spend.

    Attributes
    ----------
    time : float
        Seconds since the epoch when the spend was recorded.
    label : str
        What was released (e.g. ``"PrivateEValueTest.fit"``).
    epsilon : float
        Privacy loss parameter charged.
    delta : float
        Failure probability charged.
    """

    time: float
    label: str
    epsilon: float
    delta: float


def _check_amount(value, name, *, strictly_positive, upper=None):
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}.")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}.")
    if strictly_positive and value <= 0:
        raise ValueError(f"{name} must be > 0, got {value}.")
    if not strictly_positive and value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}.")
    if upper is not None and value >= upper:
        raise ValueError(f"{name} must be < {upper}, got {value}.")
    return value


class PrivacyBudget:
    """A total privacy budget (ε, δ) and the ledger of what was spent.

    Composition is basic sequential composition: the ε of all spends add up,
    and so do the δ. A spend is one atomic check-then-record transaction, safe
    across threads and processes on one machine.

    Parameters
    ----------
    epsilon : float
        Total ε allowed, > 0.
    delta : float, default=0.0
        Total δ allowed, in [0, 1).
    path : str or os.PathLike, default=None
        File of a persistent ledger. Reopening a file shows its past spends; the
        totals given must then equal those it was created with. ``None`` uses a
        temporary file, deleted when the creating process exits.

    Attributes
    ----------
    epsilon : float
        Total ε allowed.
    delta : float
        Total δ allowed.
    path : str
        Location of the SQLite ledger.

    Notes
    -----
    ``copy.copy``, ``copy.deepcopy`` and :func:`sklearn.base.clone` return the
    same handle, and a pickled budget reopens the same ledger file, so spends
    made by cloned estimators or joblib worker processes are never lost. A grid
    search on private data costs ``2 * n_candidates * n_folds + 1`` spends (a fit
    and a score per fold, then the refit): choose ε by power planning on
    synthetic data instead, which costs nothing.

    Comparisons allow a relative slack of 1e-9 for floating-point rounding
    (100 spends of 0.01 fit in a total of 1.0).

    Examples
    --------
    >>> from skdptest import PrivacyBudget
    >>> budget = PrivacyBudget(epsilon=1.0)
    >>> budget.spend(0.25, label="first release")
    >>> round(budget.remaining[0], 10)
    0.75
    """

    def __init__(self, epsilon, delta=0.0, path=None):
        self.epsilon = _check_amount(epsilon, "epsilon", strictly_positive=True)
        self.delta = _check_amount(delta, "delta", strictly_positive=False, upper=1.0)
        self._owner_pid = None
        if path is None:
            fd, path = tempfile.mkstemp(prefix="skdptest-budget-", suffix=".sqlite")
            os.close(fd)
            self._owner_pid = os.getpid()
            atexit.register(_remove_if_owner, path, self._owner_pid)
        self.path = os.fspath(path)
        self._init_ledger()

    # -- storage ---------------------------------------------------------------
    def _connect(self, create=False):
        # sqlite3 would silently create an empty file in place of a vanished ledger.
        if not create and not os.path.exists(self.path):
            raise FileNotFoundError(
                f"The privacy ledger {self.path!r} no longer exists (a temporary ledger is "
                "deleted when the process that created it exits); nothing was recorded."
            )
        try:
            con = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
        except sqlite3.Error as exc:
            raise ValueError(f"path={self.path!r}: cannot open the privacy ledger: {exc}") from exc
        return con

    def _init_ledger(self):
        directory = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(directory):
            raise ValueError(f"path={self.path!r}: directory {directory!r} does not exist.")
        con = self._connect(create=True)
        try:
            con.executescript(_SCHEMA)
            con.execute("BEGIN IMMEDIATE")
            rows = dict(con.execute("SELECT key, value FROM meta").fetchall())
            if not rows:
                con.execute(
                    "INSERT INTO meta VALUES ('epsilon', ?), ('delta', ?)",
                    (self.epsilon, self.delta),
                )
            con.execute("COMMIT")
        except sqlite3.Error as exc:
            raise ValueError(
                f"path={self.path!r} is not a writable privacy ledger: {exc}"
            ) from exc
        finally:
            con.close()
        if rows and (rows["epsilon"] != self.epsilon or rows["delta"] != self.delta):
            raise ValueError(
                f"path={self.path!r} holds a ledger created with epsilon={rows['epsilon']}, "
                f"delta={rows['delta']}; it cannot be reopened with epsilon={self.epsilon}, "
                f"delta={self.delta}."
            )

    # -- spending --------------------------------------------------------------
    def spend(self, epsilon, delta=0.0, label="spend"):
        """Record a spend of (ε, δ), or refuse it and record nothing.

        Parameters
        ----------
        epsilon : float
            ε to charge, finite and > 0.
        delta : float, default=0.0
            δ to charge, in [0, 1).
        label : str, default="spend"
            Description stored in the ledger.

        Raises
        ------
        BudgetExceededError
            If the spend would exceed the total; the message states what was
            asked and what remains.
        ValueError, TypeError
            If ``epsilon`` or ``delta`` is invalid (nothing is recorded).
        FileNotFoundError
            If the ledger file no longer exists (nothing is recorded).
        """
        epsilon = _check_amount(epsilon, "epsilon", strictly_positive=True)
        delta = _check_amount(delta, "delta", strictly_positive=False, upper=1.0)
        if not isinstance(label, str):
            raise TypeError(f"label must be a str, got {type(label).__name__}.")
        con = self._connect()
        try:
            con.execute("BEGIN IMMEDIATE")
            spent_eps, spent_delta = self._sums(con)
            over_eps = spent_eps + epsilon > self.epsilon * (1 + _REL_TOL)
            over_delta = spent_delta + delta > self.delta * (1 + _REL_TOL) + 1e-300
            if over_eps or (delta > 0 and over_delta):
                con.execute("ROLLBACK")
                raise BudgetExceededError(
                    f"Privacy budget exceeded: asked for epsilon={epsilon:g}, "
                    f"delta={delta:g} ({label}), but only epsilon="
                    f"{max(self.epsilon - spent_eps, 0.0):g}, delta="
                    f"{max(self.delta - spent_delta, 0.0):g} remain."
                )
            con.execute(
                "INSERT INTO spends (time, label, epsilon, delta, pid) VALUES (?, ?, ?, ?, ?)",
                (time.time(), label, epsilon, delta, os.getpid()),
            )
            con.execute("COMMIT")
        finally:
            con.close()

    @staticmethod
    def _sums(con):
        rows = con.execute("SELECT epsilon, delta FROM spends").fetchall()
        return math.fsum(r[0] for r in rows), math.fsum(r[1] for r in rows)

    # -- reading ---------------------------------------------------------------
    @property
    def spent(self):
        """tuple of float: (ε, δ) spent so far."""
        con = self._connect()
        try:
            return self._sums(con)
        finally:
            con.close()

    @property
    def remaining(self):
        """tuple of float: (ε, δ) still available (never negative)."""
        eps, delta = self.spent
        return max(self.epsilon - eps, 0.0), max(self.delta - delta, 0.0)

    @property
    def ledger(self):
        """list of LedgerEntry: every recorded spend, oldest first."""
        con = self._connect()
        try:
            rows = con.execute(
                "SELECT time, label, epsilon, delta FROM spends ORDER BY id"
            ).fetchall()
        finally:
            con.close()
        return [LedgerEntry(*row) for row in rows]

    def __len__(self):
        return len(self.ledger)

    def __bool__(self):
        # A handle is a handle: without this, ``__len__`` would make a budget with
        # no spends yet falsy, and ``if budget:`` would skip charging it.
        return True

    def __repr__(self):
        # Shown inside estimator reprs and tracebacks: never raise here.
        try:
            eps, delta = self.spent
            spent = f"({eps:g}, {delta:g})"
        except (OSError, sqlite3.Error, ValueError):
            spent = "unavailable"
        return (
            f"PrivacyBudget(epsilon={self.epsilon!r}, delta={self.delta!r}, "
            f"spent={spent}, path={self.path!r})"
        )

    # -- handle semantics ------------------------------------------------------
    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __getstate__(self):
        return {"epsilon": self.epsilon, "delta": self.delta, "path": self.path}

    def __setstate__(self, state):
        self.epsilon = state["epsilon"]
        self.delta = state["delta"]
        self.path = state["path"]
        self._owner_pid = None
        if not os.path.exists(self.path):
            warnings.warn(
                f"The privacy ledger {self.path!r} no longer exists; a fresh one is created "
                "there and past spends are not visible.",
                RuntimeWarning,
                stacklevel=2,
            )
        self._init_ledger()


def _remove_if_owner(path, owner_pid):
    if os.getpid() == owner_pid:
        for suffix in ("", "-journal", "-wal", "-shm"):
            try:
                os.remove(path + suffix)
            except OSError:
                pass
