"""Fault injection: each node of the graph is killed (SIGKILL) in the middle of an episode.

The outcome must be bounded: either the run recovers (a respawned node is back and the episode
succeeds) or it fails within 10 s of the kill with a reason that names the node. Either way the
launcher leaves no process behind, and what telemetry recorded up to then is on disk.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.graph.isolation import next_domain

pytestmark = pytest.mark.sim

NODES = (
    'state_publisher',
    'depth_fusion',
    'wrist_gauge',
    'planner',
    'trajectory_executor',
    'telemetry',
    'cell_bridge',
    'episode_director',
)
BOUND_S = 10.0  # a failure must be reported within this long after the kill [s]


def _alive(pid: int) -> bool:
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().split()[2] != 'Z'
    except FileNotFoundError:
        return False


def _run_with_kill(
    victim: str, cwd: Path, sig: signal.Signals = signal.SIGKILL
) -> tuple[int, list[tuple[float, str]], float, set, float]:
    """Start level 11 seed 1 at speed 1 in its own network namespace; SIGKILL `victim` once the
    first carton is on the pallet (`sig` to the launcher itself when `victim` is 'launcher').
    Returns (exit code, (time, line) list, kill time, pids, the
    time the run ended)."""
    script = 'ip link set lo up && ip link set lo multicast on && exec "$@"'
    argv = [sys.executable, '-m', 'palletizer.cli.palletize', '--level', '11', '--seed', '1']
    proc = subprocess.Popen(
        ['unshare', '-n', 'sh', '-c', script, 'sh', *argv, '--speed', '1'],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={
            **os.environ,
            'ROS_DOMAIN_ID': str(next_domain()),
            'ROS_AUTOMATIC_DISCOVERY_RANGE': 'LOCALHOST',
            'PYTHONUNBUFFERED': '1',
        },
    )
    lines: list[tuple[float, str]] = []
    pids: dict[str, int] = {}
    all_pids: set[int] = set()
    killed_at = [0.0]

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            now = time.monotonic()
            lines.append((now, line.rstrip('\n')))
            started = re.search(r'\[launcher\] started (\w+) \(pid (\d+)\)', line)
            if started:
                pids[started.group(1)] = int(started.group(2))
                all_pids.add(int(started.group(2)))
            if not killed_at[0] and 'std_m-00' in line and ' L1 ' in line:
                os.kill(proc.pid if victim == 'launcher' else pids[victim], sig)
                killed_at[0] = time.monotonic()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        code = proc.wait(timeout=300)
        ended_at = time.monotonic()
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(timeout=10)
    return code, lines, killed_at[0], all_pids, ended_at


# Behind --run-slow (33-80 s each in CI at e3b6f9d), to keep the default run within 20 minutes
# on 2 cores: the launcher's respawn and required-node rules, which decide whether a run
# recovers or fails fast naming the node, are held in tests/launcher/test_process.py, and a
# required node's death through ros2 launch in tests/graph/test_ros2_launch.py.
@pytest.mark.slow
@pytest.mark.parametrize('victim', NODES)
def test_a_node_killed_mid_episode_recovers_or_fails_fast_naming_it(victim, tmp_path):
    code, lines, killed_at, pids, ended_at = _run_with_kill(victim, tmp_path)
    text = '\n'.join(ln for _, ln in lines)
    assert killed_at, f'the first carton never landed:\n{text[-4000:]}'
    # No orphans: every process the launcher started is gone once it has exited.
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in pids if _alive(p)], 'processes left behind'

    recovered = code == 0 and 'seed 1: 4/4 · SUCCESS' in text
    summary = [ln for _, ln in lines if 'seed 1:' in ln or 'stopping all nodes' in ln]
    print(f'\n{victim} killed: exit {code}; ' + ' | '.join(summary))
    if not recovered:
        assert code == 1, text[-4000:]  # episodes failed (docs/running.md "Exit codes")
        # The first line after the kill that reports the failure, and that it names the node.
        report = next(
            (
                (t, ln)
                for t, ln in lines
                if t >= killed_at
                and (
                    '· ABORTED' in ln
                    or 'stopping all nodes' in ln
                    or 'run aborted' in ln
                    or 'FAILURE' in ln
                )
            ),
            None,
        )
        assert report is not None, text[-4000:]
        t, line = report
        print(f'{victim}: failure reported {t - killed_at:.2f} s after the kill')
        assert t - killed_at <= BOUND_S, f'{t - killed_at:.1f} s after the kill: {line}'
        named = [ln for _, ln in lines if victim in ln and ('ABORTED' in ln or 'stopping' in ln)]
        assert named, f'no failure line names {victim}:\n{text[-4000:]}'
        # The run itself ends within the bound too, not only its report.
        print(f'{victim}: run ended {ended_at - killed_at:.2f} s after the kill')
        assert ended_at - killed_at <= BOUND_S, (
            f'the run ended {ended_at - killed_at:.1f} s after the kill (bound {BOUND_S:g} s)'
        )

    # What telemetry wrote up to the kill is on disk; the episode's line too unless telemetry
    # itself was the node killed.
    (run,) = sorted((tmp_path / 'runs').iterdir())
    events = [json.loads(x) for x in (run / 'events.jsonl').read_text().splitlines() if x]
    assert events and events[0]['kind'] == 'perceive'
    if victim != 'telemetry':
        episodes = [json.loads(x) for x in (run / 'episodes.jsonl').read_text().splitlines()]
        assert len(episodes) == 1
        ep = episodes[0]
        assert ep['success'] is recovered
        if not recovered and ep['metrics'].get('aborted'):
            assert ep['level'] == 11 and ep['task'] == 'table' and ep['oracle'] is False
            # The real cause and the carton count, under the key the director writes.
            assert ep['n_objects'] == 4, ep
            assert 'aborted_reason' not in ep['metrics'], ep['metrics']
            assert victim in ep['metrics']['abort_reason'], ep['metrics']


# Behind --run-slow (31 s each in CI at e3b6f9d): Ctrl-C's aborted episode on disk is held in
# the default run by tests/graph/test_ros2_launch.py (every launch file's Ctrl-C).
@pytest.mark.slow
@pytest.mark.parametrize('sig', [signal.SIGINT, signal.SIGKILL], ids=['sigint', 'kill'])
def test_a_stopped_run_records_the_real_cause_and_the_carton_count(sig, tmp_path):
    """Ctrl-C of the launcher, or the launcher killed: the open episode's line says why."""
    code, lines, killed_at, pids, _ = _run_with_kill('launcher', tmp_path, sig)
    text = '\n'.join(ln for _, ln in lines)
    assert killed_at, f'the first carton never landed:\n{text[-4000:]}'
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in pids if _alive(p)], 'processes left behind'
    (run,) = sorted((tmp_path / 'runs').iterdir())
    (ep,) = [json.loads(x) for x in (run / 'episodes.jsonl').read_text().splitlines()]
    assert ep['metrics']['aborted'] is True and 'aborted_reason' not in ep['metrics'], ep
    assert ep['n_objects'] == 4, ep
    cause = 'received SIGINT' if sig == signal.SIGINT else 'its launcher died'
    assert cause in ep['metrics']['abort_reason'], ep['metrics']
