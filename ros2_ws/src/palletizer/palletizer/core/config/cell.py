"""configs/cell.yaml as frozen records: the robot, gripper, pallet, furniture, sources, cameras,
physics, wrench sensor, motion and episode settings of the simulated cell.

`build_cell` makes a CellConfig from the schema-validated mapping (every key present, every
value checked and normalised: numbers are floats or ints, lists are tuples), so the records
only convert; what each key means and how it was measured is said in cell.yaml beside it.
Lengths are metres, angles radians unless a field says _deg.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from palletizer.core.errors import ConfigError

__all__ = [
    'DH',
    'CameraConfig',
    'CellConfig',
    'ConveyorConfig',
    'CupGrid',
    'DepthNoiseConfig',
    'EpisodeConfig',
    'GripperConfig',
    'HardwareConfig',
    'LineIO',
    'LoaderJitter',
    'MotionConfig',
    'PalletConfig',
    'Pedestal',
    'PhysicsConfig',
    'RobotConfig',
    'TableConfig',
    'TablesConfig',
    'Tolerance',
    'TruckConfig',
    'VacuumIO',
    'VacuumLevel',
    'WrenchConfig',
    'build_cameras',
    'build_cell',
]

Vec2 = tuple[float, float]
Vec3 = tuple[float, float, float]
Joints = tuple[float, float, float, float, float, float]


@dataclass(frozen=True)
class Pedestal:
    radius: float
    height: float


@dataclass(frozen=True)
class DH:
    """The UR10e's Denavit-Hartenberg lengths [m]."""

    d1: float
    a2: float
    a3: float
    d4: float
    d5: float
    d6: float


@dataclass(frozen=True)
class RobotConfig:
    """`robot`: the arm, where it stands, its joints and limits; home is the IK seed, rest the
    observe pose (joint angles [rad])."""

    model: str
    base_pos: Vec3
    base_quat: tuple[float, float, float, float]  # w x y z
    pedestal: Pedestal
    joint_names: tuple[str, ...]
    dh: DH
    joint_speed_limits_deg_s: Joints
    torque_limits_nm: Joints
    joint_lower: Joints
    joint_upper: Joints
    link_masses_kg: Joints
    payload_kg: float
    home: Joints
    rest: Joints


@dataclass(frozen=True)
class CupGrid:
    columns: int
    rows: int
    pitch_x: float
    pitch_y: float
    radius: float


@dataclass(frozen=True)
class VacuumIO:
    """The ur_msgs/SetIO function and pin that switch the vacuum."""

    fun: int
    pin: int


@dataclass(frozen=True)
class VacuumLevel:
    """The vacuum level on the tool's analog input 2 [V]: what a sealed gripper reads, and the
    least reading that counts as holding."""

    volts_sealed: float
    volts_held_min: float


@dataclass(frozen=True)
class GripperConfig:
    """`gripper`: the vacuum tool; body is L x W x flange-to-cup-face [m]."""

    model: str
    mass_kg: float
    body: Vec3
    tcp_offset: float
    cups: CupGrid
    force_per_cup_n: float
    derating: float
    safety_factor: float
    cup_gap: float
    seal_band: float
    vacuum_io: VacuumIO
    vacuum_level: VacuumLevel


@dataclass(frozen=True)
class PalletConfig:
    """`pallet`: size is L x W x deck height [m], centre its (x, y) in the world."""

    size: Vec3
    centre: Vec2
    mass_kg: float
    max_load_kg: float
    max_height: float
    layer_clearance: float
    friction: Vec3

    @property
    def deck_z(self) -> float:
        """Height of the deck top [m]: the pallet stands on the floor."""
        return self.size[2]


@dataclass(frozen=True)
class TableConfig:
    centre: Vec2
    half_size: Vec3
    top: float
    friction: Vec3


@dataclass(frozen=True)
class TablesConfig:
    """`tables`: the pick table and the auxiliary table (the set-aside buffer)."""

    pick: TableConfig
    auxiliary: TableConfig


@dataclass(frozen=True)
class ConveyorConfig:
    centre: Vec2
    size: Vec2
    top: float
    speed: float
    station: Vec2
    station_tol: float
    rest_speed: float
    rest_time: float
    timeout_s: float
    friction: Vec3


@dataclass(frozen=True)
class LoaderJitter:
    pos: float
    yaw_deg: float


@dataclass(frozen=True)
class TruckConfig:
    """`truck`: the trailer bay, its loader and the tie rule the source and the camera share."""

    origin: Vec2
    size: Vec2
    floor: float
    column_gap: float
    max_stack_height: float
    max_column_items: int
    min_support: float
    max_slide: float
    loader_jitter: LoaderJitter
    friction: Vec3
    tie_band: float
    tie_point: Vec2
    tie_clear: float
    lift_clearance: float = 0.0


@dataclass(frozen=True)
class DepthNoiseConfig:
    """A camera's `depth_noise`: the depth sensor model (sim.depth_noise.DepthNoise)."""

    sensor: str
    focal_px: float
    baseline_m: float
    subpixel: float
    depth_unit_m: float
    min_z_m: float
    max_z_m: float
    grazing_deg: Vec2
    edge_jump: float
    edge_drop: float
    flying: float


