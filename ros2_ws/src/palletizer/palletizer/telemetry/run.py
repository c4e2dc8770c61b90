"""RunWriter: one run directory of JSONL files and PNG snapshots, the source of truth on disk.

Why one file of this length: RunWriter is the one writer of a run folder; its durability rules
(fsync order, the open episode closed on any exit, the event count check) hold across all its
methods, so they stay in one class.
"""

from __future__ import annotations

import errno
import json
import os
import re
import struct
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from palletizer.core.contracts import EpisodeResult, PalletState, Placement
from palletizer.core.errors import PalletizerError
from palletizer.telemetry.replica.rows import ReplicaError
from palletizer.telemetry.replica.sink import ReplicaSink
from palletizer.telemetry.units import json_safe, payload_to_display
from palletizer.telemetry.vocab import (
    EventKind,
    SnapshotView,
    TelemetryError,
    TelemetryWriteError,
)

__all__ = [
    'FILES',
    'STAMP_FORMAT',
    'RunInfo',
    'RunWriter',
    'check_event_count',
    'check_writable',
    'run_stamp',
]

STAMP_FORMAT = '%Y%m%d-%H%M%S'
_STAMP_RE = re.compile(r'^\d{8}-\d{6}$')
_TAG_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.-]*$')
_PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'
# Run folders of one stamp and tag: <stamp>-<tag>, then -2, -3, ... (two runs in one second).
_MAX_SUFFIX = 999
# One file per Platform table (docs/telemetry.md §8.1); disk rows carry the table's columns
# plus `seed`.
FILES = {
    'episodes': 'episodes.jsonl',
    'events': 'events.jsonl',
    'placements': 'placements.jsonl',
    'pallet_states': 'pallet_states.jsonl',
    'snapshots': 'snapshots.jsonl',
}


def run_stamp(when: datetime) -> str:
    """The run directory stamp for `when` (YYYYmmdd-HHMMSS); the caller owns the clock."""
    return when.strftime(STAMP_FORMAT)


def _why(exc: OSError) -> str:
    return exc.strerror or errno.errorcode.get(exc.errno or 0, '') or str(exc)


