"""One run at a time: `scripts/palletize`'s launcher as a child process, watched line by line.

The panel starts exactly what `scripts/palletize` runs (`python -m palletizer.cli.palletize`
with the same flags), reads its console, and joins its DDS domain (announced on the launcher's
first line) with an `Observer` for the live view. Stop sends SIGINT, as Ctrl-C would: the
launcher stops its nodes and telemetry closes the open episode as aborted. A launcher that
does not exit is sent SIGTERM and then SIGKILL, to its whole process group.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from palletizer.cli.palletize import build_options
from palletizer.core.config import load_config
from palletizer.core.errors import PalletizerError

__all__ = ['PanelError', 'RunManager', 'RunRequest', 'panel_argv', 'request_from']

LOG_KEEP = 5000  # console lines kept in memory (the log pane shows the last of them)
STOP_GRACE_S = 30.0  # the launcher's own SIGINT -> SIGTERM -> SIGKILL of its nodes fits in it

_DOMAIN = re.compile(r'^\[launcher\] ROS_DOMAIN_ID (\d+)')
_RUN_DIR = re.compile(r'^\[episode_director\] telemetry writes (.+)$')
_RESULT = re.compile(r'^\[episode_director\] (seed (-?\d+): (\d+)/(\d+) · (.+))$')
_NODE_PID = re.compile(r'^\[launcher\] started (\w+) \(pid (\d+)\)')


class PanelError(PalletizerError):
    """A request the panel refuses; `status` is the HTTP status it answers with."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class RunRequest:
    """The options of a run, as the page sends them; each maps to one `scripts/palletize` flag."""

    level: int
    planner: str = 'heuristic'
    seed: int = 1
    episodes: int = 1
    speed: float = 0.0
    perception: str = 'cameras'
    telemetry: str = 'disk'
    stability: bool = False
    pallet_spec: str = ''  # the normalised pallet spec as JSON ('' = none): --spec with its file

    def flags(self) -> list[str]:
        return [
            '--level', str(self.level),
            '--planner', self.planner,
            '--seed', str(self.seed),
            '--episodes', str(self.episodes),
            '--speed', repr(float(self.speed)),
            '--perception', self.perception,
            '--telemetry', self.telemetry,
            *(['--stability'] if self.stability else []),
            *(['--spec', str(spec_file(self.pallet_spec))] if self.pallet_spec else []),
        ]  # fmt: skip


def spec_file(text: str) -> Path:
    """The file a run's pallet spec (normalised JSON) is handed over in: one per spec, named by
    its hash, in the temporary folder (the run's episode lines record the spec itself)."""
    folder = Path(tempfile.gettempdir()) / 'palletizer-panel-specs'
    folder.mkdir(exist_ok=True)
    path = folder / f'{hashlib.sha256(text.encode()).hexdigest()[:16]}.json'
    if not path.is_file():
        path.write_text(text)
    return path


def check_spec(doc: Any) -> tuple[str, dict[str, Any] | None]:
    """A spec from the page: the normalised spec as JSON and as data ('' and None for none or
    one with no rule on); SpecError naming each bad key."""
    from palletizer.core.pallet_spec import load_spec

    if doc is None:
        return '', None
    spec = load_spec(doc, load_config().catalogue.types, where='pallet_spec')
    if spec.empty:
        return '', None
    data = spec.to_dict()
    return json.dumps(data, sort_keys=True), data


def panel_argv(req: RunRequest) -> list[str]:
    """The child's command line, checked by the CLI's own parser first (PanelError 400)."""
    try:
        build_options(req.flags())
    except PalletizerError as exc:
        raise PanelError(str(exc)) from exc
    return [sys.executable, '-m', 'palletizer.cli.palletize', *req.flags()]


@dataclass
class Run:
    request: RunRequest
    argv: list[str]
    proc: subprocess.Popen[str]
    cartons_total: int
    state: str = 'starting'
    domain: int | None = None
    run_dir: str | None = None
    results: list[dict[str, Any]] = field(default_factory=list)
    node_pids: dict[str, int] = field(default_factory=dict)
    stop_requested: bool = False
    exit_code: int | None = None
    error: str | None = None
    started: float = field(default_factory=time.time)