@dataclass(frozen=True)
class CameraConfig:
    """One camera of `cameras`: pose, vertical field of view, image size (width, height) [px],
    role (pallet | pick | photo) and its depth sensor model, if any."""

    pos: Vec3
    look_at: Vec3
    up: Vec3 | None
    fovy_deg: float
    size: tuple[int, int]
    role: str
    depth_noise: DepthNoiseConfig | None


@dataclass(frozen=True)
class PhysicsConfig:
    timestep: float
    control_rate_hz: float
    integrator: str
    cone: str
    gravity: Vec3
    settle_after_release_s: float
    rest_speed: float
    sleep: bool


@dataclass(frozen=True)
class WrenchConfig:
    """`wrench`: the flange force/torque sensor's noise, offset, drift and rate."""

    noise_force_n: float
    noise_torque_nm: float
    bias_force_n: Vec3
    bias_torque_nm: Vec3
    offset_force_n: float
    offset_torque_nm: float
    drift_force_n: float
    drift_torque_nm: float
    drift_period_s: Vec2
    drift_terms: int
    rate_hz: float


@dataclass(frozen=True)
class MotionConfig:
    """`motion`: speeds, limits, clearances and timing of the motion planner (MotionParams)."""

    cartesian_speed: float
    approach_speed: float
    cartesian_accel: float
    empty_accel: float
    blend_radius: float
    joint_accel_limits: Joints
    joint_jerk_limits: Joints
    timing: str
    transit: str
    transit_height: float
    place_clearance: float
    stack_clearance: float
    drop_clearance: float
    reach_tolerance: float
    settle_seconds: float
    map_margin: float
    ready_offset: Vec2


@dataclass(frozen=True)
class Tolerance:
    """How far a carton may land from its slot and still count as placed."""

    xy: float
    yaw: float
    overhang: float
    square: float


@dataclass(frozen=True)
class EpisodeConfig:
    max_duration_s: float
    place_retries: int
    detect_retries: int
    detect_retry_wait_s: float
    tolerance: Tolerance
    detect_early: bool


@dataclass(frozen=True)
class LineIO:
    """The line's handshake on the robot's standard digital I/O (ur_msgs/SetIO pins)."""

    request_out: int  # digital output: the palletizer asks for the next carton
    arrived_in: int  # digital input: the photo-eye over the station sees a carton at rest
    done_in: int  # digital input: the line has no carton left for this pallet
    finished_out: int  # digital output: this pallet is finished, take it away
    ready_in: int  # digital input: an empty pallet stands and the line is loaded


@dataclass(frozen=True)
class HardwareConfig:
    """`hardware`: the hardware profile of the simulated cell (docs/real-cell.md): the world
    runs on at real_time_factor x wall time, the cameras stream at camera_rate_hz."""

    real_time_factor: float
    camera_rate_hz: float
    line: LineIO


@dataclass(frozen=True)
class CellConfig:
    """configs/cell.yaml, whole. cameras is read-only, in file order."""

    robot: RobotConfig
    gripper: GripperConfig
    pallet: PalletConfig
    tables: TablesConfig
    conveyor: ConveyorConfig
    truck: TruckConfig
    cameras: Mapping[str, CameraConfig]
    physics: PhysicsConfig
    wrench: WrenchConfig
    motion: MotionConfig
    episode: EpisodeConfig
    hardware: HardwareConfig


def build_cell(d: Mapping[str, Any]) -> CellConfig:
    """The CellConfig of a validated cell.yaml mapping (its `schema` key is dropped)."""
    return typing.cast(
        CellConfig, _build(CellConfig, {k: v for k, v in d.items() if k != 'schema'})
    )


def build_cameras(d: Mapping[str, Any]) -> Mapping[str, CameraConfig]:
    """The cameras of a validated cell.yaml `cameras` mapping, read-only, in file order."""
    return typing.cast(Mapping[str, CameraConfig], _build(Mapping[str, CameraConfig], d))


def _build(hint: Any, value: Any) -> Any:
    """Convert one validated value to the type its field declares."""
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        hints = typing.get_type_hints(hint)
        names = {f.name for f in dataclasses.fields(hint)}
        if set(value) != names:  # the schema and the record disagree: a programming error
            raise ConfigError(
                f'cell.yaml: {hint.__name__} has fields {sorted(names)}, the schema '
                f'{sorted(value)}'
            )
        return hint(**{k: _build(hints[k], value[k]) for k in names})
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is types.UnionType:  # X | None
        return None if value is None else _build(args[0], value)
    if origin is tuple:
        item = args[0]
        return tuple(
            _build(args[i] if args[-1] is not Ellipsis else item, v) for i, v in enumerate(value)
        )
    if origin is Mapping:
        return MappingProxyType({str(k): _build(args[1], v) for k, v in value.items()})
    if hint is int:
        return int(value)
    if hint is float:
        return float(value)
    return value
