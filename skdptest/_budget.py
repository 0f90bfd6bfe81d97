"""The shared privacy-budget ledger.

A :class:`PrivacyBudget` is a *handle* to one ledger stored in an embedded SQLite
database. Copies (``copy.deepcopy``, :func:`sklearn.base.clone`) return the same
handle and pickles carry the database location, so every fit of a grid search,
including fits run in joblib worker processes, charges the same ledger.

The ledger is an honest analyst's bookkeeping, not an access control: anyone who
can write the file can edit it. What the file format guarantees is that accidents
(a wrong path, a foreign or truncated file, random corruption, a handle whose
totals were tampered with in memory) are detected and refused rather than read as
another budget. See ``doc/privacy_budget.md`` for the threat model.

File format (``PRAGMA user_version = 1``)
-----------------------------------------
``PRAGMA application_id`` is :data:`LEDGER_APPLICATION_ID` (``0x534B4450``, the
ASCII bytes ``"SKDP"``). Table ``totals`` holds exactly one row: the ledger's
random id, the totals allowed (ε, δ), the *exact* sums spent (integers in
units of 2**-1074, the smallest float64 step, so no rounding accumulates; stored as
``"<odd hex mantissa>p<exponent>"``), the
number of entries, the head of a SHA-256 hash chain over the entries, and a
SHA-256 digest of all of these. Table ``spends`` holds the entries, each with its
link of the hash chain. A spend reads and rewrites only the ``totals`` row, so it
costs O(1) whatever the length of the ledger; reading :attr:`PrivacyBudget.ledger`
(and reopening a ledger by path) re-verifies every entry against the chain, the
count and the exact sums.
"""

from __future__ import annotations

import atexit
import errno
import hashlib
import math
import os
import secrets
import sqlite3
import tempfile
import time
import warnings
from dataclasses import dataclass
from numbers import Real
from pathlib import Path

from ._params import Interval, InvalidParameterError, check_value
from ._warnings import PrivacyLeakWarning

__all__ = [
    "LEDGER_APPLICATION_ID",
    "BudgetExceededError",
    "LedgerEntry",
    "LedgerError",
    "LedgerNotFoundError",
    "PrivacyBudget",
    "PrivacyLeakWarning",
]

#: ``PRAGMA application_id`` of a ledger file: the ASCII bytes "SKDP" as a
#: big-endian 32-bit integer (0x534B4450 = 1397441616).
LEDGER_APPLICATION_ID = 0x534B4450
# ``PRAGMA user_version``: the layout of the tables below. Bump on any change.
_SCHEMA_VERSION = 1

# What _read_state checks first, in order: (pragma, expected value, message if not).
_PRAGMA_CHECKS = (
    ("application_id", LEDGER_APPLICATION_ID,
     "is an SQLite database but not a skdptest privacy ledger (application_id="
     "{value:#x}, a ledger has {expected:#x})."),
    ("user_version", _SCHEMA_VERSION,
     "is a privacy ledger of schema version {value}; this skdptest reads "
     "version {expected}."),
)

# Relative slack in the comparison ``spent + asked <= total``: sums of decimal
# fractions such as 100 x 0.01 are not exact in binary floating point.
_REL_TOL = 1e-9

# Seconds a connection waits for another process's write lock before giving up
# (module-level so that tests can shorten it).
_BUSY_TIMEOUT = 60.0

# Every float64 is an integer multiple of 2**-1074, so sums kept as integers in
# these units are exact; ``units / 2**1074`` (int true division) is correctly
# rounded, hence equal to ``math.fsum`` of the entries.
_UNIT_EXP = 1074
_ONE = 1 << _UNIT_EXP

# What a statement on a damaged file can raise: sqlite3 errors, and UnicodeDecodeError
# when sqlite3 decodes an error message quoting garbage bytes (e.g. a corrupted schema).
_DB_ERRORS = (sqlite3.Error, UnicodeDecodeError)

