"""The panel's history from the Postgres replica: the same episodes as the disk's, and a replica
that cannot be reached does not hide the disk's runs."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
import warnings

import psycopg
import pytest

with warnings.catch_warnings():  # starlette's test client warns about its httpx dependency
    warnings.simplefilter('ignore')
    from fastapi.testclient import TestClient

from palletizer.panel.runner import RunManager
from palletizer.panel.server import COOKIE, PanelConfig, create_app
from palletizer.telemetry import RunInfo, RunWriter
from palletizer.telemetry.replica.localpg import LocalPostgres

from tests.telemetry._fixtures import package_events, pallet_state, placement, result

INFO = RunInfo(level=11, task='table', oracle=False, git_sha='abc1234')


@pytest.fixture(scope='module')
def dsn():
    pg = LocalPostgres()  # scripts/setup installs the server: a missing one is a broken set-up
    try:
        pg.start()
        name = f'db_{uuid.uuid4().hex[:10]}'
        with psycopg.connect(pg.dsn('postgres'), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE {name}')
        yield pg.dsn(name)
    finally:
        pg.close()


@pytest.fixture(scope='module')
def run_dir(tmp_path_factory, dsn):
    """A two-episode run on disk, replicated with `python -m palletizer.telemetry.replica`."""
    w = RunWriter(tmp_path_factory.mktemp('disk'), '20261202-110000', info=INFO)
    for seed, n in ((3, 2), (4, 1)):
        w.begin(seed, n_objects=2, info=INFO)
        seq = 0
        for i in range(n):
            for kind, pid, payload in package_events(f'p{i:02d}'):
                w.event(seq, 0.5 * seq, kind, payload, pid, seed=seed)
                seq += 1
            w.placement(placement(i))
            w.pallet_state(pallet_state(i))
        w.end(result(seed, n_objects=2, n_placed=n))
    w.close()
    out = subprocess.run(
        [sys.executable, '-m', 'palletizer.telemetry.replica', str(w.path)],
        capture_output=True, text=True, env={**os.environ, 'PALLETIZER_PG_DSN': dsn},
        check=False, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    return w.path


def _client(tmp_path, runs_dir, dsn):
    cfg = PanelConfig(token='t', root=tmp_path, runs_dir=runs_dir, live=False, replica_dsn=dsn)
    return TestClient(create_app(cfg, RunManager(tmp_path)), cookies={COOKIE: 't'})


def test_a_run_only_in_the_replica_reads_back_as_on_disk(tmp_path, dsn, run_dir):
    with _client(tmp_path, tmp_path / 'empty', dsn) as c:
        h = c.get('/api/history').json()
        assert h['replica'] == {'configured': True, 'error': None}
        (row,) = h['runs']
        assert row['origin'] == 'replica' and row['label'] == run_dir.name
        assert (row['episodes'], row['succeeded'], row['placed'], row['cartons']) == (2, 1, 3, 4)
        rep = c.get(f'/api/history/{row["name"]}').json()
    with _client(tmp_path, run_dir.parent, '') as c:
        disk = c.get(f'/api/history/{run_dir.name}').json()
    assert [e['seed'] for e in rep['episodes']] == [e['seed'] for e in disk['episodes']] == [3, 4]
    for r, d in zip(rep['episodes'], disk['episodes'], strict=True):
        assert r['cartons'] == d['cartons'] and len(r['cartons']) >= 1
        assert r['cycle_s'] == d['cycle_s']
        assert r['margins_mm'] == d['margins_mm']
        assert r['success'] == d['success'] and r['failure'] == d['failure']
        for key in ('cog_true', 'cog_measured', 'margin_mm'):
            assert r['scene'][key] == pytest.approx(d['scene'][key], abs=1e-4)
        assert len(r['scene']['cartons']) == len(d['scene']['cartons'])


def test_a_run_on_disk_and_in_the_replica_is_listed_once(tmp_path, dsn, run_dir):
    with _client(tmp_path, run_dir.parent, dsn) as c:
        runs = c.get('/api/history').json()['runs']
    assert [(r['name'], r['origin']) for r in runs] == [(run_dir.name, 'disk')]


def test_an_unreachable_replica_still_lists_the_disk(tmp_path, run_dir):
    down = 'postgresql://panel:secret@127.0.0.1:1/nothing'
    with _client(tmp_path, run_dir.parent, down) as c:
        h = c.get('/api/history').json()
        assert [r['name'] for r in h['runs']] == [run_dir.name]
        assert 'replica' in h['replica']['error'] and 'secret' not in h['replica']['error']
        bad = c.get('/api/history/replica-not-a-uuid')
        assert bad.status_code == 404 and 'replica-<uuid>' in bad.json()['detail']
