"""The PostgreSQL replica through psycopg 3: migrations applied on connect, upserts on `id`.

Snapshots: the PNG bytes go into `snapshots.png` (bytea, added by sql/002) and `url` holds the
PNG's path under the runs folder (<run folder>/<seed>/<after_seq>-<view>.png), so a database
reader needs no file server and the disk copy stays findable. Verified against a real
PostgreSQL 15 server in the tests (tests/telemetry/test_replica_postgres.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from palletizer.telemetry.replica.base import SCHEMA_VERSION, migrations
from palletizer.telemetry.replica.rows import (
    ReplicaDown,
    ReplicaFatal,
    ReplicaRefused,
    Row,
)

__all__ = ['PostgresBackend', 'redact_dsn']

_JSON_COLUMNS = {'config', 'metrics', 'payload', 'planned_pose', 'actual_pose'}
# SQLSTATE classes: 28 = invalid authorisation, 3D = no such database; 08 = connection.
_FATAL_STATES = ('28', '3D')
_PASSWORD_RE = re.compile(r'(password\s*=\s*)(\'[^\']*\'|\S+)|(://[^:/@]+:)([^@]*)(@)', re.I)


def redact_dsn(dsn: str) -> str:
    """The DSN with its password replaced by ***."""

    def hide(m: re.Match[str]) -> str:
        if m.group(1):
            return m.group(1) + '***'
        return m.group(3) + '***' + m.group(5)

    return _PASSWORD_RE.sub(hide, dsn)


def _why(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


class PostgresBackend:
    """Rows into the PostgreSQL database at `dsn` (a libpq connection string or URI)."""

    name = 'postgres'

    def __init__(self, dsn: str, *, timeout_s: float = 6.0) -> None:
        self.dsn = dsn
        self.timeout_s = float(timeout_s)
        self._conn: psycopg.Connection[Any] | None = None

    def describe(self) -> str:
        return f'postgres {redact_dsn(self.dsn)}'

    def connect(self) -> None:
        if self._conn is not None and not self._conn.closed:
            return
        where = self.describe()
        try:
            psycopg.conninfo.conninfo_to_dict(self.dsn)
        except psycopg.ProgrammingError as exc:
            raise ReplicaFatal(f'{where}: bad DSN ({_why(exc)})') from None
        try:
            conn = psycopg.connect(
                self.dsn, connect_timeout=max(1, round(self.timeout_s)), autocommit=True
            )
        except psycopg.OperationalError as exc:
            why = _why(exc)
            state = getattr(exc, 'sqlstate', None) or ''
            if state[:2] in _FATAL_STATES or any(
                s in why for s in ('authentication failed', 'does not exist', 'no password')
            ):
                raise ReplicaFatal(f'{where}: {why}') from None
            raise ReplicaDown(f'{where}: {why}') from None
        try:
            self._migrate(conn)
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        """Apply sql/001.. (idempotent) unless the database is at a newer version."""
        where = self.describe()
        try:
            have = conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL").fetchone()
            newest = 0
            if have and have[0]:
                row = conn.execute('SELECT max(version) FROM schema_migrations').fetchone()
                newest = int(row[0] or 0) if row else 0
            if newest > SCHEMA_VERSION:
                raise ReplicaFatal(
                    f'{where}: schema version {newest}; this code writes version '
                    f'{SCHEMA_VERSION} (refusing to write to a newer schema)'
                )
            for m in migrations():
                if m.version > newest:
                    conn.execute(m.path.read_text())
            row = conn.execute('SELECT max(version) FROM schema_migrations').fetchone()
            got = int(row[0] or 0) if row else 0
        except psycopg.OperationalError as exc:
            raise ReplicaDown(f'{where}: {_why(exc)}') from None
        except psycopg.Error as exc:
            raise ReplicaFatal(f'{where}: applying sql/ migrations failed: {_why(exc)}') from None
        if got != SCHEMA_VERSION:
            raise ReplicaFatal(
                f'{where}: schema version {got} after migrating; this code writes version '
                f'{SCHEMA_VERSION}'
            )

    def ship(self, rows: Sequence[Row], run_dir: Path) -> None:
        if self._conn is None or self._conn.closed:
            self.connect()
        conn = self._conn
        assert conn is not None
        try:
            with conn.transaction(), conn.cursor() as cur:
                for table, op, cols, params in _groups(rows, run_dir):
                    query = _upsert(table, cols) if op == 'upsert' else _update(table, cols)
                    cur.executemany(query, params)
        except OSError as exc:
            raise ReplicaRefused(f'{self.describe()}: snapshot PNG unreadable ({exc})') from None
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            self.close()
            raise ReplicaDown(f'{self.describe()}: {_why(exc)}') from None
        except psycopg.Error as exc:
            raise ReplicaRefused(f'{self.describe()}: {_why(exc)}') from None

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except psycopg.Error:
                pass


def _upsert(table: str, cols: Sequence[str]) -> sql.Composed:
    return sql.SQL('INSERT INTO {t} ({c}) VALUES ({v}) ON CONFLICT (id) DO UPDATE SET {u}').format(
        t=sql.Identifier(table),
        c=sql.SQL(', ').join(map(sql.Identifier, cols)),
        v=sql.SQL(', ').join(sql.Placeholder() * len(cols)),
        u=sql.SQL(', ').join(
            sql.SQL('{0} = EXCLUDED.{0}').format(sql.Identifier(c)) for c in cols if c != 'id'
        ),
    )


def _update(table: str, cols: Sequence[str]) -> sql.Composed:
    """UPDATE of the columns after `id`; parameters in `cols` order, `id` moved last."""
    return sql.SQL('UPDATE {t} SET {u} WHERE id = {p}').format(
        t=sql.Identifier(table),
        u=sql.SQL(', ').join(
            sql.SQL('{0} = {1}').format(sql.Identifier(c), sql.Placeholder())
            for c in cols
            if c != 'id'
        ),
        p=sql.Placeholder(),
    )


def _groups(
    rows: Sequence[Row], run_dir: Path
) -> list[tuple[str, str, tuple[str, ...], list[list[Any]]]]:
    """Consecutive rows of one table, op and column set: (table, op, columns, parameters)."""
    out: list[tuple[str, str, tuple[str, ...], list[list[Any]]]] = []
    for row in rows:
        data = dict(row.data)
        if row.table == 'snapshots' and row.blob:
            data['png'] = (Path(run_dir) / row.blob).read_bytes()
            data['url'] = f'{Path(run_dir).name}/{row.blob}'
        cols = tuple(data)
        if row.op == 'update':  # the id goes last, to the WHERE
            cols = (*(c for c in cols if c != 'id'), 'id')
        params = [Jsonb(data[c]) if c in _JSON_COLUMNS else data[c] for c in cols]
        if out and out[-1][:3] == (row.table, row.op, cols):
            out[-1][3].append(params)
        else:
            out.append((row.table, row.op, cols, [params]))
    return out
