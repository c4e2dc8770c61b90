"""A real multi-episode run replicating to a real PostgreSQL server through two outages.

Level 11, seed 1, three fast-forward episodes through the node graph, `--telemetry postgres`
against a throwaway server on a Unix socket (reachable from inside the run's network
namespace). The server is stopped mid-episode 2 for several placements and restarted; then
stopped again in episode 3 and the whole run is SIGKILLed while it is down (no node gets to
close anything). `scripts/replicate` then drains what the dead run left and closes its open
episode. Every event, placement and pallet-state row on disk is in the database exactly once
and equal; no episode is left running.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from palletizer.telemetry.replica import Outbox
from palletizer.telemetry.replica.localpg import LocalPostgres

from tests.telemetry.replica_check import assert_run_equals_disk, lines, query

pytestmark = pytest.mark.sim

PALLETIZE = [sys.executable, '-m', 'palletizer.cli.palletize']
_SCRIPT = 'ip link set lo up && ip link set lo multicast on && exec "$@"'


def _kill_marked(mark: str) -> int:
    """Freeze, then SIGKILL, every process whose environment has PALLETIZER_TEST_MARK=mark.

    Frozen first (SIGSTOP) so that none of them can react to another's death (the nodes get
    SIGTERM when the launcher dies) and close anything: a crash, not a shutdown.
    """
    needle = f'PALLETIZER_TEST_MARK={mark}'.encode()
    pids = []
    for pid in (int(p) for p in os.listdir('/proc') if p.isdigit()):
        try:
            env = Path(f'/proc/{pid}/environ').read_bytes()
        except OSError:
            continue
        if needle in env.split(b'\0'):
            pids.append(pid)
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
    return len(pids)


def _wait(cond, what: str, timeout: float, out: list[str]) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, f'{what} did not happen:\n' + ''.join(out[-60:])
        time.sleep(0.2)


@pytest.fixture
def pg():
    server = LocalPostgres()
    try:
        server.start()
        yield server
    finally:
        server.close()


# Behind --run-slow (106 s in CI at e3b6f9d): the replica's outage and resume are held without
# a graph in tests/telemetry/test_replica_postgres.py.
@pytest.mark.slow
def test_outage_and_crash_lose_no_row_and_duplicate_none(tmp_path, pg):
    mark = uuid.uuid4().hex
    env = {
        **os.environ,
        'PALLETIZER_PG_DSN': pg.dsn(),
        'PALLETIZER_TEST_MARK': mark,
        'ROS_DOMAIN_ID': '83',
        'ROS_AUTOMATIC_DISCOVERY_RANGE': 'LOCALHOST',
        'PYTHONUNBUFFERED': '1',
    }
    argv = ['--level', '11', '--seed', '1', '-n', '3', '--speed', '0', '--telemetry', 'postgres']
    proc = subprocess.Popen(
        ['unshare', '-n', 'sh', '-c', _SCRIPT, 'sh', *PALLETIZE, *argv],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        runs = tmp_path / 'runs'

        def folders() -> list[Path]:
            # The run's folder: not the writability probe (.write-check-*) that telemetry
            # writes and removes in runs/ first, which a poll under load can catch.
            return [p for p in runs.iterdir() if p.is_dir()] if runs.exists() else []

        _wait(lambda: bool(folders()), 'the run folder', 120, out)
        (run_dir,) = folders()
        placements = run_dir / 'placements.jsonl'

        def placed(n: int):
            return lambda: len(lines(placements)) >= n

        # Episode 2 (seed 2) begins after 4 placements: stop the server at its first one, keep
        # it down for two more placements, then restart it.
        _wait(placed(5), 'the first placement of episode 2', 300, out)
        pg.stop()
        _wait(placed(7), 'two placements during the outage', 180, out)
        pg.start()
        # Episode 3: down again at its first placement, and the run dies (SIGKILL, every node)
        # one placement later, with the server still down.
        _wait(placed(9), 'the first placement of episode 3', 300, out)
        pg.stop()
        _wait(placed(10), 'a placement during the second outage', 180, out)
        assert _kill_marked(mark) >= 5
        proc.wait(timeout=30)
    finally:
        _kill_marked(mark)
        proc.wait(timeout=30)
        reader.join(5)
    text = ''.join(out)
    assert 'Traceback' not in text, text[-6000:]
    assert re.search(r'\[telemetry\] \[WARN\].*: replica unreachable: postgres ', text), text
    assert re.search(r'\[telemetry\] \[INFO\].*: replica back after [0-9.]+ s', text), text
    assert 'telemetry postgres: replica postgres host=' in text, text[:3000]
    pg.start()
    missing_before = (
        len(lines(placements)) - query(pg.dsn(), 'SELECT count(*) FROM placements')[0][0]
    )
    assert missing_before > 0  # the dead run left rows in its outbox
    t0 = time.monotonic()
    rep = subprocess.run(
        [sys.executable, '-m', 'palletizer.telemetry.replica', str(run_dir)],
        env={**os.environ, 'PALLETIZER_PG_DSN': pg.dsn()},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    drain_s = time.monotonic() - t0
    assert rep.returncode == 0, rep.stdout + rep.stderr
    assert 'episode seed 3 was left running; closed as aborted' in rep.stdout, rep.stdout
    print(f'replicate drained the dead run in {drain_s:.2f} s: {rep.stdout.splitlines()[-1]}')
    dsn = pg.dsn()
    with Outbox(run_dir, create=False) as ob:
        assert_run_equals_disk(dsn, ob.run_uuid, run_dir)  # every row exactly once, equal
    # The replica changes nothing of the episodes: the two that ended equal the in-process loop.
    from tests.graph.test_palletize import _in_process

    ended = lines(run_dir / 'episodes.jsonl')
    assert [e['seed'] for e in ended] == [1, 2]  # seed 3 died with the run: no line on disk
    for graph in ended:
        assert graph == _in_process(11, graph['seed'], graph['git_sha'])
    eps = query(dsn, 'SELECT seed, status, metrics FROM episodes ORDER BY seed')
    assert [(s, st) for s, st, _ in eps] == [(1, 'success'), (2, 'success'), (3, 'failure')]
    assert eps[2][2]['aborted'] is True and 'died' in eps[2][2]['abort_reason']
    assert query(dsn, "SELECT count(*) FROM episodes WHERE status = 'running'") == [(0,)]
    assert query(dsn, 'SELECT count(*) FROM runs WHERE ended_at IS NULL') == [(0,)]
    snaps = lines(run_dir / 'snapshots.jsonl')
    assert query(dsn, 'SELECT count(*) FROM snapshots WHERE png IS NOT NULL') == [(len(snaps),)]
