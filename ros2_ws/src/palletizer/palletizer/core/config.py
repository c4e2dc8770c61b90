"""Load and validate configs/*.yaml; every error names the file, key path, bad value and what is allowed.

The planner, perception, stability and telemetry sections load into frozen dataclasses, built
once here from the validated files; no other module reads them by key. The cell section is
still a validated mapping (next to be typed).

Why one file of this length: most of it is the schema, one declarative table per config file
(what each key is, its type and range), and the typed sections built from it, kept next to the
validators so a key, its rule and its field are found together. Splitting schema from sections
is due when the cell section is typed.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from palletizer.core.detection.model import DetectionError, DetectorParams
from palletizer.core.errors import ConfigError, close_match
from palletizer.core.heightmap_fusion.params import FusionError, FusionParams
from palletizer.core.planning.buffer import BufferSettings
from palletizer.core.planning.params import BEAM_TERMS as _BEAM_TERMS
from palletizer.core.planning.params import TERMS as _TERMS
from palletizer.core.planning.params import BeamParams, GridParams, HeuristicParams
from palletizer.core.vocab import PlannerKind, SnapshotView, SourceKind, TelemetryMode

__all__ = [
    'COG_MODES',
    'DECORS',
    'SOURCES',
    'BagSettings',
    'BeamTrial',
    'CartonType',
    'Catalogue',
    'Config',
    'EumosTrial',
    'GaugeSettings',
    'HeightmapConfig',
    'JoltTrials',
    'Level',
    'PerceptionConfig',
    'PlannerConfig',
    'PostgresSettings',
    'RandomSpec',
    'ReplicaSettings',
    'SnapshotSettings',
    'StabilityConfig',
    'SupabaseSettings',
    'TelemetryConfig',
    'config_dir',
    'load_config',
    'read_yaml',
]

# source -> level tens digit (table 1x, conveyor 2x, truck 3x)
SOURCES: dict[str, int] = {kind.value: i for i, kind in enumerate(SourceKind, 1)}
COG_MODES = ('centred', 'catalogue', 'adversarial')
DECORS = ('cell', 'plant')
CONFIG_FILES = (
    'catalogue.yaml',
    'levels.yaml',
    'cell.yaml',
    'planner.yaml',
    'perception.yaml',
    'stability.yaml',
    'telemetry.yaml',
)
REACH_TABLE_FILE = 'reach_ur10e.npz'  # built by python -m palletizer.core.motion.reach

Validator = Callable[[Any, str], Any]


# ---------------------------------------------------------------------------------------------
# Value validators. Each takes (value, where) and returns the normalised value or raises.


def _fail(where: str, value: Any, allowed: str) -> ConfigError:
    return ConfigError(f'{where} = {value!r}; expected {allowed}')


def _num(lo: float = -math.inf, hi: float = math.inf, *, integer: bool = False) -> Validator:
    def check(v: Any, where: str) -> float | int:
        kind = 'an integer' if integer else 'a number'
        ok_type = isinstance(v, int) if integer else isinstance(v, (int, float))
        if isinstance(v, bool) or not ok_type or not math.isfinite(v):
            raise _fail(where, v, f'{kind} in [{lo}, {hi}]')
        if not lo <= v <= hi:
            raise _fail(where, v, f'{kind} in [{lo}, {hi}]')
        return int(v) if integer else float(v)

    return check


def _vec(n: int | None, lo: float = -math.inf, hi: float = math.inf) -> Validator:
    item = _num(lo, hi)

    def check(v: Any, where: str) -> tuple[float, ...]:
        size = f'{n} numbers' if n is not None else 'numbers'
        if not isinstance(v, (list, tuple)) or (n is not None and len(v) != n):
            raise _fail(where, v, f'a list of {size} in [{lo}, {hi}]')
        return tuple(item(x, f'{where}[{i}]') for i, x in enumerate(v))

    return check


def _one_of(*allowed: Any) -> Validator:
    def check(v: Any, where: str) -> Any:
        if v not in allowed:
            names = [str(a) for a in allowed]
            raise ConfigError(
                f'{where} = {v!r}; expected one of {", ".join(names)}{close_match(v, names)}'
            )
        return v

    return check


def _bool(v: Any, where: str) -> bool:
    if not isinstance(v, bool):
        raise _fail(where, v, 'true or false')
    return v


def _text(v: Any, where: str) -> str:
    if not isinstance(v, str) or not v:
        raise _fail(where, v, 'a non-empty string')
    return v


def _text_or_empty(v: Any, where: str) -> str:
    if not isinstance(v, str):
        raise _fail(where, v, 'a string (may be empty)')
    return v


def _list_of(item: Validator, min_len: int = 0) -> Validator:
    def check(v: Any, where: str) -> tuple[Any, ...]:
        if not isinstance(v, list) or len(v) < min_len:
            raise _fail(where, v, f'a list of at least {min_len} items')
        return tuple(item(x, f'{where}[{i}]') for i, x in enumerate(v))

    return check


def _map_of(item: Validator) -> Validator:
    def check(v: Any, where: str) -> dict[str, Any]:
        if not isinstance(v, dict) or not v:
            raise _fail(where, v, 'a non-empty mapping')
        return {str(k): item(x, f'{where}.{k}') for k, x in v.items()}

    return check


@dataclass(frozen=True)
class _Opt:
    """Marks a schema entry optional, with a default."""

    validator: Any
    default: Any = None


def _record(schema: Mapping[str, Any]) -> Validator:
    """Validate a mapping against a schema; nested dicts are sub-records; unknown keys are errors."""

    def check(v: Any, where: str) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise _fail(where, v, f'a mapping with keys {", ".join(schema)}')
        out: dict[str, Any] = {}
        for key in v:
            if key not in schema:
                raise ConfigError(
                    f'{f"{where}.{key}" if where else key}: unknown key; expected one of '
                    f'{", ".join(schema)}'
                    f'{close_match(key, schema)}'
                )
        for key, spec in schema.items():
            sub = f'{where}.{key}' if where else key
            optional = isinstance(spec, _Opt)
            rule = spec.validator if optional else spec
            if key not in v:
                if optional:
                    out[key] = spec.default
                    continue
                raise ConfigError(f'{sub}: missing required key')
            out[key] = _record(rule)(v[key], sub) if isinstance(rule, dict) else rule(v[key], sub)
        return out

    return check


# ---------------------------------------------------------------------------------------------
# Schemas of the free-form files (the catalogue and levels get typed records below).

_FRICTION = _vec(3, 0.0, 5.0)
_POS = _num(0.0, 10.0)
_TABLE = {'centre': _vec(2), 'half_size': _vec(3, 0.0), 'top': _POS, 'friction': _FRICTION}
_CAMERA = {
    'pos': _vec(3),
    'look_at': _vec(3),
    'up': _Opt(_vec(3)),
    'fovy_deg': _num(1.0, 179.0),
    'size': _vec(2, 16, 8192),
    'role': _one_of('pallet', 'pick', 'photo'),
    'depth_noise': _Opt(
        {
            'sensor': _text,
            'focal_px': _num(1.0, 1e5),
            'baseline_m': _num(1e-4, 2.0),
            'subpixel': _num(0.0, 5.0),
            'depth_unit_m': _num(1e-6, 0.1),
            'min_z_m': _num(0.0, 10.0),
            'max_z_m': _num(0.01, 100.0),
            'grazing_deg': _vec(2, 0.0, 90.0),
            'edge_jump': _num(1e-4, 1.0),
            'edge_drop': _num(0.0, 1.0),
            'flying': _num(0.0, 1.0),
        },
        None,
    ),
}
_CELL = {
    'schema': _num(1, 1, integer=True),
    'robot': {
        'model': _one_of('UR10e'),
        'base_pos': _vec(3),
        'base_quat': _vec(4, -1.0, 1.0),
        'pedestal': {'radius': _POS, 'height': _POS},
        'joint_names': _list_of(_text, 6),
        'dh': {k: _num(-2.0, 2.0) for k in ('d1', 'a2', 'a3', 'd4', 'd5', 'd6')},
        'joint_speed_limits_deg_s': _vec(6, 0.0, 360.0),
        'torque_limits_nm': _vec(6, 0.0, 1000.0),
        'joint_lower': _vec(6, -7.0, 7.0),
        'joint_upper': _vec(6, -7.0, 7.0),
        'link_masses_kg': _vec(6, 0.0, 50.0),
        'payload_kg': _num(0.0, 50.0),
        'home': _vec(6, -7.0, 7.0),
        'rest': _vec(6, -7.0, 7.0),
    },
    'gripper': {
        'model': _text,
        'mass_kg': _num(0.0, 20.0),
        'body': _vec(3, 0.0, 1.0),
        'tcp_offset': _num(0.0, 1.0),
        'cups': {
            'columns': _num(1, 16, integer=True),
            'rows': _num(1, 16, integer=True),
            'pitch_x': _num(0.0, 1.0),
            'pitch_y': _num(0.0, 1.0),
            'radius': _num(0.001, 0.2),
        },
        'force_per_cup_n': _num(0.0, 1000.0),
        'derating': _num(0.0, 1.0),
        'safety_factor': _num(1.0, 10.0),
        'cup_gap': _num(0.0, 0.02),
        'seal_band': _num(0.0, 0.02),
        'vacuum_io': {'fun': _num(1, 4, integer=True), 'pin': _num(0, 17, integer=True)},
    },
    'pallet': {
        'size': _vec(3, 0.0, 5.0),
        'centre': _vec(2),
        'mass_kg': _num(0.0, 200.0),
        'max_load_kg': _num(0.0, 5000.0),
        'max_height': _num(0.0, 5.0),
        'layer_clearance': _num(0.0, 0.5),
        'friction': _FRICTION,
    },
    'tables': {'pick': _TABLE, 'auxiliary': _TABLE},
    'conveyor': {
        'centre': _vec(2),
        'size': _vec(2, 0.0, 10.0),
        'top': _POS,
        'speed': _num(0.0, 5.0),
        'station': _vec(2),
        'station_tol': _num(0.0, 0.5),
        'rest_speed': _num(0.0, 1.0),
        'rest_time': _num(0.0, 10.0),
        'timeout_s': _num(0.0, 600.0),
        'friction': _FRICTION,
    },
    'truck': {
        'origin': _vec(2),
        'size': _vec(2, 0.0, 10.0),
        'floor': _POS,
        'column_gap': _num(0.0, 1.0),
        'max_stack_height': _num(0.0, 5.0),
        'max_column_items': _num(1, 50, integer=True),
        'min_support': _num(0.0, 1.0),
        'max_slide': _num(0.0, 1.0),
        'loader_jitter': {'pos': _num(0.0, 0.1), 'yaw_deg': _num(0.0, 45.0)},
        'friction': _FRICTION,
        'tie_band': _Opt(_num(0.0, 0.5), 0.030),
        'tie_point': _Opt(_vec(2), (0.60, -0.72)),
        'tie_clear': _Opt(_num(0.0, 0.1), 0.0),
    },
    'cameras': _map_of(_record(_CAMERA)),
    'physics': {
        'timestep': _num(1e-5, 0.1),
        'control_rate_hz': _num(1.0, 10000.0),
        'integrator': _one_of('Euler', 'RK4', 'implicit', 'implicitfast'),
        'cone': _one_of('pyramidal', 'elliptic'),
        'gravity': _vec(3),
        'settle_after_release_s': _num(0.0, 60.0),
        'rest_speed': _num(0.0, 1.0),
        'sleep': _Opt(_bool, False),
    },
    'wrench': {
        'noise_force_n': _num(0.0, 100.0),
        'noise_torque_nm': _num(0.0, 10.0),
        'bias_force_n': _vec(3),
        'bias_torque_nm': _vec(3),
        'offset_force_n': _Opt(_num(0.0, 100.0), 0.0),
        'offset_torque_nm': _Opt(_num(0.0, 10.0), 0.0),
        'drift_force_n': _Opt(_num(0.0, 100.0), 0.0),
        'drift_torque_nm': _Opt(_num(0.0, 10.0), 0.0),
        'drift_period_s': _Opt(_vec(2, 1.0, 1e6), (300.0, 1800.0)),
        'drift_terms': _Opt(_num(1, 100, integer=True), 3),
        'rate_hz': _num(1.0, 10000.0),
    },
    'motion': {
        'cartesian_speed': _num(0.0, 5.0),
        'approach_speed': _num(0.0, 5.0),
        'cartesian_accel': _num(0.0, 50.0),
        'empty_accel': _num(0.0, 50.0),
        'blend_radius': _num(0.0, 0.5),
        'joint_accel_limits': _vec(6, 0.0, 100.0),
        'joint_jerk_limits': _vec(6, 0.0, 10000.0),
        'timing': _one_of('jerk_limited', 'time_optimal', 'ruckig'),
        'transit_height': _num(0.0, 3.0),
        'place_clearance': _num(0.0, 1.0),
        'stack_clearance': _num(0.0, 1.0),
        'drop_clearance': _num(0.0, 0.1),
        'reach_tolerance': _num(0.0, 0.5),
        'settle_seconds': _num(0.0, 60.0),
        'map_margin': _Opt(_num(0.0, 0.1), 0.0),
        'ready_offset': _Opt(_vec(2, -1.0, 1.0), (0.0, 0.0)),
    },
    'episode': {
        'max_duration_s': _num(1.0, 1e5),
        'place_retries': _num(0, 20, integer=True),
        'detect_retries': _num(0, 20, integer=True),
        'detect_retry_wait_s': _num(0.0, 10.0),
        'tolerance': {'xy': _num(0.0, 1.0), 'yaw': _num(0.0, 3.2), 'overhang': _num(0.0, 1.0)},
    },
}
# The term names are the planners' own (one list, no copy to drift).
HEURISTIC_TERMS = _TERMS
BEAM_TERMS = _BEAM_TERMS
_WEIGHT = _num(0.0, 100.0)
_PLANNER = {
    'schema': _num(1, 1, integer=True),
    'default': _one_of(*PlannerKind.names()),
    'heuristic': {
        'cell': _num(0.001, 0.1),
        'clearance': _num(0.0, 0.5),
        'support_tol': _num(0.0, 0.05),
        'proximity_band': _num(0.0, 0.5),
        'levelness_scale': _num(1e-6, 10.0),
        'useful_gap': _num(0.0, 1.0),
        'min_support_ratio': _num(0.0, 1.0),
        'max_stack_height': _num(0.0, 5.0),
        'lowness_scale': _num(0.01, 5.0),
        'tie_eps': _num(0.0, 1.0),
        'yaws': _list_of(_one_of(0, 90, 180, 270), 1),
        'allow_unobserved': _bool,
        'stack_check': _bool,
        'reserve': _list_of(_num(0.001, 2.0), 3),
        'reserve_tries': _num(0, 1000, integer=True),
        'exclude_radius': _Opt(_num(0, 100, integer=True), 0),
        'weights': {t: _WEIGHT for t in HEURISTIC_TERMS},
    },
    'beam': {
        'beam_width': _num(1, 1000, integer=True),
        'lookahead': _num(1, 20, integer=True),
        'candidates_per_node': _num(1, 10000, integer=True),
        'min_support_ratio': _num(0.0, 1.0),
        'min_tipping_margin': _num(0.0, 1.0),
        'surface_samples': _list_of(_num(1, 1000, integer=True), 2),
        'reserve': _list_of(_num(0.001, 2.0), 3),
        'reserve_tries': _num(0, 1000, integer=True),
        'weights': {t: _WEIGHT for t in BEAM_TERMS},
    },
    'grid': {'min_support_ratio': _num(0.0, 1.0), 'clearance': _num(0.0, 0.5)},
    'buffer': {
        'slots': _num(0, 8, integer=True),
        'edge_margin': _num(0.0, 0.2),
        'gap': _num(0.0, 0.5),
    },
}
_PERCEPTION = {
    'schema': _num(1, 1, integer=True),
    'heightmap': {
        'cameras': _list_of(_text, 1),
        'cell': _num(0.001, 0.1),
        'min_upward_nz': _num(0.0, 1.0),
        'depth_range': _vec(2, 0.0, 100.0),
        'z_range': _vec(2, -1.0, 10.0),
        'exclude_robot': _bool,
        'robot_margin': _Opt(_num(0.0, 0.5), 0.04),
        'normal_px': _Opt(_num(1, 10, integer=True), 2),
        'edge_px': _Opt(_num(0, 10, integer=True), 2),
        'edge_jump': _Opt(_num(0.001, 1.0), 0.02),
        'bin': _Opt(_num(0.001, 0.1), 0.01),
        'band': _Opt(_num(0.001, 0.1), 0.012),
        'min_points': _Opt(_num(1, 1000, integer=True), 2),
        'fill_neighbours': _Opt(_num(1, 8, integer=True), 5),
        'fill_tol': _Opt(_num(0.0, 0.1), 0.004),
        'edge_fill': _Opt(_bool, True),
        'recall': _Opt(_bool, True),
        'recall_tol': _Opt(_num(0.001, 0.2), 0.02),
    },
    'detector': {
        'camera': _text,
        'truck_cameras': _Opt(_list_of(_text, 1)),
        'held_cameras': _Opt(_list_of(_text, 1)),
        'min_confidence': _num(0.0, 1.0),
        **{
            k: _Opt(_num(0.0, 100.0))
            for k in (
                'station_radius',
                'pick_radius',
                'min_height',
                'flat_tol',
                'min_area_m2',
                'min_side',
                'edge_search_px',
                'edge_min_grad',
                'max_residual_mm',
                'colour_tol',
                'square_tol',
                'tie_margin',
                'tie_near',
                'bay_margin',
                'held_margin',
                'held_gap',
                'held_pct',
            )
        },
        'envelope': _Opt(_vec(2, 0.0, 10.0)),
    },
    'gauge': {
        'samples': _num(1, 10000, integer=True),
        'settle_s': _num(0.0, 10.0),
        'still_speed': _num(0.0, 1.0),
        'still_steps': _num(1, 10000, integer=True),
        'hidden_limit': _num(0.0, 1.0),
        'no_payload_kg': _num(0.0, 10.0),
        'tare_offsets': _list_of(_vec(3, -3.2, 3.2), 3),
    },
}
_STABILITY = {
    'schema': _num(1, 1, integer=True),
    'jolts': {
        'levels_g': _vec(None, 0.0, 5.0),
        'axes': _list_of(_one_of('x', 'y', 'z'), 1),
        'duration': _num(0.01, 10.0),
        'settle_seconds': _num(0.0, 60.0),
        'hold_seconds': _num(0.0, 60.0),
        'rest_seconds': _num(0.0, 60.0),
        'max_shift_m': _num(0.0, 1.0),
    },
    'beam': {
        'width': _num(0.0, 1.0),
        'height': _num(0.0, 1.0),
        'settle_seconds': _num(0.0, 60.0),
        'max_tilt_deg': _num(0.0, 90.0),
    },
    'eumos': {
        'accel_g': _num(0.0, 5.0),
        'ramp_s': _num(0.0, 1.0),
        'hold_s': _num(0.0, 10.0),
        'max_displacement_m': _num(0.0, 1.0),
    },
    'transport_accel_g': _num(0.0, 2.0),
}
_TELEMETRY = {
    'schema': _num(1, 1, integer=True),
    # off is chosen at launch (telemetry:=off, --no-telemetry), not in telemetry.yaml
    'mode': _one_of(*(m for m in TelemetryMode.names() if m != TelemetryMode.off)),
    'runs_dir': _text,
    'min_free_mb': _Opt(_num(0.0, 1e7), 0.0),
    'bag': {
        'enabled': _bool,
        'version': _num(8, 9, integer=True),
        'compression': _one_of('none', 'zstd'),
        'topics': _list_of(_text, 1),
    },
    'snapshots': {
        'views': _list_of(_one_of(*SnapshotView.names()), 1),
    },
    'replica': {
        'timeout_s': _num(0.1, 120.0),
        'batch': _num(1, 100_000, integer=True),
        'backoff_s': _list_of(_num(0.01, 600.0), 2),
        'drain_s': _num(0.0, 3600.0),
        'postgres': {'dsn': _text_or_empty},
        'supabase': {'bucket': _text},
    },
}


# ---------------------------------------------------------------------------------------------
# Typed records.


@dataclass(frozen=True)
class CartonType:
    """A declared carton type: full dims [m], mass [kg], true CoG offset [m] from the centre."""

    name: str
    dims: tuple[float, float, float]
    mass: float
    cog_offset: tuple[float, float, float]
    rgba: tuple[float, float, float, float]
    friction: tuple[float, float, float]


@dataclass(frozen=True)
class RandomSpec:
    """Envelope of the random carton generator (ranges are [lo, hi])."""

    length: tuple[float, float]
    width: tuple[float, float]
    height: tuple[float, float]
    volume: tuple[float, float]
    max_aspect: float
    density: tuple[float, float]
    mass: tuple[float, float]
    max_attempts: int
    adversarial_fraction: float


@dataclass(frozen=True)
class Catalogue:
    """The carton types by name plus the random generator."""

    types: Mapping[str, CartonType]
    random: RandomSpec
    friction: tuple[float, float, float]


@dataclass(frozen=True)
class Level:
    """One level: its source, load and staging jitter."""

    id: int
    source: str
    name: str
    n: int
    types: tuple[str, ...]
    yaw_jitter_deg: float
    pos_jitter_m: float
    cog: str
    loader_jitter: bool
    decor: str
    same_load_as: int | None

    @property
    def load_level(self) -> int:
        """Level whose draw this level reuses (34 reuses 33: only scenery differs)."""
        return self.same_load_as if self.same_load_as is not None else self.id


@dataclass(frozen=True)
class PlannerConfig:
    """configs/planner.yaml: the default planner and each planner's parameters, built once.

    default: the planner a run gets when none is named; heuristic, beam, grid: the params the
    factory (core.planning.build_planner) builds each planner with; buffer: the set-aside
    buffer on the auxiliary table (core.planning.buffer).
    """

    default: PlannerKind
    heuristic: HeuristicParams
    beam: BeamParams
    grid: GridParams
    buffer: BufferSettings


@dataclass(frozen=True)
class HeightmapConfig:
    """configs/perception.yaml `heightmap`: the fusion's settings (their `cameras` are the pallet
    cameras fused) and whether the robot's own shape is cut out of the views."""

    fusion: FusionParams
    exclude_robot: bool


