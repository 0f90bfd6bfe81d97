"""The shared privacy-budget ledger.

A :class:`PrivacyBudget` is a *handle* to one ledger stored in an embedded SQLite
database, or in a PostgreSQL database (``path="postgresql://..."``, see
:mod:`skdptest._ledger_postgres`; the same transactions run on both). Copies
(``copy.deepcopy``, :func:`sklearn.base.clone`) return the same handle and pickles
carry the database location, so every fit of a grid search, including fits run in
joblib worker processes, charges the same ledger.

The ledger is an honest analyst's bookkeeping, not an access control: anyone who
can write the file can edit it. What the file format guarantees is that accidents
(a wrong path, a foreign or truncated file, random corruption, a handle whose
totals were tampered with in memory) are detected and refused rather than read as
another budget. See ``doc/privacy_budget.md`` for the threat model.

File format (``PRAGMA user_version = 2``)
-----------------------------------------
``PRAGMA application_id`` is :data:`LEDGER_APPLICATION_ID` (``0x534B4450``, the
ASCII bytes ``"SKDP"``). Table ``totals`` holds exactly one row: the ledger's
random id, the totals allowed (ε, δ), the *exact* sums spent (integers in
units of 2**-1074, the smallest float64 step, so no rounding accumulates; stored as
``"<odd hex mantissa>p<exponent>"``), the
number of entries, the head of a SHA-256 hash chain over the entries, the
accountant (``"basic"``, ``"zcdp"`` or ``"rdp"``, its Rényi order, the limit of its
running sum of losses, the exact running sum and the sum reserved) and a SHA-256
digest of all of these. Table ``spends`` holds the entries (with their privacy
profile and loss), each with its link of the hash chain; table ``reservations`` the
open reservations, each with its own digest. A spend reads and rewrites only the
``totals`` row (and its reservation's row), so it costs O(1) whatever the length of
the ledger; reading :attr:`PrivacyBudget.ledger` (and reopening a ledger by path)
re-verifies every entry against the chain, the count, the exact sums and the
reservations. Table ``queue`` (created by the first spend that has to wait; outside the
digests, it holds no budget) orders waiting spends first come, first served (see
``PrivacyBudget._begin_turn``).
"""

from __future__ import annotations

import atexit
import contextvars
import errno
import functools
import hashlib
import math
import os
import secrets
import socket
import sqlite3
import tempfile
import threading
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from numbers import Real
from pathlib import Path

from . import _accountants, _ledger_postgres
from ._params import Interval, InvalidParameterError, check_value
from ._warnings import PrivacyLeakWarning

__all__ = [
    "LEDGER_APPLICATION_ID",
    "BudgetExceededError",
    "BudgetReport",
    "DEFAULT_LEDGER_ENV",
    "LedgerEntry",
    "LedgerError",
    "LedgerNotFoundError",
    "PrivacyBudget",
    "PrivacyLeakWarning",
    "PrivacySpent",
    "accounted_elsewhere",
    "default_budget",
]

#: ``PRAGMA application_id`` of a ledger file: the ASCII bytes "SKDP" as a
#: big-endian 32-bit integer (0x534B4450 = 1397441616).
LEDGER_APPLICATION_ID = 0x534B4450
# ``PRAGMA user_version``: the layout of the tables below. Bump on any change.
_SCHEMA_VERSION = 2

# What _read_state checks first, in order: (pragma, expected value, message if not).
# Two plain PRAGMA statements: one SELECT of the table-valued pragma_application_id() and
# pragma_user_version() cost more (0.1 ms more per read, measured).
_PRAGMA_CHECKS = (
    ("application_id", LEDGER_APPLICATION_ID,
     "is an SQLite database but not a skdptest privacy ledger (application_id="
     "{value:#x}, a ledger has {expected:#x})."),
    ("user_version", _SCHEMA_VERSION,
     "is a privacy ledger of schema version {value}; this skdptest reads "
     "version {expected}."),
)
_TOTALS_QUERY = (
    "SELECT ledger_id, epsilon, delta, spent_epsilon, spent_delta, n_entries, head, "
    "accountant, rdp_order, loss_limit, spent_loss, reserved_loss, reserved_delta, "
    "n_reservations, digest FROM totals"
)

# Relative slack in the comparison ``spent + asked <= total``: sums of decimal
# fractions such as 100 x 0.01 are not exact in binary floating point.
_REL_TOL = 1e-9

# Seconds a connection waits for another process's write lock before giving up
# (module-level so that tests can shorten it).
_BUSY_TIMEOUT = 60.0

# A spend that has to wait on an SQLite ledger queues for its turn (first come, first
# served). _POLL: the pause, in seconds, between its tries of the write lock, and the
# first pause between its reads of the queue (growing to _POLL_MAX while the ticket first
# in line stays the same). SQLite's own busy handler sleeps up to 100 ms between tries,
# which lets writers that ask later cut in; short pauses make the queue's order the
# order of service.
_POLL = 0.0005
_POLL_MAX = 0.005

# The queue of waiting spends (SQLite only). Created by the first spend that has to wait;
# outside the digests and the hash chain: it holds no budget, only the order of service.
_QUEUE_TABLE = (
    "CREATE TABLE IF NOT EXISTS queue (ticket INTEGER PRIMARY KEY, owner INTEGER NOT NULL)"
)

# Every float64 is an integer multiple of 2**-1074, so sums kept as integers in
# these units are exact; ``units / 2**1074`` (int true division) is correctly
# rounded, hence equal to ``math.fsum`` of the entries.
_UNIT_EXP = 1074
_ONE = 1 << _UNIT_EXP

# What a statement on a damaged file can raise: sqlite3 errors, and UnicodeDecodeError
# when sqlite3 decodes an error message quoting garbage bytes (e.g. a corrupted schema).
_DB_ERRORS = (sqlite3.Error, UnicodeDecodeError, _ledger_postgres.ServerError)