class RunManager:
    """Starts, watches and stops the panel's run; keeps the console and the last run's status.

    `observe(domain_id, level)` is called once the run's domain is known and returns an object
    with close() (the live view's Observer); it may be None in tests of the console alone.
    """

    def __init__(
        self,
        cwd: Path,
        env: Mapping[str, str] | None = None,
        observe: Callable[[int, int], Any] | None = None,
        live_rows: Callable[[], list[dict[str, Any]]] | None = None,
        runs_dir: Path | None = None,
    ) -> None:
        self.cwd = cwd
        # The folder the panel lists (--runs): its runs are written there, not to the
        # repository's runs/, through a params file that sets telemetry's runs_dir.
        self.runs_dir = None if runs_dir is None else Path(runs_dir).absolute()
        self.env = dict(os.environ if env is None else env)
        self.observe = observe
        self.live_rows = live_rows or (lambda: [])
        self.lock = threading.RLock()
        self.run: Run | None = None
        self.log: list[str] = []
        self.log_start = 0  # index of log[0] among every line so far
        self.version = 0  # bumped on every status change
        self._observer: Any = None
        self._last_rows: list[dict[str, Any]] = []

    # -- control -----------------------------------------------------------------------------
    def start(self, req: RunRequest) -> dict[str, Any]:
        argv = panel_argv(req)
        if self.runs_dir is not None:
            argv = [*argv, f'params_file:={self._runs_params()}']
        with self.lock:
            if self.run is not None and self.run.proc.poll() is None:
                r = self.run
                raise PanelError(
                    f'a run is already running (level {r.request.level}, seed '
                    f'{r.request.seed}, pid {r.proc.pid}); stop it first',
                    409,
                )
            n = load_config().level(req.level).n
            env = {**self.env, 'PYTHONUNBUFFERED': '1'}
            proc = subprocess.Popen(
                argv,
                cwd=self.cwd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                text=True,
                bufsize=1,
                start_new_session=True,  # its own group: a last-resort kill reaches every node
            )
            self.run = Run(req, argv, proc, n)
            self._append(f'[panel] started: {" ".join(argv[1:])} (pid {proc.pid})')
            self.version += 1
        threading.Thread(target=self._read, args=(self.run,), daemon=True).start()
        return self.status()

    def stop(self) -> dict[str, Any]:
        with self.lock:
            r = self.run
            if r is None or r.proc.poll() is not None:
                raise PanelError('no run is running', 409)
            r.stop_requested = True
            self._append(f'[panel] stop: SIGINT to the launcher (pid {r.proc.pid})')
            self.version += 1
        try:
            os.kill(r.proc.pid, signal.SIGINT)
        except ProcessLookupError:
            pass
        threading.Thread(target=self._escalate, args=(r,), daemon=True).start()
        return self.status()

    def _escalate(self, r: Run) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                r.proc.wait(timeout=STOP_GRACE_S)
                return
            except subprocess.TimeoutExpired:
                with self.lock:
                    self._append(f'[panel] the launcher did not exit: {sig.name} to its group')
                try:
                    os.killpg(r.proc.pid, sig)
                except ProcessLookupError:
                    return

    def _runs_params(self) -> Path:
        """A ROS parameters file that points telemetry at the panel's runs folder."""
        assert self.runs_dir is not None
        path = Path(tempfile.gettempdir()) / f'palletizer-panel-{os.getpid()}-runs.yaml'
        # JSON is YAML: the folder name needs no quoting rules of its own.
        params = {'telemetry': {'ros__parameters': {'runs_dir': str(self.runs_dir)}}}
        path.write_text(json.dumps(params) + '\n', encoding='utf-8')
        return path

    def close(self) -> None:
        """Stop a running run and wait for it (the panel is shutting down)."""
        r = self.run
        if r is not None and r.proc.poll() is None:
            try:
                self.stop()
            except PanelError:
                pass
            try:
                r.proc.wait(timeout=2 * STOP_GRACE_S + 5)
            except subprocess.TimeoutExpired:
                pass
        self._close_observer()

    # -- the child's console -----------------------------------------------------------------
    def _append(self, line: str) -> None:
        self.log.append(line)
        if len(self.log) > LOG_KEEP:
            drop = len(self.log) - LOG_KEEP
            del self.log[:drop]
            self.log_start += drop

    def _read(self, r: Run) -> None:
        assert r.proc.stdout is not None
        for raw in r.proc.stdout:
            line = raw.rstrip('\n')
            with self.lock:
                self._append(line)
                self._parse(r, line)
        code = r.proc.wait()
        with self.lock:
            r.exit_code = code
            if r.stop_requested or code in (128 + signal.SIGINT, 128 + signal.SIGTERM):
                r.state = 'aborted'
            elif code in (0, 1) and r.results:
                r.state = 'finished'
            else:
                r.state = 'crashed'
                tail = [ln for ln in self.log[-40:] if not ln.startswith('[panel]')][-12:]
                r.error = f'the run exited with code {code}' + (
                    ':\n' + '\n'.join(tail) if tail else ' and printed nothing'
                )
            self._append(f'[panel] the run exited with code {code}: {r.state}')
            self.version += 1
        self._close_observer()

    def _parse(self, r: Run, line: str) -> None:
        if m := _DOMAIN.match(line):
            r.domain, r.state = int(m.group(1)), 'running'
            self.version += 1
            if self.observe is not None:
                self._close_observer()
                try:
                    self._observer = self.observe(r.domain, r.request.level)
                except Exception as exc:  # the run goes on; the live view says why it is empty
                    self._append(f'[panel] live view unavailable: {type(exc).__name__}: {exc}')
        elif m := _RUN_DIR.match(line):
            r.run_dir = m.group(1).strip()
            self.version += 1
        elif m := _RESULT.match(line):
            r.results.append(
                {
                    'seed': int(m.group(2)),
                    'placed': int(m.group(3)),
                    'total': int(m.group(4)),
                    'success': m.group(5) == 'SUCCESS',
                    'text': m.group(1),
                }
            )
            self.version += 1
        elif m := _NODE_PID.match(line):
            r.node_pids[m.group(1)] = int(m.group(2))

    def _close_observer(self) -> None:
        obs, self._observer = self._observer, None
        if obs is not None:
            obs.close()

    # -- status ------------------------------------------------------------------------------
    def status(self, log_lines: int = 400) -> dict[str, Any]:
        with self.lock:
            r = self.run
            base: dict[str, Any] = {
                'state': 'idle',
                'argv': None,
                'options': None,
                'pid': None,
                'exit_code': None,
                'run_dir': None,
                'episodes_total': 0,
                'episodes_done': 0,
                'episode_seed': None,
                'cartons_total': 0,
                'cartons_done': 0,
                'results': [],
                'cartons': [],
                'node_pids': {},
                'error': None,
                'log': self.log[-log_lines:] if log_lines else [],
            }
            if r is None:
                return base
            rows = self.live_rows() if r.state in ('starting', 'running') else self._last_rows
            self._last_rows = rows
            done = len(r.results)
            base.update(
                state=r.state,
                argv=r.argv,
                options=r.request.__dict__,
                pid=r.proc.pid,
                exit_code=r.exit_code,
                run_dir=r.run_dir,
                episodes_total=r.request.episodes,
                episodes_done=done,
                episode_seed=r.request.seed + min(done, r.request.episodes - 1),
                cartons_total=r.cartons_total,
                cartons_done=sum(1 for x in rows if x.get('seq') is not None),
                results=list(r.results),
                cartons=rows,
                node_pids=dict(r.node_pids),
                error=r.error,
            )
            return base

    def log_since(self, index: int) -> tuple[list[str], int]:
        """Console lines from absolute index `index` on, and the next index."""
        with self.lock:
            end = self.log_start + len(self.log)
            start = max(index, self.log_start)
            return self.log[start - self.log_start :], end


