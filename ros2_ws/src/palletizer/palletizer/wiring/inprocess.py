"""In-process wiring: the episode loop calling the cell, oracles, planner and executor directly.

This is what fast batch runs and benchmarks use; the ROS graph wires the same ports through
services and actions. The executor is the trajectory_executor node's PickPlaceSequencer over
the cell's arm (wiring.arm.CellArm) instead of the UR driver's interfaces.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from palletizer.bridge.stream import steps_per_sample
from palletizer.core.config import Config, load_config
from palletizer.core.config.cell import CameraConfig
from palletizer.core.contracts import EpisodeResult, PalletState, Placement
from palletizer.core.episode import EpisodeSettings, last_resort_line, run_episode
from palletizer.core.errors import InvalidValue
from palletizer.core.gauge import GaugeParams, OracleGauge
from palletizer.core.gauge_motion import MotionGaugeParams
from palletizer.core.loads import draw_load
from palletizer.core.motion import MotionParams, MotionPlanner
from palletizer.core.oracle import oracle_flag
from palletizer.core.planning import Planner
from palletizer.core.ports import Presented
from palletizer.core.vocab import GaugeMode
from palletizer.execution import (
    PickPlaceSequencer,
    SequencerExecutor,
    VerifyParams,
    arm_boxes,
    pick_rise,
    ready_pose,
    static_boxes,
)
from palletizer.sim.cell import Cell, CellOptions
from palletizer.telemetry.png import encode_png
from palletizer.wiring.arm import CellArm
from palletizer.wiring.gauge import WristGauge
from palletizer.wiring.oracles import Referee
from palletizer.wiring.perception import Perception, build_perception, check_mode

__all__ = [
    'CellPortAdapter',
    'MemorySink',
    'PhotoMemorySink',
    'PhotoSink',
    'RunSetup',
    'run_inprocess',
]


class _ProbedGauge:
    """A gauge whose every answer is shown to a benchmark's probe as ('weigh', id, spec)."""

    def __init__(self, gauge: Any, probe: Callable[[str, str, Any], None]) -> None:
        self.gauge, self.probe, self.oracle = gauge, probe, gauge.oracle

    def weigh(self, observation: Any) -> Any:
        spec = self.gauge.weigh(observation)
        self.probe('weigh', observation.package_id, spec)
        return spec

    def __getattr__(self, name: str) -> Any:
        # The rest is the gauge's own: the episode's zero after each place and `last_weigh`
        # (a probed run weighs exactly as an unprobed one).
        return getattr(self.gauge, name)


def _mode_of(component: Any) -> str:
    """'oracle' for a stub that reads truth; the sensor it uses otherwise."""
    if component.oracle:
        return 'oracle'
    return 'wrench' if isinstance(component, WristGauge) else 'cameras'


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
        if self.echo is not None and 'buffer_slot' in payload:
            arrow = '->' if kind == 'place' else '<-'
            self.echo(f'{package_id:12s} {arrow} buffer {payload["buffer_slot"]}')
        if self.echo is not None and kind == 'plan' and payload.get('last_resort'):
            self.echo(f'{package_id:12s} {last_resort_line(payload)}')

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


class PhotoSink:
    """Wraps a sink; its layer_photo renders the snapshot views through the cell and hands
    each PNG to the wrapped sink's `snapshot(after_seq, view, png)` (a RunWriter has one)."""

    def __init__(
        self, sink: Any, cell: Cell, cameras: Mapping[str, CameraConfig], views: Any
    ) -> None:
        self.sink = sink
        self.cell = cell
        self.cameras = cameras
        self.views = tuple(views)

    def event(
        self, seq: int, ts: float, kind: str, package_id: str, payload: Mapping[str, Any]
    ) -> None:
        self.sink.event(seq, ts, kind, package_id, payload)

    def placement(self, placement: Placement) -> None:
        self.sink.placement(placement)

    def pallet_state(self, state: PalletState) -> None:
        self.sink.pallet_state(state)

    def layer_photo(self, after_seq: int) -> None:
        for view in self.views:
            w, h = self.cameras[view].size
            frame = self.cell.capture([view], w, h, depth=False)[view]
            assert frame.rgb is not None, f'capture of {view} has no colour image'
            self.sink.snapshot(after_seq, view, encode_png(frame.rgb))


