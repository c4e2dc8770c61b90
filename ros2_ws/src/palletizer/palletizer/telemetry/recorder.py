"""Recorder: one run's RunWriter and bag, bound to the director's run id, that never crashes."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from palletizer.core.errors import close_match
from palletizer.telemetry.bag import BagWriter
from palletizer.telemetry.run import RunInfo, RunWriter, check_writable
from palletizer.telemetry.vocab import TelemetryError, TelemetryWriteError

if TYPE_CHECKING:
    from palletizer.core.config import TelemetryConfig

__all__ = ['Begin', 'Recorder', 'RecorderConfig', 'parse_run_info', 'preflight']

_RUN_ID_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$')
_INFO_KEYS = ('level', 'task', 'oracle', 'git_sha', 'n_objects')


class Begin(Enum):
    """Outcomes of begin(); the names are BeginEpisode's error-code constants."""

    OK = 'ok'
    CANNOT_WRITE = 'cannot write'
    WRONG_RUN = 'wrong run'
    ALREADY_OPEN = 'already open'
    INVALID_REQUEST = 'invalid request'


@dataclass(frozen=True)
class RecorderConfig:
    """Where and what to record.

    runs_dir: folder of run folders; stamp, tag: the run folder is <stamp>-<tag> (or -2, ...);
    min_free_bytes [B]: free space the runs folder needs at start and at every begin;
    bag_topics: topic -> message type of the bag, or None for no bag; outbox: queue every row
    for a replica as well.
    """

    runs_dir: Path
    stamp: str
    tag: str
    min_free_bytes: int
    bag_topics: Mapping[str, str] | None
    outbox: bool = False  # queue every row for a replica (runs/<run>/outbox.sqlite)


def preflight(telemetry: TelemetryConfig) -> Path:
    """check_writable for configs/telemetry.yaml's runs_dir and min_free_mb [MB] (1 MB = 1e6 B).

    What scripts/palletize runs before it starts the graph; returns the runs folder.
    """
    runs_dir = Path(telemetry.runs_dir).expanduser()
    return check_writable(runs_dir, int(telemetry.min_free_mb * 1e6))