@dataclass(frozen=True)
class GaugeSettings:
    """configs/perception.yaml `gauge`: the wrist gauge's readings.

    samples: wrench samples averaged per reading; settle_s [s] held before they count;
    still_speed [rad/s] and still_steps: the arm counts as still below this joint speed for
    this many consecutive steps; hidden_limit [m]: worst planar leak of the blind axis before a
    tilted sweep; no_payload_kg: below this the cups hold nothing; tare_offsets [rad]: wrist_1..3
    offsets from home of the tare poses.
    """

    samples: int
    settle_s: float
    still_speed: float
    still_steps: int
    hidden_limit: float
    no_payload_kg: float
    tare_offsets: tuple[tuple[float, float, float], ...]


@dataclass(frozen=True)
class PerceptionConfig:
    """configs/perception.yaml: height-map fusion, carton detection and the wrist gauge."""

    heightmap: HeightmapConfig
    detector: DetectorParams
    gauge: GaugeSettings


@dataclass(frozen=True)
class JoltTrials:
    """configs/stability.yaml `jolts`: lateral jolts of each level [g] along each axis."""

    levels_g: tuple[float, ...]
    axes: tuple[str, ...]
    duration: float
    settle_seconds: float
    hold_seconds: float
    rest_seconds: float
    max_shift_m: float


