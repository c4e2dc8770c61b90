"""Run a node graph as child processes: log prefixes, respawn, and a clean stop with no orphans."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import yaml

from palletizer.core.errors import GraphError
from palletizer.core.ports import STOP_REASON_ENV
from palletizer.launcher.graph import NodeSpec

__all__ = [
    'EXIT_BAD_INPUT',
    'EXIT_FAILED',
    'EXIT_OK',
    'GraphRunner',
    'find_executable',
    'node_argv',
]

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child: get SIGTERM if the launcher dies, even by SIGKILL, so nothing is orphaned."""
    libc = ctypes.CDLL('libc.so.6', use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    # Own process group: a terminal Ctrl-C reaches the launcher only, which then stops the
    # children in order instead of all at once.
    os.setpgid(0, 0)


def find_executable(package: str, executable: str) -> Path:
    """lib/<package>/<executable> on AMENT_PREFIX_PATH, as `ros2 run` resolves it."""
    prefixes = [p for p in os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep) if p]
    for prefix in prefixes:
        cand = Path(prefix) / 'lib' / package / executable
        if cand.is_file() and os.access(cand, os.X_OK):
            return cand
    raise GraphError(
        f'executable {executable!r} of package {package!r} not found under lib/{package}/ in '
        f'AMENT_PREFIX_PATH ({", ".join(prefixes) or "empty"}); run scripts/setup or source '
        f'scripts/env.sh'
    )


def node_argv(spec: NodeSpec, params_dir: Path, log_level: str = 'info') -> list[str]:
    """The argv of one node: executable, its ROS name, parameters file and remappings."""
    base = (
        list(spec.command)
        if spec.command
        else [str(find_executable(spec.package, spec.executable))]
    )
    params_file = params_dir / f'{spec.name}.yaml'
    params_file.write_text(
        yaml.safe_dump({spec.name: {'ros__parameters': dict(spec.parameters)}}), encoding='utf-8'
    )
    argv = [*base, *spec.args, '--ros-args', '-r', f'__node:={spec.name}']
    argv += ['--params-file', str(params_file)]
    for extra in spec.params_files:
        argv += ['--params-file', extra]
    for src, dst in spec.remappings:
        argv += ['-r', f'{src}:={dst}']
    argv += ['--log-level', log_level]
    return argv


@dataclass
class _Child:
    spec: NodeSpec
    proc: subprocess.Popen[bytes]
    readers: list[threading.Thread]


# Exit codes of a run (docs/running.md "Exit codes"): every episode succeeded, episodes failed, bad input.
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


