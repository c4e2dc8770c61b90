"""In-process wiring: the episode loop calling the cell, oracles, planner and executor directly.

This is what fast batch runs and benchmarks use; the ROS graph wires the same ports through
services and actions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from palletizer.bridge.stream import steps_per_sample
from palletizer.core.config import Config, load_config
from palletizer.core.contracts import (
    EpisodeResult,
    FailureCause,
    HeightMap,
    Observation,
    PackageSpec,
    PalletState,
    Placement,
    PlacementPlan,
)
from palletizer.core.episode import EpisodeSettings, MotionOutcome, Presented, run_episode
from palletizer.core.gauge import GaugeParams
from palletizer.core.loads import draw_load
from palletizer.core.measure import Tolerances
from palletizer.core.motion import CarriedLoad, MotionError, MotionParams, MotionPlanner
from palletizer.core.planning import Planner
from palletizer.execution.layout import ready_pose, static_boxes
from palletizer.execution.park import Parked, ParkPose, plan_park, plan_unpark
from palletizer.sim.cell import Cell, CellOptions
from palletizer.telemetry.png import encode_png
from palletizer.wiring.executor import SimExecutor
from palletizer.wiring.gauge import WristGauge
from palletizer.wiring.oracles import OracleDetector, OracleGauge, OracleHeightMap, Referee

__all__ = [
    'CellPortAdapter',
    'MemorySink',
    'ParkingExecutor',
    'PhotoMemorySink',
    'PhotoSink',
    'RunSetup',
    'oracle_flag',
    'run_inprocess',
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


class ParkingExecutor(SimExecutor):
    """SimExecutor with the photo park: the trajectory_executor's ~/park, in process.

    Same rules as the node's sequencer: the checked tool-down Cartesian move of
    execution.park against the last perceived height map (the node's latched one), carrying the
    held carton (the observed dims until a place names the weighed ones); the next motion first
    leaves the park to above the pallet.
    """

    def __init__(
        self,
        *args: Any,
        park_pose: ParkPose | None = None,
        ready_pose: tuple[float, float, float, float] | None = None,
        **kw: Any,
    ) -> None:
        super().__init__(*args, **kw)
        self.park_pose = park_pose or ParkPose()
        self.ready_pose = ready_pose
        self.last_heightmap: HeightMap | None = None
        self.held_dims: tuple[float, float, float] | None = None
        self.parked: Parked | None = None
        self.parks = 0  # park moves executed

    def _load(self) -> CarriedLoad | None:
        if self.grasp is None or self.held_dims is None:
            return None
        return CarriedLoad(self.held_dims, self.grasp.offset)

    def _hm(self) -> HeightMap:
        return self.last_heightmap if self.last_heightmap is not None else HeightMap.flat()

    def _unpark(self) -> MotionOutcome | None:
        """Out of the park when still parked; an outcome only when that failed."""
        parked, self.parked = self.parked, None
        holding = self.grasp is not None
        try:
            world = self._world(self._hm())
            plan = plan_unpark(
                self.motion, self.cell.q, parked, self.park_pose, world, self._load()
            )
        except MotionError as exc:
            return MotionOutcome(False, FailureCause.ik_unreachable, str(exc), holding=holding)
        if plan is None:
            return None
        if not plan.ok:
            return self._refused(plan, holding=holding)
        self._run(plan.trajectory)
        return None

    def pick(self, observation: Observation) -> MotionOutcome:
        out = self._unpark() or super().pick(observation)
        if out.ok:
            self.held_dims = tuple(float(v) for v in observation.dims_guess)  # type: ignore[assignment]
        return out

    def place(self, plan: PlacementPlan, spec: PackageSpec, heightmap: HeightMap) -> MotionOutcome:
        failed = self._unpark()
        if failed is not None:
            return failed
        self.held_dims = tuple(float(v) for v in spec.dims_m)  # type: ignore[assignment]
        out = super().place(plan, spec, heightmap)
        if self.grasp is None:
            self.held_dims = None
        return out

    def return_to_source(self, observation: Observation) -> MotionOutcome:
        out = self._unpark() or super().return_to_source(observation)
        if self.grasp is None:
            self.held_dims = None
        return out

    def ready(self) -> MotionOutcome:
        """Empty arm to hover above the source station (ready_pose), the sequencer's hover."""
        if self.ready_pose is None:
            return MotionOutcome(True)
        if self.grasp is not None:
            return MotionOutcome(
                False, FailureCause.grasp_slip, 'hover refused: a carton is held', holding=True
            )
        try:
            x, y, z, yaw = self.ready_pose
            plan = self.motion.plan_hover(self.cell.q, x, y, z, self._world(self._hm()), yaw)
        except MotionError as exc:
            return MotionOutcome(False, FailureCause.ik_unreachable, str(exc))
        if not plan.ok:
            return self._refused(plan, holding=False)
        if plan.trajectory is not None:

            def move() -> MotionOutcome:
                self._run(plan.trajectory)
                return MotionOutcome(True)

            out = self._guarded(move)
            if not out.ok:
                return out
            self.parked = None
        return MotionOutcome(True)

    def park(self) -> MotionOutcome:
        q = self.cell.q.copy()
        try:
            world = self._world(self._hm())
            plan, parked = plan_park(self.motion, q, self.park_pose, world, self._load())
        except MotionError as exc:
            return MotionOutcome(False, FailureCause.ik_unreachable, str(exc))
        if not plan.ok:
            return self._refused(plan, holding=self.grasp is not None)
        if plan.trajectory is not None:
            self._run(plan.trajectory)
            self.parked = parked
            self.parks += 1
        return MotionOutcome(True)


class PhotoSink:
    """Wraps a sink; its layer_photo renders the snapshot views through the cell and hands
    each PNG to the wrapped sink's `snapshot(after_seq, view, png)` (a RunWriter has one)."""

    def __init__(self, sink: Any, cell: Cell, cameras: Mapping[str, Any], views: Any) -> None:
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
            w, h = self.cameras[view]['size']
            frame = self.cell.capture([view], int(w), int(h), depth=False)[view]
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
                every=steps_per_sample(
                    float(cfg.cell['wrench']['rate_hz']), float(cfg.cell['physics']['timestep'])
                ),
                settle_s=g['settle_s'],
            )
            if gauge == 'wrench'
            else oracle_gauge
        )
        executor = ParkingExecutor(
            cell,
            MotionPlanner(params=MotionParams.from_config(cfg.cell)),
            hmap.heightmap,
            static_boxes(cfg, lv.source),
            speed=speed,
            ready_pose=ready_pose(cfg, lv.source),
        )

        class _Perception:
            oracle = detector.oracle or hmap.oracle

            def detect(self, package_id: str):
                return detector.detect(package_id)

            def heightmap(self):
                # The executor parks against the last perceived map, as the node does
                # against the latched one.
                executor.last_heightmap = hmap.heightmap()
                executor.placed = []
                return executor.last_heightmap

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
        # Photos only for sinks that store them; the park happens either way (the executor).
        port_sink = sink
        if callable(getattr(sink, 'snapshot', None)):
            views = cfg.telemetry['snapshots']['views']
            port_sink = PhotoSink(sink, cell, cfg.cell['cameras'], views)
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
            sink=port_sink,
            settings=settings,
            oracle=oracle,
            git_sha=git_sha,
        )
        return result, sink
    finally:
        cell.close()