_SQLITE_MAGIC = b"SQLite format 3\x00"
_HEADER_SIZE = 100
_SEP = "\x1f"  # field separator of the hashed records (never in hex or decimal digits)

_SCHEMA = f"""
PRAGMA application_id = {LEDGER_APPLICATION_ID};
PRAGMA user_version = {_SCHEMA_VERSION};
CREATE TABLE totals (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    ledger_id TEXT NOT NULL,
    epsilon REAL NOT NULL,
    delta REAL NOT NULL,
    spent_epsilon TEXT NOT NULL,
    spent_delta TEXT NOT NULL,
    n_entries INTEGER NOT NULL,
    head TEXT NOT NULL,
    digest TEXT NOT NULL
);
CREATE TABLE spends (
    id INTEGER PRIMARY KEY,
    time REAL NOT NULL,
    label TEXT NOT NULL,
    epsilon REAL NOT NULL,
    delta REAL NOT NULL,
    pid INTEGER NOT NULL,
    chain TEXT NOT NULL
);
"""

_GRID_SEARCH_HINT = (
    'Nothing was recorded. In a grid search pass error_score="raise" to GridSearchCV '
    "so that a refused spend stops the search instead of producing NaN scores."
)


class BudgetExceededError(ValueError):
    """Raised when a spend would exceed the total of a :class:`PrivacyBudget`.

    Nothing is recorded when it is raised.
    """


class LedgerError(ValueError):
    """The ledger file cannot be used: not a ledger, corrupted, or not writable.

    The message names the path. Raised instead of reading a damaged or foreign
    file as a budget; nothing is recorded when it is raised. Errors of the
    ``sqlite3`` module (read-only file, full disk, lock timeout, malformed
    database) are chained as ``__cause__``.
    """


class LedgerNotFoundError(LedgerError, FileNotFoundError):
    """The ledger file of a handle no longer exists; nothing is recorded."""


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
    """Validate one privacy amount (a total or a spend) and return it as a float.

    Parameters
    ----------
    value : object
        The amount given.
    name : str
        Name of the argument, used in the error messages.
    strictly_positive : bool
        Require ``value > 0`` (ε) rather than ``value >= 0`` (δ).
    upper : float, default=None
        Exclusive upper bound, if any.

    Returns
    -------
    float

    Raises
    ------
    InvalidParameterError
        (a ``TypeError`` and a ``ValueError``) if ``value`` is not a finite real
        number in range (``bool`` and arrays are not numbers here). The same
        constraint primitives validate every estimator's parameters.
    """
    closed = ("neither" if strictly_positive else "left") if upper is not None \
        else ("neither" if strictly_positive else "left")
    return check_value(value, [Interval(Real, 0, upper, closed=closed)], name)


def _check_path(path):
    """The ledger path as a str, refused before anything is created if it cannot name a
    file: not a str or path-like, empty, holding a NUL byte, or not encodable by the file
    system (a lone surrogate). SQLite would otherwise open the file named by the part
    before a NUL byte (``"a\\0b"`` created ``a``)."""
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidParameterError(
            f"path must be None, a str or an os.PathLike, got {type(path).__name__}."
        )
    try:
        path = os.fspath(path)
        if not isinstance(path, str):
            path = os.fsdecode(path)
    except (TypeError, UnicodeDecodeError) as exc:
        raise InvalidParameterError(f"path cannot be read as a file path: {exc}.") from None
    if not path:
        raise InvalidParameterError("path must name a file; got the empty string.")
    if "\0" in path:
        raise InvalidParameterError(
            f"path must not contain a NUL byte ('\\0'); got {path!r}. Nothing was created."
        )
    try:
        os.fsencode(path)
    except UnicodeEncodeError:
        raise InvalidParameterError(
            f"path cannot be encoded for the file system; got {path!r}. Nothing was created."
        ) from None
    return path


# -- exact sums and digests -------------------------------------------------------------