class GraphRunner:
    """Start the nodes of a graph, supervise them, and stop them all.

    - Every output line is prefixed with `[node_name]`; each exit is logged once.
    - A node with `respawn` is restarted after `respawn_delay` when it exits on its own, unless
      it exited with code 2 (its input is bad: the run stops with code 2); one that exits
      `max_quick_exits` times in a row within `quick_exit_s` of its start is given up on, and
      the run stops with code 1.
    - A node with neither `respawn` nor `required` that exits while the graph runs stops the
      run (exit code 1): nothing would take its place, and the episode could only time out.
    - When a `required` node exits, or on stop() (Ctrl-C, SIGTERM), every child gets SIGINT,
      then SIGTERM and finally SIGKILL after grace periods; children also die with the launcher.
      Before stopping, the reason is written to the file named by $PALLETIZER_STOP_REASON_FILE
      in every child's environment.
    """

    def __init__(
        self,
        nodes: Sequence[NodeSpec],
        *,
        log_level: str = 'info',
        env: dict[str, str] | None = None,
        out: IO[str] | None = None,
        grace_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        quick_exit_s: float = 5.0,
        max_quick_exits: int = 3,
    ) -> None:
        names = [n.name for n in nodes]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise GraphError(f'node names must be unique; repeated: {", ".join(dupes)}')
        self._nodes = list(nodes)
        self._log_level = log_level
        self._tmp = tempfile.TemporaryDirectory(prefix='palletizer-params-')
        self._reason_file = Path(self._tmp.name) / 'stop_reason'
        self._env = {
            **os.environ,
            **(env or {}),
            'PYTHONUNBUFFERED': '1',
            STOP_REASON_ENV: str(self._reason_file),
        }
        self._out = out or sys.stdout
        self._grace = grace_s
        self._clock = clock
        self._quick_exit_s = quick_exit_s
        self._max_quick_exits = max_quick_exits
        self._children: dict[str, _Child] = {}
        self._started_at: dict[str, float] = {}
        self._quick_exits: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.exit_code: int | None = None
        self.stop_reason = ''

    # -- output -------------------------------------------------------------------------------

    def log(self, name: str, line: str) -> None:
        with self._lock:
            self._out.write(f'[{name}] {line}\n')
            self._out.flush()

    def _pump(self, name: str, stream: IO[bytes]) -> None:
        for raw in iter(stream.readline, b''):
            self.log(name, raw.decode('utf-8', 'replace').rstrip('\n'))
        stream.close()

    # -- lifecycle ----------------------------------------------------------------------------

    def _spawn(self, spec: NodeSpec) -> None:
        argv = node_argv(spec, Path(self._tmp.name), self._log_level)
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**self._env, **spec.env},
            preexec_fn=_die_with_parent,
        )
        readers = [
            threading.Thread(target=self._pump, args=(spec.name, s), daemon=True)
            for s in (proc.stdout, proc.stderr)
        ]
        for r in readers:
            r.start()
        self._children[spec.name] = _Child(spec, proc, readers)
        self._started_at[spec.name] = self._clock()
        self.log('launcher', f'started {spec.name} (pid {proc.pid})')

    def start(self) -> None:
        for spec in self._nodes:
            self._spawn(spec)

    @property
    def pids(self) -> dict[str, int]:
        return {name: c.proc.pid for name, c in self._children.items()}

    def stop(self, reason: str = 'stop requested', code: int | None = None) -> None:
        """Stop every child: SIGINT, then SIGTERM, then SIGKILL, each after the grace period.

        `code` becomes the run's exit code unless one is set already.
        """
        if self._stopping.is_set():
            return
        self._stopping.set()
        self.stop_reason = reason
        if code is not None and self.exit_code is None:
            self.exit_code = code
        try:
            self._reason_file.write_text(reason + '\n', encoding='utf-8')
        except OSError:
            pass  # the reason is in the log line below either way
        self.log('launcher', f'stopping all nodes: {reason}')
        live = [c for c in self._children.values() if c.proc.poll() is None]
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            for c in live:
                if c.proc.poll() is None:
                    try:
                        os.killpg(c.proc.pid, sig)
                    except ProcessLookupError:
                        pass
            deadline = self._clock() + self._grace
            while self._clock() < deadline and any(c.proc.poll() is None for c in live):
                time.sleep(0.02)
            live = [c for c in live if c.proc.poll() is None]
            if not live:
                break
        for c in self._children.values():
            c.proc.wait()
            for r in c.readers:
                r.join(timeout=1.0)
        self._tmp.cleanup()

    def run(self, poll_s: float = 0.05) -> int:
        """Supervise until a required node exits or stop() is called; return an exit code."""
        if not self._children:
            self.start()
        respawn_at: dict[str, float] = {}
        reported: set[str] = set()  # children whose exit is logged (each exit once)
        while not self._stopping.is_set():
            for name, c in list(self._children.items()):
                code = c.proc.poll()
                if code is None or name in reported:
                    continue
                reported.add(name)
                self.log('launcher', f'{name} exited with code {code}')
                if c.spec.required:
                    # Its own code (the director's says how the episodes went); killed by a
                    # signal (a negative code), the run failed.
                    self.stop(
                        f'required node {name} exited with code {code}',
                        code if code >= 0 else EXIT_FAILED,
                    )
                    break
                if not c.spec.respawn:
                    self.stop(
                        f'{name} exited with code {code} and is not respawned',
                        EXIT_BAD_INPUT if code == EXIT_BAD_INPUT else EXIT_FAILED,
                    )
                    break
                if code == EXIT_BAD_INPUT:  # its configuration is bad: a restart reads it again
                    self.stop(f'{name} refused its configuration (exit code 2)', EXIT_BAD_INPUT)
                    break
                quick = self._clock() - self._started_at[name] < self._quick_exit_s
                self._quick_exits[name] = self._quick_exits.get(name, 0) + 1 if quick else 0
                if self._quick_exits[name] >= self._max_quick_exits:
                    self.stop(
                        f'{name} exited {self._quick_exits[name]} times within '
                        f'{self._quick_exit_s:g} s of starting (last code {code}): not '
                        'respawning it again',
                        EXIT_FAILED,
                    )
                    break
                respawn_at[name] = self._clock() + c.spec.respawn_delay
            for name, at in list(respawn_at.items()):
                if self._clock() >= at and not self._stopping.is_set():
                    del respawn_at[name]
                    reported.discard(name)
                    self.log('launcher', f'respawning {name}')
                    self._spawn(self._children[name].spec)
            time.sleep(poll_s)
        return self.exit_code if self.exit_code is not None else EXIT_OK

    def stop_on_signals(self) -> None:
        """Ctrl-C and SIGTERM stop the graph; the run then exits 130 or 143 (128 + signal)."""

        def on_signal(signum: int, _frame: object) -> None:
            self.stop(f'received {signal.Signals(signum).name}', 128 + signum)

        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)
