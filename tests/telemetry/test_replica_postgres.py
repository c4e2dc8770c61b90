"""The PostgreSQL replica against a real PostgreSQL server (a throwaway cluster per module)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import psycopg
import pytest
from palletizer.telemetry import RunInfo, RunWriter
from palletizer.telemetry.replica import (
    OUTBOX_FILE,
    SCHEMA_VERSION,
    Outbox,
    ReplicaDown,
    ReplicaFatal,
    Replicator,
    Row,
    adopt_orphans,
)
from palletizer.telemetry.replica.localpg import LocalPostgres
from palletizer.telemetry.replica.postgres import PostgresBackend

from tests.telemetry._fixtures import package_events, pallet_state, placement, png, result
from tests.telemetry.replica_check import assert_run_equals_disk

STAMP = '20261201-120000'
INFO = RunInfo(level=11, task='table', oracle=False, git_sha='abc1234')


@pytest.fixture(scope='module')
def server():
    # No skip: scripts/setup installs the server, and a missing one is a broken set-up.
    pg = LocalPostgres()
    try:
        pg.start()
        yield pg
    finally:
        pg.close()


@pytest.fixture
def dsn(server):
    """A fresh database on the module's server."""
    if not server.running:
        server.start()
    name = f'db_{uuid.uuid4().hex[:10]}'
    with psycopg.connect(server.dsn('postgres'), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE {name}')
    return server.dsn(name)


def _q(dsn: str, query: str, *args):
    with psycopg.connect(dsn) as conn:
        return conn.execute(query, args).fetchall()


def _lines(path):
    return [json.loads(ln) for ln in path.read_text().splitlines()]


def _episode(w: RunWriter, seed: int, n: int, snapshot: bool = True) -> None:
    seq = 0
    for i in range(n):
        for kind, pid, payload in package_events(f'p{i}', score=0.5 + 0.1 * i):
            w.event(seq, 0.5 * seq, kind, payload, pid, seed=seed)
            seq += 1
        w.placement(placement(i))
        w.pallet_state(pallet_state(i))
        if snapshot and i == 0:
            w.snapshot(i, 'top', png(8, 6, seed))


def _logs():
    lines: list[tuple[str, str]] = []
    return lines, lambda level, line: lines.append((level, line))


def _drain(dsn: str, *run_dirs, timeout: float = 30.0) -> Replicator:
    lines, log = _logs()
    rep = Replicator(PostgresBackend(dsn), log, backoff_s=(0.05, 0.5))
    for d in run_dirs:
        rep.add(d)
    rep.start()
    assert rep.drain(timeout), lines
    assert rep.stop(5.0)
    rep.lines = lines
    return rep


def _assert_equal_to_disk(dsn: str, run_dir) -> None:
    """Every events / placements / pallet_states / snapshots line is in the database once."""
    with Outbox(run_dir, create=False) as ob:
        assert_run_equals_disk(dsn, ob.run_uuid, run_dir)


def test_migrations_apply_once_and_a_newer_schema_is_refused(dsn):
    b = PostgresBackend(dsn)
    b.connect()
    b.close()
    b.connect()  # idempotent: applying again changes nothing
    b.close()
    assert _q(dsn, 'SELECT version FROM schema_migrations ORDER BY 1') == [(1,), (2,)]
    assert _q(dsn, "SELECT count(*) FROM pg_tables WHERE tablename = 'snapshots'") == [(1,)]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_migrations VALUES (9, '009_future')")
    with pytest.raises(
        ReplicaFatal, match=rf'schema version 9; this code writes version {SCHEMA_VERSION}'
    ):
        PostgresBackend(dsn).connect()


def test_connect_failures_are_one_line_fatal_or_down(server, dsn):
    for bad, match in [
        (server.tcp_dsn('wrong-password'), 'password authentication failed'),
        (server.dsn('no_such_db'), 'database "no_such_db" does not exist'),
        ('host=x port=1 ==', 'bad DSN'),
    ]:
        with pytest.raises(ReplicaFatal, match=match) as exc:
            PostgresBackend(bad).connect()
        assert '\n' not in str(exc.value) and 'wrong-password' not in str(exc.value)
    down = LocalPostgres()  # initialised, never started: nothing listens there
    try:
        with pytest.raises(ReplicaDown, match='No such file or directory|Connection refused'):
            PostgresBackend(down.dsn()).connect()
    finally:
        down.close()


def test_a_run_replicates_every_row_once_and_equal_to_disk(tmp_path, dsn):
    w = RunWriter(tmp_path, STAMP, info=INFO, outbox=True)
    w.begin(5, n_objects=2, info=INFO)
    _episode(w, 5, 2)
    w.end(result(5, n_objects=2, n_placed=2, score=0.9))
    w.begin(6, n_objects=3, info=INFO)
    _episode(w, 6, 1)
    w.close()  # seed 6 closes as aborted
    rep = _drain(dsn, w.path)
    assert rep.rejected == 0 and rep.state == 'up'
    _assert_equal_to_disk(dsn, w.path)
    eps = _q(
        dsn,
        'SELECT seed, status, n_objects, n_placed, failure, metrics, score, ended_at IS NOT NULL '
        'FROM episodes ORDER BY seed',
    )
    assert [e[:5] for e in eps] == [(5, 'success', 2, 2, None), (6, 'failure', 3, 1, None)]
    assert eps[0][6] == pytest.approx(0.9) and eps[0][7] and eps[1][7]
    assert eps[1][5] == {'aborted': True, 'abort_reason': 'the run closed with the episode open'}
    (run,) = _q(
        dsn,
        'SELECT task, level, git_sha, oracle, label, ended_at IS NOT NULL, n_episodes FROM runs',
    )
    assert run == ('table', 11, 'abc1234', False, w.path.name, True, 2)
    # Shipping everything again (a crash between the commit and the outbox mark) lands once.
    with Outbox(w.path, create=False) as ob:
        n = ob.counts()['shipped']
        ob._db.execute('UPDATE rows SET state = 0')
    assert _drain(dsn, w.path).shipped == n
    _assert_equal_to_disk(dsn, w.path)
    assert _q(dsn, 'SELECT count(*) FROM episodes') == [(2,)]


def test_a_run_of_one_episode_says_one_episode(tmp_path, dsn):
    w = RunWriter(tmp_path, STAMP, info=INFO, outbox=True)
    w.begin(1, n_objects=2, info=INFO)
    _episode(w, 1, 2)
    w.end(result(1, n_objects=2, n_placed=2, score=0.9))
    w.close()
    assert _drain(dsn, w.path).rejected == 0
    assert _q(dsn, 'SELECT n_episodes FROM runs') == [(1,)]


def test_an_outage_mid_episode_loses_nothing_and_duplicates_nothing(tmp_path, server, dsn):
    lines, log = _logs()
    rep = Replicator(PostgresBackend(dsn), log, backoff_s=(0.05, 0.3)).start()
    w = RunWriter(tmp_path, STAMP, info=INFO, outbox=True)
    rep.add(w.path)
    w.begin(1, n_objects=4, info=INFO)
    _episode(w, 1, 1)
    assert rep.drain(20.0)
    server.stop()  # mid-episode
    try:
        _episode_more(w, 1, start=1, n=3)  # several placements while the server is down
        assert not rep.drain(1.0) and rep.state == 'down'
        with Outbox(w.path, create=False) as ob:
            assert ob.counts()['pending'] > 0
    finally:
        server.start()
    w.end(result(1, n_objects=4, n_placed=4))
    w.close()
    assert rep.drain(30.0), lines
    assert rep.stop(5.0)
    assert len(rep.outages) == 1
    assert [lv for lv, _ in lines] == ['warning', 'info']
    assert 'replica unreachable' in lines[0][1] and 'replica back after' in lines[1][1]
    _assert_equal_to_disk(dsn, w.path)
    assert _q(dsn, "SELECT count(*) FROM episodes WHERE status = 'running'") == [(0,)]


def _episode_more(w: RunWriter, seed: int, start: int, n: int) -> None:
    seq = 6 * start
    for i in range(start, start + n):
        for kind, pid, payload in package_events(f'p{i}'):
            w.event(seq, 0.5 * seq, kind, payload, pid, seed=seed)
            seq += 1
        w.placement(placement(i))
        w.pallet_state(pallet_state(i))


def test_a_refused_row_is_marked_with_its_reason_and_does_not_block_the_rest(tmp_path, dsn):
    w = RunWriter(tmp_path, STAMP, info=INFO, outbox=True)
    w.begin(2, n_objects=1, info=INFO)
    _episode(w, 2, 1, snapshot=False)
    eid = w.replica.outbox.rows('events')[0]['episode_id']
    bad = {'id': str(uuid.uuid4()), 'episode_id': eid, 'ts': 0.0, 'seq': 99, 'kind': 'dance'}
    w.replica.outbox.put(Row('events', bad))
    w.end(result(2, n_objects=1, n_placed=1))
    w.close()
    rep = _drain(dsn, w.path)
    assert rep.rejected == 1
    with Outbox(w.path, create=False) as ob:
        ((_, table, why),) = ob.rejected()
        assert ob.counts()['pending'] == 0
    assert table == 'events' and 'events_kind_check' in why
    assert [lv for lv, ln in rep.lines if 'refused' in ln] == ['error']
    _assert_equal_to_disk(dsn, w.path)  # every disk row landed, the bad one did not


_DIE = """
import os, sys
from palletizer.telemetry import RunInfo, RunWriter
from tests.telemetry.replica_check import assert_run_equals_disk
from tests.telemetry._fixtures import package_events
info = RunInfo(level=12, task='conveyor', oracle=False, git_sha='f00')
w = RunWriter(sys.argv[1], '20261201-120000', info=info, outbox=True)
w.begin(3, n_objects=5, info=info)
for seq, (kind, pid, payload) in enumerate(package_events('p0')):
    w.event(seq, 0.5 * seq, kind, payload, pid, seed=3)
print(w.path, flush=True)
os._exit(9)  # dies with the episode open: no end, no abort, no close
"""


def test_an_episode_left_running_by_a_dead_run_is_closed_at_the_next_start(tmp_path, dsn):
    out = subprocess.run(
        [sys.executable, '-c', _DIE, str(tmp_path)],
        capture_output=True, text=True, check=False, cwd=os.getcwd(),
    )  # fmt: skip
    assert out.returncode == 9, out.stderr
    dead = tmp_path / out.stdout.strip().rsplit('/', 1)[-1]
    assert (dead / OUTBOX_FILE).exists()
    live = RunWriter(tmp_path, '20261201-130000', info=INFO, outbox=True)
    found = adopt_orphans(tmp_path, live.path)
    assert [d for d, _ in found] == [dead]
    assert 'episode seed 3 was left running; closed as aborted' in found[0][1]
    assert adopt_orphans(tmp_path, live.path) == [(dead, '')]  # closed once; rows still wait
    live.close()
    _drain(dsn, dead)
    # Closed and shipped runs cost a later start nothing: no run is taken up again.
    assert adopt_orphans(tmp_path) == []
    ((status, metrics, level),) = _q(dsn, 'SELECT status, metrics, level FROM episodes')
    assert status == 'failure' and level == 12 and metrics['aborted'] is True
    assert metrics['abort_reason'].startswith('its run process died; closed at the next start')
    assert _q(dsn, 'SELECT count(*) FROM events') == [(len(package_events('p0')),)]
    assert _q(dsn, 'SELECT count(*) FROM runs WHERE ended_at IS NULL') == [(0,)]


def test_replicate_backfills_a_disk_only_run_once_however_often_it_runs(tmp_path, dsn):
    w = RunWriter(tmp_path, STAMP, info=INFO)  # disk only: no outbox
    w.begin(7, n_objects=2, info=INFO)
    _episode(w, 7, 2)
    w.end(result(7, n_objects=2, n_placed=2))
    w.begin(8, n_objects=2, info=INFO)
    _episode(w, 8, 1)
    w.close()
    assert not (w.path / OUTBOX_FILE).exists()
    env = {**os.environ, 'PALLETIZER_PG_DSN': dsn}
    for _ in range(2):
        out = subprocess.run(
            [sys.executable, '-m', 'palletizer.telemetry.replica', str(w.path)],
            capture_output=True, text=True, env=env, check=False, timeout=120,
        )  # fmt: skip
        assert out.returncode == 0, out.stdout + out.stderr
        assert 'replicate: replica postgres' in out.stdout and ' 0 waiting' in out.stdout
    _assert_equal_to_disk(dsn, w.path)
    assert _q(dsn, 'SELECT seed, status FROM episodes ORDER BY seed') == [
        (7, 'success'),
        (8, 'failure'),
    ]


def test_replicate_without_credentials_says_so(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(('PALLETIZER_PG', 'SUPABASE'))}
    out = subprocess.run(
        [sys.executable, '-m', 'palletizer.telemetry.replica', str(tmp_path), '--telemetry',
         'postgres'],
        capture_output=True, text=True, env=env, check=False, cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert out.returncode == 2
    assert 'disk only · no credentials (PALLETIZER_PG_DSN unset' in out.stderr