# Temporary ledgers (``path=None``: a mkstemp file that only the creating process and its
# children know, deleted when the creator exits) skip fsync on every connection. A
# killed process loses nothing (its writes are in the OS's page cache and SQLite's
# rollback journal still makes each transaction atomic); only a power loss or an OS
# crash could, and the file would not outlive its process anyway. Their rollback journal
# is truncated at each commit instead of deleted: creating the journal file anew cost
# most of a spend's CPU (0.8 ms), and a 0-byte journal is never replayed. Persistent
# ledgers (a user's path, PostgreSQL) keep SQLite's defaults: fsync (FULL) and a journal
# deleted at each commit, so no file but the user's own is left beside it.
_TEMPORARY_PRAGMAS = ("PRAGMA synchronous = OFF", "PRAGMA journal_mode = TRUNCATE")

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
    accountant TEXT NOT NULL,
    rdp_order REAL NOT NULL,
    loss_limit REAL NOT NULL,
    spent_loss TEXT NOT NULL,
    reserved_loss TEXT NOT NULL,
    reserved_delta TEXT NOT NULL,
    n_reservations INTEGER NOT NULL,
    digest TEXT NOT NULL
);
CREATE TABLE spends (
    id INTEGER PRIMARY KEY,
    time REAL NOT NULL,
    label TEXT NOT NULL,
    epsilon REAL NOT NULL,
    delta REAL NOT NULL,
    pid INTEGER NOT NULL,
    chain TEXT NOT NULL,
    profile TEXT NOT NULL,
    loss REAL NOT NULL,
    reservation INTEGER NOT NULL
);
CREATE TABLE reservations (
    id INTEGER PRIMARY KEY,
    pid INTEGER NOT NULL,
    loss_left TEXT NOT NULL,
    delta_left TEXT NOT NULL,
    digest TEXT NOT NULL
);
"""

_GRID_SEARCH_HINT = (
    'Nothing was recorded. In a grid search pass error_score="raise" to GridSearchCV '
    "so that a refused spend stops the search instead of producing NaN scores."
)


class BudgetExceededError(ValueError):
    """Raised when a spend would exceed the total of a :class:`PrivacyBudget`.

    Nothing is recorded when it is raised.

    Examples
    --------
    >>> from skdptest import BudgetExceededError, PrivacyBudget
    >>> budget = PrivacyBudget(1.0)
    >>> try:
    ...     budget.spend(2.0)
    ... except BudgetExceededError:
    ...     print(len(budget))
    0
    """


class LedgerError(ValueError):
    """The ledger file cannot be used: not a ledger, corrupted, or not writable.

    The message names the path. Raised instead of reading a damaged or foreign
    file as a budget; nothing is recorded when it is raised. Errors of the
    ``sqlite3`` module (read-only file, full disk, lock timeout, malformed
    database) are chained as ``__cause__``.

    Examples
    --------
    >>> import os, tempfile
    >>> from skdptest import LedgerError, PrivacyBudget
    >>> path = os.path.join(tempfile.mkdtemp(), "notes.txt")
    >>> with open(path, "w") as file:
    ...     _ = file.write("not a ledger")
    >>> try:
    ...     PrivacyBudget(1.0, path=path)
    ... except LedgerError as exc:
    ...     print("is not an SQLite database" in str(exc))
    True
    """


class LedgerNotFoundError(LedgerError, FileNotFoundError):
    """The ledger file of a handle no longer exists; nothing is recorded.

    Examples
    --------
    >>> import os
    >>> from skdptest import LedgerNotFoundError, PrivacyBudget
    >>> budget = PrivacyBudget(1.0)
    >>> os.remove(budget.path)
    >>> try:
    ...     budget.spend(0.1)
    ... except LedgerNotFoundError:
    ...     print("refused")
    refused
    """


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
    profile : str
        Privacy profile of the release (``"pure"`` or ``"laplace"``, see
        :mod:`skdptest._accountants`).
    loss : float
        What the spend added to the ledger's running sum: ε (``"basic"``), ρ
        (``"zcdp"``) or the Rényi divergence at the ledger's order (``"rdp"``).
    reservation : int
        Id of the reservation the spend drew on (0: none).

    Examples
    --------
    >>> from skdptest import PrivacyBudget
    >>> budget = PrivacyBudget(1.0)
    >>> budget.spend(0.25, label="first release")
    >>> entry = budget.ledger[0]
    >>> entry.label, entry.epsilon, entry.profile
    ('first release', 0.25, 'pure')
    """

    time: float
    label: str
    epsilon: float
    delta: float
    profile: str = "pure"
    loss: float = 0.0
    reservation: int = 0


@dataclass(frozen=True)
class BudgetReport:
    """What a ledger's spends cost, by accountant (:meth:`PrivacyBudget.report`).

    Attributes
    ----------
    accountant : str
        The ledger's accountant.
    n_entries : int
        Number of spends reported.
    delta : float
        The δ at which every ε below is given.
    adaptive_epsilon : float
        The guarantee under adaptively chosen spends: the sum of the ε (basic
        composition, with ``basic_delta``) for a ``"basic"`` ledger; the ε of the
        ledger's filter target for ``"zcdp"`` and ``"rdp"`` (a filter certifies its
        target, not the sum reached so far).
    basic_epsilon, basic_delta : float
        Sums of the ε and δ spent (basic composition).
    zcdp_epsilon : float or None
        ε from the sum of the zCDP parameters (``None`` if a spend had δ > 0).
    rdp_epsilon : float or None
        ε from the Rényi composition, the best order chosen afterwards: a
        *declared-batch* figure (``None`` if a spend had δ > 0).
    batch_epsilon : float
        ε of the privacy-loss-distribution composition (``dp_accounting``), the
        tightest of all: valid only **as a declared batch**, i.e. had this sequence
        of spends been fixed in advance; not a guarantee for adaptive choices.
    label : str
        The words above in one line, for printed reports.

    Examples
    --------
    >>> from skdptest import PrivacyBudget
    >>> budget = PrivacyBudget(3.0, 1e-6, accountant="zcdp")
    >>> for _ in range(10):
    ...     budget.spend(0.1)
    >>> report = budget.report()
    >>> round(report.basic_epsilon, 6), report.batch_epsilon < report.basic_epsilon
    (1.0, True)
    """

    accountant: str
    n_entries: int
    delta: float
    adaptive_epsilon: float
    basic_epsilon: float
    basic_delta: float
    zcdp_epsilon: float | None
    rdp_epsilon: float | None
    batch_epsilon: float
    label: str = (
        "batch_epsilon, rdp_epsilon and zcdp_epsilon hold for these spends as a batch "
        "declared in advance; adaptive_epsilon is what the ledger guarantees for "
        "adaptively chosen spends."
    )


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
    if type(value) is float and (0.0 < value if strictly_positive else 0.0 <= value) and (
        value < math.inf if upper is None else value < upper
    ):
        # The usual case, a plain float in range: what the constraint below returns for
        # it (the value itself), without building the constraint (a spend checks two).
        return value
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


def _link(previous, entry_id, time_, label, epsilon, delta, pid, profile, loss, reservation):
    # The label goes last: every other field is hex, decimal or a fixed word and cannot
    # hold the separator, so the hashed record decodes uniquely.
    return _sha256(
        "skdptest-ledger-entry",
        previous,
        str(entry_id),
        time_.hex(),
        epsilon.hex(),
        delta.hex(),
        str(pid),
        profile,
        loss.hex(),
        str(reservation),
        label,
    )


def _reservation_digest(ledger_id, res_id, pid, loss_left, delta_left):
    return _sha256(
        "skdptest-ledger-reservation",
        ledger_id,
        str(res_id),
        str(pid),
        _format_units(loss_left),
        _format_units(delta_left),
    )


def _host_tag():
    """31 bits naming this machine (a hash of its host name): a reservation's owner is
    ``tag << 32 | pid``, so only a process on the owner's machine judges it crashed."""
    name = socket.gethostname().encode("utf-8", "surrogateescape")
    return int.from_bytes(hashlib.sha256(name).digest()[:4], "big") & 0x7FFFFFFF


def _owner_id():
    """This process as a reservation owner: its machine's tag and its pid."""
    return _host_tag() << 32 | os.getpid()


def _owner_alive(owner):
    """Whether a reservation's owner may still run. A pid means nothing on another
    machine (a server ledger is shared by several): an owner elsewhere counts as alive,
    so its reservation is kept until it is released (never freed early)."""
    if owner >> 32 != _host_tag():
        return True
    return _pid_alive(owner & 0xFFFFFFFF)