@dataclass(frozen=True)
class BeamTrial:
    """configs/stability.yaml `beam`: the stack set down on a narrow beam."""

    width: float
    height: float
    settle_seconds: float
    max_tilt_deg: float


@dataclass(frozen=True)
class EumosTrial:
    """configs/stability.yaml `eumos`: the EUMOS 40509-style acceleration trial."""

    accel_g: float
    ramp_s: float
    hold_s: float
    max_displacement_m: float


@dataclass(frozen=True)
class StabilityConfig:
    """configs/stability.yaml: the physical stability protocol."""

    jolts: JoltTrials
    beam: BeamTrial
    eumos: EumosTrial
    transport_accel_g: float


@dataclass(frozen=True)
class BagSettings:
    """configs/telemetry.yaml `bag`: whether a bag is written, its version, compression, topics."""

    enabled: bool
    version: int
    compression: str
    topics: tuple[str, ...]


@dataclass(frozen=True)
class SnapshotSettings:
    """configs/telemetry.yaml `snapshots`: the views photographed after each layer."""

    views: tuple[SnapshotView, ...]


@dataclass(frozen=True)
class PostgresSettings:
    """configs/telemetry.yaml `replica.postgres`: the libpq DSN ('' : from the environment)."""

    dsn: str


@dataclass(frozen=True)
class SupabaseSettings:
    """configs/telemetry.yaml `replica.supabase`: the Storage bucket of the snapshot PNGs."""

    bucket: str


