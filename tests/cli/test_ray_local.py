"""Without RAY_ADDRESS the pool starts a Ray of its own, even where a `ray start` head is left
running on this machine (plain `ray.init(num_cpus=...)` joins that head and then refuses)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ray = pytest.importorskip('ray')

from palletizer.cli import pool  # noqa: E402

# A Ray cluster of its own: two on one machine at once collide (ports, the session files
# under /tmp/ray); run alone, after the parallel tests (scripts/test).
pytestmark = pytest.mark.serial


CURRENT = Path('/tmp/ray/ray_current_cluster')  # where ray.init looks for a head to join


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return int(s.getsockname()[1])


@pytest.fixture
def head(monkeypatch):
    """A `ray start --head` on loopback with 1 CPU, as a user leaves one running; stopped after
    (only this head: `ray stop` would stop every Ray on the machine)."""
    monkeypatch.delenv('RAY_ADDRESS', raising=False)
    monkeypatch.setenv('RAY_USAGE_STATS_ENABLED', '0')
    port = _free_port()
    before = CURRENT.read_text() if CURRENT.exists() else None
    exe = Path(sys.executable).with_name('ray')
    proc = subprocess.Popen(
        [str(exe), 'start', '--head', '--block', f'--port={port}', '--num-cpus=1']
        + ['--node-ip-address=127.0.0.1', '--include-dashboard=false', '--disable-usage-stats'],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90.0
        # The head writes its address here (the machine's own address, whatever the node's).
        while not (CURRENT.exists() and CURRENT.read_text().strip().endswith(f':{port}')):
            assert proc.poll() is None, f'ray start --head exited {proc.returncode}'
            assert time.monotonic() < deadline, f'the head on port {port} did not come up in 90 s'
            time.sleep(0.5)
        yield proc, CURRENT.read_text().strip()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
        # The stopped head leaves its address behind, and a later plain ray.init would try to
        # join it: put back what was there.
        if CURRENT.exists() and CURRENT.read_text().strip().endswith(f':{port}'):
            if before is None:
                CURRENT.unlink()
            else:
                CURRENT.write_text(before)


def test_with_a_head_running_the_pool_starts_its_own_ray_and_leaves_the_head_alone(head):
    proc, address = head
    # The trap: a plain local start finds the head, joins it, and refuses the CPU count.
    with pytest.raises(ValueError, match='existing cluster'):
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    assert not ray.is_initialized()
    with pool.ray_session(workers=2):
        ctx = ray.get_runtime_context()
        assert ctx.gcs_address != address  # not the head
        assert ray.cluster_resources()['CPU'] == 2  # ours: the head has 1
        assert sorted(r for _, r in pool.as_completed(abs, [-1, -2, -3], workers=2)) == [1, 2, 3]
    assert not ray.is_initialized()
    assert proc.poll() is None  # the user's head still runs
