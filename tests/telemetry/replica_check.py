"""Hold a replica database to a run folder's JSONL files: every row once, every column equal."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

KEYS = {'events': 'seq', 'placements': 'seq', 'pallet_states': 'after_seq'}


def lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def query(dsn: str, sql: str, *args):
    with psycopg.connect(dsn) as conn:
        return conn.execute(sql, args).fetchall()


def assert_table_equals_disk(dsn: str, run_uuid: str, run_dir: Path, table: str) -> int:
    """Each line of <table>.jsonl is one row of the run in `table`, column for column (floats to
    1e-6 relative: the database stores `real`); no other row of the run. Returns the rows."""
    key = KEYS[table]
    rows = query(
        dsn,
        f'SELECT e.seed, t.{key}, to_jsonb(t) FROM {table} t '  # noqa: S608 - fixed names
        'JOIN episodes e ON e.id = t.episode_id WHERE e.run_id = %s',
        run_uuid,
    )
    got = {(seed, k): row for seed, k, row in rows}
    disk = lines(run_dir / f'{table}.jsonl')
    assert len(rows) == len(got) == len(disk), (table, len(rows), len(got), len(disk))
    for line in disk:
        row = got[(line['seed'], line[key])]
        for col, value in line.items():
            if col == 'seed':
                continue
            if col == 'payload' or value is None or isinstance(value, (bool, str, int)):
                assert row[col] == value, (table, col)
            else:  # floats, poses and sizes
                assert row[col] == pytest.approx(value, rel=1e-6), (table, col)
    return len(rows)


def assert_run_equals_disk(dsn: str, run_uuid: str, run_dir: Path) -> None:
    """Events, placements, pallet states and snapshots (PNG bytes too) equal the disk."""
    for table in KEYS:
        assert_table_equals_disk(dsn, run_uuid, run_dir, table)
    seeds = dict(query(dsn, 'SELECT id::text, seed FROM episodes WHERE run_id = %s', run_uuid))
    snaps = query(
        dsn,
        'SELECT s.episode_id::text, s.after_seq, s.view, s.url, s.png, s.width FROM snapshots s '
        'JOIN episodes e ON e.id = s.episode_id WHERE e.run_id = %s',
        run_uuid,
    )
    disk = lines(run_dir / 'snapshots.jsonl')
    assert len(snaps) == len(disk)
    for line in disk:
        (hit,) = [
            s
            for s in snaps
            if seeds[s[0]] == line['seed'] and (s[1], s[2]) == (line['after_seq'], line['view'])
        ]
        assert bytes(hit[4]) == (run_dir / line['path']).read_bytes()
        assert hit[3] == f'{run_dir.name}/{line["path"]}' and hit[5] == line['width']
