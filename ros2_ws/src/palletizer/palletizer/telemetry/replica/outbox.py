"""The outbox: every replica row of a run, on disk in the run folder, until it is shipped.

Why SQLite (the standard library's sqlite3): one file per run that takes a row per transaction
and survives the process dying mid-write (the write-ahead log rolls a torn transaction back),
keeps rows in their insertion order (an INTEGER PRIMARY KEY), and can be read by the
replicator thread while the recorder writes (WAL mode: readers do not block the writer). A
JSONL outbox would need its own cursor file and torn-line repair; a queue server is one more
service to run. synchronous=NORMAL: a committed row survives the process being killed (the
case that matters here); after a power loss the last rows may be lost, as the run's JSONL
files, which are fsynced at each episode end, may lose theirs.

Rows are never deleted: a shipped row is marked, so `counts()` tells what is waiting. A row
the database refuses for good (a CHECK it violates) is marked rejected with the reason and
does not block the rows behind it; the disk still has it.

The live writer holds an exclusive lock (`outbox.lock`, flock) for as long as its run is open.
A run whose lock can be taken has no live writer: its outbox can be drained and its open
episode closed by anyone (`owner_alive`).
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from palletizer.telemetry.replica.rows import ReplicaError, Row

__all__ = ['OUTBOX_FILE', 'Outbox', 'owner_alive']

OUTBOX_FILE = 'outbox.sqlite'
_LOCK_FILE = 'outbox.lock'
PENDING, SHIPPED, REJECTED = 0, 1, 2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rows (
    n INTEGER PRIMARY KEY AUTOINCREMENT,
    tbl TEXT NOT NULL,
    data TEXT NOT NULL,
    blob TEXT NOT NULL DEFAULT '',
    op TEXT NOT NULL DEFAULT 'upsert',
    state INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    queued_at REAL NOT NULL DEFAULT 0  -- [s] wall clock (time.time) when queued
);
CREATE INDEX IF NOT EXISTS rows_state ON rows (state, n);
"""


def owner_alive(run_dir: Path) -> bool:
    """True while a live writer holds the run's outbox lock."""
    lock = Path(run_dir) / _LOCK_FILE
    if not lock.exists():
        return False
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops a lock we took
    return False


class Outbox:
    """The outbox of the run folder `run_dir` (created when missing if create=True).

    One thread at a time may use an Outbox (the recorder's callbacks run on executor threads
    under its lock; the replicator opens its own). lock=True takes the run's writer lock, held
    until close(); a second writer raises ReplicaError.
    """

    def __init__(
        self, run_dir: str | os.PathLike[str], *, create: bool = True, lock: bool = False
    ):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / OUTBOX_FILE
        if not create and not self.path.exists():
            raise ReplicaError(f'{self.path}: no outbox in this run folder')
        self._lock_fd: int | None = None
        if lock:
            fd = os.open(self.run_dir / _LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise ReplicaError(f'{self.path}: another live process writes this run') from None
            self._lock_fd = fd
        try:
            self._db = sqlite3.connect(
                self.path, isolation_level=None, timeout=30.0, check_same_thread=False
            )
            self._db.execute('PRAGMA journal_mode=WAL')
            self._db.execute('PRAGMA synchronous=NORMAL')
            self._db.executescript(_SCHEMA)
            if self.get('run_uuid') is None:
                self._db.execute(
                    'INSERT OR IGNORE INTO meta VALUES (?, ?)', ('run_uuid', str(uuid.uuid4()))
                )
        except sqlite3.Error as exc:
            self.close()
            raise ReplicaError(f'{self.path}: {exc}') from None
        self.run_uuid: str = str(self.get('run_uuid'))

    # -- meta ---------------------------------------------------------------------------------

    def get(self, key: str, default: Any = None) -> Any:
        cur = self._db.execute('SELECT value FROM meta WHERE key = ?', (key,))
        hit = cur.fetchone()
        return default if hit is None else json.loads(hit[0]) if key != 'run_uuid' else hit[0]

    def set(self, key: str, value: Any) -> None:
        self._db.execute(
            'INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
            (key, json.dumps(value)),
        )

    # -- rows ---------------------------------------------------------------------------------

    def put(self, *rows: Row, meta: dict[str, Any] | None = None) -> None:
        """Append rows (and set meta keys) in one transaction."""
        now = time.time()
        try:
            self._db.execute('BEGIN IMMEDIATE')
            self._db.executemany(
                'INSERT INTO rows (tbl, data, blob, op, queued_at) VALUES (?, ?, ?, ?, ?)',
                [
                    (
                        r.table,
                        json.dumps(r.data, separators=(',', ':'), allow_nan=False),
                        r.blob,
                        r.op,
                        now,
                    )
                    for r in rows
                ],
            )
            for key, value in (meta or {}).items():
                self.set(key, value)
            self._db.execute('COMMIT')
        except (sqlite3.Error, ValueError) as exc:
            if self._db.in_transaction:
                self._db.execute('ROLLBACK')
            raise ReplicaError(f'{self.path}: cannot queue rows ({exc})') from None

    def pending(self, limit: int = 500) -> list[tuple[int, Row, float]]:
        """The oldest rows not shipped yet, in order: (n, row, queued_at [s])."""
        cur = self._db.execute(
            'SELECT n, tbl, data, blob, op, queued_at FROM rows WHERE state = ? ORDER BY n '
            'LIMIT ?',
            (PENDING, int(limit)),
        )
        return [(n, Row(t, json.loads(d), b, o), q) for n, t, d, b, o, q in cur.fetchall()]

    def rows(self, table: str) -> list[dict[str, Any]]:
        """The data of every row of `table` queued so far, in order."""
        cur = self._db.execute('SELECT data FROM rows WHERE tbl = ? ORDER BY n', (table,))
        return [json.loads(d) for (d,) in cur.fetchall()]

    def mark(self, ns: Iterable[int], state: int = SHIPPED, error: str | None = None) -> None:
        ids = [(state, error, int(n)) for n in ns]
        self._db.execute('BEGIN IMMEDIATE')
        self._db.executemany('UPDATE rows SET state = ?, error = ? WHERE n = ?', ids)
        self._db.execute('COMMIT')

    def counts(self) -> dict[str, int]:
        """Rows pending, shipped and rejected."""
        got = dict(self._db.execute('SELECT state, COUNT(*) FROM rows GROUP BY state').fetchall())
        return {
            'pending': int(got.get(PENDING, 0)),
            'shipped': int(got.get(SHIPPED, 0)),
            'rejected': int(got.get(REJECTED, 0)),
        }

    def rejected(self) -> list[tuple[int, str, str]]:
        """(n, table, reason) of every row the database refused."""
        cur = self._db.execute('SELECT n, tbl, error FROM rows WHERE state = ? ORDER BY n', (2,))
        return [(int(n), str(t), str(e)) for n, t, e in cur.fetchall()]

    def close(self) -> None:
        db = getattr(self, '_db', None)
        if db is not None:
            db.close()
            self._db = None  # type: ignore[assignment]  # closed: no query runs after close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> Outbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
