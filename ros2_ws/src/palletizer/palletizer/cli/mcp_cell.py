"""What the MCP server knows and may do: its limits, the pallet spec, the one run and its state.

Episodes run exactly as the operator panel runs them (panel.runner.RunManager): `scripts/
palletize` as a child process in its own DDS domain, its console read line by line, stopped
with SIGINT as Ctrl-C would. The limits are held here, not left to the assistant: seeds 1-100,
a speed cap, one run at a time, known levels and planners, and a valid spec. Nothing here moves
the arm outside an episode.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from palletizer.cli.mcp_models import (
    SEED_MAX,
    SEED_MIN,
    CartonRow,
    CellState,
    EpisodeOutcome,
    LevelInfo,
    LevelList,
    PreviewResult,
    Robot,
    RunInfo,
    RunLimits,
    SpecResult,
    StopResult,
    carton_row,
)
from palletizer.cli.mcp_preview import jsonl_rows, preview, read_stack
from palletizer.core.config import load_config
from palletizer.core.errors import InvalidValue, PalletizerError, UnknownKey
from palletizer.core.pallet_spec import PalletSpec, load_spec
from palletizer.core.vocab import PerceptionMode, PlannerKind
from palletizer.panel.runner import PanelError, RunManager, RunRequest, check_spec

__all__ = ['ROBOTS', 'SIM_ONLY', 'SPEED_CAP_MAX', 'Cell', 'CellRefusal']

SPEED_CAP_MAX = 2.0  # the highest cap a server may be started with (the panel's fastest preset)
ROBOTS: tuple[Robot, ...] = ('sim', 'ur')  # as scripts/palletize robot:=
SIM_ONLY = ('run_episode', 'check_stability')  # the tools that drive the simulated cell
_DONE = ('finished', 'aborted', 'crashed')


class CellRefusal(PalletizerError):
    """A request the server refuses: the message names what was wrong and what is allowed."""


@dataclass
class _Episode:
    """The server's view of the current run, from its console and its run folder."""

    level: int
    seed: int
    total: int
    log_index: int = 0
    cartons: list[CartonRow] = field(default_factory=list)


