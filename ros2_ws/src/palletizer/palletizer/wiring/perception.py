"""In-process perception: the height map and the pick detection from the cell's cameras, or the
oracle stubs; built by mode so the run's oracle flag follows what was constructed."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from palletizer.core.config import Config
from palletizer.core.config.cell import CameraConfig
from palletizer.core.contracts import HeightMap, Observation, PalletGeometry
from palletizer.core.detection import (
    DetectResult,
    detect_station,
    detect_truck,
    held_height,
    measure_lid,
    remeasured,
)
from palletizer.core.detection.label import LabelSeen, read_held_label
from palletizer.core.gauge import type_from_label
from palletizer.core.heightmap_fusion import (
    FusionResult,
    MapMemory,
    RobotBody,
    fuse_heightmap,
)
from palletizer.core.oracle import oracle_flag
from palletizer.core.views import CameraView
from palletizer.core.vocab import PerceptionMode
from palletizer.sim.cell import Cell
from palletizer.wiring.oracles import OracleDetector, OracleHeightMap

__all__ = [
    'PERCEPTION_MODES',
    'CameraDetector',
    'CameraHeightMap',
    'Perception',
    'build_perception',
    'camera_views',
    'check_mode',
    'station_geometry',
]

# cameras: the height map fused from the pallet cameras and detection from the pick cameras;
# oracle: both read simulator truth (the run is flagged).
PERCEPTION_MODES = PerceptionMode.names()


def check_mode(name: str, value: str) -> PerceptionMode:
    """A perception mode, or a ConfigError naming what is allowed."""
    return PerceptionMode.parse(value, name)


def camera_views(
    cell: Cell, cameras: Mapping[str, CameraConfig], names: Sequence[str], rgb: bool
) -> list[CameraView]:
    """Capture the named cameras at their configured size (depth with the sensor noise)."""
    out = []
    for n in names:
        w, h = cameras[n].size
        f = cell.capture([n], w, h, rgb=rgb, depth=True)[n]
        assert f.depth is not None, f'capture of {n} with depth=True has no depth'
        out.append(CameraView(n, f.depth, f.rgb, f.intrinsics.K, f.T_world_optical, f.time))
    return out


def station_geometry(cfg: Config, source: str) -> tuple[tuple[float, float], float]:
    """(station xy [m], surface z [m]) where a table or conveyor source presents."""
    if source == 'table':
        t = cfg.cell.tables.pick
        return t.centre, t.top
    c = cfg.cell.conveyor
    return c.station, c.top


class CameraHeightMap:
    """The pallet height map fused from the pallet cameras' noisy depth (core.heightmap_fusion),
    with the arm and the held carton filtered out by the robot model and the joint positions.
    One per episode: cells out of sight keep what an earlier fusion of the episode saw where
    the cameras show them hidden (MapMemory); `seen` is the last fusion before that."""

    oracle = False

    def __init__(self, cell: Cell, cfg: Config, pallet: PalletGeometry | None = None) -> None:
        self.cell = cell
        self.cameras = cfg.cell.cameras
        hm = cfg.perception.heightmap
        self.params = hm.fusion
        self.names = self.params.cameras
        self.body = RobotBody.from_config(cfg.cell) if hm.exclude_robot else None
        self.pallet = pallet or PalletGeometry()
        self.last: FusionResult | None = None
        self.last_ms = 0.0  # [ms] the last fusion, without the renders
        self.seen: HeightMap | None = None  # the last fusion, before the recall
        self.memory: HeightMap | None = None  # the last map returned
        self.record = MapMemory(self.params, self.pallet)

    def heightmap(self, held_dims: Sequence[float] | None = None) -> HeightMap:
        views = camera_views(self.cell, self.cameras, self.names, rgb=False)
        q = self.cell.q.copy()
        held = None if held_dims is None else tuple(float(v) for v in held_dims)
        t0 = time.perf_counter()
        self.last = fuse_heightmap(views, self.params, self.pallet, self.body, q, held)
        self.seen = self.last.heightmap
        self.memory = self.record.remember(self.seen, views, self.body, q, held)
        self.last_ms = (time.perf_counter() - t0) * 1000
        return self.memory


class CameraDetector:
    """The presented carton from the pick cameras (core.detection): the station camera at a table
    or conveyor, the trailer cameras at the truck."""

    oracle = False

    def __init__(self, cell: Cell, cfg: Config, source: str, labels: bool = False) -> None:
        self.cell = cell
        self.cfg = cfg
        self.source = source
        self.labels = labels  # read each held carton's label (a level with labels)
        self.last_label: LabelSeen | None = None
        self.last_held_observation: Observation | None = None  # the one last_label was read on
        self.params = cfg.perception.detector
        self.cameras = cfg.cell.cameras
        self.last: DetectResult | None = None
        self.last_ms = 0.0  # [ms] the last detection, without the renders
        self.last_held: Any = None
        self.held_reason = ''  # why the last in-hand measurement failed
        self.last_lid: Any = None
        self.lid_reason = ''  # why the last set-aside lid measurement failed
        self.body = RobotBody.from_config(cfg.cell)
        self.tcp_offset = cfg.cell.gripper.tcp_offset
        self.cup_gap = cfg.cell.gripper.cup_gap

    def detect_result(self) -> DetectResult:
        """Capture and detect; the whole result (every detection, ambiguity, reason)."""
        if self.source == 'truck':
            names = self.params.truck_cameras
            views = camera_views(self.cell, self.cameras, names, rgb=True)
            t0 = time.perf_counter()
            self.last = detect_truck(views, self.params, self.cfg.cell.truck)
        else:
            xy, surface_z = station_geometry(self.cfg, self.source)
            view = camera_views(self.cell, self.cameras, [self.params.camera], rgb=True)[0]
            t0 = time.perf_counter()
            self.last = detect_station(view, self.params, surface_z, xy)
        self.last_ms = (time.perf_counter() - t0) * 1000
        return self.last

    def detect(self, package_id: str) -> Observation | None:
        got = self.detect_result().chosen
        return None if got is None else got.observation(package_id)

    def measure_held(self, observation: Observation) -> Observation | None:
        """The truck carton's height, measured in hand from the side cameras (the camera above
        the load sees lids only); other sources' detections already measured it. On a level
        with labels, then the label's face (last_label)."""
        self.last_label = None
        held = self._held_height(observation) if self.source == 'truck' else observation
        if held is not None and self.labels:
            self.last_label = self.read_label(held)
            self.last_held_observation = held
        return held

    def read_label(self, observation: Observation) -> LabelSeen:
        """The held carton's label face, from the label cameras (core.detection.label)."""
        views = camera_views(self.cell, self.cameras, self.params.label_cameras, rgb=True)
        return read_held_label(
            views,
            observation,
            self.body,
            self.cell.q.copy(),
            self.cup_gap,
            self.cfg.catalogue,
            type_from_label(observation.package_id),
            self.params,
        )

    def _held_height(self, observation: Observation) -> Observation | None:
        views = camera_views(self.cell, self.cameras, self.params.held_cameras, rgb=False)
        got = held_height(
            views,
            self.params,
            self.body,
            self.cell.q.copy(),
            observation,
            self.tcp_offset,
            self.cup_gap,
            self.cfg.cell.truck.floor,
        )
        self.last_held = got
        if got.height <= 0.0:
            self.held_reason = got.reason
            return None
        L, W, _ = observation.dims_guess
        return dataclasses.replace(observation, dims_guess=(L, W, got.height))

    def measure_lid(self, observation: Observation) -> Observation | None:
        """A set-aside carton as it stands: its lid measured from the cameras above the
        auxiliary table, its height from the believed support (None: not seen, with the why in
        lid_reason)."""
        views = camera_views(self.cell, self.cameras, self.params.lid_cameras, rgb=False)
        got = measure_lid(views, self.params, observation, self.body, self.cell.q.copy())
        self.last_lid = got
        if got.top_z <= 0.0:
            self.lid_reason = got.reason
            return None
        return remeasured(observation, got.top_z)


