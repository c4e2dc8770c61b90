"""Pick and place on the simulated cell, in process: core motion plans tracked by the cell's servos.

The same steps the trajectory_executor node performs through FollowJointTrajectory and SetIO:
plan and check the whole move first, then execute it, switch the vacuum, verify.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from palletizer.core.contracts import (
    FailureCause,
    HeightMap,
    Observation,
    PackageSpec,
    PlacementPlan,
)
from palletizer.core.episode import MotionOutcome
from palletizer.core.motion import (
    AABB,
    CartonPose,
    CollisionWorld,
    Grasp,
    HeightField,
    MotionPlanner,
    MotionResult,
    placed_box,
)
from palletizer.sim.servo import Trajectory

__all__ = ['SimExecutor']


class _Tracking(Exception):
    """The servo could not follow the trajectory."""


def _cause(name: str | None) -> FailureCause:
    return FailureCause(name) if name else FailureCause.ik_unreachable


class SimExecutor:
    """ExecutorPort over a Cell: speed 0 = fast-forward, > 0 = servo-tracked trajectories."""

    def __init__(
        self,
        cell,
        planner: MotionPlanner,
        heightmap: Callable[[], HeightMap],
        static_boxes: tuple[AABB, ...] = (),
        speed: float = 0.0,
    ) -> None:
        self.cell = cell
        self.motion = planner
        self.heightmap = heightmap
        self.static_boxes = static_boxes
        self.speed = speed
        self.grasp: Grasp | None = None
        # Cartons placed since the last perceived height map (the sequencer's rule).
        self.placed: list[AABB] = []
        # [rad] joint tracking error that aborts a move: the cell bridge's default
        # FollowJointTrajectory path tolerance, so both wirings stop on the same events
        self.path_tolerance_rad = 0.1
        self.tracking_error_m = 0.0  # worst TCP tracking error seen [m]
        self.motion_time_s = 0.0  # trajectory time executed [s]

    def _world(self, hm: HeightMap | None = None) -> CollisionWorld:
        hf = HeightField.from_height_map(hm if hm is not None else self.heightmap())
        return CollisionWorld(hf, self.static_boxes, tuple(self.placed))

    def _run(self, traj) -> None:
        t = Trajectory(
            np.asarray(traj.t), np.asarray(traj.q), np.asarray(traj.qd), np.asarray(traj.qdd)
        )
        res = self.cell.track(t, speed=self.speed)
        self.tracking_error_m = max(self.tracking_error_m, float(res.max_tcp_error))
        self.motion_time_s += float(t.t[-1])
        if float(np.max(res.max_joint_error)) > self.path_tolerance_rad:
            # Like a controller's path tolerance: the arm or its load hit something the checks
            # did not model (arm links, walls), and the episode cannot go on from here.
            raise _Tracking(
                f'a joint left its path by {float(np.max(res.max_joint_error)):.3f} rad '
                f'(TCP {res.max_tcp_error * 1000:.0f} mm, {res.saturated_steps} torque-saturated '
                'steps): something was hit'
            )

    def _refused(self, plan: MotionResult, holding: bool) -> MotionOutcome:
        where = plan.failing_name or (
            f'waypoint {plan.failing_waypoint}'
            if plan.failing_waypoint is not None
            else 'the plan'
        )
        return MotionOutcome(
            False,
            _cause(plan.cause),
            f'{plan.message} (at {where})',
            holding=holding,
            details={'failing_waypoint': plan.failing_waypoint},
        )

    def pick(self, observation: Observation) -> MotionOutcome:
        return self._guarded(self._pick, observation)

    def place(self, plan: PlacementPlan, spec: PackageSpec, heightmap: HeightMap) -> MotionOutcome:
        return self._guarded(self._place, plan, spec, heightmap)

    def return_to_source(self, observation: Observation) -> MotionOutcome:
        """Put the held carton back where it was observed."""
        return self._guarded(self._return_to_source, observation)

    def _guarded(self, fn, *args) -> MotionOutcome:
        try:
            return fn(*args)
        except _Tracking as exc:
            return MotionOutcome(False, FailureCause.collision, str(exc), holding=False)

    def _pick(self, observation: Observation) -> MotionOutcome:
        x, y, z = observation.position
        carton = CartonPose(x, y, z, observation.yaw, tuple(observation.dims_guess))
        plan = self.motion.plan_pick(self.cell.q, carton, self._world())
        if not plan.ok:
            return self._refused(plan, holding=False)
        self._run(plan.trajectory)
        seal = self.cell.set_vacuum(True)
        if not seal.sealed:
            return MotionOutcome(
                False, FailureCause.grasp_slip, f'the cups did not seal: {seal.status.value}'
            )
        self._run(plan.retreat)
        if self.cell.suction.held is None:
            return MotionOutcome(False, FailureCause.grasp_slip, 'the carton dropped on the lift')
        self.grasp = plan.grasp
        ratio = seal.capacity_n / seal.required_n if seal.required_n else 0.0
        return MotionOutcome(
            True, details={'active_cups': int(seal.n_cups), 'grip_capacity_ratio': round(ratio, 2)}
        )

    def _place(
        self, plan: PlacementPlan, spec: PackageSpec, heightmap: HeightMap
    ) -> MotionOutcome:
        assert self.grasp is not None, 'place() before a successful pick()'
        x, y, z = plan.position
        target = CartonPose(x, y, z, plan.yaw, tuple(spec.dims_m))
        motion = self.motion.plan_place(self.cell.q, target, self.grasp, self._world(heightmap))
        if not motion.ok:
            return self._refused(motion, holding=True)
        self._run(motion.trajectory)
        self.cell.set_vacuum(False)
        self.placed.append(placed_box(x, y, z, plan.yaw, tuple(spec.dims_m)))
        self._run(motion.retreat)
        if self.cell.suction.held is not None:
            return MotionOutcome(False, FailureCause.grasp_slip, 'still holding after release')
        self.grasp = None
        return MotionOutcome(True, details={'reach_residual_m': 0.0})

    def _return_to_source(self, observation: Observation) -> MotionOutcome:
        """Put the held carton back where it was observed."""
        if self.grasp is None:
            return MotionOutcome(True)
        x, y, z = observation.position
        target = CartonPose(x, y, z, observation.yaw, tuple(observation.dims_guess))
        motion = self.motion.plan_place(self.cell.q, target, self.grasp, self._world())
        if not motion.ok:
            return self._refused(motion, holding=True)
        self._run(motion.trajectory)
        self.cell.set_vacuum(False)
        self._run(motion.retreat)
        self.grasp = None
        return MotionOutcome(True)