def _to_units(value):
    # value is a finite float >= 0; its denominator is a power of two <= 2**1074.
    num, den = value.as_integer_ratio()
    return num * (_ONE // den)


def _from_units(units):
    return units / _ONE


def _format_units(units):
    # Canonical and compact: "<odd mantissa in lowercase hex>p<binary exponent>", or
    # "0". Written in full, the integer would be ~270 hex digits, most of them zeros
    # that random damage could change without changing the float total.
    if units == 0:
        return "0"
    exponent = (units & -units).bit_length() - 1
    return f"{units >> exponent:x}p{exponent}"


def _parse_units(text):
    """Inverse of :func:`_format_units`; ``ValueError`` unless ``text`` is canonical."""
    mantissa, _, exponent = text.partition("p")
    units = int(mantissa, 16) << int(exponent) if exponent else int(mantissa, 16)
    if _format_units(units) != text or units < 0:
        raise ValueError(f"not a canonical exact sum: {text!r}")
    return units


def _sha256(*fields):
    return hashlib.sha256(_SEP.join(fields).encode("utf-8")).hexdigest()


def _genesis(ledger_id):
    return _sha256("skdptest-ledger-genesis", ledger_id)


def _link(previous, entry_id, time_, label, epsilon, delta, pid):
    # The label goes last: every other field is hex or decimal and cannot hold the
    # separator, so the hashed record decodes uniquely.
    return _sha256(
        "skdptest-ledger-entry",
        previous,
        str(entry_id),
        time_.hex(),
        epsilon.hex(),
        delta.hex(),
        str(pid),
        label,
    )


@dataclass(frozen=True)
class _State:
    """The verified ``totals`` row."""

    ledger_id: str
    epsilon: float
    delta: float
    spent_epsilon: int  # exact, in units of 2**-1074
    spent_delta: int
    n_entries: int
    head: str

    def digest(self):
        return _sha256(
            "skdptest-ledger-totals",
            self.ledger_id,
            self.epsilon.hex(),
            self.delta.hex(),
            _format_units(self.spent_epsilon),
            _format_units(self.spent_delta),
            str(self.n_entries),
            self.head,
        )

    def row(self):
        return (
            self.ledger_id,
            self.epsilon,
            self.delta,
            _format_units(self.spent_epsilon),
            _format_units(self.spent_delta),
            self.n_entries,
            self.head,
            self.digest(),
        )


def _open_connection(uri):
    # The single place connections are made (tests wrap it to trace statements).
    return sqlite3.connect(uri, uri=True, timeout=_BUSY_TIMEOUT, isolation_level=None)


def _describe(exc, creating=False):
    text = str(exc)
    if "readonly" in text or "read-only" in text:
        return f"the file is read-only ({text})"
    if "full" in text:
        return f"the disk is full ({text})"
    if "locked" in text or "busy" in text:
        return f"another process held the ledger's lock too long ({text})"
    if creating:
        return f"SQLite: {text}"
    # Anything else on an existing file: malformed pages, undecodable text, a schema
    # that no longer parses.
    return f"the file is damaged or not readable as a ledger (SQLite: {text})"


class PrivacyBudget:
    """A total privacy budget (ε, δ) and the ledger of what was spent.

    Composition is basic sequential composition: the ε of all spends add up,
    and so do the δ. A spend is one atomic check-then-record transaction, safe
    across threads and processes on one machine, and costs O(1) however long the
    ledger is.

    Parameters
    ----------
    epsilon : float
        Total ε allowed, > 0.
    delta : float, default=0.0
        Total δ allowed, in [0, 1).
    path : str or os.PathLike, default=None
        File of a persistent ledger. A path that does not exist yet is created;
        reopening a ledger shows its past spends (every entry is verified), and
        the totals given must then equal those it was created with. Any other
        file (empty, foreign SQLite database, not SQLite, truncated, corrupted)
        raises :class:`LedgerError`. ``None`` uses a temporary file, deleted when
        the creating process exits.

    Attributes
    ----------
    epsilon : float
        Total ε allowed (read-only).
    delta : float
        Total δ allowed (read-only).
    path : str
        Location of the SQLite ledger (read-only).

    Raises
    ------
    LedgerError
        If ``path`` is not a usable ledger, or holds other totals.

    Notes
    -----
    ``copy.copy``, ``copy.deepcopy`` and :func:`sklearn.base.clone` return the
    same handle, and a pickled budget reopens the same ledger file, so spends
    made by cloned estimators or joblib worker processes are never lost. Only
    this constructor creates a ledger: a handle unpickled after its file vanished
    refuses to spend. A grid search on private data costs
    ``2 * n_candidates * n_folds + 1`` spends (a fit and a score per fold, then
    the refit): choose ε by power planning on synthetic data instead, which
    costs nothing.

    Comparisons allow a relative slack of 1e-9 for floating-point rounding
    (100 spends of 0.01 fit in a total of 1.0). The sums spent are exact.

    Examples
    --------
    >>> from skdptest import PrivacyBudget
    >>> budget = PrivacyBudget(epsilon=1.0)
    >>> budget.spend(0.25, label="first release")
    >>> round(budget.remaining[0], 10)
    0.75
    """

    def __init__(self, epsilon, delta=0.0, path=None):
        if "_path" in self.__dict__:
            raise AttributeError("A PrivacyBudget cannot be re-initialised; create a new one.")
        epsilon = _check_amount(epsilon, "epsilon", strictly_positive=True)
        delta = _check_amount(delta, "delta", strictly_positive=False, upper=1.0)
        self._set(epsilon=epsilon, delta=delta, path=None, ledger_id=None, owner_pid=None)
        if path is None:
            fd, path = tempfile.mkstemp(prefix="skdptest-budget-", suffix=".sqlite")
            os.close(fd)
            self._set(path=path, owner_pid=os.getpid())
            atexit.register(_remove_if_owner, path, os.getpid())
            # A fresh mkstemp file that only this process knows: build the ledger in place.
            self._set(ledger_id=self._create(path))
            return
        path = _check_path(path)
        self._set(path=path)
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            raise LedgerError(f"path={path!r}: directory {directory!r} does not exist.")
        if not os.path.lexists(path):
            self._set(ledger_id=self._create_exclusive(path))
            return
        self._set(ledger_id=self._reopen(path))

    # -- read-only attributes --------------------------------------------------------
    def _set(self, **attrs):
        for name, value in attrs.items():
            object.__setattr__(self, "_" + name, value)

    def __setattr__(self, name, value):
        # The totals, the path and the ledger identity define what a spend is checked
        # against: a live handle must not be re-pointed or given a bigger budget.
        raise AttributeError(
            f"PrivacyBudget attributes are read-only (cannot assign {name!r}); create a "
            "new PrivacyBudget (with a new path) for another total."
        )

    def __delattr__(self, name):
        raise AttributeError(f"PrivacyBudget attributes are read-only (cannot delete {name!r}).")

    @property
    def epsilon(self):
        """float: total ε allowed (read-only)."""
        return self._epsilon

    @property
    def delta(self):
        """float: total δ allowed (read-only)."""
        return self._delta

    @property
    def path(self):
        """str: location of the SQLite ledger (read-only)."""
        return self._path

    # -- creating and opening --------------------------------------------------------
    def _error(self, message, path=None):
        return LedgerError(f"path={path if path is not None else self._path!r}: {message}")

    def _create(self, path, name=None):
        """Write a new, empty ledger into ``path`` (absent or 0 bytes); return its id.

        ``name`` is the path to name in errors (the final path, when ``path`` is the
        private file the ledger is built in).
        """
        name = path if name is None else name
        ledger_id = secrets.token_hex(16)
        state = _State(ledger_id, self._epsilon, self._delta, 0, 0, 0, _genesis(ledger_id))
        try:
            con = _open_connection(Path(os.path.abspath(path)).as_uri() + "?mode=rwc")
        except _DB_ERRORS as exc:
            raise LedgerError(
                f"path={name!r}: cannot create the privacy ledger: {_describe(exc, creating=True)}"
            ) from exc
        try:
            con.execute("BEGIN IMMEDIATE")
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    con.execute(statement)
            con.execute("INSERT INTO totals VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?)", state.row())
            con.execute("COMMIT")
        except _DB_ERRORS as exc:
            raise LedgerError(
                f"path={name!r}: cannot create the privacy ledger: {_describe(exc, creating=True)}"
            ) from exc
        finally:
            con.close()
        return ledger_id

    def _create_exclusive(self, path):
        """Create the ledger at ``path`` unless another process does so first."""
        # Build it under a private name, then hard-link it into place: the link fails
        # if ``path`` appeared meanwhile, and no process ever sees a half-built file.
        tmp = f"{path}.{secrets.token_hex(8)}.tmp"
        try:
            ledger_id = self._create(tmp, name=path)
            try:
                os.link(tmp, path)
            except FileExistsError:
                return self._reopen(path)
            except (OSError, NotImplementedError) as exc:
                if isinstance(exc, OSError) and exc.errno not in (
                    errno.EPERM,
                    errno.ENOTSUP,
                    errno.EOPNOTSUPP,
                    errno.EXDEV,
                    errno.EMLINK,
                ):
                    raise LedgerError(f"path={path!r}: cannot create the ledger: {exc}") from exc
                # No hard links on this file system: claim the name exclusively and copy.
                with open(tmp, "rb") as src:
                    data = src.read()
                try:
                    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
                except FileExistsError:
                    return self._reopen(path)
                with os.fdopen(fd, "wb") as dst:
                    dst.write(data)
                    dst.flush()
                    os.fsync(dst.fileno())
            return ledger_id
        finally:
            for suffix in ("", "-journal"):
                try:
                    os.remove(tmp + suffix)
                except OSError:
                    pass

    def _reopen(self, path):
        """Open the existing ledger at ``path``, verify it entirely; return its id."""
        con = self._connect(path)
        try:
            try:
                con.execute("BEGIN")
                state = self._read_state(con, path, check_handle=False)
                self._verify_entries(con, state, path)
                con.execute("COMMIT")
            except _DB_ERRORS as exc:
                raise self._db_error(exc, "cannot read the privacy ledger", path) from exc
        finally:
            con.close()
        if state.epsilon != self._epsilon or state.delta != self._delta:
            raise self._error(
                f"holds a ledger created with epsilon={state.epsilon}, delta={state.delta}; it "
                f"cannot be reopened with epsilon={self._epsilon}, delta={self._delta}.",
                path,
            )
        return state.ledger_id

    def _connect(self, path=None):
        """Connect to an existing ledger file; never creates one."""
        path = self._path if path is None else path
        # Cheap O(1) checks first, for clear messages: sqlite3 would report a 0-byte
        # file as an empty database and a missing one as "unable to open".
        try:
            with open(path, "rb") as f:
                header = f.read(_HEADER_SIZE)
        except FileNotFoundError:
            raise LedgerNotFoundError(
                f"path={path!r}: the privacy ledger no longer exists (a temporary ledger is "
                "deleted when the process that created it exits; only the PrivacyBudget "
                "constructor creates a ledger); nothing was recorded."
            ) from None
        except IsADirectoryError:
            raise self._error("cannot open the privacy ledger: it is a directory.", path) from None
        except OSError as exc:
            raise self._error(f"cannot open the privacy ledger: {exc}", path) from exc
        if len(header) == 0:
            raise self._error("is an empty (0-byte) file, not a privacy ledger.", path)
        if not header.startswith(_SQLITE_MAGIC):
            raise self._error("is not an SQLite database, so not a privacy ledger.", path)
        if len(header) < _HEADER_SIZE:
            raise self._error("is a truncated SQLite file, not a usable privacy ledger.", path)
        try:
            return _open_connection(Path(os.path.abspath(path)).as_uri() + "?mode=rw")
        except _DB_ERRORS as exc:
            raise self._error(f"cannot open the privacy ledger: {_describe(exc)}", path) from exc

    def _db_error(self, exc, doing, path=None):
        """The :class:`LedgerError` for an sqlite3 error, saying why when it can."""
        path = self._path if path is None else path
        # Checked only after SQLite failed: outside a lock, a concurrent commit could
        # make the header and the file size disagree for a moment.
        try:
            with open(path, "rb") as f:
                header = f.read(_HEADER_SIZE)
            size = os.path.getsize(path)
        except OSError:
            header, size = b"", 0
        if len(header) == _HEADER_SIZE and header[24:28] == header[92:96]:
            # Page size (1 means 65536) and the page count, valid when the change
            # counter equals the "version-valid-for" number.
            page_size = int.from_bytes(header[16:18], "big")
            page_size = 65536 if page_size == 1 else page_size
            pages = int.from_bytes(header[28:32], "big")
            if size < pages * page_size:
                return self._error(
                    f"is truncated ({size} bytes, {pages} pages of {page_size} expected); "
                    f"{doing}.",
                    path,
                )
        return self._error(f"{doing}: {_describe(exc)}", path)

    def _read_state(self, con, path=None, check_handle=True):
        """Read and verify the marker and the ``totals`` row (inside a transaction)."""
        path = self._path if path is None else path
        for pragma, expected, message in _PRAGMA_CHECKS:
            value = con.execute(f"PRAGMA {pragma}").fetchone()[0]
            if value != expected:
                raise self._error(message.format(value=value, expected=expected), path)
        rows = con.execute(
            "SELECT ledger_id, epsilon, delta, spent_epsilon, spent_delta, n_entries, head, "
            "digest FROM totals"
        ).fetchall()
        if len(rows) != 1:
            raise self._error(f"is corrupted: {len(rows)} totals rows instead of 1.", path)
        state = self._parse_totals(rows[0], path)
        if check_handle:
            if state.ledger_id != self._ledger_id:
                raise self._error(
                    "is not the ledger this handle was opened on (the file was replaced, e.g. "
                    "deleted and created anew); refusing to charge it.",
                )
            if state.epsilon != self._epsilon or state.delta != self._delta:
                raise self._error(
                    f"holds totals epsilon={state.epsilon}, delta={state.delta}, but this handle "
                    f"has epsilon={self._epsilon}, delta={self._delta} (totals are fixed when "
                    "a ledger is created); refusing to charge it.",
                )
        return state

    def _parse_totals(self, row, path):
        ledger_id, eps, delta, spent_e, spent_d, n, head, digest = row
        types = (str, float, float, str, str, int, str, str)
        corrupted = self._error(
            "is corrupted: its totals row does not match its integrity digest.", path
        )
        if not all(type(v) is t for v, t in zip(row, types, strict=True)):
            raise corrupted
        try:
            state = _State(
                ledger_id, eps, delta, _parse_units(spent_e), _parse_units(spent_d), n, head
            )
        except ValueError:
            raise corrupted from None
        if state.digest() != digest:
            raise corrupted
        return state

    def _verify_entries(self, con, state, path=None):
        """Check every entry against the hash chain, the count and the exact sums."""
        rows = con.execute(
            "SELECT id, time, label, epsilon, delta, pid, chain FROM spends ORDER BY id"
        ).fetchall()
        head = _genesis(state.ledger_id)
        sum_e = sum_d = 0
        for index, row in enumerate(rows, start=1):
            entry_id, time_, label, eps, delta, pid, chain = row
            ok = (
                type(entry_id) is int
                and type(time_) is float
                and type(label) is str
                and type(eps) is float
                and type(delta) is float
                and type(pid) is int
                and entry_id == index
                and math.isfinite(eps)
                and math.isfinite(delta)
                and eps > 0
                and delta >= 0
            )
            if ok:
                head = _link(head, entry_id, time_, label, eps, delta, pid)
            if not ok or head != chain:
                raise self._error(
                    f"is corrupted: entry {index} does not match the ledger's hash chain.", path
                )
            sum_e += _to_units(eps)
            sum_d += _to_units(delta)
        if (len(rows), head, sum_e, sum_d) != (
            state.n_entries,
            state.head,
            state.spent_epsilon,
            state.spent_delta,
        ):
            raise self._error(
                "is corrupted: its entries do not add up to its recorded totals.", path
            )
        return [LedgerEntry(r[1], r[2], r[3], r[4]) for r in rows]

    # -- spending --------------------------------------------------------------------
    def spend(self, epsilon, delta=0.0, label="spend"):
        """Record a spend of (ε, δ), or refuse it and record nothing.

        One ``BEGIN IMMEDIATE`` transaction reads the ledger's totals row, verifies
        it, checks the spend and records it: O(1) whatever the length of the ledger.

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
            If ``epsilon``, ``delta`` or ``label`` is invalid (nothing is recorded).
        LedgerNotFoundError
            If the ledger file no longer exists (a :class:`LedgerError` and a
            ``FileNotFoundError``; nothing is recorded).
        LedgerError
            If the file is not this handle's ledger, holds other totals than this
            handle, is corrupted, read-only, on a full disk, or locked too long
            (nothing is recorded).
        """
        epsilon = _check_amount(epsilon, "epsilon", strictly_positive=True)
        delta = _check_amount(delta, "delta", strictly_positive=False, upper=1.0)
        if not isinstance(label, str):
            raise TypeError(f"label must be a str, got {type(label).__name__}.")
        try:
            label.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("label must be encodable as UTF-8 (no lone surrogates).") from None
        con = self._connect()
        try:
            con.execute("BEGIN IMMEDIATE")
            state = self._read_state(con)
            spent_eps = _from_units(state.spent_epsilon)
            spent_delta = _from_units(state.spent_delta)
            over_eps = spent_eps + epsilon > self._epsilon * (1 + _REL_TOL)
            over_delta = spent_delta + delta > self._delta * (1 + _REL_TOL) + 1e-300
            if over_eps or (delta > 0 and over_delta):
                raise BudgetExceededError(
                    f"Privacy budget exceeded: asked for epsilon={epsilon:g}, "
                    f"delta={delta:g} ({label}), but only epsilon="
                    f"{max(self._epsilon - spent_eps, 0.0):g}, delta="
                    f"{max(self._delta - spent_delta, 0.0):g} remain. {_GRID_SEARCH_HINT}"
                )
            entry_id = state.n_entries + 1
            now, pid = time.time(), os.getpid()
            chain = _link(state.head, entry_id, now, label, epsilon, delta, pid)
            new = _State(
                state.ledger_id,
                state.epsilon,
                state.delta,
                state.spent_epsilon + _to_units(epsilon),
                state.spent_delta + _to_units(delta),
                entry_id,
                chain,
            )
            con.execute(
                "INSERT INTO spends (id, time, label, epsilon, delta, pid, chain) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (entry_id, now, label, epsilon, delta, pid, chain),
            )
            cur = con.execute(
                "UPDATE totals SET ledger_id = ?, epsilon = ?, delta = ?, spent_epsilon = ?, "
                "spent_delta = ?, n_entries = ?, head = ?, digest = ? WHERE id = 1",
                new.row(),
            )
            if cur.rowcount != 1:
                raise self._error("is corrupted: its totals row cannot be updated.")
            con.execute("COMMIT")
        except _DB_ERRORS as exc:
            raise self._db_error(exc, "the spend was not recorded") from exc
        finally:
            # Closing without COMMIT rolls back: nothing of a refused spend remains.
            con.close()

    # -- reading ---------------------------------------------------------------------
    def _read(self, verify_entries=False):
        con = self._connect()
        try:
            con.execute("BEGIN")
            state = self._read_state(con)
            entries = self._verify_entries(con, state) if verify_entries else None
            con.execute("COMMIT")
        except _DB_ERRORS as exc:
            raise self._db_error(exc, "cannot read the privacy ledger") from exc
        finally:
            con.close()
        return state, entries

    @property
    def spent(self):
        """tuple of float: (ε, δ) spent so far (the correctly rounded exact sums)."""
        state, _ = self._read()
        return _from_units(state.spent_epsilon), _from_units(state.spent_delta)

    @property
    def remaining(self):
        """tuple of float: (ε, δ) still available (never negative)."""
        eps, delta = self.spent
        return max(self._epsilon - eps, 0.0), max(self._delta - delta, 0.0)

    @property
    def ledger(self):
        """list of LedgerEntry: every recorded spend, oldest first (all verified)."""
        _, entries = self._read(verify_entries=True)
        return entries

    def __len__(self):
        state, _ = self._read()
        return state.n_entries

    def __bool__(self):
        # A handle is a handle: without this, ``__len__`` would make a budget with
        # no spends yet falsy, and ``if budget:`` would skip charging it.
        return True

    def __repr__(self):
        # Shown inside estimator reprs and tracebacks: never raise here. Concise: the
        # totals, what was spent, and the path only when the user chose it (a temporary
        # ledger's name is noise that changes on every run).
        try:
            eps, delta = self.spent
            spent = f"({eps!r}, {delta!r})"
        except (OSError, sqlite3.Error, ValueError):
            spent = "unavailable"
        # A temporary ledger is one this process made with path=None (it owns the file),
        # or, in an unpickled handle (joblib worker), a file with mkstemp's name pattern.
        directory, name = os.path.split(os.path.abspath(self._path))
        temporary = self._owner_pid is not None or (
            directory == os.path.abspath(tempfile.gettempdir())
            and len(name) == len("skdptest-budget-") + 8 + len(".sqlite")
            and name.startswith("skdptest-budget-")
            and name.endswith(".sqlite")
        )
        path = "" if temporary else f", path={self._path!r}"
        return (
            f"PrivacyBudget(epsilon={self._epsilon!r}, delta={self._delta!r}, "
            f"spent={spent}{path})"
        )

    # -- handle semantics ------------------------------------------------------------
    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __getstate__(self):
        return {
            "epsilon": self._epsilon,
            "delta": self._delta,
            "path": self._path,
            "ledger_id": self._ledger_id,
        }

    def __setstate__(self, state):
        # Never creates a ledger: a handle whose file is gone refuses every spend
        # (only the constructor, told the totals by the analyst, may start a ledger).
        if not isinstance(state, dict) or not {"epsilon", "delta", "path", "ledger_id"} <= set(
            state
        ):
            raise LedgerError(
                "path=None: this pickled PrivacyBudget lacks its ledger identity (made by "
                "another skdptest version); reopen the ledger with PrivacyBudget(...)."
            )
        self._set(
            epsilon=_check_amount(state["epsilon"], "epsilon", strictly_positive=True),
            delta=_check_amount(state["delta"], "delta", strictly_positive=False, upper=1.0),
            path=os.fspath(state["path"]),
            ledger_id=str(state["ledger_id"]),
            owner_pid=None,
        )
        if not os.path.exists(self._path):
            warnings.warn(
                f"The privacy ledger {self._path!r} no longer exists; this unpickled "
                "PrivacyBudget will refuse to spend.",
                RuntimeWarning,
                stacklevel=2,
            )


def _remove_if_owner(path, owner_pid):
    if os.getpid() == owner_pid:
        for suffix in ("", "-journal", "-wal", "-shm"):
            try:
                os.remove(path + suffix)
            except OSError:
                pass