@dataclass
class PhotoMemorySink(MemorySink):
    """MemorySink that also keeps the snapshots: (after_seq, view, PNG bytes)."""

    snapshots: list[tuple[int, str, bytes]] = field(default_factory=list)

    def snapshot(self, after_seq: int, view: str, png: bytes) -> None:
        self.snapshots.append((after_seq, view, png))


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
    perception: str = 'cameras',
    map_mode: str | None = None,
    detector_mode: str | None = None,
    probe: Callable[[str, str, Any], None] | None = None,
    git_sha: str = '',
    on_start: Callable[[RunSetup], None] | None = None,
    on_sequencer: Callable[[PickPlaceSequencer], None] | None = None,
    pallet_spec: Any = None,
) -> tuple[EpisodeResult, Any]:
    """One episode of (level, seed) on a fresh simulated cell; returns (result, sink).

    perception: cameras | oracle, for both the height map and the detector; map_mode and
    detector_mode override one of them. gauge: wrench | oracle. probe(kind, package_id,
    component), when given, is called after each detection ('detect'), fusion ('heightmap')
    and weighing ('weigh'), for benchmarks that score perception against the referee.
    on_sequencer(sequencer), when given, sees the executor's sequencer before the episode
    starts (scripts/bench throughput times its plans again at the physical limit).
    pallet_spec (core.pallet_spec PalletSpec), when given: the referee measures the final stack
    against it, into the episode line's metrics `pallet_spec` and `compliance`.
    """
    map_mode = check_mode('map', map_mode or perception)
    detector_mode = check_mode('detector', detector_mode or perception)
    gauge = GaugeMode.parse(gauge, 'gauge', error=InvalidValue)
    cfg = config or load_config()
    lv = cfg.level(level)
    cell = Cell(lv, seed, options=CellOptions.from_config(cfg.cell))
    try:
        draws = draw_load(level, seed, cfg)
        hmap, detector = build_perception(cell, cfg, lv.source, map_mode, detector_mode, lv.labels)
        oracle_gauge = OracleGauge(d.spec for d in draws)
        g = cfg.perception.gauge
        weigher = (
            WristGauge(
                cell,
                samples=g.samples,
                still_speed=g.still_speed,
                tcp_offset=cfg.cell.gripper.tcp_offset,
                cup_gap=cfg.cell.gripper.cup_gap,
                params=GaugeParams(
                    no_payload_kg=g.no_payload_kg,
                    noise_sigma_n=max(cfg.cell.wrench.noise_force_n, 0.1),
                ),
                every=steps_per_sample(cfg.cell.wrench.rate_hz, cfg.cell.physics.timestep),
                settle_s=g.settle_s,
                lift_skip_s=g.lift_skip_s if g.weigh_on_lift else None,
                zero_on_move=g.zero_on_move,
                motion_params=MotionGaugeParams(
                    force_sigma_n=max(cfg.cell.wrench.noise_force_n, 0.1),
                    torque_sigma_nm=max(cfg.cell.wrench.noise_torque_nm, 0.004),
                ),
            )
            if gauge is GaugeMode.wrench
            else oracle_gauge
        )
        # The trajectory_executor node's sequencer, over the cell instead of the UR driver's
        # interfaces. Hold and release are judged by the vacuum sensor in both motion modes
        # (the node does so in fast-forward and reads the wrench when interpolated): an arm
        # without a still dwell at the end of each goal gives no static wrench reading.
        cell_port = CellPortAdapter(cell, cfg)
        sequencer = PickPlaceSequencer(
            CellArm(cell, speed=speed),
            planner=MotionPlanner(params=MotionParams.from_config(cfg.cell)),
            static_boxes=static_boxes(cfg, lv.source),
            arm_boxes=arm_boxes(cfg, lv.source),
            pick_rise=pick_rise(cfg, lv.source),
            verify=VerifyParams(noise_force_n=cfg.cell.wrench.noise_force_n),
            use_wrench=False,
            clock=cell_port.sim_time,  # the episode's clock: pick and place report their phases
        )
        if on_sequencer is not None:
            on_sequencer(sequencer)
        executor = SequencerExecutor(sequencer, ready_pose=ready_pose(cfg, lv.source))

        # The executor moves against the last perceived map, as the node does against the
        # latched one.
        perceive = Perception(hmap, detector, on_heightmap=executor.heightmap_updated, probe=probe)

        # The in-process flag, from the objects constructed (core/oracle.py).
        oracle = oracle_flag(hmap, detector, weigher, planner)
        setup = RunSetup(
            str(getattr(planner, 'kind', '?')),
            _mode_of(detector),
            _mode_of(weigher),
            _mode_of(hmap),
            speed,
            oracle,
        )
        if on_start is not None:
            on_start(setup)
        settings = EpisodeSettings.from_config(cfg.cell, cfg.planner.buffer)
        if pallet_spec is not None:
            settings = dataclasses.replace(
                settings, pallet_spec=pallet_spec, catalogue=cfg.catalogue
            )
        sink = sink if sink is not None else MemorySink()
        # Photos only for sinks that store them; the park happens either way (the executor).
        port_sink = sink
        if callable(getattr(sink, 'snapshot', None)):
            views = tuple(v.value for v in cfg.telemetry.snapshots.views)
            port_sink = PhotoSink(sink, cell, cfg.cell.cameras, views)
        if lv.source == 'truck' and hasattr(planner, 'set_forecast'):
            # Only the oracle gauge can give specs of cartons not yet weighed.
            if weigher is oracle_gauge:
                planner.set_forecast(oracle_gauge.forecast([d.package_id for d in draws]))

        def on_reset() -> None:
            if isinstance(weigher, WristGauge):
                weigher.attach()
                weigher.tare()

        cell_port.on_reset = on_reset
        result = run_episode(
            level=level,
            seed=seed,
            task=lv.source,
            cell=cell_port,
            perception=perceive,
            gauge=weigher if probe is None else _ProbedGauge(weigher, probe),
            planner=planner,
            executor=executor,
            referee=Referee(cell, draws),
            sink=port_sink,
            settings=settings,
            oracle=oracle,
            git_sha=git_sha,
        )
        return result, sink
    finally:
        cell.close()