@dataclass
class Perception:
    """The episode's PerceptionPort over a map and a detector of either kind.

    The held carton's dimensions come from the last detection (the map is fused while the arm
    holds what it last picked), for the robot self-filter.
    """

    hmap: Any
    detector: Any
    on_heightmap: Any = None
    probe: Any = None  # probe(kind, package_id, component): a benchmark's look after each call

    def __post_init__(self) -> None:
        self.oracle = oracle_flag(self.hmap, self.detector)
        self._held: Observation | None = None
        self.held_label: LabelSeen | None = None  # the last held carton's label, where read

    def detect(self, package_id: str) -> Observation | None:
        obs = self.detector.detect(package_id)
        if obs is not None:
            self._held = obs
        if self.probe is not None:
            self.probe('detect', package_id, self.detector)
        return obs

    def measure_held(self, observation: Observation) -> Observation | None:
        got = getattr(self.detector, 'measure_held', None)
        held = observation if got is None else got(observation)
        self.held_reason = '' if held is not None else getattr(self.detector, 'held_reason', '')
        self.held_label = getattr(self.detector, 'last_label', None)
        if held is not None:
            self._held = held
        if self.probe is not None:
            self.probe('held', observation.package_id, self.detector)
        return held

    def measure_lid(self, observation: Observation) -> Observation | None:
        """The detector's measure of a set-aside carton's lid; the observation itself where the
        detector has none (the oracle's sizes are true), None where it cannot see the lid
        (lid_reason says why)."""
        got = getattr(self.detector, 'measure_lid', None)
        lid = observation if got is None else got(observation)
        self.lid_reason = '' if lid is not None else getattr(self.detector, 'lid_reason', '')
        if self.probe is not None:
            self.probe('lid', observation.package_id, self.detector)
        return lid

    def heightmap(self) -> HeightMap:
        if isinstance(self.hmap, CameraHeightMap):
            held = None if self._held is None else self._held.dims_guess
            hm = self.hmap.heightmap(held)
        else:
            hm = self.hmap.heightmap()
        if self.on_heightmap is not None:
            self.on_heightmap(hm)
        if self.probe is not None:
            self.probe('heightmap', '', self.hmap)
        return hm


def build_perception(
    cell: Cell, cfg: Config, source: str, map_mode: str, detector_mode: str, labels: bool = False
) -> tuple[Any, Any]:
    """(height map, detector) for the modes: CameraHeightMap or OracleHeightMap, CameraDetector or
    OracleDetector; labels: the camera detector reads each held carton's label."""
    pallet = PalletGeometry.from_config(cfg.cell.pallet)
    hmap = (
        CameraHeightMap(cell, cfg, pallet)
        if check_mode('map', map_mode) is PerceptionMode.cameras
        else OracleHeightMap(cell, pallet)
    )
    cameras = check_mode('detector', detector_mode) is PerceptionMode.cameras
    det = CameraDetector(cell, cfg, source, labels) if cameras else OracleDetector(cell)
    return hmap, det
