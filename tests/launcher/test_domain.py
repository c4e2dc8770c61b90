"""Each run claims its own ROS_DOMAIN_ID and holds it for its lifetime (an flock per domain)."""

from __future__ import annotations

import fcntl
import functools
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import types

import pytest
from palletizer.cli import palletize
from palletizer.core.errors import GraphError
from palletizer.launcher import __main__ as launcher
from palletizer.launcher import domain as domain_module
from palletizer.launcher.domain import FREE_DOMAINS, claim_domain

# A process that claims a domain (the one named by ROS_DOMAIN_ID, or a free one), says which,
# and holds it until killed.
_HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from palletizer.launcher.domain import claim_domain
    claim = claim_domain(lock_dir=Path(sys.argv[1]))
    print(claim.domain_id, flush=True)
    time.sleep(600)
    """
)


@pytest.fixture
def holders(tmp_path):
    """Start holder processes; each is killed at the end of the test."""
    procs: list[subprocess.Popen[str]] = []

    def start(domain: str | None = None) -> tuple[subprocess.Popen[str], int]:
        env = {k: v for k, v in os.environ.items() if k != 'ROS_DOMAIN_ID'}
        if domain is not None:
            env['ROS_DOMAIN_ID'] = domain
        proc = subprocess.Popen(
            [sys.executable, '-c', _HOLDER, str(tmp_path)],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        procs.append(proc)
        line = proc.stdout.readline()
        assert line.strip().isdigit(), line
        return proc, int(line)

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def test_two_claims_in_one_process_get_different_domains_and_never_0(tmp_path):
    with claim_domain({}, lock_dir=tmp_path) as a, claim_domain({}, lock_dir=tmp_path) as b:
        assert a.domain_id != b.domain_id
        assert {a.domain_id, b.domain_id} <= set(FREE_DOMAINS) and 0 not in FREE_DOMAINS
        assert a.env == {'ROS_DOMAIN_ID': str(a.domain_id)}
    # released: the next claim gets the first one again
    with claim_domain({}, lock_dir=tmp_path) as c:
        assert c.domain_id == a.domain_id


def test_two_processes_get_different_domains(holders):
    _, a = holders()
    _, b = holders()
    assert a != b and 0 not in (a, b)


def test_an_explicit_domain_is_used_and_locked(tmp_path):
    with claim_domain({'ROS_DOMAIN_ID': '7'}, lock_dir=tmp_path) as claim:
        assert claim.domain_id == 7
        assert claim.banner() == (
            'ROS_DOMAIN_ID 7 (join this run: export ROS_DOMAIN_ID=7, then rviz2 or ros2 '
            'topic list)'
        )
        with pytest.raises(GraphError, match='ROS_DOMAIN_ID=7 is held by another palletizer run'):
            claim_domain({'ROS_DOMAIN_ID': '7'}, lock_dir=tmp_path)
        # a run that picks for itself skips it
        with claim_domain({}, lock_dir=tmp_path, candidates=[7, 8]) as other:
            assert other.domain_id == 8


def test_an_explicit_domain_held_by_another_process_is_refused_with_one_line(holders, tmp_path):
    proc, held = holders('42')
    assert held == 42
    with pytest.raises(GraphError) as err:
        claim_domain({'ROS_DOMAIN_ID': '42'}, lock_dir=tmp_path)
    msg = str(err.value)
    assert '\n' not in msg
    assert msg == (
        f'ROS_DOMAIN_ID=42 is held by another palletizer run (pid {proc.pid}); stop that run, '
        'or export ROS_DOMAIN_ID=<another id, 1-101> (or unset it and the run picks a free one)'
    )


def test_a_killed_holder_frees_its_domain(holders, tmp_path):
    proc, held = holders('5')
    with pytest.raises(GraphError, match='held by another palletizer run'):
        claim_domain({'ROS_DOMAIN_ID': '5'}, lock_dir=tmp_path)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with claim_domain({'ROS_DOMAIN_ID': '5'}, lock_dir=tmp_path) as claim:
        assert claim.domain_id == held == 5


def test_a_run_with_the_real_ur_joins_the_drivers_default_domain(tmp_path):
    # The driver runs on ROS's default domain 0 unless ROS_DOMAIN_ID says otherwise.
    with claim_domain({'ROS_DOMAIN_ID': ''}, robot='ur', lock_dir=tmp_path) as claim:
        assert claim.domain_id == 0
        with pytest.raises(GraphError, match='the default ROS_DOMAIN_ID 0 is held'):
            claim_domain({}, robot='ur', lock_dir=tmp_path)
    with claim_domain({'ROS_DOMAIN_ID': '3'}, robot='ur', lock_dir=tmp_path) as claim:
        assert claim.domain_id == 3


@pytest.mark.parametrize('text', ['abc', '-1', '233', '1.5'])
def test_a_malformed_domain_id_is_refused(tmp_path, text):
    with pytest.raises(GraphError, match=rf"ROS_DOMAIN_ID='{text}'; expected an integer 0-232"):
        claim_domain({'ROS_DOMAIN_ID': text}, lock_dir=tmp_path)


def test_a_domain_whose_dds_ports_are_bound_is_skipped(tmp_path):
    # A DDS participant of domain 60 (participant 0) listens on 7400 + 250 * 60 + 10.
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.bind(('127.0.0.1', 7400 + 250 * 60 + 10))
        except OSError:
            pytest.skip('port 22410 is taken here already')
        with claim_domain({}, lock_dir=tmp_path, candidates=[60, 61]) as claim:
            assert claim.domain_id == 61


def test_no_free_domain_says_so(tmp_path):
    with claim_domain({}, lock_dir=tmp_path, candidates=[9]):
        with pytest.raises(GraphError, match=r'no free ROS_DOMAIN_ID \(9-9\)'):
            claim_domain({}, lock_dir=tmp_path, candidates=[9])


def test_the_lock_folder_is_per_network_namespace(tmp_path):
    with claim_domain({}, lock_dir=tmp_path) as claim:
        net = os.stat('/proc/self/ns/net').st_ino
        assert claim.path == tmp_path / f'net{net}' / f'{claim.domain_id}.lock'
        assert claim.path.read_text() == f'{os.getpid()}\n'
    assert not claim.path.parent.exists()  # an ended run leaves nothing behind
    assert tmp_path.exists()


def test_a_domain_is_never_held_twice_while_runs_come_and_go(tmp_path, monkeypatch):
    # An ended run removes its lock file; a claim that opened the file just before must not
    # count a lock on the removed file. A pause before each flock widens that window.
    def slow_flock(fd, op):
        time.sleep(0.001)
        fcntl.flock(fd, op)

    shim = types.SimpleNamespace(flock=slow_flock, LOCK_EX=fcntl.LOCK_EX, LOCK_NB=fcntl.LOCK_NB)
    monkeypatch.setattr(domain_module, 'fcntl', shim)
    twice, held = [], []

    def contend() -> None:
        for _ in range(150):
            try:
                claim = claim_domain({'ROS_DOMAIN_ID': '9'}, lock_dir=tmp_path)
            except GraphError:
                continue
            with claim:
                try:
                    os.close(os.open(tmp_path / 'mark', os.O_CREAT | os.O_EXCL))
                except FileExistsError:
                    twice.append(1)
                    continue
                time.sleep(0.0005)
                os.unlink(tmp_path / 'mark')
                held.append(1)

    threads = [threading.Thread(target=contend) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not twice and held


@pytest.mark.skipif(os.geteuid() != 0, reason='network namespaces need root (unshare -n)')
def test_a_run_in_another_network_namespace_does_not_hold_the_id_here(tmp_path):
    # DDS discovery never leaves a namespace: the graph tests' runs may share an id.
    proc = subprocess.Popen(
        ['unshare', '-n', sys.executable, '-c', _HOLDER, str(tmp_path)],
        env={**os.environ, 'ROS_DOMAIN_ID': '42'},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == '42'
        with claim_domain({'ROS_DOMAIN_ID': '42'}, lock_dir=tmp_path) as claim:
            assert claim.domain_id == 42
    finally:
        proc.kill()
        proc.wait()


class _Runner:
    """Stands in for GraphRunner: records what the run would give its children and print."""

    made: list[_Runner] = []

    def __init__(self, nodes, **kwargs):
        self.env = kwargs.get('env')
        self.lines: list[str] = []
        _Runner.made.append(self)

    def log(self, name, line):
        self.lines.append(f'[{name}] {line}')

    def stop_on_signals(self):
        pass

    def start(self):
        pass

    def run(self):
        return 0


@pytest.mark.parametrize(
    'module, argv', [(palletize, ['--level', '11', '--no-telemetry']), (launcher, [])]
)
def test_every_child_gets_the_claimed_domain_and_the_first_line_says_it(
    tmp_path, monkeypatch, module, argv
):
    monkeypatch.delenv('ROS_DOMAIN_ID', raising=False)
    monkeypatch.setattr(module, 'claim_domain', functools.partial(claim_domain, lock_dir=tmp_path))
    monkeypatch.setattr(module, 'GraphRunner', _Runner)
    _Runner.made.clear()
    assert module.main(argv) == 0
    (runner,) = _Runner.made
    domain = int(runner.env['ROS_DOMAIN_ID'])
    assert runner.env == {'ROS_DOMAIN_ID': str(domain)} and domain in FREE_DOMAINS
    assert runner.lines[0] == (
        f'[launcher] ROS_DOMAIN_ID {domain} (join this run: export ROS_DOMAIN_ID={domain}, '
        'then rviz2 or ros2 topic list)'
    )


@pytest.mark.parametrize(
    'module, argv, prefix',
    [
        (palletize, ['--level', '11', '--no-telemetry'], 'palletize: error: '),
        (launcher, [], 'error: '),
    ],
)
def test_a_run_on_a_held_domain_fails_before_anything_starts_with_one_line(
    holders, tmp_path, monkeypatch, capsys, module, argv, prefix
):
    proc, _ = holders('17')
    monkeypatch.setenv('ROS_DOMAIN_ID', '17')
    monkeypatch.setattr(module, 'claim_domain', functools.partial(claim_domain, lock_dir=tmp_path))
    monkeypatch.setattr(module, 'GraphRunner', None)  # calling it would fail the test
    monkeypatch.setattr(subprocess, 'Popen', None)
    assert module.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ''
    assert err == (
        f'{prefix}ROS_DOMAIN_ID=17 is held by another palletizer run (pid {proc.pid}); stop that '
        'run, or export ROS_DOMAIN_ID=<another id, 1-101> (or unset it and the run picks a free '
        'one)\n'
    )
