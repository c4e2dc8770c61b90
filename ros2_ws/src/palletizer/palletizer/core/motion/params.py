"""Motion parameters: Cartesian speeds, transit heights, path resolution and controller rate."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

from palletizer.core.config.cell import CellConfig
from palletizer.core.contracts import EUR_DECK_Z
from palletizer.core.motion.errors import MotionError
from palletizer.core.motion.kinematics import JointLimits

__all__ = ['TIMINGS', 'TRANSITS', 'MotionParams']

# The time parameterisations MotionParams.timing selects (see there).
TIMINGS = ('jerk_limited', 'time_optimal', 'ruckig')
# The paths MotionParams.transit selects for a plan's cross (see there).
TRANSITS = ('cartesian', 'joint')


@dataclass(frozen=True)
class MotionParams:
    """Everything a tool-down Cartesian plan needs besides the kinematics.

    Speeds [m/s], [rad/s]; accelerations [m/s^2]; jerks [m/s^3]; heights [m] in world z unless
    named otherwise. Defaults cite docs/cell.md §3.11 (the reference's "new" generation) or say
    why they were chosen; they equal configs/cell.yaml, which the wirings read through
    `from_config`.
    """

    cartesian_speed: float = 1.50  # transit, box in the air (docs/cell.md §3.11, new generation)
    # Final descent to seal / release. It ends at rest (braking in its last 4 cm); 0.30
    # (docs/cell.md §3.11) -> 0.50 kept every level-11-15 and 21-23 seed-1 placement within
    # 0.17 mm; 0.80 level 11 seeds 1-10 within 0.29 mm (configs/cell.yaml).
    approach_speed: float = 0.80
    angular_speed: float = 3.00  # tool yaw rate (docs/cell.md §3.11)
    # With a carton in the cups. The grip holds m (g + a) within its 1.5 safety factor up to
    # a = 0.5 g; 3.0 m/s^2 keeps the load factor at 1.31 (mujoco-notes tested 2.0: < 0.05 mm
    # slip). Levels 11-15, 21-23 seed 1 at speed 1: same placements and errors as at 2.0.
    cartesian_accel: float = 3.0
    # With the cups empty (pick approach, place retract) no carton can slip: only the joint
    # acceleration limits bind; 5 m/s^2 leaves them in charge on every level-11 move.
    empty_accel: float = 5.0
    # Chosen (0.1 s ramp to full acceleration), not measured; scaled with the acceleration
    # of the move (empty cups). Only the 'ruckig' timing uses it.
    cartesian_jerk: float = 20.0
    # Timing along each path (TIMINGS): 'jerk_limited' = time-optimal (every joint's speed and
    # acceleration limit applied point by point, corners rounded), then smoothed so every
    # joint stays within its jerk limit; 'time_optimal' = the same unsmoothed (jerk not
    # bounded); 'ruckig' = ruckig on each segment's path coordinate with one set of limits per
    # segment (jerk-limited, corners stopped at). `scripts/bench motion` measures all three.
    timing: str = 'jerk_limited'
    # The cross between a plan's vertical rise and descent (TRANSITS): 'cartesian' = straight
    # lines in the world, round the base through vias; 'joint' = the straight line in joint
    # space between the configurations the Cartesian plan has at the cross's ends, its corners
    # rounded (joint_transit.py), used where it passes every check and is the faster of the
    # two; otherwise the Cartesian cross.
    transit: str = 'cartesian'
    transit_height: float = 0.94  # minimum cruise z (docs/cell.md §3.11)
    # Crossing moves keep the TCP this far from the base's vertical axis [m]: the empty arm
    # first failed to hold a pose at 0.373 m and held every pose from 0.447 m
    # (docs/levels.md §1.5);
    # a straight truck-to-pallet cross passed 0.21 m from the axis and had no IK (level 33).
    base_clearance: float = 0.45
    # The arm's mount, for the wrist-vs-mount check (base frame, [m]): the pedestal under the
    # base (configs/cell.yaml robot.pedestal.radius), the base link up to the shoulder (UR10e
    # base 190 mm across, shoulder at d1 = 0.181), and the wrist links' radius with 15 mm air.
    pedestal_radius: float = 0.24
    base_radius: float = 0.095
    shoulder_height: float = 0.181
    link_radius: float = 0.075
    # Air the forearm and wrist capsules (the self-filter's, Menagerie's UR10e) keep from the
    # furniture boxes (CollisionWorld.arm_boxes) [m]: level 12 seeds 1 and 11 drove wrist 2 into
    # the pick table's corner, 2 mm deep, placing at the pallet corner beside it. The capsules
    # are at least the simulated arm's collision geoms (the forearm's 58 mm radius along its
    # whole length, the cell's 43 mm past the elbow). 15 mm refused the low truck picks beside
    # the auxiliary table at 13.9-14.8 mm (level 33 seeds 14, 15 and 17, ended `collision`); 10
    # mm still refuses the level 12 drives by 12 mm. The reach table was built at 15 mm
    # (configs/reach_ur10e.yaml): it keeps the planners a little inside what the arm clears.
    # Since the capsules hold the whole simulated wrist 1 and 2 (level 15 seed 1 drove wrist 2
    # into the pick table's corner, which the shorter capsule kept 10-15 mm from), the level 33
    # seed 15 pick keeps 9.5 mm: 8 mm passes it and still refuses the level 12 and 15 drives.
    arm_margin: float = 0.008
    # The heaviest carton the arm may carry [kg]: the UR10e's 12.5 kg payload less the VGP20's
    # 2.55 kg (configs/cell.yaml robot.payload_kg, gripper.mass_kg). A cup block other than the
    # rule's, tried where the rule's strikes something, must hold it (grasp_alternatives): the
    # carton is weighed only once lifted.
    max_carton_kg: float = 9.95
    # Above the seal / release pose before the final descent (docs/cell.md §3.11).
    place_clearance: float = 0.18
    # Carried load bottom above the tallest stack (docs/cell.md §3.11).
    stack_clearance: float = 0.22
    drop_clearance: float = 0.002  # release height above the support (docs/cell.md §3.11)
    cup_gap: float = 0.0015  # cup face to lid at sealing (docs/cell.md §3.10)
    deck_z: float = EUR_DECK_Z  # pallet deck top (docs/cell.md §3.2)
    path_step: float = 0.005  # [m] Cartesian resolution of the dense IK path
    path_step_yaw: float = math.radians(1.0)  # [rad] yaw resolution of the dense IK path
    # Largest joint change between successive dense samples. 5 mm / 1 deg moves a joint by
    # ~0.02 rad away from singularities; a branch flip moves one by ~pi.
    max_joint_step: float = 0.10
    rate_hz: float = 500.0  # controller sampling rate (UR e-series runs 500 Hz)
    # Overlap depth below which a contact is not a collision: a picked carton starts resting on
    # its source (0 mm), and the release leaves 2 mm of air; 5 mm absorbs lid-height error.
    collision_tolerance: float = 0.005
    # How far a perceived height map may read above the true surface (its measured error):
    # the map is lowered by this much before the swept carton is checked against it, so a
    # release 2 mm above a noisy lid is not refused as a collision (configs/cell.yaml motion).
    map_margin: float = 0.010
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
        if self.timing not in TIMINGS:
            raise MotionError(
                f'MotionParams.timing = {self.timing!r}; expected one of {", ".join(TIMINGS)}'
            )
        if self.transit not in TRANSITS:
            raise MotionError(
                f'MotionParams.transit = {self.transit!r}; expected one of {", ".join(TRANSITS)}'
            )
        for f in fields(self):
            if f.name in ('limits', 'timing', 'transit'):
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

    @classmethod
    def from_config(cls, cell: CellConfig, **overrides: Any) -> MotionParams:
        """Parameters from configs/cell.yaml (`motion`, robot limits, gripper cup gap, pallet
        deck, control rate); `overrides` replace single fields."""
        m, r = cell.motion, cell.robot
        limits = JointLimits(
            lower=r.joint_lower,
            upper=r.joint_upper,
            velocity=tuple(math.radians(v) for v in r.joint_speed_limits_deg_s),
            acceleration=m.joint_accel_limits,
            jerk=m.joint_jerk_limits,
        )
        values: dict[str, Any] = {
            'cartesian_speed': m.cartesian_speed,
            'approach_speed': m.approach_speed,
            'cartesian_accel': m.cartesian_accel,
            'empty_accel': m.empty_accel,
            'transit_height': m.transit_height,
            'place_clearance': m.place_clearance,
            'stack_clearance': m.stack_clearance,
            'drop_clearance': m.drop_clearance,
            'blend_radius': m.blend_radius,
            'map_margin': m.map_margin,
            'timing': m.timing,
            'transit': m.transit,
            'pedestal_radius': r.pedestal.radius,
            'max_carton_kg': r.payload_kg - cell.gripper.mass_kg,
            'cup_gap': cell.gripper.cup_gap,
            'deck_z': cell.pallet.deck_z,
            'rate_hz': cell.physics.control_rate_hz,
            'limits': limits,
        }
        values.update(overrides)
        return cls(**values)