@dataclass(frozen=True)
class ReplicaSettings:
    """configs/telemetry.yaml `replica`: timeout_s [s] connect / HTTP timeout; batch: rows per
    transaction; backoff_s [s]: first and longest wait between retries (the first two of the
    file's list, all the replicator reads); drain_s [s]: how long
    the telemetry node waits at shutdown for its outbox to drain."""

    timeout_s: float
    batch: int
    backoff_s: tuple[float, float]
    drain_s: float
    postgres: PostgresSettings
    supabase: SupabaseSettings


@dataclass(frozen=True)
class TelemetryConfig:
    """configs/telemetry.yaml: mode (never off: that is chosen per run), the runs folder, the free
    space it needs [MB], the bag, the snapshots and the replica."""

    mode: TelemetryMode
    runs_dir: str
    min_free_mb: float
    bag: BagSettings
    snapshots: SnapshotSettings
    replica: ReplicaSettings


@dataclass(frozen=True)
class Config:
    """All validated configuration, as loaded from one configs/ folder."""

    root: Path
    catalogue: Catalogue
    levels: Mapping[int, Level]
    default_level: int
    cell: Mapping[str, Any]
    planner: PlannerConfig
    perception: PerceptionConfig
    stability: StabilityConfig
    telemetry: TelemetryConfig

    def level(self, level_id: int) -> Level:
        """The level with this id, or a ConfigError listing the valid ids."""
        if level_id not in self.levels:
            valid = ', '.join(str(i) for i in sorted(self.levels))
            raise ConfigError(f'level {level_id!r} does not exist; valid levels: {valid}')
        return self.levels[level_id]

    @property
    def reach_table(self) -> Path:
        """The UR10e reach table the heuristic planner plans with (configs/reach_ur10e.npz)."""
        return self.root / REACH_TABLE_FILE

    def levels_of(self, source: str) -> tuple[int, ...]:
        """Level ids of one source, ascending."""
        _one_of(*SOURCES)(source, 'source')
        return tuple(sorted(i for i, lv in self.levels.items() if lv.source == source))