def parse_run_info(info_json: str) -> tuple[RunInfo, int | None]:
    """RunInfo and n_objects (None when not given) from BeginEpisode.info_json."""
    try:
        info = json.loads(info_json)
    except ValueError as exc:
        raise TelemetryError(f'info_json: {exc}; expected a JSON object') from None
    if not isinstance(info, dict):
        raise TelemetryError(f'info_json = {info_json!r}; expected a JSON object')
    for key in info:
        if key not in _INFO_KEYS:
            raise TelemetryError(
                f'info_json: unknown key {key!r}; expected {", ".join(_INFO_KEYS)}'
                f'{close_match(str(key), _INFO_KEYS)}'
            )
    missing = [k for k in _INFO_KEYS[:4] if k not in info]
    if missing:
        raise TelemetryError(f'info_json: missing {", ".join(missing)}')

    def integer(key: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise TelemetryError(f'info_json: {key} = {value!r}; expected an integer >= 0')
        return value

    for key in ('task', 'git_sha'):
        if not isinstance(info[key], str):
            raise TelemetryError(f'info_json: {key} = {info[key]!r}; expected a string')
    if not isinstance(info['oracle'], bool):
        raise TelemetryError(f'info_json: oracle = {info["oracle"]!r}; expected true or false')
    n_objects = info.get('n_objects')
    return (
        RunInfo(integer('level', info['level']), info['task'], info['oracle'], info['git_sha']),
        None if n_objects is None else integer('n_objects', n_objects),
    )


class Recorder:
    """The run folder and bag of one run, bound to one director run id.

    open() creates them after a preflight (check_writable); when that fails the recorder holds
    no run, says why in `error`, and retries at the next begin(). begin() binds the first run id
    it is given and refuses any other (two runs on one ROS domain); messages of another run id
    are refused by accepts(). Writes that the disk refuses raise TelemetryWriteError to the
    caller, which answers with an error code and stays up. Not thread-safe.
    """

    def __init__(self, cfg: RecorderConfig) -> None:
        self.cfg = cfg
        self.run: RunWriter | None = None
        self.bag: BagWriter | None = None
        self.run_id = ''
        self.error = ''
        self.foreign: dict[str, int] = {}  # run id -> messages refused

    def open(self) -> str:
        """Create the run folder and bag; return '' or why not (also kept in `error`)."""
        if self.run is not None:
            return ''
        try:
            check_writable(self.cfg.runs_dir, self.cfg.min_free_bytes)
            run = RunWriter(
                self.cfg.runs_dir, self.cfg.stamp, self.cfg.tag, outbox=self.cfg.outbox
            )
            try:
                if self.cfg.bag_topics is not None:
                    self.bag = BagWriter(run.path / 'bag', self.cfg.bag_topics)
            except TelemetryError:
                run.close()
                raise
        except TelemetryError as exc:
            self.error = str(exc)
            return self.error
        self.run, self.error = run, ''
        return ''

    @property
    def run_dir(self) -> str:
        return '' if self.run is None else str(self.run.path)

    def accepts(self, run_id: str) -> bool:
        """False for a message of another run than the bound one (counted in `foreign`)."""
        if not run_id or not self.run_id or run_id == self.run_id:
            return True
        self.foreign[run_id] = self.foreign.get(run_id, 0) + 1
        return False

    def begin(self, seed: int, run_id: str, info_json: str) -> tuple[Begin, str]:
        """Open episode `seed` of run `run_id` with its run info; return the outcome and why.

        An open episode of another seed (its end never came) is aborted first; the message then
        says so with Begin.OK.
        """
        if not _RUN_ID_RE.match(run_id):
            return Begin.INVALID_REQUEST, (
                f'run_id = {run_id!r}; expected 1-64 letters, digits, _ . : - (the director stamp)'
            )
        if self.run_id and run_id != self.run_id:
            return Begin.WRONG_RUN, (
                f'telemetry serves run {self.run_id}, not {run_id}: two runs share this ROS '
                'domain; give each run its own ROS_DOMAIN_ID'
            )
        try:
            info, n_objects = parse_run_info(info_json)
        except TelemetryError as exc:
            return Begin.INVALID_REQUEST, str(exc)
        if self.open():
            return Begin.CANNOT_WRITE, self.error
        run = self.run
        assert run is not None
        self.run_id = run_id
        if run.open_seed == seed or seed in run.seeds:
            return Begin.ALREADY_OPEN, f'seed {seed} was already begun in run {run_id}'
        note = ''
        try:
            check_writable(run.path, self.cfg.min_free_bytes)
            if run.open_seed is not None:
                note = (
                    f'begin of seed {seed} while episode {run.open_seed} is open: aborted it '
                    '(end_episode never came)'
                )
                self._abort(f'the next episode (seed {seed}) began before its end came')
            run.begin(seed, n_objects, info)
        except TelemetryWriteError as exc:
            return Begin.CANNOT_WRITE, str(exc)
        except TelemetryError as exc:
            return Begin.INVALID_REQUEST, str(exc)
        return Begin.OK, note

    def _abort(self, reason: str) -> None:
        assert self.run is not None
        try:
            self.run.abort(reason=reason)
        finally:
            self.checkpoint()

    def adopt(self, seed: int, run_id: str) -> str:
        """Open `seed` for a message that came without begin (as before begin_episode existed).

        Aborts an open episode of another seed; binds the run id if none is bound yet. Returns
        a line for the log when it aborted one, else ''. Raises TelemetryError.
        """
        run = self.run
        if run is None:
            raise TelemetryWriteError(f'no run folder: {self.error}')
        if run.open_seed == seed:
            return ''
        note = ''
        if run.open_seed is not None:
            note = (
                f'event of seed {seed} while episode {run.open_seed} is open: aborting it '
                '(end_episode never came)'
            )
            self._abort(f'an event of seed {seed} came before its end')
        self.run_id = self.run_id or run_id
        run.begin(seed)
        return note

    def checkpoint(self) -> None:
        """Make the bag readable up to now (after every episode end or abort)."""
        if self.bag is not None:
            self.bag.checkpoint()

    def close(
        self, reason: str = 'the telemetry node stopped with the episode open'
    ) -> int | None:
        """Abort an open episode (for `reason`) and finish the bag; return its seed or None."""
        seed = None
        try:
            if self.run is not None:
                seed = self.run.open_seed
                self.run.close(reason)
        finally:
            if self.bag is not None:
                self.bag.close()
        return seed
