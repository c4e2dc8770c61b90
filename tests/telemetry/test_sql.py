"""sql/001_schema.sql loads into a real, throw-away PostgreSQL 15 and enforces the vocabularies."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

PG_BIN = Path('/usr/lib/postgresql/15/bin')
SCHEMA = Path(__file__).resolve().parents[2] / 'sql' / '001_schema.sql'


def _why_not() -> str:
    if not PG_BIN.is_dir():
        return f'{PG_BIN} not found (Debian package postgresql-15)'
    if os.geteuid() != 0:
        return 'initdb refuses root, and switching to the postgres user needs root (runuser)'
    if shutil.which('runuser') is None:
        return 'runuser not found (Debian package util-linux)'
    try:
        import pwd

        pwd.getpwnam('postgres')
    except KeyError:
        return 'no postgres system user'
    return ''


pytestmark = pytest.mark.skipif(bool(_why_not()), reason=_why_not() or 'ok')


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _as_postgres(*argv: str, check: bool = True, stdin: str | None = None):
    return subprocess.run(
        ['runuser', '-u', 'postgres', '--', *argv],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=check,
    )


@pytest.fixture(scope='module')
def psql() -> Iterator:
    """A psql runner against a fresh cluster on 127.0.0.1:<random port>, deleted afterwards."""
    root = Path(tempfile.mkdtemp(prefix='palletizer-pg-'))
    shutil.chown(root, 'postgres', 'postgres')
    data, port = root / 'data', _free_port()
    _as_postgres(str(PG_BIN / 'initdb'), '-D', str(data), '-A', 'trust', '-U', 'postgres')
    _as_postgres(
        str(PG_BIN / 'pg_ctl'), '-D', str(data), '-l', str(root / 'log'), '-w', '-o',
        f'-h 127.0.0.1 -p {port} -k {root}', 'start',
    )  # fmt: skip

    def run(sql: str, check: bool = True):
        return _as_postgres(
            str(PG_BIN / 'psql'), '-h', '127.0.0.1', '-p', str(port), '-U', 'postgres',
            '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-v', 'VERBOSITY=verbose', '-At', '-c', sql,
            check=check,
        )  # fmt: skip

    try:
        run(SCHEMA.read_text())
        yield run
    finally:
        _as_postgres(
            str(PG_BIN / 'pg_ctl'), '-D', str(data), '-m', 'immediate', 'stop', check=False
        )
        shutil.rmtree(root, ignore_errors=True)


_EPISODE = (
    "WITH r AS (INSERT INTO runs (task, level) VALUES ('table', 11) RETURNING id) "
    "INSERT INTO episodes (run_id, seed, task, level) SELECT id, {seed}, 'table', 11 FROM r "
    'RETURNING id'
)


def _episode(psql, seed: int) -> str:
    return psql(_EPISODE.format(seed=seed)).stdout.split()[0]


def test_schema_loads_twice_and_has_the_six_tables(psql):
    psql(SCHEMA.read_text())  # idempotent: a replica can re-apply it
    names = psql(
        "SELECT string_agg(tablename, ',' ORDER BY tablename) FROM pg_tables "
        "WHERE schemaname = 'public'"
    ).stdout.strip()
    assert names == 'episodes,events,pallet_states,placements,runs,snapshots'


def test_a_bad_event_kind_raises_a_check_violation(psql):
    ep = _episode(psql, 1)
    ok = psql(
        f"INSERT INTO events (episode_id, ts, seq, kind, payload) VALUES ('{ep}', 0.5, 0, "
        """'place', '{"error_xy_mm": 4.2}') RETURNING kind"""
    )
    assert ok.stdout.strip() == 'place'
    bad = psql(
        f"INSERT INTO events (episode_id, ts, seq, kind) VALUES ('{ep}', 0.6, 1, 'grasp')",
        check=False,
    )
    assert bad.returncode != 0
    assert '23514' in bad.stderr and 'events_kind_check' in bad.stderr, bad.stderr


@pytest.mark.parametrize(
    ('sql', 'constraint'),
    [
        ("INSERT INTO snapshots (episode_id, after_seq, view, url) VALUES ('{ep}', 0, 'front', 'u')",
         'snapshots_view_check'),
        ("UPDATE episodes SET failure = 'dropped' WHERE id = '{ep}'", 'episodes_failure_check'),
        ("UPDATE episodes SET status = 'aborted' WHERE id = '{ep}'", 'episodes_status_check'),
    ],
)  # fmt: skip
def test_view_failure_and_status_vocabularies_are_checked(psql, sql, constraint):
    ep = _episode(psql, 100 + len(constraint))
    bad = psql(sql.format(ep=ep), check=False)
    assert bad.returncode != 0 and '23514' in bad.stderr and constraint in bad.stderr, bad.stderr


def test_event_seq_is_unique_per_episode(psql):
    ep = _episode(psql, 2)
    psql(f"INSERT INTO events (episode_id, ts, seq, kind) VALUES ('{ep}', 0, 0, 'perceive')")
    dup = psql(
        f"INSERT INTO events (episode_id, ts, seq, kind) VALUES ('{ep}', 1, 0, 'plan')",
        check=False,
    )
    assert dup.returncode != 0 and '23505' in dup.stderr, dup.stderr