# ---------------------------------------------------------------------------------------------
# Typed sections, built from the schema-validated mappings (every key is present and checked).


def _planner(d: Mapping[str, Any]) -> PlannerConfig:
    b = d['buffer']
    return PlannerConfig(
        default=PlannerKind.parse(d['default'], 'planner.yaml: default'),
        heuristic=HeuristicParams.from_mapping(d['heuristic'], 'planner.yaml: heuristic'),
        beam=BeamParams.from_mapping(d['beam'], 'planner.yaml: beam'),
        grid=GridParams.from_mapping(d['grid'], 'planner.yaml: grid'),
        buffer=BufferSettings(int(b['slots']), float(b['edge_margin']), float(b['gap'])),
    )


def _perception(d: Mapping[str, Any]) -> PerceptionConfig:
    hm, g = d['heightmap'], d['gauge']
    try:
        fusion = FusionParams.from_config(hm)
        detector = DetectorParams.from_config(d['detector'])
    except (FusionError, DetectionError) as exc:
        raise ConfigError(f'perception.yaml: {exc}') from None
    return PerceptionConfig(
        heightmap=HeightmapConfig(fusion=fusion, exclude_robot=bool(hm['exclude_robot'])),
        detector=detector,
        gauge=GaugeSettings(
            samples=int(g['samples']),
            settle_s=float(g['settle_s']),
            still_speed=float(g['still_speed']),
            still_steps=int(g['still_steps']),
            hidden_limit=float(g['hidden_limit']),
            no_payload_kg=float(g['no_payload_kg']),
            tare_offsets=tuple((float(x), float(y), float(z)) for x, y, z in g['tare_offsets']),
        ),
    )


