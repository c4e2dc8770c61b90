"""The cell bridge's parameters: their names, defaults and descriptions, read once at start.

`declare_params` declares them on the node in one place and refuses a combination the bridge
cannot run (an unknown profile, fast-forward in the hardware profile, a speed slider out of
range, injected faults in the lockstep profile).
"""

from __future__ import annotations

from dataclasses import dataclass

from rclpy.node import Node

from palletizer.bridge import FjtDefaults
from palletizer.bridge.faults import FaultPlan, parse_faults
from palletizer.core.config import Config
from palletizer.core.errors import PalletizerError
from palletizer.nodes.cell_hardware import PROFILES
from palletizer.nodes.params import declare

__all__ = ['BridgeParams', 'declare_params', 'label_only_cameras']


@dataclass(frozen=True)
class BridgeParams:
    """The values of the cell bridge's parameters (docs/real-cell.md for the profiles)."""

    level: int
    seed: int
    speed: float  # 0 = fast-forward goals, > 0 = servo-tracked
    action: str  # FollowJointTrajectory action name
    io_service: str  # SetIO service name
    wrench_topic: str
    vac_fun: int
    vac_pin: int
    defaults: FjtDefaults
    truth: bool  # truth/<id> carton TFs
    profile: str  # lockstep | hardware
    real_time_factor: float  # hardware: sim s per wall s
    camera_rate_hz: float  # hardware: frames per sim s
    topics: dict[str, str]  # depth, color and info topic patterns with {camera}
    scenario_file: str  # hardware: the scenario referee's episode lines ('' = none)
    speed_scaling: float  # the pendant's speed slider, 0.01-1
    faults: FaultPlan

    @property
    def hardware(self) -> bool:
        return bool(self.profile == 'hardware')


def declare_params(node: Node, cfg: Config) -> BridgeParams:
    """Declare the cell bridge's parameters on `node` and read them; PalletizerError when they
    do not go together."""
    cell_cfg = cfg.cell
    vac = cell_cfg.gripper.vacuum_io

    level = declare(node, 'level', cfg.default_level, 'level id at start (see levels.yaml)')
    seed = declare(node, 'seed', 0, 'load seed at start')
    speed = float(declare(node, 'speed', 0.0, '0 = fast-forward goals, > 0 = servo-tracked'))
    action = declare(node, 'trajectory_action', 'follow_joint_trajectory', 'FJT action name')
    io_srv = declare(node, 'set_io_service', 'set_io', 'ur_msgs/SetIO service name')
    wrench = declare(node, 'wrench_topic', 'wrench', 'WrenchStamped topic, flange frame [N, N m]')
    vac_fun = declare(node, 'vacuum_fun', vac.fun, 'SetIO fun that switches the vacuum')
    vac_pin = declare(node, 'vacuum_pin', vac.pin, 'SetIO pin that switches the vacuum')
    d = FjtDefaults()
    defaults = FjtDefaults(
        declare(node, 'path_tolerance', d.path_position, 'default path tolerance [rad]'),
        declare(node, 'goal_tolerance', d.goal_position, 'default goal tolerance [rad]'),
        declare(node, 'goal_time_tolerance', d.goal_time, 'default goal time tolerance [s]'),
        declare(node, 'stopped_velocity_tolerance', d.stopped_velocity, 'end at rest [rad/s]'),
    )
    truth = declare(node, 'publish_truth', True, 'truth/<id> carton TFs (visualisation only)')
    profile = declare(node, 'profile', 'lockstep', 'lockstep | hardware (docs/real-cell.md)')
    hw = cell_cfg.hardware
    rtf = float(
        declare(node, 'real_time_factor', hw.real_time_factor, 'hardware: sim s per wall s')
    )
    rate = float(declare(node, 'camera_rate_hz', hw.camera_rate_hz, 'hardware: frames per sim s'))
    topics = {
        k: declare(
            node, f'{k}_topic', f'/cameras/{{camera}}/{v}', f'{k} topic of camera {{camera}}'
        )
        for k, v in (('depth', 'depth/image_raw'), ('color', 'color/image_raw'))
    }
    topics['info'] = declare(
        node, 'info_topic', '/cameras/{camera}/camera_info', 'CameraInfo topic'
    )
    scenario_file = declare(
        node, 'scenario_file', '', "hardware: append the scenario referee's episode lines here"
    )
    if profile not in PROFILES:
        raise PalletizerError(
            f'cell_bridge: profile:={profile!r}; expected one of {", ".join(PROFILES)}'
        )
    hardware = profile == 'hardware'
    if hardware and speed == 0:
        raise PalletizerError(
            'cell_bridge: profile:=hardware runs the world on in real time, so goals are '
            'servo-tracked: speed:=0 (fast-forward) is for the lockstep profile; use speed > 0'
        )
    slider = float(
        declare(node, 'speed_scaling', 1.0, "the pendant's speed slider, 0.01-1: goals run slower")
    )
    if not 0.01 <= slider <= 1.0:
        raise PalletizerError(
            f'cell_bridge: speed_scaling:={slider}; expected 0.01 to 1 (1 = full speed)'
        )
    fault_specs = str(
        declare(
            node, 'faults', '', 'hardware: injected faults, kind@goal[:share],... (bridge/faults)'
        )
    )
    faults = FaultPlan(parse_faults(fault_specs.split(',')))
    if faults.faults and not hardware:
        raise PalletizerError(
            f'cell_bridge: faults:={fault_specs!r} are injected in profile:=hardware only '
            '(the lockstep profile is the deterministic one)'
        )
    return BridgeParams(
        level=level,
        seed=seed,
        speed=speed,
        action=action,
        io_service=io_srv,
        wrench_topic=wrench,
        vac_fun=vac_fun,
        vac_pin=vac_pin,
        defaults=defaults,
        truth=truth,
        profile=profile,
        real_time_factor=rtf,
        camera_rate_hz=rate,
        topics=topics,
        scenario_file=scenario_file,
        speed_scaling=slider,
        faults=faults,
    )


def label_only_cameras(cfg: Config) -> tuple[str, ...]:
    """The cameras only the held carton's label reading uses (perception.yaml detector
    label_cameras less every other camera perception reads)."""
    det, fused = cfg.perception.detector, cfg.perception.heightmap.fusion.cameras
    used = {det.camera, *det.truck_cameras, *det.held_cameras, *det.lid_cameras, *fused}
    return tuple(n for n in det.label_cameras if n not in used)