def request_from(body: Mapping[str, Any]) -> RunRequest:
    """A RunRequest from the page's JSON, naming what is wrong and what is allowed."""
    known = set(RunRequest.__dataclass_fields__)
    extra = sorted(set(body) - known)
    if extra:
        allowed = ', '.join(sorted(known))
        raise PanelError(f'unknown run option(s) {", ".join(extra)}; allowed: {allowed}')
    if 'level' not in body:
        raise PanelError('level is required')

    def num(name: str, kind: type, default: Any) -> Any:
        v = body.get(name, default)
        if isinstance(v, bool):  # JSON true is not a number, though int(True) is 1
            raise PanelError(f'{name} must be a number, got {v!r}')
        try:
            return kind(v)
        except (TypeError, ValueError):
            raise PanelError(f'{name} must be a number, got {v!r}') from None

    def flag(name: str) -> bool:
        v = body.get(name, False)
        if not isinstance(v, bool):
            raise PanelError(f'{name} must be true or false, got {v!r}')
        return v

    return RunRequest(
        level=num('level', int, None),
        planner=str(body.get('planner', 'heuristic')),
        seed=num('seed', int, 1),
        episodes=num('episodes', int, 1),
        speed=num('speed', float, 0.0),
        perception=str(body.get('perception', 'cameras')),
        telemetry=str(body.get('telemetry', 'disk')),
        stability=flag('stability'),
        pallet_spec=check_spec(body.get('pallet_spec'))[0],
    )