def _stability(d: Mapping[str, Any]) -> StabilityConfig:
    j, b, e = d['jolts'], d['beam'], d['eumos']
    return StabilityConfig(
        jolts=JoltTrials(
            levels_g=tuple(j['levels_g']),
            axes=tuple(j['axes']),
            duration=j['duration'],
            settle_seconds=j['settle_seconds'],
            hold_seconds=j['hold_seconds'],
            rest_seconds=j['rest_seconds'],
            max_shift_m=j['max_shift_m'],
        ),
        beam=BeamTrial(b['width'], b['height'], b['settle_seconds'], b['max_tilt_deg']),
        eumos=EumosTrial(e['accel_g'], e['ramp_s'], e['hold_s'], e['max_displacement_m']),
        transport_accel_g=d['transport_accel_g'],
    )


def _telemetry(d: Mapping[str, Any]) -> TelemetryConfig:
    bag, r = d['bag'], d['replica']
    return TelemetryConfig(
        mode=TelemetryMode.parse(d['mode'], 'telemetry.yaml: mode', error=ConfigError),
        runs_dir=d['runs_dir'],
        min_free_mb=float(d['min_free_mb']),
        bag=BagSettings(bag['enabled'], bag['version'], bag['compression'], tuple(bag['topics'])),
        snapshots=SnapshotSettings(
            tuple(
                SnapshotView.parse(v, f'telemetry.yaml: snapshots.views[{i}]', error=ConfigError)
                for i, v in enumerate(d['snapshots']['views'])
            )
        ),
        replica=ReplicaSettings(
            timeout_s=r['timeout_s'],
            batch=r['batch'],
            backoff_s=(r['backoff_s'][0], r['backoff_s'][1]),
            drain_s=r['drain_s'],
            postgres=PostgresSettings(r['postgres']['dsn']),
            supabase=SupabaseSettings(r['supabase']['bucket']),
        ),
    )


def _read_catalogue(doc: Any, where: str) -> Catalogue:
    rules = {
        'schema': _num(1, 1, integer=True),
        'friction': _FRICTION,
        'types': _map_of(
            _record(
                {
                    'dims': _vec(3, 0.01, 3.0),
                    'mass': _num(0.01, 100.0),
                    'cog_offset': _vec(3, -1.0, 1.0),
                    'rgba': _vec(4, 0.0, 1.0),
                }
            )
        ),
        'random': {
            'length': _vec(2, 0.01, 3.0),
            'width': _vec(2, 0.01, 3.0),
            'height': _vec(2, 0.01, 3.0),
            'volume': _vec(2, 0.0, 10.0),
            'max_aspect': _num(1.0, 100.0),
            'density': _vec(2, 1.0, 10000.0),
            'mass': _vec(2, 0.0, 100.0),
            'max_attempts': _num(1, 10**7, integer=True),
            'adversarial_fraction': _num(0.0, 1.0),
        },
    }
    d = _record(rules)(doc, where)
    friction = d['friction']
    types: dict[str, CartonType] = {}
    for name, t in d['types'].items():
        if name == 'random':
            raise ConfigError('types.random: the name random is reserved for the generator')
        half = [t['dims'][0] / 2, t['dims'][1] / 2, t['dims'][2] / 2]
        for axis in range(3):
            if abs(t['cog_offset'][axis]) > half[axis]:
                raise ConfigError(
                    f'types.{name}.cog_offset[{axis}] = {t["cog_offset"][axis]!r}; '
                    f'expected a value inside the box, |x| <= {half[axis]}'
                )
        types[name] = CartonType(name, t['dims'], t['mass'], t['cog_offset'], t['rgba'], friction)
    r = d['random']
    for key in ('length', 'width', 'height', 'volume', 'density', 'mass'):
        lo, hi = r[key]
        if lo > hi:
            raise ConfigError(f'random.{key} = {list(r[key])!r}; expected [lo, hi] with lo <= hi')
    return Catalogue(types=types, random=RandomSpec(**r), friction=friction)