def _pid_alive(pid):
    """Whether process ``pid`` exists on this machine (a reservation's owner)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by another user
        return True
    return True


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
    accountant: str = "basic"
    rdp_order: float = 0.0
    loss_limit: float | None = None  # None: the total ε (basic)
    spent_loss: int | None = None  # None: spent_epsilon (basic)
    reserved_loss: int = 0
    reserved_delta: int = 0
    n_reservations: int = 0

    def __post_init__(self):
        if self.loss_limit is None:
            object.__setattr__(self, "loss_limit", self.epsilon)
        if self.spent_loss is None:
            object.__setattr__(self, "spent_loss", self.spent_epsilon)

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
            self.accountant,
            self.rdp_order.hex(),
            self.loss_limit.hex(),
            _format_units(self.spent_loss),
            _format_units(self.reserved_loss),
            _format_units(self.reserved_delta),
            str(self.n_reservations),
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
            self.accountant,
            self.rdp_order,
            self.loss_limit,
            _format_units(self.spent_loss),
            _format_units(self.reserved_loss),
            _format_units(self.reserved_delta),
            self.n_reservations,
            self.digest(),
        )

    def replace(self, **changes):
        fields = {name: getattr(self, name) for name in self.__dataclass_fields__}
        fields.update(changes)
        return _State(**fields)


def _begin_immediate(con, wait):
    """``BEGIN IMMEDIATE`` on an SQLite connection, retrying every ``_POLL`` seconds for
    at most ``_BUSY_TIMEOUT`` seconds (``wait``), or not at all.

    Returns whether the lock was taken (always ``True`` with ``wait``, which raises
    SQLite's "database is locked" error once the time is up).
    """
    con.execute("PRAGMA busy_timeout = 0")
    try:
        deadline = time.monotonic() + _BUSY_TIMEOUT
        while True:
            try:
                con.execute("BEGIN IMMEDIATE")
                return True
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                if not wait:
                    return False
                if time.monotonic() >= deadline:
                    raise
            # Never slower: a backoff would let writers that asked later cut in.
            time.sleep(_POLL)
    finally:
        # The commit may still wait for readers: SQLite's busy handler, as for any statement.
        con.execute(f"PRAGMA busy_timeout = {int(_BUSY_TIMEOUT * 1000)}")


def _leave_queue(con, ticket):
    """Delete a spend's ticket after its transaction failed (best effort: a ticket left
    behind by a live process delays the queue at most ``_BUSY_TIMEOUT`` seconds, and one
    of a dead process is skipped)."""
    try:
        if con.in_transaction:
            con.execute("ROLLBACK")
        _begin_immediate(con, wait=True)
        con.execute("DELETE FROM queue WHERE ticket = ?", (ticket,))
        con.execute("COMMIT")
    except _DB_ERRORS:
        pass


@functools.lru_cache(maxsize=1)
def _empty_ledger_image():
    """The bytes of a ledger file with its marker and tables but no totals row yet.

    Built once per process by SQLite (the same statements as ``_create``, in a scratch
    file), then copied into each new temporary ledger: the three ``CREATE TABLE`` cost
    half of a temporary ledger's creation. The page contents are what ``_create``
    writes; only the header's change counter differs (one more commit).
    """
    fd, scratch = tempfile.mkstemp(prefix="skdptest-schema-", suffix=".sqlite")
    os.close(fd)
    try:
        con = sqlite3.connect(scratch, isolation_level=None)
        try:
            # A scratch file: no journal, no fsync.
            con.execute("PRAGMA journal_mode = OFF")
            con.execute("PRAGMA synchronous = OFF")
            con.execute("BEGIN IMMEDIATE")
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    con.execute(statement)
            con.execute("COMMIT")
        finally:
            con.close()
        with open(scratch, "rb") as file:
            return file.read()
    finally:
        _remove_if_owner(scratch, os.getpid())


def _read_header(path):
    """The first bytes of the file ``path`` (at most the SQLite header's 100).

    Unbuffered (three system calls; ``open`` takes six): it runs before every
    transaction. Raises what ``open(path, "rb").read()`` raises, ``IsADirectoryError``
    for a directory included.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        return os.read(fd, _HEADER_SIZE)
    finally:
        os.close(fd)


def _file_uri(path, mode):
    """The SQLite URI of the file ``path`` (relative paths: from the current directory)."""
    return _absolute_uri(os.path.abspath(path), mode)


@functools.lru_cache(maxsize=256)
def _absolute_uri(path, mode):
    # Cached: pathlib's quoting cost a tenth of a read. Keyed by the path only (public).
    return Path(path).as_uri() + "?mode=" + mode


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

    Each spend is recorded with its ε, δ and privacy profile, and is admitted by
    the ledger's accountant: ``"basic"`` (the ε of all spends add up, and so do
    the δ), ``"zcdp"`` (their zCDP parameters add up to at most the largest ρ that
    converts to the target (ε, δ)) or ``"rdp"`` (their Rényi divergences of one
    fixed order add up to at most the largest that converts to it). Each check is
    a valid privacy filter when the spends are chosen adaptively (see
    :mod:`skdptest._accountants` and ``doc/privacy_budget.md``). A spend is one
    atomic check-then-record transaction, safe across threads and processes on
    one machine (SQLite) or on every machine reaching the server (PostgreSQL), and
    costs O(1) however long the ledger is. A handle refuses a ledger rolled back
    behind what it (or the handle it was pickled from) already saw.

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
        the creating process exits and written without fsync (see Notes). A URL
        ``"postgresql://..."`` (the ``postgres`` extra, psycopg 3) keeps the ledger
        on a PostgreSQL server instead, with the same transactions, integrity
        checks and semantics (see :mod:`skdptest._ledger_postgres`): its tables
        are created in the URL's database (or the schema its ``search_path``
        names) unless a ledger is there.
    accountant : {"basic", "zcdp", "rdp"}, default="basic"
        How spends compose (fixed when the ledger is created; reopening with
        another accountant is refused). ``"zcdp"`` and ``"rdp"`` need
        ``delta > 0`` and admit only spends with δ = 0.

    Attributes
    ----------
    epsilon : float
        Total ε allowed (read-only).
    delta : float
        Total δ allowed (read-only).
    path : str
        Location of the ledger: an SQLite file, or a PostgreSQL URL (read-only;
        messages and the repr never show the URL's password).
    accountant : str
        The accountant (read-only).
    rdp_order : float
        The Rényi order of an ``"rdp"`` ledger (0.0 otherwise).
    loss_limit : float
        The limit of the running sum of losses: ε (basic), ρ (zcdp) or the Rényi
        divergence at ``rdp_order`` (rdp).

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

    Durability: a ledger at a ``path`` (or on PostgreSQL) has a spend recorded on
    disk when ``spend`` returns (SQLite's ``synchronous = FULL``). A temporary
    ledger (``path=None``) skips fsync (``synchronous = OFF``, and its rollback
    journal is truncated rather than deleted at each commit): a process killed at
    any moment loses nothing, since its writes are in the operating system's
    cache and each transaction stays atomic; only a power loss or an OS crash
    could lose recent spends, and the file, known only to this process and its
    children, would not outlive its process anyway.

    Examples
    --------
    >>> from skdptest import PrivacyBudget
    >>> budget = PrivacyBudget(epsilon=1.0)
    >>> budget.spend(0.25, label="first release")
    >>> round(budget.remaining[0], 10)
    0.75
    """

    def __init__(self, epsilon, delta=0.0, path=None, *, accountant="basic"):
        if "_path" in self.__dict__:
            raise AttributeError("A PrivacyBudget cannot be re-initialised; create a new one.")
        epsilon = _check_amount(epsilon, "epsilon", strictly_positive=True)
        delta = _check_amount(delta, "delta", strictly_positive=False, upper=1.0)
        if accountant not in _accountants.ACCOUNTANTS:
            raise InvalidParameterError(
                f"accountant must be one of {_accountants.ACCOUNTANTS}, got {accountant!r}."
            )
        if accountant != "basic" and delta == 0:
            raise InvalidParameterError(
                f"accountant={accountant!r} needs delta > 0 (a zCDP or Rényi guarantee "
                "converts to (epsilon, delta)-DP only for delta > 0); use accountant='basic' "
                "for a pure budget."
            )
        self._init(epsilon, delta, path, accountant)

    @classmethod
    def _unlimited(cls, path=None):
        """A ``"basic"`` ledger without a limit (the process-wide default ledger)."""
        budget = cls.__new__(cls)
        budget._init(math.inf, math.inf, path, "basic", buffered=path is None)
        return budget

    def _init(self, epsilon, delta, path, accountant, buffered=False):
        # Two independent speed-ups, both for temporary ledgers only:
        # ``durable=False``: no fsync and a kept journal (see _TEMPORARY_PRAGMAS);
        # ``buffered``: spends kept in memory until the next read, valid only for the
        # unlimited default ledger, which can refuse nothing (see ``spend``).
        order = _accountants.default_order(epsilon, delta) if accountant == "rdp" else 0.0
        self._set(
            epsilon=epsilon, delta=delta, path=None, ledger_id=None, owner_pid=None,
            accountant=accountant, rdp_order=order, reservation=None, buffered=buffered,
            durable=path is not None,
            loss_limit=_accountants.loss_limit(accountant, epsilon, delta, order),
            pending=[], pending_lock=threading.Lock(), seen=(0, None),
        )
        if path is None:
            fd, path = tempfile.mkstemp(prefix="skdptest-budget-", suffix=".sqlite")
            self._set(path=path, owner_pid=os.getpid())
            atexit.register(_remove_if_owner, path, os.getpid())
            # A fresh mkstemp file that only this process knows: build the ledger in place,
            # from the image of an empty one (its tables and marker), then its totals row.
            try:
                with os.fdopen(fd, "wb") as file:
                    file.write(_empty_ledger_image())
            except OSError as exc:
                raise LedgerError(
                    f"path={path!r}: cannot create the privacy ledger: {exc}"
                ) from exc
            self._set(ledger_id=self._create(path, schema=False))
            return
        if _ledger_postgres.is_url(path):
            self._set(path=path)
            self._set(ledger_id=self._create_server(path))
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

    @property
    def accountant(self):
        """str: how spends compose, ``"basic"``, ``"zcdp"`` or ``"rdp"`` (read-only)."""
        return self._accountant

    @property
    def rdp_order(self):
        """float: the Rényi order of an ``"rdp"`` ledger, 0.0 otherwise (read-only)."""
        return self._rdp_order

    @property
    def loss_limit(self):
        """float: the limit of the ledger's running sum of losses (read-only)."""
        return self._loss_limit

    # -- creating and opening --------------------------------------------------------
    def _error(self, message, path=None):
        path = self._path if path is None else path
        if _ledger_postgres.is_url(path):
            path = _ledger_postgres.redact(path)
        return LedgerError(f"path={path!r}: {message}")

    def _create_server(self, url):
        """Create the ledger in the PostgreSQL database at ``url``, or reopen the one
        there; return its id."""
        ledger_id = secrets.token_hex(16)
        state = _State(
            ledger_id, self._epsilon, self._delta, 0, 0, 0, _genesis(ledger_id),
            accountant=self._accountant, rdp_order=self._rdp_order,
            loss_limit=self._loss_limit, spent_loss=0,
        )
        try:
            created = _ledger_postgres.create(
                url, _BUSY_TIMEOUT, state.row(), LEDGER_APPLICATION_ID, _SCHEMA_VERSION
            )
        except _ledger_postgres.ServerError as exc:
            raise self._error(f"cannot create the privacy ledger: {exc}", url) from exc
        return ledger_id if created else self._reopen(url)

    def _create(self, path, name=None, schema=True):
        """Write a new, empty ledger into ``path`` (absent or 0 bytes); return its id.

        ``name`` is the path to name in errors (the final path, when ``path`` is the
        private file the ledger is built in). ``schema=False``: ``path`` holds
        :func:`_empty_ledger_image` already; only the totals row is written.
        """
        name = path if name is None else name
        ledger_id = secrets.token_hex(16)
        state = _State(
            ledger_id, self._epsilon, self._delta, 0, 0, 0, _genesis(ledger_id),
            accountant=self._accountant, rdp_order=self._rdp_order,
            loss_limit=self._loss_limit, spent_loss=0,
        )
        try:
            con = _open_connection(_file_uri(path, "rwc"))
        except _DB_ERRORS as exc:
            raise LedgerError(
                f"path={name!r}: cannot create the privacy ledger: {_describe(exc, creating=True)}"
            ) from exc
        try:
            if not self._durable:
                for pragma in _TEMPORARY_PRAGMAS:
                    con.execute(pragma)
            con.execute("BEGIN IMMEDIATE")
            for statement in _SCHEMA.split(";") if schema else ():
                if statement.strip():
                    con.execute(statement)
            con.execute(
                "INSERT INTO totals VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                state.row(),
            )
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
        con = self._connect(path, write=False)
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
        if state.accountant != self._accountant:
            raise self._error(
                f"holds a ledger created with accountant={state.accountant!r}; it cannot be "
                f"reopened with accountant={self._accountant!r}.",
                path,
            )
        # The file's order and limit are authoritative (another dp_accounting version
        # could compute a slightly different limit; the ledger keeps the one it began with).
        self._set(rdp_order=state.rdp_order, loss_limit=state.loss_limit)
        self._saw(state)
        return state.ledger_id

    def _saw(self, state):
        """Remember the newest state this handle has seen (its rollback anchor)."""
        if state.n_entries >= self._seen[0]:
            self._set(seen=(state.n_entries, state.head))

    def _locked_state(self, con):
        """:meth:`_read_state` under the write lock, refusing a ledger rolled back behind
        what this handle (or the handle it was pickled from) already saw."""
        state = self._read_state(con)
        count, head = self._seen
        if state.n_entries < count or (
            state.n_entries == count and head is not None and state.head != head
        ):
            raise self._error(
                f"is behind what this handle already saw ({state.n_entries} entries now, "
                f"{count} seen, or another chain head): the ledger was rolled back (e.g. an "
                "older copy restored over it); refusing to charge it."
            )
        return state

    def _connect(self, path=None, write=True):
        """Connect to an existing ledger file; never creates one.

        ``write=False``: for a read-only transaction, which needs no journal or sync
        settings (they apply to commits that write).
        """
        path = self._path if path is None else path
        if _ledger_postgres.is_url(path):
            try:
                return _ledger_postgres.connect(path, _BUSY_TIMEOUT)
            except _ledger_postgres.ServerError as exc:
                raise self._error(f"cannot open the privacy ledger: {exc}", path) from exc
        # Cheap O(1) checks first, for clear messages: sqlite3 would report a 0-byte
        # file as an empty database and a missing one as "unable to open".
        try:
            header = _read_header(path)
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
            con = _open_connection(_file_uri(path, "rw"))
            if write and not self._durable:
                for pragma in _TEMPORARY_PRAGMAS:
                    con.execute(pragma)
            return con
        except _DB_ERRORS as exc:
            raise self._error(f"cannot open the privacy ledger: {_describe(exc)}", path) from exc

    def _db_error(self, exc, doing, path=None):
        """The :class:`LedgerError` for an sqlite3 error, saying why when it can."""
        path = self._path if path is None else path
        if isinstance(exc, _ledger_postgres.ServerError):
            if exc.missing:
                return LedgerNotFoundError(str(self._error(
                    "the privacy ledger no longer exists in this database (its tables were "
                    "dropped; only the PrivacyBudget constructor creates a ledger); "
                    f"{doing}.", path)))
            return self._error(f"{doing}: {exc}", path)
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
        rows = con.execute(_TOTALS_QUERY).fetchall()
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
            if (state.accountant, state.rdp_order, state.loss_limit) != (
                self._accountant, self._rdp_order, self._loss_limit
            ):
                raise self._error(
                    f"holds accountant={state.accountant!r} with limit {state.loss_limit!r}, but "
                    f"this handle has accountant={self._accountant!r} with limit "
                    f"{self._loss_limit!r}; refusing to charge it.",
                )
        return state

    def _parse_totals(self, row, path):
        (ledger_id, eps, delta, spent_e, spent_d, n, head, accountant, order, limit,
         spent_l, reserved_l, reserved_d, n_res, digest) = row
        types = (str, float, float, str, str, int, str, str, float, float, str, str, str, int,
                 str)
        corrupted = self._error(
            "is corrupted: its totals row does not match its integrity digest.", path
        )
        if not all(type(v) is t for v, t in zip(row, types, strict=True)):
            raise corrupted
        try:
            state = _State(
                ledger_id, eps, delta, _parse_units(spent_e), _parse_units(spent_d), n, head,
                accountant, order, limit, _parse_units(spent_l), _parse_units(reserved_l),
                _parse_units(reserved_d), n_res,
            )
        except ValueError:
            raise corrupted from None
        if state.digest() != digest:
            raise corrupted
        return state

    def _verify_entries(self, con, state, path=None):
        """Check every entry against the hash chain, the count and the exact sums."""
        rows = con.execute(
            "SELECT id, time, label, epsilon, delta, pid, chain, profile, loss, reservation "
            "FROM spends ORDER BY id"
        ).fetchall()
        head = _genesis(state.ledger_id)
        sum_e = sum_d = sum_l = 0
        for index, row in enumerate(rows, start=1):
            entry_id, time_, label, eps, delta, pid, chain, profile, loss, res = row
            ok = (
                type(entry_id) is int
                and type(time_) is float
                and type(label) is str
                and type(eps) is float
                and type(delta) is float
                and type(pid) is int
                and type(profile) is str
                and type(loss) is float
                and type(res) is int
                and entry_id == index
                and math.isfinite(eps)
                and math.isfinite(delta)
                and math.isfinite(loss)
                and eps > 0
                and delta >= 0
                and loss >= 0
                and profile in _accountants.PROFILES
            )
            if ok:
                head = _link(head, entry_id, time_, label, eps, delta, pid, profile, loss, res)
            if not ok or head != chain:
                raise self._error(
                    f"is corrupted: entry {index} does not match the ledger's hash chain.", path
                )
            sum_e += _to_units(eps)
            sum_d += _to_units(delta)
            sum_l += _to_units(loss)
        if (len(rows), head, sum_e, sum_d, sum_l) != (
            state.n_entries,
            state.head,
            state.spent_epsilon,
            state.spent_delta,
            state.spent_loss,
        ):
            raise self._error(
                "is corrupted: its entries do not add up to its recorded totals.", path
            )
        reservations = self._read_reservations(con, state, path)
        if (sum(r[2] for r in reservations), sum(r[3] for r in reservations)) != (
            state.reserved_loss, state.reserved_delta
        ):
            raise self._error(
                "is corrupted: its reservations do not add up to its recorded totals.", path
            )
        return [LedgerEntry(*r[1:5], r[7], r[8], r[9]) for r in rows]

    def _read_reservations(self, con, state, path=None, res_id=None):
        """The verified reservation rows (all, or the one with id ``res_id``)."""
        query = "SELECT id, pid, loss_left, delta_left, digest FROM reservations"
        rows = (con.execute(query + " WHERE id = ?", (res_id,)) if res_id is not None
                else con.execute(query + " ORDER BY id")).fetchall()
        out = []
        for row in rows:
            res, pid, loss_left, delta_left, digest = row
            try:
                if type(res) is not int or type(pid) is not int:
                    raise ValueError
                loss_left, delta_left = _parse_units(loss_left), _parse_units(delta_left)
            except (ValueError, TypeError):
                loss_left = None
            if loss_left is None or digest != _reservation_digest(
                state.ledger_id, res, pid, loss_left, delta_left
            ):
                raise self._error(
                    f"is corrupted: reservation {res} does not match its integrity digest.", path
                )
            out.append((res, pid, loss_left, delta_left))
        return out

    # -- spending --------------------------------------------------------------------
    def spend(self, epsilon, delta=0.0, label="spend", *, profile="pure"):
        """Record a spend of (ε, δ), or refuse it and record nothing.

        One ``BEGIN IMMEDIATE`` transaction reads the ledger's totals row, verifies
        it, checks the spend with the ledger's accountant and records it: O(1)
        whatever the length of the ledger. Inside :meth:`reserve`, the spend draws
        on the reservation while it covers the spend. Spends that have to wait for
        the lock are served first come, first served from the moment they are queued
        (on SQLite, in the order of their tickets, which are issued in a race for the
        write lock; on PostgreSQL, by the server's lock queue).

        Parameters
        ----------
        epsilon : float
            ε to charge, finite and > 0.
        delta : float, default=0.0
            δ to charge, in [0, 1) (only 0 on a ``"zcdp"`` or ``"rdp"`` ledger).
        label : str, default="spend"
            Description stored in the ledger.
        profile : {"pure", "laplace"}, default="pure"
            Privacy profile of the release: ``"laplace"`` only when the release is
            one continuous Laplace draw of scale sensitivity/ε, or a post-processing
            of it; ``"pure"`` for any other ε-DP release.

        Raises
        ------
        BudgetExceededError
            If the spend would exceed the total; the message states what was
            asked and what remains.
        ValueError, TypeError
            If ``epsilon``, ``delta``, ``label`` or ``profile`` is invalid (nothing
            is recorded).
        LedgerNotFoundError
            If the ledger file no longer exists (a :class:`LedgerError` and a
            ``FileNotFoundError``; nothing is recorded).
        LedgerError
            If the file is not this handle's ledger, holds other totals than this
            handle, is corrupted, read-only, on a full disk, or locked too long
            (nothing is recorded).
        """
        epsilon, delta, label, profile = self._check_spend(epsilon, delta, label, profile)
        if self._buffered and self._reservation is None:
            # The temporary default ledger has no limit, so nothing can be refused: its
            # spends are kept in memory and written (chained, verified) by the next read.
            with self._pending_lock:
                self._pending.append((time.time(), label, epsilon, delta, profile))
            return
        self._flush()
        self._record([(None, label, epsilon, delta, profile)])

    def _flush(self):
        """Write the pending spends of the temporary default ledger in one transaction."""
        if not self._buffered:
            return
        with self._pending_lock:
            pending, self._pending[:] = list(self._pending), []
        if pending:
            self._record(pending)

    def _record(self, batch):
        """Check and record ``(time or None, label, ε, δ, profile)`` spends in one transaction."""
        con = self._connect()
        ticket = None
        try:
            if _ledger_postgres.is_url(self._path):
                con.execute("BEGIN IMMEDIATE")  # the server's lock queue is FIFO already
            else:
                ticket = self._begin_turn(con)
            state = self._locked_state(con)
            for when, label, epsilon, delta, profile in batch:
                state = self._record_one(con, state, when, label, epsilon, delta, profile)
            self._write_totals(con, state)
            if ticket is not None:
                # In the same transaction: a crash leaves either the spend recorded and no
                # ticket, or no spend and the ticket of a dead process (which waiters skip).
                con.execute("DELETE FROM queue WHERE ticket <= ?", (ticket,))
            con.execute("COMMIT")
            ticket = None
            self._saw(state)
        except _DB_ERRORS as exc:
            raise self._db_error(exc, "the spend was not recorded") from exc
        finally:
            # Leaving without COMMIT rolls back: nothing of a refused spend remains. A
            # refused or failed spend then gives up its place in the queue.
            if ticket is not None:
                _leave_queue(con, ticket)
            con.close()

    def _begin_turn(self, con):
        """``BEGIN IMMEDIATE`` on an SQLite ledger when it is this spend's turn.

        A spend that gets the write lock at once while no one is queued goes ahead (no
        ticket, one transaction). Otherwise it takes a ticket (a row of ``queue``, in a
        short transaction of its own) and polls until no ticket ahead of its own belongs
        to a live process, then takes the lock: first come, first served. Tickets of dead
        processes (``_owner_alive``) are skipped and deleted with the spend's own, so a
        killed process never blocks the queue; a ticket that stays first for longer than
        ``_BUSY_TIMEOUT`` (abandoned by a live process, or written by hand) is skipped too,
        so nothing in the queue can do worse than delay. Returns the ticket (``None``:
        none was taken); its row must be deleted in the spend's transaction.

        The guarantee starts at the ticket's transaction: after it, only spends holding
        earlier tickets (at most one per other spend call) are recorded before this one.
        The ticket itself is issued in a race for the write lock, which orders nothing: a
        spend that asked later can get an earlier ticket (doc/privacy_budget.md).
        """
        if _begin_immediate(con, wait=False):
            try:
                waiting = con.execute("SELECT 1 FROM queue LIMIT 1").fetchone()
            except sqlite3.OperationalError as exc:
                if "no such table" not in str(exc):
                    raise
                waiting = None
            if waiting is None:
                return None
        else:
            _begin_immediate(con, wait=True)
        con.execute(_QUEUE_TABLE)
        ticket = con.execute(
            "INSERT INTO queue (owner) VALUES (?)", (_owner_id(),)
        ).lastrowid
        con.execute("COMMIT")
        try:
            head, since, pause = None, time.monotonic(), _POLL
            while True:
                # Tickets are issued in increasing order, so none can appear ahead of ours.
                ahead = [t for t, owner in con.execute(
                    "SELECT ticket, owner FROM queue WHERE ticket < ? ORDER BY ticket",
                    (ticket,)).fetchall() if type(owner) is int and _owner_alive(owner)]
                if not ahead:
                    break
                now = time.monotonic()
                if ahead[0] != head:
                    head, since, pause = ahead[0], now, _POLL
                elif now - since > _BUSY_TIMEOUT:
                    break  # the first ticket is not being served: skip it
                time.sleep(pause)
                pause = min(2 * pause, _POLL_MAX)
            _begin_immediate(con, wait=True)
        except BaseException:
            _leave_queue(con, ticket)
            raise
        return ticket

    def _record_one(self, con, state, when, label, epsilon, delta, profile):
        loss = _accountants.loss(self._accountant, epsilon, profile, self._rdp_order)
        loss_units, delta_units = _to_units(loss), _to_units(delta)
        res_id = 0
        if self._reservation is not None:
            rows = self._read_reservations(con, state, res_id=self._reservation)
            if rows and rows[0][2] >= loss_units and rows[0][3] >= delta_units:
                res_id, pid, loss_left, delta_left = rows[0]
                loss_left -= loss_units
                delta_left -= delta_units
                con.execute(
                    "UPDATE reservations SET loss_left = ?, delta_left = ?, digest = ? "
                    "WHERE id = ?",
                    (_format_units(loss_left), _format_units(delta_left),
                     _reservation_digest(state.ledger_id, res_id, pid, loss_left,
                                         delta_left), res_id),
                )
                if state.reserved_loss < loss_units or state.reserved_delta < delta_units:
                    raise self._error("is corrupted: its reservations exceed its totals.")
                state = state.replace(
                    reserved_loss=state.reserved_loss - loss_units,
                    reserved_delta=state.reserved_delta - delta_units,
                )
        if res_id == 0 and not self._fits(state, loss, delta):
            state = self._release_stale(con, state)
            if not self._fits(state, loss, delta):
                raise BudgetExceededError(self._refusal(state, epsilon, delta, label))
        entry_id = state.n_entries + 1
        now, pid = (time.time() if when is None else when), os.getpid()
        chain = _link(state.head, entry_id, now, label, epsilon, delta, pid, profile, loss,
                      res_id)
        con.execute(
            "INSERT INTO spends (id, time, label, epsilon, delta, pid, chain, profile, "
            "loss, reservation) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (entry_id, now, label, epsilon, delta, pid, chain, profile, loss, res_id),
        )
        return state.replace(
            spent_epsilon=state.spent_epsilon + _to_units(epsilon),
            spent_delta=state.spent_delta + delta_units,
            spent_loss=state.spent_loss + loss_units,
            n_entries=entry_id,
            head=chain,
        )

    def _check_spend(self, epsilon, delta, label, profile):
        epsilon = _check_amount(epsilon, "epsilon", strictly_positive=True)
        delta = _check_amount(delta, "delta", strictly_positive=False, upper=1.0)
        if not isinstance(label, str):
            raise TypeError(f"label must be a str, got {type(label).__name__}.")
        try:
            label.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("label must be encodable as UTF-8 (no lone surrogates).") from None
        if profile not in _accountants.PROFILES:
            raise InvalidParameterError(
                f"profile must be one of {_accountants.PROFILES}, got {profile!r}."
            )
        if delta > 0 and self._accountant != "basic":
            raise InvalidParameterError(
                f"delta must be 0 on a ledger with accountant={self._accountant!r}, got "
                f"{delta:g} ({label}): approximate-DP spends are accounted only by "
                "accountant='basic'. Nothing was recorded."
            )
        return epsilon, delta, label, profile

    def _write_totals(self, con, new):
        cur = con.execute(
            "UPDATE totals SET ledger_id = ?, epsilon = ?, delta = ?, spent_epsilon = ?, "
            "spent_delta = ?, n_entries = ?, head = ?, accountant = ?, rdp_order = ?, "
            "loss_limit = ?, spent_loss = ?, reserved_loss = ?, reserved_delta = ?, "
            "n_reservations = ?, digest = ? WHERE id = 1",
            new.row(),
        )
        if cur.rowcount != 1:
            raise self._error("is corrupted: its totals row cannot be updated.")

    def _fits(self, state, loss, delta):
        committed = _from_units(state.spent_loss + state.reserved_loss)
        if committed + loss > self._loss_limit * (1 + _REL_TOL):
            return False
        committed_delta = _from_units(state.spent_delta + state.reserved_delta)
        return delta == 0 or committed_delta + delta <= self._delta * (1 + _REL_TOL) + 1e-300

    def _left(self, state):
        """(largest ε of one more pure spend, δ left) given ``state``."""
        loss_left = max(self._loss_limit - _from_units(state.spent_loss + state.reserved_loss),
                        0.0)
        delta_left = max(self._delta - _from_units(state.spent_delta + state.reserved_delta),
                         0.0)
        return (_accountants.largest_epsilon(self._accountant, loss_left, self._rdp_order),
                delta_left)

    def _refusal(self, state, epsilon, delta, label, what="asked for"):
        eps_left, delta_left = self._left(state)
        reserved = " (some of it reserved)" if state.reserved_loss or state.reserved_delta \
            else ""
        how = "" if self._accountant == "basic" else (
            f" under the {self._accountant!r} accountant (epsilon remaining is the largest "
            "one more pure spend may have)"
        )
        return (
            f"Privacy budget exceeded: {what} epsilon={epsilon:g}, delta={delta:g} ({label}), "
            f"but only epsilon={eps_left:g}, delta={delta_left:g} remain{reserved}{how}. "
            f"{_GRID_SEARCH_HINT}"
        )

    def _release_stale(self, con, state):
        """Free the reservations of processes that no longer exist (crashed owners)."""
        if not (state.reserved_loss or state.reserved_delta):
            return state
        for res, pid, loss_left, delta_left in self._read_reservations(con, state):
            if not _owner_alive(pid):
                con.execute("DELETE FROM reservations WHERE id = ?", (res,))
                state = state.replace(
                    reserved_loss=state.reserved_loss - loss_left,
                    reserved_delta=state.reserved_delta - delta_left,
                )
        return state

    # -- reservations ----------------------------------------------------------------
    def _cost_units(self, cost, delta):
        """(loss units, δ units, ε for messages) of a reservation's cost."""
        spends = getattr(cost, "spends", None)
        if spends is None:
            epsilon = _check_amount(cost, "epsilon", strictly_positive=True)
            delta = _check_amount(delta, "delta", strictly_positive=False, upper=1.0)
            self._check_spend(epsilon, delta, "reservation", "pure")
            loss = _accountants.loss(self._accountant, epsilon, "pure", self._rdp_order)
            return _to_units(loss), _to_units(delta), epsilon, delta
        loss_units = delta_units = 0
        for eps, d, profile, count in spends:
            self._check_spend(eps, d, "reservation", profile)
            loss = _accountants.loss(self._accountant, eps, profile, self._rdp_order)
            loss_units += _to_units(loss) * count
            delta_units += _to_units(d) * count
        refit = [(_to_units(_accountants.loss(self._accountant, e, p, self._rdp_order)),
                  _to_units(d)) for e, d, p in getattr(cost, "refit", ())]
        if refit:
            loss_units += max(r[0] for r in refit)
            delta_units += max(r[1] for r in refit)
        return loss_units, delta_units, float(cost.epsilon), float(cost.delta)

    @contextmanager
    def reserve(self, epsilon, delta=0.0):
        """Set aside a cost atomically; spends made inside draw on it.

        Use it around a search whose cost is known in advance
        (:func:`skdptest.search_cost`): a search that cannot finish is refused
        before its first spend, and nothing else can take the budget it needs
        meanwhile. On exit the unused part returns to the budget. If the process
        dies inside the block, the reservation is freed by the next spend or
        reservation that needs it (the owner's process id no longer exists); what
        was spent stays spent.

        Parameters
        ----------
        epsilon : float or SearchCost
            ε of one pure spend to set aside, or a :class:`~skdptest.SearchCost`
            (every spend of a search, with its profile; the accountant prices it).
        delta : float, default=0.0
            δ to set aside (ignored for a ``SearchCost``, which carries its own).

        Yields
        ------
        budget : PrivacyBudget
            This handle; its spends (and those of its pickles made inside the
            block, e.g. in joblib workers) draw on the reservation.

        Raises
        ------
        BudgetExceededError
            If the cost does not fit in what remains; nothing is reserved or spent.
        RuntimeError
            If this handle is already inside a reservation.

        Examples
        --------
        >>> from skdptest import PrivacyBudget
        >>> budget = PrivacyBudget(1.0)
        >>> with budget.reserve(0.5):
        ...     budget.spend(0.2)
        >>> round(budget.spent[0], 10), round(budget.remaining[0], 10)
        (0.2, 0.8)
        """
        if self._reservation is not None:
            raise RuntimeError("This PrivacyBudget handle is already inside a reservation.")
        loss_units, delta_units, eps_shown, delta_shown = self._cost_units(epsilon, delta)
        con = self._connect()
        try:
            con.execute("BEGIN IMMEDIATE")
            state = self._locked_state(con)
            loss, d = _from_units(loss_units), _from_units(delta_units)
            if not self._fits(state, loss, d):
                state = self._release_stale(con, state)
                if not self._fits(state, loss, d):
                    raise BudgetExceededError(self._refusal(
                        state, eps_shown, delta_shown, "reservation", what="a reservation of"
                    ).replace("Nothing was recorded.", "Nothing was reserved or spent."))
            res_id = state.n_reservations + 1
            pid = _owner_id()
            con.execute(
                "INSERT INTO reservations (id, pid, loss_left, delta_left, digest) "
                "VALUES (?, ?, ?, ?, ?)",
                (res_id, pid, _format_units(loss_units), _format_units(delta_units),
                 _reservation_digest(state.ledger_id, res_id, pid, loss_units, delta_units)),
            )
            self._write_totals(con, state.replace(
                reserved_loss=state.reserved_loss + loss_units,
                reserved_delta=state.reserved_delta + delta_units,
                n_reservations=res_id,
            ))
            con.execute("COMMIT")
        except _DB_ERRORS as exc:
            raise self._db_error(exc, "nothing was reserved") from exc
        finally:
            con.close()
        self._set(reservation=res_id)
        try:
            yield self
        finally:
            self._set(reservation=None)
            self._release(res_id)

    def _release(self, res_id):
        con = self._connect()
        try:
            con.execute("BEGIN IMMEDIATE")
            state = self._locked_state(con)
            rows = self._read_reservations(con, state, res_id=res_id)
            if rows:
                _, _, loss_left, delta_left = rows[0]
                con.execute("DELETE FROM reservations WHERE id = ?", (res_id,))
                self._write_totals(con, state.replace(
                    reserved_loss=state.reserved_loss - loss_left,
                    reserved_delta=state.reserved_delta - delta_left,
                ))
            con.execute("COMMIT")
        except _DB_ERRORS as exc:
            raise self._db_error(exc, "the reservation was not released") from exc
        finally:
            con.close()

    @property
    def reserved(self):
        """tuple of float: (loss, δ) currently reserved by open reservations."""
        state, _ = self._read()
        return _from_units(state.reserved_loss), _from_units(state.reserved_delta)

    @property
    def loss_spent(self):
        """float: the running sum of losses (ε, ρ or Rényi divergence) spent so far."""
        state, _ = self._read()
        return _from_units(state.spent_loss)

    # -- reports ---------------------------------------------------------------------
    def report(self, delta=None):
        """The cost of the spends so far, by accountant, at one δ.

        Parameters
        ----------
        delta : float, default=None
            δ of the reported ε; ``None`` uses the ledger's δ, which must then be
            in (0, 1).

        Returns
        -------
        BudgetReport
            ``adaptive_epsilon`` is what holds for adaptively chosen spends;
            ``batch_epsilon`` (privacy loss distributions, ``dp_accounting``) and
            the zCDP and Rényi figures hold for the same spends only as a batch
            declared in advance.

        Examples
        --------
        >>> from skdptest import PrivacyBudget
        >>> budget = PrivacyBudget(10.0, 1e-6, accountant="zcdp")
        >>> for _ in range(100):
        ...     budget.spend(0.1)
        >>> report = budget.report()
        >>> round(report.basic_epsilon, 6), round(report.batch_epsilon, 2)
        (10.0, 4.77)
        """
        if delta is None:
            delta = self._delta
            if not 0 < delta < 1:
                raise InvalidParameterError(
                    f"delta must be given: this ledger's delta={delta} is not in (0, 1)."
                )
        delta = check_value(delta, [Interval(Real, 0, 1, closed="neither")], "delta")
        entries = self.ledger
        groups = {}
        for entry in entries:
            key = (entry.epsilon, entry.delta, entry.profile)
            groups[key] = groups.get(key, 0) + 1
        grouped = [(*key, count) for key, count in sorted(groups.items())]
        basic_eps = math.fsum(e.epsilon for e in entries)
        basic_delta = math.fsum(e.delta for e in entries)
        pure = all(e.delta == 0 for e in entries)
        rho_total = math.fsum(_accountants.rho(e, p) * n for e, _, p, n in grouped)
        if self._accountant == "basic":
            adaptive = basic_eps
        else:
            adaptive = min(basic_eps, self._epsilon)
        return BudgetReport(
            accountant=self._accountant,
            n_entries=len(entries),
            delta=delta,
            adaptive_epsilon=adaptive,
            basic_epsilon=basic_eps,
            basic_delta=basic_delta,
            zcdp_epsilon=_accountants.zcdp_epsilon(rho_total, delta) if pure else None,
            rdp_epsilon=_accountants.rdp_batch_epsilon(grouped, delta) if pure else None,
            batch_epsilon=_accountants.batch_epsilon(grouped, delta),
        )

    def to_frame(self):
        """The verified entries as a :class:`pandas.DataFrame`, one row per spend.

        Columns: ``time`` (UTC timestamps), ``label``, ``epsilon``, ``delta``,
        ``profile``, ``loss`` (what the spend added to the accountant's sum) and
        ``reservation`` (0: none). For auditors and output checkers.

        Returns
        -------
        pandas.DataFrame

        Examples
        --------
        >>> from skdptest import PrivacyBudget
        >>> budget = PrivacyBudget(1.0)
        >>> budget.spend(0.25, label="first release")
        >>> budget.to_frame()[["label", "epsilon", "profile"]]
                   label  epsilon profile
        0  first release     0.25    pure
        """
        import pandas as pd

        entries = self.ledger
        frame = pd.DataFrame(
            {
                "time": pd.to_datetime([e.time for e in entries], unit="s", utc=True),
                "label": pd.Series([e.label for e in entries], dtype=object),
                "epsilon": pd.Series([e.epsilon for e in entries], dtype=float),
                "delta": pd.Series([e.delta for e in entries], dtype=float),
                "profile": pd.Series([e.profile for e in entries], dtype=object),
                "loss": pd.Series([e.loss for e in entries], dtype=float),
                "reservation": pd.Series([e.reservation for e in entries], dtype="int64"),
            }
        )
        frame.attrs.update(
            accountant=self._accountant, epsilon=self._epsilon, delta=self._delta,
            loss_limit=self._loss_limit,
        )
        return frame

    # -- reading ---------------------------------------------------------------------
    def _read(self, verify_entries=False):
        self._flush()
        con = self._connect(write=False)
        try:
            con.execute("BEGIN")
            state = self._read_state(con)
            entries = self._verify_entries(con, state) if verify_entries else None
            con.execute("COMMIT")
            self._saw(state)
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
        """tuple of float: (ε, δ) still available (never negative), reservations excluded.

        For ``"zcdp"`` and ``"rdp"`` ledgers, ε is the largest ε of one more pure
        ε-DP spend that would be admitted now.
        """
        state, _ = self._read()
        return self._left(state)

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
        shown = _ledger_postgres.redact(self._path) if _ledger_postgres.is_url(
            self._path) else self._path
        path = "" if temporary else f", path={shown!r}"
        accountant = "" if self._accountant == "basic" else f", accountant={self._accountant!r}"
        return (
            f"PrivacyBudget(epsilon={self._epsilon!r}, delta={self._delta!r}, "
            f"spent={spent}{accountant}{path})"
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
            "accountant": self._accountant,
            "rdp_order": self._rdp_order,
            "loss_limit": self._loss_limit,
            # A pickle made inside ``reserve`` (a joblib worker's copy) draws on it too.
            "reservation": self._reservation,
            "seen": self._seen,
            # A temporary ledger's pickle goes to this process's workers, which may skip
            # fsync as it does (the file dies with its creator anyway).
            "durable": self._durable,
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
        unlimited = state["epsilon"] == math.inf and state.get("accountant") == "basic"
        accountant = state.get("accountant", "basic")
        if accountant not in _accountants.ACCOUNTANTS:
            raise LedgerError(f"path={state['path']!r}: unknown accountant {accountant!r}.")
        self._set(
            epsilon=math.inf if unlimited else _check_amount(
                state["epsilon"], "epsilon", strictly_positive=True),
            delta=math.inf if unlimited else _check_amount(
                state["delta"], "delta", strictly_positive=False, upper=1.0),
            path=os.fspath(state["path"]),
            ledger_id=str(state["ledger_id"]),
            owner_pid=None,
            accountant=accountant,
            rdp_order=float(state.get("rdp_order", 0.0)),
            loss_limit=float(state.get("loss_limit", state["epsilon"])),
            reservation=state.get("reservation"),
            seen=tuple(state.get("seen", (0, None))),
            buffered=False,
            # Old pickles (without the key) were made by durable handles or by temporary
            # ledgers that fsync'ed: durable, the safe side.
            durable=bool(state.get("durable", True)),
            pending=[],
            pending_lock=threading.Lock(),
        )
        if not _ledger_postgres.is_url(self._path) and not os.path.exists(self._path):
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


@dataclass(frozen=True)
class PrivacySpent:
    """What one release of a fitted estimator cost (its ``privacy_spent_``).

    Attributes
    ----------
    epsilon : float
        ε charged for the fit.
    delta : float
        δ charged for the fit.
    profile : str
        The privacy profile the charge declared (``"pure"``: any ε-DP release;
        ``"laplace"``: one continuous Laplace release or its post-processing).
    ledger : str or None
        Path of the ledger charged (the process-wide default ledger when the
        estimator had ``budget=None``); ``None`` for the inner fits of a search
        whose own charge covers them (:func:`accounted_elsewhere`).

    Examples
    --------
    >>> import numpy as np
    >>> from skdptest import DPBinomialTest, PrivacyBudget
    >>> budget = PrivacyBudget(1.0)
    >>> X = np.array([[0], [1], [1], [0], [1]] * 8)
    >>> est = DPBinomialTest(epsilon=0.5, budget=budget).fit(X)
    >>> est.privacy_spent_.epsilon, est.privacy_spent_.profile
    (0.5, 'pure')
    """

    epsilon: float
    delta: float
    profile: str
    ledger: str


#: Environment variable naming a file for the process-wide default ledger.
DEFAULT_LEDGER_ENV = "SKDPTEST_DEFAULT_LEDGER"

_default = {"budget": None, "pid": None}
_default_lock = threading.Lock()


def default_budget():
    """The process-wide ledger charged by estimators given ``budget=None``.

    It has no limit (it never refuses) and is read like any
    :class:`PrivacyBudget` (``spent``, ``ledger``, ``to_frame()``), so a fit
    without a budget still leaves a record of its cost. It is a temporary file,
    deleted when the process exits, unless the environment variable
    ``SKDPTEST_DEFAULT_LEDGER`` names a file (read when the default ledger is
    first used): then it is that persistent ledger, shared by every process
    that names it. Processes started after the first charge (joblib or
    ``multiprocessing`` workers) inherit the variable and charge the same file.

    Returns
    -------
    PrivacyBudget
        An unlimited ``"basic"`` ledger.

    Examples
    --------
    >>> from skdptest import default_budget
    >>> ledger = default_budget()
    >>> ledger.epsilon
    inf
    """
    with _default_lock:
        budget = _default["budget"]
        if budget is None or _default["pid"] != os.getpid():
            path = os.environ.get(DEFAULT_LEDGER_ENV) or None
            budget = PrivacyBudget._unlimited(path)
            if path is None:
                # Children started from now on charge this file (forked or spawned
                # workers inherit the environment); the creating process deletes it.
                os.environ[DEFAULT_LEDGER_ENV] = budget.path
            _default.update(budget=budget, pid=os.getpid())
        return budget


_ELSEWHERE = contextvars.ContextVar("skdptest_accounted_elsewhere", default=False)


@contextmanager
def accounted_elsewhere():
    """Fits inside this block with ``budget=None`` are not recorded in the default ledger.

    For library code whose inner fits are covered by a charge already made (the
    draws of a threshold search, whose ε the search charged once); never for a
    release that nothing else accounts for.
    """
    token = _ELSEWHERE.set(True)
    try:
        yield
    finally:
        _ELSEWHERE.reset(token)


def _is_accounted_elsewhere():
    return _ELSEWHERE.get()
