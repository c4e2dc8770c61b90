"""The MuJoCo cell: robot, gripper, pallet, sources, cameras, suction, wrench, stability trials."""

from __future__ import annotations

import os

# MuJoCo picks its GL backend when first imported. Without a display GLFW aborts the process,
# so headless runs default to EGL (mujoco-notes "Headless rendering"); MUJOCO_GL still wins.
if 'MUJOCO_GL' not in os.environ and not os.environ.get('DISPLAY'):
    os.environ['MUJOCO_GL'] = 'egl'

# ruff: noqa: E402
from palletizer.sim.cameras import CAMERAS, CameraError, CameraRig, CameraSpec, Frame, Intrinsics
from palletizer.sim.cell import CartonTruth, Cell, CellError, CellOptions, GroundTruth
from palletizer.sim.gripper import CupBlock, GripperParams, block_capacity, plan_cup_block
from palletizer.sim.pallet import PalletParams
from palletizer.sim.robot import ARM_JOINTS, ArmParams, T_world_dhbase
from palletizer.sim.scene import (
    CartonPlacement,
    SceneError,
    SceneOptions,
    build_scene_spec,
    build_scene_xml,
    compile_scene,
    scene_spec,
)
from palletizer.sim.servo import Servo, ServoError, ServoGains, TrackResult, Trajectory
from palletizer.sim.stability import (
    CartonShift,
    StabilityError,
    StabilityProtocol,
    StabilityReport,
    TrialResult,
    run_protocol,
)
from palletizer.sim.suction import SealResult, SealStatus, Suction
from palletizer.sim.wrench import Wrench, WrenchNoise, WrenchSensor, plumb_weigh

__all__ = [
    'ARM_JOINTS',
    'CAMERAS',
    'ArmParams',
    'CameraError',
    'CameraRig',
    'CameraSpec',
    'CartonPlacement',
    'CartonShift',
    'CartonTruth',
    'Cell',
    'CellError',
    'CellOptions',
    'CupBlock',
    'Frame',
    'GripperParams',
    'GroundTruth',
    'Intrinsics',
    'PalletParams',
    'SceneError',
    'SceneOptions',
    'SealResult',
    'SealStatus',
    'Servo',
    'ServoError',
    'ServoGains',
    'StabilityError',
    'StabilityProtocol',
    'StabilityReport',
    'Suction',
    'T_world_dhbase',
    'TrackResult',
    'Trajectory',
    'TrialResult',
    'Wrench',
    'WrenchNoise',
    'WrenchSensor',
    'block_capacity',
    'build_scene_spec',
    'build_scene_xml',
    'compile_scene',
    'plan_cup_block',
    'plumb_weigh',
    'run_protocol',
    'scene_spec',
]