def _make_folder(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise TelemetryWriteError(
            f'runs folder {path}: cannot create it (a file of that name exists)'
        ) from None
    except OSError as exc:
        raise TelemetryWriteError(f'runs folder {path}: cannot create it ({_why(exc)})') from None


def check_writable(runs_dir: str | os.PathLike[str], min_free_bytes: int) -> Path:
    """Raise TelemetryWriteError unless runs_dir exists or can be made, takes a file, and has room.

    Creates runs_dir (and its parents) if missing, writes and removes a probe file (as root a
    permission bit proves nothing; a read-only mount or a full disk does), and compares the free
    space with min_free_bytes [B]. Returns the absolute folder.
    """
    path = Path(runs_dir).expanduser().absolute()
    _make_folder(path)
    try:
        fd, probe = tempfile.mkstemp(prefix='.write-check-', dir=path)
        try:
            os.write(fd, b'x')
            os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as exc:
        raise TelemetryWriteError(f'runs folder {path}: not writable ({_why(exc)})') from None
    st = os.statvfs(path)
    free = st.f_bavail * st.f_frsize
    if free < int(min_free_bytes):
        raise TelemetryWriteError(
            f'runs folder {path}: {free / 1e6:.1f} MB free; telemetry needs at least '
            f'{int(min_free_bytes) / 1e6:.1f} MB (configs/telemetry.yaml min_free_mb)'
        )
    return path


def _make_run_dir(runs_dir: Path, stamp: str, tag: str) -> Path:
    """Create runs_dir/<stamp>-<tag> atomically, else the first free -2, -3, ... of it."""
    _make_folder(runs_dir)
    base = f'{stamp}-{tag}'
    for n in range(1, _MAX_SUFFIX + 1):
        path = runs_dir / (base if n == 1 else f'{base}-{n}')
        try:
            path.mkdir()  # no exist_ok: mkdir is the atomic claim of the name
        except FileExistsError:
            continue
        except OSError as exc:
            raise TelemetryWriteError(
                f'run folder {path}: cannot create it ({_why(exc)})'
            ) from None
        return path
    raise TelemetryWriteError(
        f'run folder {runs_dir / base}: it and -2 .. -{_MAX_SUFFIX} all exist'
    )


def _fsync_dir(path: Path) -> None:
    """Make a new entry in `path` durable (its directory entry, not only the file's data)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_event_count(seed: int, written: int, expected: int) -> None:
    """Raise TelemetryError unless the events on disk match the count the director published."""
    if int(written) != int(expected):
        raise TelemetryError(
            f'episode seed {seed}: {written} events written, the director published {expected}; '
            'events were lost or duplicated'
        )


@dataclass(frozen=True)
class RunInfo:
    """Run-level facts used for aborted episodes (which have no EpisodeResult).

    level: level id or None if not known yet; task: the level's source or None; oracle: any
    stub in use; git_sha: short sha of the code. A finished episode fills what is still unknown.
    """

    level: int | None = None
    task: str | None = None
    oracle: bool = False
    git_sha: str = ''


@dataclass
class _Episode:
    seed: int
    n_objects: int | None
    n_events: int = 0
    last: dict[str, int] = field(default_factory=dict)  # stream -> last seq written
    n_placed: int = 0
    last_ts: float = 0.0
    plan_scores: list[float] = field(default_factory=list)
    breakdown_sum: dict[str, float] = field(default_factory=dict)
    breakdown_n: dict[str, int] = field(default_factory=dict)
    snapshots: set[tuple[int, str]] = field(default_factory=set)


def _png_size(data: bytes) -> tuple[int, int]:
    if not data.startswith(_PNG_SIGNATURE) or len(data) < 24 or data[12:16] != b'IHDR':
        raise TelemetryError(
            f'snapshot: {len(data)} bytes starting {data[:8]!r}; expected PNG bytes'
        )
    width, height = struct.unpack('>II', data[16:24])
    return int(width), int(height)


def _pose(values: tuple[float, ...]) -> dict[str, float]:
    return dict(zip(('x', 'y', 'z', 'yaw'), values, strict=True))


class RunWriter:
    """Writes runs/<stamp>-<tag>/: episodes, events, placements, pallet states and snapshots.

    One episode is open at a time: begin(), then rows, then end() or abort(). Within an episode,
    event `seq`, placement `seq` and pallet-state `after_seq` must each strictly increase. Each
    line is one unbuffered write (a failed write is cut back, so no half line stays) and every
    file is fsynced when an episode closes. close() (and leaving the `with` block) aborts an open
    episode, so no episode is left open. Not thread-safe.

    The folder is <stamp>-<tag>, or <stamp>-<tag>-2, -3, ... when that exists: a run never
    appends to another run. A refused write (disk full, read-only, I/O error) raises
    TelemetryWriteError; end() and abort() close the episode even then.
    """

    def __init__(
        self,
        runs_dir: str | os.PathLike[str],
        stamp: str,
        tag: str = 'pallet',
        info: RunInfo | None = None,
        *,
        outbox: bool = False,
    ) -> None:
        if not _STAMP_RE.match(str(stamp)):
            raise TelemetryError(f'run stamp = {stamp!r}; expected YYYYmmdd-HHMMSS')
        if not _TAG_RE.match(str(tag)):
            raise TelemetryError(
                f'run tag = {tag!r}; expected letters, digits, _ . - (not starting with . - _)'
            )
        self.path = _make_run_dir(Path(runs_dir).absolute(), str(stamp), str(tag))
        self.info = info or RunInfo()
        self._files: dict[str, int] = {}
        try:
            for key, name in FILES.items():
                self._files[key] = os.open(
                    self.path / name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644
                )
            _fsync_dir(self.path)
        except OSError as exc:
            for fd in self._files.values():
                os.close(fd)
            raise TelemetryWriteError(f'run folder {self.path}: {_why(exc)}') from None
        self._episode: _Episode | None = None
        self._seeds: set[int] = set()
        self._closed = False
        # outbox=True: every row written here is then queued for the replica (replica/sink.py).
        self.replica: ReplicaSink | None = None
        if outbox:
            try:
                self.replica = ReplicaSink(self.path)
            except ReplicaError as exc:
                for fd in self._files.values():
                    os.close(fd)
                raise TelemetryWriteError(f'run folder {self.path}: {exc}') from None

    # -- state --------------------------------------------------------------------------------

    @property
    def open_seed(self) -> int | None:
        """Seed of the open episode, or None."""
        return None if self._episode is None else self._episode.seed

    @property
    def seeds(self) -> frozenset[int]:
        """Seeds begun in this run (open, ended or aborted)."""
        return frozenset(self._seeds)

    @property
    def open_events(self) -> int | None:
        """Events written so far for the open episode, or None when none is open."""
        return None if self._episode is None else self._episode.n_events

    def _open(self, what: str, seed: int | None = None) -> _Episode:
        if self._closed:
            raise TelemetryError(f'{what}: the run writer of {self.path} is closed')
        ep = self._episode
        if ep is None:
            raise TelemetryError(f'{what}: no episode is open; call begin(seed, n_objects) first')
        if seed is not None and int(seed) != ep.seed:
            raise TelemetryError(f'{what}: seed {seed} is not the open episode (seed {ep.seed})')
        return ep

    def _next(self, ep: _Episode, stream: str, seq: Any) -> int:
        if isinstance(seq, bool) or not isinstance(seq, int):
            raise TelemetryError(f'{stream}: seq = {seq!r}; expected an integer')
        last = ep.last.get(stream)
        if last is not None and seq <= last:
            word = 'duplicate' if seq == last else 'decreasing'
            raise TelemetryError(
                f'{stream}: seq {seq} after {last} in episode seed {ep.seed} is {word}; '
                'expected strictly increasing'
            )
        return seq

    def _write(self, key: str, row: Mapping[str, Any]) -> None:
        data = (json.dumps(row, separators=(',', ':'), allow_nan=False) + '\n').encode()
        fd = self._files[key]
        size = os.fstat(fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        except OSError as exc:
            try:
                os.ftruncate(fd, size)  # a half line would corrupt the next one
            except OSError:
                pass
            raise TelemetryWriteError(f'{self.path / FILES[key]}: {_why(exc)}') from None

    def _queue(self, table: str, row: Mapping[str, Any]) -> None:
        """Queue a row written to disk for the replica (a queue failure is kept, not raised)."""
        if self.replica is not None:
            self.replica.row(table, row)

    def _sync(self) -> None:
        """fsync every file: the episode's lines survive a crash or power loss from here on."""
        for key, fd in self._files.items():
            try:
                os.fsync(fd)
            except OSError as exc:
                raise TelemetryWriteError(f'{self.path / FILES[key]}: {_why(exc)}') from None

    # -- episode lifecycle --------------------------------------------------------------------

    def begin(self, seed: int, n_objects: int | None = None, info: RunInfo | None = None) -> None:
        """Open the episode `seed`; n_objects (cartons to place) may be unknown (None) until end.

        info, when given, replaces the run facts, so an aborted episode's line has them.
        """
        if self._closed:
            raise TelemetryError(f'begin: the run writer of {self.path} is closed')
        if self._episode is not None:
            raise TelemetryError(
                f'begin(seed={seed}): episode seed {self._episode.seed} is still open; '
                'end() or abort() it first'
            )
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TelemetryError(f'begin: seed = {seed!r}; expected an integer')
        if seed in self._seeds:
            raise TelemetryError(f'begin: seed {seed} already has an episode in this run')
        if n_objects is not None and (isinstance(n_objects, bool) or int(n_objects) < 0):
            raise TelemetryError(f'begin: n_objects = {n_objects!r}; expected an integer >= 0')
        self._episode = _Episode(seed, None if n_objects is None else int(n_objects))
        self._seeds.add(seed)
        if info is not None:
            self.info = info
        if self.replica is not None:
            self.replica.begin(
                seed,
                {
                    'level': self.info.level,
                    'task': self.info.task,
                    'oracle': self.info.oracle,
                    'git_sha': self.info.git_sha,
                    'n_objects': n_objects,
                },
            )

    def event(
        self,
        seq: int,
        ts: float,
        kind: EventKind | str,
        payload: Mapping[str, Any],
        package_id: str | None = None,
        *,
        seed: int | None = None,
    ) -> dict[str, Any]:
        """Write one event and return its row.

        ts: sim time since the episode started [s] (stored to 0.01 s); payload in SI with unit
        suffixes (`_m`, `_rad`), converted to mm and degrees here (see payload_to_display);
        package_id: empty or None for none; seed: if given, must be the open episode.
        """
        ep = self._open('event', seed)
        k = EventKind.parse(kind, 'event kind')
        seq = self._next(ep, 'events', seq)
        try:
            t = float(ts)
        except (TypeError, ValueError):
            raise TelemetryError(f'event seq {seq}: ts = {ts!r}; expected seconds') from None
        if not 0.0 <= t < float('inf'):
            raise TelemetryError(f'event seq {seq}: ts = {ts!r}; expected finite seconds >= 0')
        shown = payload_to_display(k, payload)
        row = {
            'seed': ep.seed,
            'seq': seq,
            'ts': round(t, 2),
            'kind': k.value,
            'package_id': package_id or None,
            'payload': shown,
        }
        self._write('events', row)
        self._queue('events', row)
        ep.last['events'] = seq
        ep.n_events += 1
        ep.last_ts = max(ep.last_ts, t)
        if k is EventKind.plan:
            self._note_plan(ep, shown)
        return row

    @staticmethod
    def _note_plan(ep: _Episode, payload: Mapping[str, Any]) -> None:
        score = payload.get('score')
        if isinstance(score, (int, float)) and not isinstance(score, bool):
            ep.plan_scores.append(float(score))
        breakdown = payload.get('breakdown')
        if isinstance(breakdown, Mapping):
            for term, value in breakdown.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    ep.breakdown_sum[term] = ep.breakdown_sum.get(term, 0.0) + float(value)
                    ep.breakdown_n[term] = ep.breakdown_n.get(term, 0) + 1

    def placement(self, placement: Placement | Mapping[str, Any]) -> dict[str, Any]:
        """Write one attempted carton (SI columns, pallet frame) and return its row."""
        ep = self._open('placement')
        p = placement if isinstance(placement, Placement) else _parse(Placement, placement)
        seq = self._next(ep, 'placements', p.seq)
        row = {
            'seed': ep.seed,
            'seq': seq,
            'package_id': p.package_id,
            'package_type': p.package_type,
            'mass_kg': p.mass_kg,
            'dims_m': list(p.dims_m),
            'layer': p.layer,
            'planned_pose': _pose(p.planned_pose),
            'actual_pose': _pose(p.actual_pose),
            'error_xy_m': round(p.error_xy_m, 5),
            'error_yaw_rad': round(p.error_yaw_rad, 5),
            'support_ratio': p.support_ratio,
            'support_ratio_layer': p.support_ratio_layer,  # the reference's rule, for comparison
            'overhang_m': p.overhang_m,
            'placed': p.placed,
        }
        self._write('placements', row)
        self._queue('placements', row)
        ep.last['placements'] = seq
        ep.n_placed += int(p.placed)
        return row

    def pallet_state(self, state: PalletState | Mapping[str, Any]) -> dict[str, Any]:
        """Write the stack state after one attempt (SI columns, pallet frame); return the row.

        The row holds the Platform's pallet_states columns; layer_flatness is not one of them
        and lives in the bag and the episode metrics.
        """
        ep = self._open('pallet_state')
        s = state if isinstance(state, PalletState) else _parse(PalletState, state)
        seq = self._next(ep, 'pallet_states', s.after_seq)
        row = {
            'seed': ep.seed,
            'after_seq': seq,
            'mass_kg': s.mass_kg,
            'cog_x': s.cog[0],
            'cog_y': s.cog[1],
            'cog_z': s.cog[2],
            'stability_margin_m': s.stability_margin_m,
            'fill_ratio': s.fill_ratio,
            'settle_drift_m': s.settle_drift_m,
        }
        self._write('pallet_states', row)
        self._queue('pallet_states', row)
        ep.last['pallet_states'] = seq
        return row

    def snapshot(self, after_seq: int, view: SnapshotView | str, png: bytes) -> Path:
        """Write <seed>/<after_seq:03d>-<view>.png and its row; return the PNG's path."""
        ep = self._open('snapshot')
        v = SnapshotView.parse(view, 'snapshot view')
        if isinstance(after_seq, bool) or not isinstance(after_seq, int) or after_seq < 0:
            raise TelemetryError(f'snapshot: after_seq = {after_seq!r}; expected an integer >= 0')
        if (after_seq, v.value) in ep.snapshots:
            raise TelemetryError(
                f'snapshot: after_seq {after_seq} view {v.value!r} already written for seed '
                f'{ep.seed}'
            )
        width, height = _png_size(bytes(png))
        folder = self.path / str(ep.seed)
        path = folder / f'{after_seq:03d}-{v.value}.png'
        try:
            if not folder.is_dir():
                folder.mkdir()
                _fsync_dir(self.path)
            with path.open('xb') as f:
                f.write(bytes(png))
                f.flush()
                os.fsync(f.fileno())
            _fsync_dir(folder)
        except OSError as exc:
            path.unlink(missing_ok=True)
            raise TelemetryWriteError(f'{path}: {_why(exc)}') from None
        ep.snapshots.add((after_seq, v.value))
        row = {
            'seed': ep.seed,
            'after_seq': after_seq,
            'view': v.value,
            'path': str(path.relative_to(self.path)),
            'width': width,
            'height': height,
        }
        self._write('snapshots', row)
        self._queue('snapshots', row)
        return path

    def end(self, result: EpisodeResult | Mapping[str, Any]) -> int:
        """Write the episodes.jsonl line, fsync, close the episode; return its events written.

        The line is EpisodeResult.to_dict() (with oracle and git_sha); when the metrics lack
        `planner_score_breakdown` or `mean_planner_score`, they are filled from this episode's
        plan events (per-term mean, mean score).
        """
        ep = self._open('end')
        r = result if isinstance(result, EpisodeResult) else _parse(EpisodeResult, result)
        if r.seed != ep.seed:
            raise TelemetryError(f'end: result seed {r.seed} is not the open episode {ep.seed}')
        if ep.n_objects is not None and r.n_objects != ep.n_objects:
            raise TelemetryError(
                f'end: result n_objects {r.n_objects} differs from begin(n_objects='
                f'{ep.n_objects}) for seed {ep.seed}'
            )
        line = r.to_dict()
        metrics = dict(line['metrics'])
        if 'planner_score_breakdown' not in metrics and ep.breakdown_sum:
            metrics['planner_score_breakdown'] = {
                t: round(s / ep.breakdown_n[t], 4) for t, s in sorted(ep.breakdown_sum.items())
            }
        if 'mean_planner_score' not in metrics and ep.plan_scores:
            metrics['mean_planner_score'] = round(sum(ep.plan_scores) / len(ep.plan_scores), 4)
        line['metrics'] = json_safe(metrics, 'metrics')
        self._episode = None  # closed even when the disk refuses the line
        self._write('episodes', line)
        self._sync()
        if self.replica is not None:
            self.replica.end(line)
        self.info = RunInfo(
            level=self.info.level if self.info.level is not None else r.level,
            task=self.info.task if self.info.task is not None else r.task,
            oracle=self.info.oracle or r.oracle,
            git_sha=self.info.git_sha or r.git_sha,
        )
        return ep.n_events

    def abort(self, seed: int | None = None, reason: str = '') -> int | None:
        """Close the open episode as aborted; return its events written, or None if none is open.

        The line says success False, failure None (no cause is invented) and metrics
        {"aborted": true} (with "abort_reason" when a reason is given, the key the director
        writes); n_placed counts the placed cartons recorded so far, duration_s is the last
        event's ts, and n_objects is None when begin() did not give it.
        """
        if self._episode is None:
            return None
        ep = self._open('abort', seed)
        line = {
            'seed': ep.seed,
            'level': self.info.level,
            'n_objects': ep.n_objects,
            'n_placed': ep.n_placed,
            'n_misrouted': 0,
            'success': False,
            'duration_s': ep.last_ts,
            'failure': None,
            'oracle': self.info.oracle,
            'git_sha': self.info.git_sha,
            'task': self.info.task,
            'metrics': {'aborted': True, **({'abort_reason': reason} if reason else {})},
        }
        self._episode = None  # closed even when the disk refuses the line
        self._write('episodes', line)
        self._sync()
        if self.replica is not None:
            self.replica.end(line)
        return ep.n_events

    def close(self, reason: str = 'the run closed with the episode open') -> None:
        """Abort any open episode (for `reason`) and close the files; safe more than once."""
        if self._closed:
            return
        try:
            self.abort(reason=reason)
        finally:
            self._closed = True
            for fd in self._files.values():
                os.close(fd)
            if self.replica is not None:
                self.replica.close()

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _parse(cls: Any, data: Mapping[str, Any]) -> Any:
    """Contract from a mapping; contract errors become TelemetryError at this boundary."""
    if not isinstance(data, Mapping):
        raise TelemetryError(f'{cls.__name__}: {data!r}; expected a mapping or {cls.__name__}')
    try:
        return cls.from_dict(data)
    except TelemetryError:
        raise
    except (PalletizerError, TypeError, ValueError) as exc:
        raise TelemetryError(f'{cls.__name__}: {exc}') from exc