class Cell:
    """The server's state. `root`: where runs start (as from a shell); `runs_dir`: where their
    telemetry writes; `speed_cap`: the highest speed a run may ask for (default: telemetry.yaml
    mcp.speed_cap); `robot`: 'sim', or 'ur' where the server stands beside a real cell, which
    turns the simulation-only tools (SIM_ONLY) off."""

    def __init__(
        self,
        root: Path,
        runs_dir: Path,
        speed_cap: float | None = None,
        manager: RunManager | None = None,
        robot: Robot = 'sim',
    ) -> None:
        if speed_cap is None:
            speed_cap = load_config().telemetry.mcp.speed_cap
        if not 0.0 < speed_cap <= SPEED_CAP_MAX:
            raise InvalidValue(f'speed cap {speed_cap}; expected > 0 and <= {SPEED_CAP_MAX}')
        if robot not in ROBOTS:
            raise UnknownKey(f'robot {robot!r}; expected one of {", ".join(ROBOTS)}')
        self.speed_cap = speed_cap
        self.robot = robot
        self.runs_dir = Path(runs_dir).absolute()
        self.manager = manager or RunManager(root, runs_dir=self.runs_dir)
        self.spec: PalletSpec | None = None
        self.spec_json = ''
        self.episode: _Episode | None = None
        self.last_result: dict[str, Any] | None = None
        self.last_failure: str | None = None

    # -- levels and the spec -------------------------------------------------------------------
    def levels(self) -> LevelList:
        cfg = load_config()
        rows = [
            LevelInfo(id=lv.id, source=lv.source, name=lv.name, cartons=lv.n, spec=lv.spec or None)
            for lv in sorted(cfg.levels.values(), key=lambda lv: lv.id)
        ]
        return LevelList(levels=rows, default_level=cfg.default_level)

    def spec_result(self) -> SpecResult:
        data = None if self.spec is None else self.spec.to_dict()
        on = (
            []
            if data is None
            else [k for k in data if k not in ('schema', 'name', 'this_side_up')]
        )
        return SpecResult(
            spec=data, rules_on=on, applies_to='preview_placement and the next run_episode'
        )

    def set_spec(self, doc: dict[str, Any] | None) -> SpecResult:
        """Validate `doc` (SpecError naming each bad key) and make it the current spec."""
        text, data = check_spec(doc)
        types = load_config().catalogue.types
        self.spec = None if data is None else load_spec(data, types, where='pallet_spec')
        self.spec_json = text
        return self.spec_result()

    # -- limits ----------------------------------------------------------------------------------
    def sim_only(self, tool: str) -> None:
        """CellRefusal for a simulation-only tool when the server drives a real cell."""
        if self.robot != 'sim':
            raise CellRefusal(
                f'{tool} is a simulation-only tool and this server was started with --robot '
                f'{self.robot} (a real UR10e cell): it is off here. Allowed: list_levels, '
                'get/set_pallet_spec, preview_placement, get_cell_state, stop, list_runs, '
                'get_run; episodes on the real cell are started at the cell (scripts/palletize '
                'robot:=ur)'
            )

    def limits(self) -> RunLimits:
        return RunLimits(
            robot=self.robot,
            sim_only_off=list(SIM_ONLY) if self.robot != 'sim' else [],
            seed_min=SEED_MIN,
            seed_max=SEED_MAX,
            speed_max=self.speed_cap,
            planners=list(PlannerKind.names()),
            perception=list(PerceptionMode.names()),
        )

    def request(
        self, level: int, seed: int, planner: PlannerKind, speed: float, perception: PerceptionMode
    ) -> RunRequest:
        """The run's options, each checked against the server's limits (CellRefusal)."""
        self.sim_only('run_episode')
        cfg = load_config()
        if level not in cfg.levels:
            ids = ', '.join(str(i) for i in sorted(cfg.levels))
            raise CellRefusal(f'level {level} is not a level; expected one of {ids} (list_levels)')
        if not SEED_MIN <= seed <= SEED_MAX:  # the argument's schema says so too
            raise CellRefusal(
                f'seed {seed}: allowed {SEED_MIN}-{SEED_MAX}; seeds above {SEED_MAX} are reserved'
            )
        if not 0.0 <= speed <= self.speed_cap:
            raise CellRefusal(
                f"speed {speed}: allowed 0 (fast-forward) to {self.speed_cap} (this server's cap: "
                f'telemetry.yaml mcp.speed_cap, or --max-speed; 1 = real UR10e speed)'
            )
        return RunRequest(
            level=level,
            planner=planner.value,
            seed=seed,
            speed=speed,
            perception=perception.value,
            telemetry='disk',  # the episode line is read back from the run folder
            pallet_spec=self.spec_json,
        )

    # -- the run ---------------------------------------------------------------------------------
    def start(self, req: RunRequest) -> None:
        """Start the episode (CellRefusal while another runs, or for options the CLI refuses)."""
        _, index = self.manager.log_since(0)  # this run's console starts after it
        try:
            self.manager.start(req)
        except PanelError as exc:
            raise CellRefusal(str(exc)) from None
        n = load_config().level(req.level).n
        self.episode = _Episode(level=req.level, seed=req.seed, total=n, log_index=index)

    def poll(self) -> list[CartonRow]:
        """The cartons the run reported since the last poll (the director's console lines)."""
        ep = self.episode
        if ep is None:
            return []
        lines, ep.log_index = self.manager.log_since(ep.log_index)
        new = [row for ln in lines if (row := carton_row(ln)) is not None]
        ep.cartons += new
        return new

    @property
    def cartons_total(self) -> int:
        return 0 if self.episode is None else self.episode.total

    @property
    def cartons_done(self) -> int:
        return 0 if self.episode is None else len(self.episode.cartons)

    @property
    def running(self) -> bool:
        return self.manager.status(log_lines=0)['state'] not in ('idle', *_DONE)

    def stop(self) -> StopResult:
        """Stop the running episode (SIGINT to its launcher); allowed at any time."""
        if not self.running:
            return StopResult(stopped=False, message='no episode is running', run=self.run_info())
        try:
            self.manager.stop()
        except PanelError as exc:  # it ended between the check and the signal
            return StopResult(stopped=False, message=str(exc), run=self.run_info())
        return StopResult(
            stopped=True,
            message='SIGINT sent to the run: its nodes stop and telemetry closes the episode as '
            'aborted',
            run=self.run_info(),
        )

    def run_info(self) -> RunInfo:
        st = self.manager.status(log_lines=0)
        opts = st['options'] or {}
        return RunInfo(
            state=st['state'],
            level=opts.get('level'),
            seed=opts.get('seed'),
            planner=opts.get('planner'),
            speed=opts.get('speed'),
            perception=opts.get('perception'),
            pid=st['pid'],
            run_dir=st['run_dir'],
            exit_code=st['exit_code'],
        )

    def outcome(self) -> EpisodeOutcome:
        """The run as it ended: its cartons, the result line and the episode line from disk."""
        self.poll()
        st = self.manager.status(log_lines=0)
        ep = self.episode
        line = None
        if ep is not None and st['run_dir']:
            rows = jsonl_rows(Path(st['run_dir']) / 'episodes.jsonl')
            line = next((r for r in reversed(rows) if r.get('seed') == ep.seed), None)
        if line is not None:
            self.last_result = line
            failure = line.get('failure')
            if failure:
                self.last_failure = f'seed {line.get("seed")}: {failure}'
        if st['state'] == 'crashed':
            self.last_failure = st['error']
        elif st['state'] == 'aborted' and line is None:
            self.last_failure = 'the episode was stopped before it wrote its line'
        results = st['results']
        return EpisodeOutcome(
            run=self.run_info(),
            cartons_total=self.cartons_total,
            cartons_done=self.cartons_done,
            cartons=[] if ep is None else list(ep.cartons),
            result=results[-1]['text'] if results else None,
            episode=line,
            error=st['error'],
        )

    @property
    def done(self) -> bool:
        return self.manager.status(log_lines=0)['state'] in _DONE

    # -- state and the stack ---------------------------------------------------------------------
    def held_carton(self) -> str | None:
        """The carton picked last and neither placed nor failed yet (events.jsonl)."""
        run_dir = self.manager.status(log_lines=0)['run_dir']
        if not self.running or not run_dir:
            return None
        held = None
        for ev in jsonl_rows(Path(run_dir) / 'events.jsonl'):
            if ev.get('kind') == 'pick':
                held = ev.get('package_id')
            elif ev.get('kind') in ('place', 'fail') and ev.get('package_id') == held:
                held = None
        return held

    def state(self) -> CellState:
        self.poll()
        if self.done:
            self.outcome()  # folds the ended run's line and failure in
        ep = self.episode
        return CellState(
            run=self.run_info(),
            cartons_total=self.cartons_total,
            cartons_done=self.cartons_done,
            cartons=[] if ep is None else list(ep.cartons),
            held_carton=self.held_carton(),
            last_result=self.last_result,
            last_failure=self.last_failure,
            pallet_spec=None if self.spec is None else self.spec.to_dict(),
            limits=self.limits(),
        )

    def preview(
        self, dims_m: list[float], mass_kg: float, stack: str, planner: PlannerKind
    ) -> PreviewResult:
        placements, label = [], 'empty'
        run_dir = self.manager.status(log_lines=0)['run_dir']
        if stack == 'current' and run_dir and self.episode is not None:
            placements = read_stack(Path(run_dir), self.episode.seed)
            label = f'{Path(run_dir).name} seed {self.episode.seed}' if placements else 'empty'
        elif stack not in ('current', 'empty'):
            raise UnknownKey(f'stack = {stack!r}; expected one of current, empty')
        return preview(dims_m, mass_kg, placements, label, planner, self.spec, load_config())

    def close(self) -> None:
        """Stop a running episode and wait for it (the server is shutting down)."""
        self.manager.close()
