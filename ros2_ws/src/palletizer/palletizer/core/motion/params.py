"""Motion parameters: Cartesian speeds, transit heights, path resolution and controller rate."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

from palletizer.core.motion.errors import MotionError
from palletizer.core.motion.kinematics import JointLimits

__all__ = ['MotionParams']


@dataclass(frozen=True)
class MotionParams:
    """Everything a tool-down Cartesian plan needs besides the kinematics.

    Speeds [m/s], [rad/s]; accelerations [m/s^2]; jerks [m/s^3]; heights [m] in world z unless
    named otherwise. Defaults cite cell-facts §3.11 ("new" generation) or say why they were chosen.
    """

    cartesian_speed: float = 1.50  # transit, box in the air (§3.11 new generation)
    approach_speed: float = 0.30  # final descent to seal / release (§3.11)
    angular_speed: float = 3.00  # tool yaw rate (§3.11)
    # A 5 kg carton on a weld-held suction grip moved 1 m at 2 m/s^2 with < 0.05 mm slip
    # (mujoco-notes "Suction"): the tested Cartesian acceleration, kept as the ceiling.
    cartesian_accel: float = 2.0
    # With the cups empty (pick approach, place retract) no carton can slip: only the joint
    # acceleration limits bind; 5 m/s^2 leaves them in charge on every level-11 move.
    empty_accel: float = 5.0
    # Chosen (0.1 s ramp to full acceleration), not measured; scaled with the acceleration
    # of the move (empty cups). Only the jerk-limited (ruckig) timing uses it.
    cartesian_jerk: float = 20.0
    # Timing: False = time-optimal along each path (every joint's speed and acceleration
    # limit applied point by point, jerk not bounded, corners rounded); True = ruckig on each
    # segment's path coordinate (jerk-limited, corners stopped at). `scripts/bench motion`
    # measures both: the jerk-limited moves take longer (motion_s_jerk_limited).
    jerk_limited: bool = False
    transit_height: float = 0.94  # minimum cruise z (§3.11)
    # Crossing moves keep the TCP this far from the base's vertical axis [m]: the empty arm
    # first failed to hold a pose at 0.373 m and held every pose from 0.447 m (cell-facts §1.5);
    # a straight truck-to-pallet cross passed 0.21 m from the axis and had no IK (level 33).
    base_clearance: float = 0.45
    place_clearance: float = 0.18  # above the seal / release pose before the final descent (§3.11)
    stack_clearance: float = 0.22  # carried load bottom above the tallest stack (§3.11)
    drop_clearance: float = 0.002  # release height above the support (§3.11)
    cup_gap: float = 0.0015  # cup face to lid at sealing (§3.10)
    deck_z: float = 0.144  # pallet deck top (cell-facts §3.2)
    path_step: float = 0.005  # [m] Cartesian resolution of the dense IK path
    path_step_yaw: float = math.radians(1.0)  # [rad] yaw resolution of the dense IK path
    # Largest joint change between successive dense samples. 5 mm / 1 deg moves a joint by
    # ~0.02 rad away from singularities; a branch flip moves one by ~pi.
    max_joint_step: float = 0.10
    rate_hz: float = 500.0  # controller sampling rate (UR e-series runs 500 Hz)
    # Overlap depth below which a contact is not a collision: a picked carton starts resting on
    # its source (0 mm), and the release leaves 2 mm of air; 5 mm absorbs lid-height error.
    collision_tolerance: float = 0.005
    # Corners of transit moves are rounded within this distance of the corner (at most 40 %
    # of either leg) instead of stopped at; every sample is still checked, and a rounded path
    # that fails a check is planned again with stops. 0 turns rounding off.
    blend_radius: float = 0.10
    # Safety share of the joint acceleration budget kept for the path-curvature term
    # q''(s) sdot^2 when choosing the path-coordinate limits (verified on samples afterwards);
    # ruckig timing only: the time-optimal one bounds that term point by point.
    curvature_share: float = 0.3
    limits: JointLimits = field(default_factory=JointLimits)

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name == 'limits':
                continue
            value = getattr(self, f.name)
            if not isinstance(value, int | float) or not math.isfinite(value):
                raise MotionError(f'MotionParams.{f.name} = {value!r}; expected a finite number')
            if f.name != 'deck_z' and value < 0:
                raise MotionError(f'MotionParams.{f.name} = {value!r}; expected >= 0')
        for name in (
            'cartesian_speed',
            'approach_speed',
            'angular_speed',
            'cartesian_accel',
            'empty_accel',
            'cartesian_jerk',
            'path_step',
            'path_step_yaw',
            'max_joint_step',
            'rate_hz',
        ):
            if getattr(self, name) <= 0:
                raise MotionError(f'MotionParams.{name} = {getattr(self, name)!r}; expected > 0')
        if not 0.0 < self.curvature_share < 1.0:
            raise MotionError(
                f'MotionParams.curvature_share = {self.curvature_share!r}; expected in (0, 1)'
            )
