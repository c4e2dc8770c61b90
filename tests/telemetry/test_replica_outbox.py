"""The outbox, the row keys and the choice of replica (no database needed)."""

from __future__ import annotations

import threading
import uuid

import pytest
from palletizer.core.config import load_config
from palletizer.telemetry import RunInfo, RunWriter
from palletizer.telemetry.replica import Outbox, ReplicaError, Row, choose_backend, owner_alive
from palletizer.telemetry.replica.credentials import read_env_file
from palletizer.telemetry.replica.postgres import redact_dsn
from palletizer.telemetry.replica.rows import row_from_disk, run_row

INFO = RunInfo(level=11, task='table', oracle=False, git_sha='abc')
CFG = load_config().telemetry.replica


def test_rows_queue_in_order_from_any_thread_and_survive_reopening(tmp_path):
    # The telemetry node writes from executor threads, not the one that opened the run.
    w = RunWriter(tmp_path, '20261201-120000', info=INFO, outbox=True)
    t = threading.Thread(target=lambda: w.begin(3, 2, INFO))
    t.start()
    t.join()
    w.event(0, 0.5, 'perceive', {'seen': 1, 'confidence': 1.0}, seed=3)
    assert w.replica.error == ''
    path = w.path
    w.close()
    with Outbox(path, create=False) as ob:
        tables = [row.table for _, row, _ in ob.pending()]
        assert tables == ['runs', 'episodes', 'events', 'episodes', 'runs']
        assert [row.op for _, row, _ in ob.pending()][-1] == 'update'  # ended_at only
        assert ob.get('open_seed') is None and ob.counts()['pending'] == 5


def test_one_live_writer_per_run_and_a_dead_one_is_seen(tmp_path):
    ob = Outbox(tmp_path, lock=True)
    assert owner_alive(tmp_path)
    with pytest.raises(ReplicaError, match='another live process writes this run'):
        Outbox(tmp_path, lock=True)
    ob.close()
    assert not owner_alive(tmp_path)
    Outbox(tmp_path, lock=True).close()


def test_row_ids_are_deterministic_per_run_and_key(tmp_path):
    run = str(uuid.uuid4())
    disk = {'seed': 4, 'seq': 7, 'ts': 1.0, 'kind': 'pick', 'package_id': 'a', 'payload': {}}
    a, b = row_from_disk(run, 'events', disk), row_from_disk(run, 'events', dict(disk))
    assert a.data['id'] == b.data['id'] and 'seed' not in a.data
    assert row_from_disk(str(uuid.uuid4()), 'events', disk).data['id'] != a.data['id']
    assert row_from_disk(run, 'events', {**disk, 'seq': 8}).data['id'] != a.data['id']
    assert run_row(run, {'task': 'table', 'level': 11}).op == 'upsert'
    assert run_row(run, {}, ended_at='x').op == 'update'
    with pytest.raises(ReplicaError, match='row table = .bogus.; expected one of runs'):
        Row('bogus', {})


def test_no_credentials_is_a_disk_only_line_and_the_environment_wins(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for mode, unset in (('postgres', 'PALLETIZER_PG_DSN'), ('supabase', 'SUPABASE_URL')):
        c = choose_backend(mode, CFG, environ={})
        assert c.backend is None and c.line.startswith('disk only · no credentials')
        assert unset in c.line
    (tmp_path / '.env').write_text(
        '# local\nexport PALLETIZER_PG_DSN="host=/from/file dbname=x"\n'
        "SUPABASE_URL=https://x.supabase.co\nSUPABASE_SERVICE_KEY='secret-key'\n"
    )
    assert read_env_file(tmp_path / '.env')['SUPABASE_SERVICE_KEY'] == 'secret-key'
    c = choose_backend('postgres', CFG, environ={})
    assert c.backend is not None and 'host=/from/file' in c.line
    c = choose_backend('postgres', CFG, environ={'PALLETIZER_PG_DSN': 'host=/from/env'})
    assert 'host=/from/env' in c.line
    c = choose_backend('supabase', CFG, environ={})
    assert c.line.startswith('replica supabase https://x.supabase.co') and 'secret' not in c.line
    assert choose_backend('disk', CFG).backend is None


def test_passwords_never_show_in_a_dsn_line():
    assert redact_dsn('postgresql://u:hunter2@h:5/db') == 'postgresql://u:***@h:5/db'
    assert redact_dsn("host=h password='a b' user=u") == 'host=h password=*** user=u'
    assert redact_dsn('host=h password=x2 user=u') == 'host=h password=*** user=u'
