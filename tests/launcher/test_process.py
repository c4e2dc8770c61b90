"""The standalone launcher prefixes logs, respawns, and stops every child without orphans."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from palletizer.launcher.graph import NodeSpec
from palletizer.launcher.process import GraphRunner

SLEEPER = str(Path(__file__).with_name('sleeper.py'))


def _node(name: str, mode: str, **kw) -> NodeSpec:
    return NodeSpec(name=name, executable='sleeper', command=(sys.executable, SLEEPER, mode), **kw)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); count it as gone.
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().split()[2] != 'Z'
    except FileNotFoundError:
        return False


def _wait_gone(pids, timeout=10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = [p for p in pids if _alive(p)]
        if not left:
            return []
        time.sleep(0.05)
    return [p for p in pids if _alive(p)]


def test_required_node_exit_stops_every_other_node_and_prefixes_logs():
    out = io.StringIO()
    runner = GraphRunner(
        [
            _node('a', 'sleep'),
            _node('b', 'stubborn'),
            _node('boss', 'exit-after-0.5', required=True),
        ],
        out=out,
        grace_s=0.5,
    )
    runner.start()
    pids = list(runner.pids.values())
    assert runner.run() == 0
    assert _wait_gone(pids, 5.0) == []
    text = out.getvalue()
    assert '[a] hello from sleep' in text and '[b] hello from stubborn' in text
    assert 'required node boss exited with code 0' in text


def test_respawn_restarts_a_node_that_exits():
    out = io.StringIO()
    runner = GraphRunner(
        [
            _node('flaky', 'exit', respawn=True, respawn_delay=0.1),
            _node('boss', 'exit-after-1.5', required=True),
        ],
        out=out,
        grace_s=0.5,
    )
    runner.run()
    assert out.getvalue().count('[flaky] hello from exit') >= 2
    assert 'respawning flaky' in out.getvalue()


def test_a_node_that_is_not_respawned_stops_the_run_naming_it_and_its_exit_is_logged_once():
    out = io.StringIO()
    runner = GraphRunner(
        [
            _node('worker', 'exit-after-0.3'),  # neither respawned nor required
            _node('boss', 'reason', required=True),
        ],
        out=out,
        grace_s=0.5,
    )
    t0 = time.monotonic()
    assert runner.run(poll_s=0.01) == 1
    assert time.monotonic() - t0 < 5.0
    text = out.getvalue()
    assert text.count('[launcher] worker exited with code 0\n') == 1
    assert 'stopping all nodes: worker exited with code 0 and is not respawned' in text
    # The required node learns why the graph is stopping (the director names it in the episode).
    assert '[boss] reason: worker exited with code 0 and is not respawned' in text


def test_a_node_that_keeps_failing_at_start_is_given_up_on():
    out = io.StringIO()
    runner = GraphRunner(
        [
            _node('planner', 'exit', respawn=True, respawn_delay=0.05),
            _node('boss', 'sleep', required=True),
        ],
        out=out,
        grace_s=0.5,
        max_quick_exits=3,
    )
    assert runner.run(poll_s=0.01) == 1
    text = out.getvalue()
    assert text.count('[planner] hello from exit') == 3
    assert text.count('[launcher] planner exited with code 3\n') == 3  # once per exit
    assert 'planner exited 3 times within 5 s of starting (last code 3)' in text


def test_a_node_that_refuses_its_configuration_is_not_respawned_and_the_run_exits_2():
    out = io.StringIO()
    runner = GraphRunner(
        [
            _node('planner', 'bad-input', respawn=True, respawn_delay=0.05),
            _node('boss', 'sleep', required=True),
        ],
        out=out,
        grace_s=0.5,
    )
    assert runner.run(poll_s=0.01) == 2
    text = out.getvalue()
    assert text.count('[planner] hello from bad-input') == 1
    assert 'stopping all nodes: planner refused its configuration (exit code 2)' in text


def test_duplicate_node_names_are_refused():
    from palletizer.core.errors import GraphError

    with pytest.raises(GraphError, match='repeated: a'):
        GraphRunner([_node('a', 'sleep'), _node('a', 'sleep')])


_LAUNCHER = textwrap.dedent(
    f"""
    import signal, sys
    sys.path[:0] = {sys.path!r}
    from palletizer.launcher.graph import NodeSpec
    from palletizer.launcher.process import GraphRunner
    nodes = [NodeSpec(name=n, executable='s', command=(sys.executable, {SLEEPER!r}, m))
             for n, m in (('a', 'sleep'), ('b', 'stubborn'), ('c', 'sleep'))]
    r = GraphRunner(nodes, grace_s=0.5)
    if {{stop_on_signals}}:
        r.stop_on_signals()
    else:
        signal.signal(signal.SIGTERM, lambda *_: r.stop('SIGTERM'))
        signal.signal(signal.SIGINT, lambda *_: r.stop('SIGINT'))
    r.start()
    # One write: the nodes' relayed output must not land inside this line.
    sys.stdout.write('PIDS ' + ' '.join(map(str, r.pids.values())) + chr(10))
    sys.stdout.flush()
    sys.exit(r.run())
    """
)


def _start_launcher(stop_on_signals: bool = False) -> tuple[subprocess.Popen[str], list[int]]:
    code = _LAUNCHER.replace('{stop_on_signals}', str(stop_on_signals))
    proc = subprocess.Popen([sys.executable, '-c', code], stdout=subprocess.PIPE, text=True)
    for line in proc.stdout:
        found = re.search(r'PIDS((?: \d+){3})', line)
        if found:
            return proc, [int(p) for p in found.group(1).split()]
    proc.kill()
    raise AssertionError('launcher did not start its nodes')


@pytest.mark.parametrize('sig', [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_launcher_leaves_no_orphans_on_ctrl_c_sigterm_or_sigkill(sig):
    proc, pids = _start_launcher()
    assert len(pids) == 3 and all(_alive(p) for p in pids)
    time.sleep(0.3)
    proc.send_signal(sig)
    proc.wait(timeout=15)
    proc.stdout.close()
    # SIGKILL cannot be handled: the children's parent-death signal ends them instead.
    assert _wait_gone(pids) == [], f'orphans left after {sig.name}'


@pytest.mark.parametrize('sig, code', [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_run_exits_128_plus_the_signal(sig, code):
    proc, pids = _start_launcher(stop_on_signals=True)
    time.sleep(0.3)
    proc.send_signal(sig)
    assert proc.wait(timeout=15) == code
    proc.stdout.close()
    assert _wait_gone(pids) == []
