"""The schema of every config file: one declarative table per file, each key with its type and
range (the validators in _validate.py). The catalogue and levels are checked in sections.py."""

from __future__ import annotations

from palletizer.core.config._validate import (
    _bool,
    _list_of,
    _map_of,
    _num,
    _one_of,
    _Opt,
    _record,
    _text,
    _text_or_empty,
    _vec,
)
from palletizer.core.params.planning import BEAM_TERMS as _BEAM_TERMS
from palletizer.core.params.planning import TERMS as _TERMS
from palletizer.core.vocab import PlannerKind, SnapshotView, SourceKind, TelemetryMode

# source -> level tens digit (table 1x, conveyor 2x, truck 3x)
SOURCES: dict[str, int] = {kind.value: i for i, kind in enumerate(SourceKind, 1)}
COG_MODES = ('centred', 'catalogue', 'adversarial')
DECORS = ('cell', 'plant')


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
    'size': _vec(2, 16, 8192, integer=True),
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
        'lift_clearance': _Opt(_num(0.0, 0.5), 0.0),
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
        'tolerance': {
            'xy': _num(0.0, 1.0),
            'yaw': _num(0.0, 3.2),
            'overhang': _num(0.0, 1.0),
            'square': _num(0.0, 0.1),
        },
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
        'reserve_tries': _num(0, 100000, integer=True),
        'exclude_radius': _Opt(_num(0, 100, integer=True), 0),
        'despeckle': _Opt(_num(0.0, 0.05), 0.0),
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
        'lid_cameras': _Opt(_list_of(_text, 1)),
        'min_confidence': _num(0.0, 1.0),
        'held_sparse': _Opt(_num(0.0, 1.0)),
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
                'held_edge_band',
                'held_edge_frac',
                'held_hidden_max',
                'lid_margin',
                'lid_band',
                'lid_min_points',
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
