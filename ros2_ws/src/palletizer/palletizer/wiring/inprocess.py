"""In-process wiring: the episode loop calling the cell, oracles, planner and executor directly.

This is what fast batch runs and benchmarks use; the ROS graph wires the same ports through
services and actions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from palletizer.core.config import Config, load_config
from palletizer.core.contracts import EpisodeResult, PalletState, Placement
from palletizer.core.episode import EpisodeSettings, Presented, run_episode
from palletizer.core.gauge import GaugeParams
from palletizer.core.loads import draw_load
from palletizer.core.measure import Tolerances
from palletizer.core.motion import AABB, MotionPlanner
from palletizer.core.planning import Planner
from palletizer.sim.cell import Cell, CellOptions
from palletizer.wiring.executor import SimExecutor
from palletizer.wiring.gauge import WristGauge
from palletizer.wiring.oracles import OracleDetector, OracleGauge, OracleHeightMap, Referee

__all__ = [
    'CellPortAdapter',
    'MemorySink',
    'RunSetup',
    'oracle_flag',
    'run_inprocess',
    'static_boxes',
]


def oracle_flag(*components: Any) -> bool:
    """The run is an oracle if any constructed component reads simulator truth."""
    return any(bool(getattr(c, 'oracle', False)) for c in components)


class CellPortAdapter:
    """CellPort over a Cell; the cell is rebuilt on reset."""

    def __init__(
        self, cell: Cell, config: Config, on_reset: Callable[[], Any] | None = None
    ) -> None:
        self.cell = cell
        self.config = config
        self.on_reset = on_reset
        self._t0 = cell.time

    def reset(self, level: int, seed: int) -> int:
        self.cell.reset(self.config.level(level), seed)
        self._t0 = self.cell.time  # the episode clock includes the tare hold, as over ROS
        if self.on_reset is not None:
            self.on_reset()  # e.g. tare the wrist sensor with the gripper empty
        return len(draw_load(level, seed, self.config))

    def present(self) -> Presented:
        got = self.cell.present()
        st = self.cell.source.state()
        fc = tuple(self.cell.source.forecast())
        pid = None if got is None else got.package_id
        return Presented(
            pid, int(st.pending), bool(st.exhausted), bool(st.jammed), dict(st.extras), fc
        )

    def release(self, package_id: str) -> None:
        self.cell.release(package_id)

    def settle(self, seconds: float) -> None:
        self.cell.settle(seconds)

    def sim_time(self) -> float:
        return self.cell.time - self._t0


@dataclass
class MemorySink:
    """Keeps events, placements and pallet states in memory (and echoes progress)."""

    events: list[tuple[int, float, str, str, dict]] = field(default_factory=list)
    placements: list[Placement] = field(default_factory=list)
    states: list[PalletState] = field(default_factory=list)
    echo: Callable[[str], None] | None = None

    def event(
        self, seq: int, ts: float, kind: str, package_id: str, payload: Mapping[str, Any]
    ) -> None:
        self.events.append((seq, ts, kind, package_id, dict(payload)))

    def placement(self, placement: Placement) -> None:
        self.placements.append(placement)
        if self.echo is not None:
            p = placement
            self.echo(
                f'{p.package_id:12s} {p.package_type:9s} L{p.layer} '
                f'err {p.error_xy_m * 1000:5.1f} mm  support {p.support_ratio * 100:3.0f} %  '
                f'{"ok" if p.placed else "NOT PLACED"}'
            )

    def pallet_state(self, state: PalletState) -> None:
        self.states.append(state)


def static_boxes(config: Config, source: str) -> tuple[AABB, ...]:
    """The fixed furniture the carried carton must not sweep, as axis-aligned boxes."""
    cell = config.cell
    boxes = []
    r = cell['robot']
    px, py, _ = r['base_pos']
    rad, h = r['pedestal']['radius'], r['pedestal']['height']
    boxes.append(AABB((px - rad, py - rad, 0.0), (px + rad, py + rad, h), 'pedestal'))
    aux = cell['tables']['auxiliary']
    (cx, cy), (hx, hy, _), top = aux['centre'], aux['half_size'], aux['top']
    boxes.append(AABB((cx - hx, cy - hy, 0.0), (cx + hx, cy + hy, top), 'auxiliary_table'))
    return tuple(boxes)


@dataclass(frozen=True)
class RunSetup:
    """What an in-process run is made of; `oracle` is derived from the parts."""

    planner_kind: str
    detector: str
    gauge: str
    heightmap: str
    speed: float
    oracle: bool


def run_inprocess(
    level: int,
    seed: int,
    planner: Planner,
    *,
    speed: float = 0.0,
    config: Config | None = None,
    sink: Any = None,
    gauge: str = 'wrench',
    git_sha: str = '',
    on_start: Callable[[RunSetup], None] | None = None,
) -> tuple[EpisodeResult, Any]:
    """One episode of (level, seed) on a fresh simulated cell; returns (result, sink)."""
    cfg = config or load_config()
    lv = cfg.level(level)
    cell = Cell(lv, seed, options=CellOptions.from_config(cfg.cell))
    try:
        draws = draw_load(level, seed, cfg)
        hmap = OracleHeightMap(cell)
        detector = OracleDetector(cell)
        oracle_gauge = OracleGauge(draws)
        if gauge not in ('wrench', 'oracle'):
            raise ValueError(f'gauge = {gauge!r}; expected wrench or oracle')
        g = cfg.perception['gauge']
        weigher = (
            WristGauge(
                cell,
                samples=g['samples'],
                still_speed=g['still_speed'],
                tcp_offset=cfg.cell['gripper']['tcp_offset'],
                cup_gap=cfg.cell['gripper']['cup_gap'],
                params=GaugeParams(
                    no_payload_kg=g['no_payload_kg'],
                    noise_sigma_n=max(cfg.cell['wrench']['noise_force_n'], 0.1),
                ),
            )
            if gauge == 'wrench'
            else oracle_gauge
        )
        executor = SimExecutor(
            cell, MotionPlanner(), hmap.heightmap, static_boxes(cfg, lv.source), speed=speed
        )

        class _Perception:
            oracle = detector.oracle or hmap.oracle

            def detect(self, package_id: str):
                return detector.detect(package_id)

            def heightmap(self):
                return hmap.heightmap()

        oracle = oracle_flag(detector, gauge, hmap, planner)
        setup = RunSetup(
            str(getattr(planner, 'kind', '?')), 'oracle', 'oracle', 'oracle', speed, oracle
        )
        if on_start is not None:
            on_start(setup)
        ep = cfg.cell['episode']
        settings = EpisodeSettings(
            max_duration_s=ep['max_duration_s'],
            settle_s=cfg.cell['physics']['settle_after_release_s'],
            place_retries=ep['place_retries'],
            tolerances=Tolerances(
                ep['tolerance']['xy'], ep['tolerance']['yaw'], ep['tolerance']['overhang']
            ),
        )
        sink = sink if sink is not None else MemorySink()
        if lv.source == 'truck' and hasattr(planner, 'set_forecast'):
            # Only the oracle gauge can give specs of cartons not yet weighed.
            if weigher is oracle_gauge:
                planner.set_forecast(oracle_gauge.forecast([d.package_id for d in draws]))

        def on_reset() -> None:
            if isinstance(weigher, WristGauge):
                weigher.attach()
                weigher.tare()

        result = run_episode(
            level=level,
            seed=seed,
            task=lv.source,
            cell=CellPortAdapter(cell, cfg, on_reset),
            perception=_Perception(),
            gauge=weigher,
            planner=planner,
            executor=executor,
            referee=Referee(cell),
            sink=sink,
            settings=settings,
            oracle=oracle,
            git_sha=git_sha,
        )
        return result, sink
    finally:
        cell.close()