def _read_levels(doc: Any, where: str, catalogue: Catalogue) -> tuple[dict[int, Level], int]:
    rules = {
        'schema': _num(1, 1, integer=True),
        'default_level': _num(10, 99, integer=True),
        'levels': _list_of(lambda v, w: v, 1),
    }
    d = _record(rules)(doc, where)
    type_names = [*catalogue.types, 'random']
    level_rule = _record(
        {
            'id': _num(10, 99, integer=True),
            'source': _one_of(*SOURCES),
            'name': _text,
            'n': _num(1, 200, integer=True),
            'types': _list_of(_text, 1),
            'yaw_jitter_deg': _num(0.0, 180.0),
            'pos_jitter_m': _num(0.0, 0.5),
            'cog': _one_of(*COG_MODES),
            'loader_jitter': _Opt(_bool, False),
            'decor': _Opt(_one_of(*DECORS), 'cell'),
            'same_load_as': _Opt(_num(10, 99, integer=True)),
        }
    )
    levels: dict[int, Level] = {}
    for i, raw in enumerate(d['levels']):
        here = f'levels[{i}]'
        lv = level_rule(raw, here)
        if lv['id'] in levels:
            raise ConfigError(f'{here}.id = {lv["id"]!r}; duplicate level id (ids must be unique)')
        decade = SOURCES[lv['source']]
        if lv['id'] // 10 != decade:
            raise ConfigError(
                f'{here}.id = {lv["id"]!r}; a {lv["source"]} level must be in the {decade}x '
                f'decade ({decade}0-{decade}9)'
            )
        for j, name in enumerate(lv['types']):
            if name not in type_names:
                raise ConfigError(
                    f'{here}.types[{j}] = {name!r}; expected a catalogue type: '
                    f'{", ".join(type_names)}{close_match(name, type_names)}'
                )
        if 'random' in lv['types'] and len(lv['types']) > 1:
            raise ConfigError(f'{here}.types = {list(lv["types"])!r}; random cannot be mixed')
        if len(lv['types']) > lv['n']:
            # A longer list would be truncated and drop whole types (docs/levels.md §2.2).
            raise ConfigError(
                f'{here}.types has {len(lv["types"])} entries but n = {lv["n"]}; expected at '
                f'most n types'
            )
        if lv['source'] != 'truck' and lv['loader_jitter']:
            raise ConfigError(f'{here}.loader_jitter = true; only truck levels have a loader')
        levels[lv['id']] = Level(**lv)
    for lv in levels.values():
        if lv.same_load_as is not None:
            twin = levels.get(lv.same_load_as)
            if twin is None or twin.source != lv.source or twin.same_load_as is not None:
                raise ConfigError(
                    f'levels[id={lv.id}].same_load_as = {lv.same_load_as!r}; expected the '
                    f'id of another {lv.source} level that has its own load'
                )
    if d['default_level'] not in levels:
        raise ConfigError(
            f'default_level = {d["default_level"]!r}; expected one of '
            f'{", ".join(str(i) for i in sorted(levels))}'
        )
    return levels, d['default_level']


def config_dir() -> Path:
    """The configs/ folder: $PALLETIZER_CONFIG_DIR, the installed share, or the repository's."""
    env = os.environ.get('PALLETIZER_CONFIG_DIR')
    if env:
        return Path(env)
    here = Path(__file__).resolve()
    for parent in here.parents:
        for cand in (parent / 'configs', parent / 'share' / 'palletizer' / 'configs'):
            if (cand / 'levels.yaml').is_file():
                return cand
    raise ConfigError(
        'cannot find the configs folder (levels.yaml); set PALLETIZER_CONFIG_DIR to the '
        "repository's configs/"
    )


_MERGE_TAG = 'tag:yaml.org,2002:merge'


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects a key given twice in one mapping (PyYAML keeps the last).

    Merge keys (`<<`) still override as YAML defines; only keys written twice are errors.
    """

    def construct_document(self, node: yaml.Node) -> Any:
        self._checked: set[int] = set()
        self._check_keys(node, '')
        return super().construct_document(node)

    def _check_keys(self, node: yaml.Node, where: str) -> None:
        if id(node) in self._checked:  # an alias of a checked node (maybe of itself)
            return
        self._checked.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self._check_keys(item, f'{where}[{i}]')
        elif isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE_TAG:
                    self._check_keys(value_node, where)
                    continue
                key = self.construct_object(key_node)
                sub = f'{where}.{key}' if where else str(key)
                line = key_node.start_mark.line + 1
                if key in seen:
                    raise ConfigError(
                        f'{sub}: duplicate key at line {line} (first at line {seen[key]}); '
                        f'expected each key once per mapping'
                    )
                seen[key] = line
                self._check_keys(value_node, sub)


def read_yaml(path: str | os.PathLike[str]) -> Any:
    """Parse one YAML file strictly; ConfigError naming the file when it cannot be read, is not
    UTF-8, is not valid YAML, or gives a key twice."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f'{path.name}: file not found in {path.parent}') from None
    except OSError as exc:
        raise ConfigError(
            f'{path.name}: cannot read {path}: {exc.strerror or exc}; expected a readable file'
        ) from None
    try:
        text = data.decode('utf-8')
    except UnicodeDecodeError as exc:
        line = data.count(b'\n', 0, exc.start) + 1
        raise ConfigError(
            f'{path.name}: byte 0x{data[exc.start]:02x} at line {line} is not UTF-8; expected '
            f'UTF-8 text'
        ) from None
    try:
        return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader: plain data only
    except ConfigError as exc:
        raise ConfigError(f'{path.name}: {exc}') from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, 'problem_mark', None)
        at = f' at line {mark.line + 1}, column {mark.column + 1}' if mark is not None else ''
        problem = getattr(exc, 'problem', None) or str(exc).splitlines()[0]
        raise ConfigError(f'{path.name}: not valid YAML{at}: {problem}') from None


def _check_joint_limits(robot: Mapping[str, Any]) -> None:
    """Each joint's lower limit below its upper one, and home and rest inside the limits."""
    lower, upper, names = robot['joint_lower'], robot['joint_upper'], robot['joint_names']
    for i, (lo, hi) in enumerate(zip(lower, upper, strict=True)):
        if not lo < hi:
            raise ConfigError(
                f'cell.yaml: robot.joint_lower[{i}] = {lo!r} is not below robot.joint_upper[{i}] '
                f'= {hi!r} ({names[i]}); expected joint_lower < joint_upper for every joint'
            )
    for key in ('home', 'rest'):
        for i, q in enumerate(robot[key]):
            if not lower[i] <= q <= upper[i]:
                raise ConfigError(
                    f'cell.yaml: robot.{key}[{i}] = {q!r} ({names[i]}); expected a value inside '
                    f'the joint limits [{lower[i]}, {upper[i]}]'
                )


def _check_payload(catalogue: Catalogue, cell: Mapping[str, Any]) -> None:
    """No carton the catalogue can bring may weigh more than the arm carries with its gripper."""
    payload, gripper = cell['robot']['payload_kg'], cell['gripper']['mass_kg']
    capacity = payload - gripper
    why = (
        f'{capacity:g} kg: the robot carries {payload:g} kg (cell.yaml robot.payload_kg) minus '
        f'the {gripper:g} kg gripper (gripper.mass_kg)'
    )
    for name, t in catalogue.types.items():
        if t.mass > capacity:
            raise ConfigError(
                f'catalogue.yaml: types.{name}.mass = {t.mass!r}; expected at most {why}'
            )
    if catalogue.random.mass[1] > capacity:
        raise ConfigError(
            f'catalogue.yaml: random.mass = {list(catalogue.random.mass)!r}; expected a maximum '
            f'of at most {why}'
        )


def load_config(root: str | os.PathLike[str] | None = None) -> Config:
    """Load and validate every file in configs/ (or `root`); raise ConfigError on the first problem."""
    base = Path(root) if root is not None else config_dir()
    docs = {name: read_yaml(base / name) for name in CONFIG_FILES}
    try:
        catalogue = _read_catalogue(docs['catalogue.yaml'], '')
    except ConfigError as exc:
        raise ConfigError(f'catalogue.yaml: {exc}') from None
    try:
        levels, default = _read_levels(docs['levels.yaml'], '', catalogue)
    except ConfigError as exc:
        raise ConfigError(f'levels.yaml: {exc}') from None
    free = {
        'cell.yaml': _CELL,
        'planner.yaml': _PLANNER,
        'perception.yaml': _PERCEPTION,
        'stability.yaml': _STABILITY,
        'telemetry.yaml': _TELEMETRY,
    }
    parsed = {}
    for name, schema in free.items():
        try:
            parsed[name] = _record(schema)(docs[name], '')
        except ConfigError as exc:
            raise ConfigError(f'{name}: {exc}') from None
    _check_joint_limits(parsed['cell.yaml']['robot'])
    _check_payload(catalogue, parsed['cell.yaml'])
    cams = parsed['cell.yaml']['cameras']
    for i, cam in enumerate(parsed['perception.yaml']['heightmap']['cameras']):
        if cam not in cams:
            raise ConfigError(
                f'perception.yaml: heightmap.cameras[{i}] = {cam!r}; expected a camera of '
                f'cell.yaml: {", ".join(cams)}{close_match(cam, cams)}'
            )
    return Config(
        root=base,
        catalogue=catalogue,
        levels=levels,
        default_level=default,
        cell=parsed['cell.yaml'],
        planner=_planner(parsed['planner.yaml']),
        perception=_perception(parsed['perception.yaml']),
        stability=_stability(parsed['stability.yaml']),
        telemetry=_telemetry(parsed['telemetry.yaml']),
    )
