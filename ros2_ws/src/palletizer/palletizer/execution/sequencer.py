"""Pick and place as a sequence of controller goals: plan and check first, then move, switch, verify.

Talks to the arm only through an ArmPort (a FollowJointTrajectory client, a SetIO client and
the wrench and joint-state streams in the node), so the same logic drives the simulated cell
and a real UR driver.

Why one file of this length: a pick and a place are each one ordered sequence of goals and
checks with shared recovery (release, retreat, verify), read top to bottom.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

import numpy as np

from palletizer.core.contracts import HeightMap, Observation, PackageSpec, PlacementPlan
from palletizer.core.motion import (
    AABB,
    CarriedLoad,
    CartonPose,
    CollisionWorld,
    Grasp,
    HeightField,
    JointTrajectory,
    MotionError,
    MotionPlanner,
    MotionResult,
    UR10eKinematics,
    placed_box,
    plan_grasp,
)
from palletizer.core.motion.path import wrap_pi
from palletizer.core.vocab import CyclePhase
from palletizer.execution.park import Parked, ParkPose, plan_park, plan_unpark
from palletizer.execution.wrench import (
    ForceReading,
    Verdict,
    VerifyParams,
    verify_hold,
    verify_release,
)

__all__ = [
    'ArmPort',
    'ExecResult',
    'FollowResult',
    'Outcome',
    'PickPlaceSequencer',
    'controller_cause',
    'arrival_timeline',
    'cycle_phase',
]

Feedback = Callable[[str, float], None]


class Outcome(Enum):
    """How an action ended; names match the result constants of Pick, Place and MoveArm (the
    executor band, docs/interfaces.md §9.2)."""

    OK = 'ok'
    IK_UNREACHABLE = 'ik_unreachable'
    COLLISION = 'collision'
    GRASP_SLIP = 'grasp_slip'
    CONTROLLER_FAILED = 'controller_failed'
    # The goal itself is malformed: the node's message conversion refused it before the
    # sequencer saw it (the sequencer never returns this).
    INVALID_REQUEST = 'invalid_request'


# Planner refusals in the closed failure vocabulary -> outcome.
_REFUSED = {
    'ik_unreachable': Outcome.IK_UNREACHABLE,
    'collision': Outcome.COLLISION,
    'grasp_slip': Outcome.GRASP_SLIP,
}


@dataclass(frozen=True)
class FollowResult:
    """A FollowJointTrajectory goal's end: ok, the controller's error_code and error_string."""

    ok: bool
    error_code: int = 0
    message: str = ''
    cause: str | None = None  # the failure cause when the port knows it better than the code


class ArmPort(Protocol):
    """The arm as the UR driver exposes it."""

    def joint_positions(self) -> np.ndarray | None:
        """Latest joint positions (6,) [rad] in the planner's joint order; None before any."""

    def follow(self, traj: JointTrajectory, progress: Callable[[float], None]) -> FollowResult:
        """Execute one goal, blocking; `progress` gets the controller's time from start [s]."""

    def set_vacuum(self, on: bool) -> FollowResult:
        """Switch the vacuum output; ok when the controller set it."""

    def wrench_after_motion(self) -> ForceReading | None:
        """Mean force at the still end of the last follow(); None when no sample came."""

    def vacuum_holding(self) -> bool | None:
        """The gripper's vacuum sensor: something sealed on the cups; None when unknown."""


@dataclass(frozen=True)
class ExecResult:
    """The outcome of a pick or place and what its action result reports.

    cause: closed failure vocabulary ('' when ok); failing_waypoint: -1 when none;
    motion_s: controller trajectory time executed [s].
    """

    outcome: Outcome
    message: str = ''
    cause: str = ''
    failing_waypoint: int = -1
    active_cups: int = 0
    grip_capacity_ratio: float = 0.0
    reach_residual_m: float = 0.0
    motion_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.OK


# Waypoint names of core.motion plans -> the feedback phase vocabulary of the actions.
_PHASE = {
    'rise': 'rise',
    'cross': 'cross',
    'around': 'cross',  # via points that arc a cross around the base axis
    'pre_seal': 'descend',
    'seal': 'descend',
    'pre_release': 'descend',
    'release': 'descend',
    'lift': 'lift',
    'retract': 'retract',
}


# Feedback phases that name the same part of the cycle in a pick and in a place. A still
# dwell at a goal's end (the wrench reading) is `dwell` in both.
_CYCLE_BOTH = {'dwell': CyclePhase.dwell}
_CYCLE_PICK = {
    'descend': CyclePhase.descend,
    'seal': CyclePhase.seal,
    'lift': CyclePhase.lift,
    'verify': CyclePhase.lift,
}
_CYCLE_PLACE = {
    'descend': CyclePhase.place,
    'release': CyclePhase.release,
    'retract': CyclePhase.retract,
    'verify': CyclePhase.retract,
}


def cycle_phase(feedback_phase: str, placing: bool) -> CyclePhase:
    """The carton-cycle phase (core.cycle) of a pick's or a place's feedback phase.

    A pick's travel before its descent (rise, cross, out of the photo park) is the empty arm's
    return to the source; a place's travel before its descent is its cross.
    """
    table = _CYCLE_PLACE if placing else _CYCLE_PICK
    found = _CYCLE_BOTH.get(feedback_phase) or table.get(feedback_phase)
    if found is not None:
        return found
    return CyclePhase.cross if placing else CyclePhase.return_


def arrival_timeline(
    traj: JointTrajectory, waypoints: tuple, kin: UR10eKinematics
) -> tuple[tuple[float, str], ...]:
    """(end time [s], phase) per waypoint from where the TCP passes it.

    Each sample's TCP is projected on the waypoint polyline; a waypoint is reached at the
    first sample whose distance along the polyline gets there (a rounded corner is passed
    at its middle, with no stop). A turn-only waypoint ends with the one before it.
    """
    phases = tuple(_PHASE.get(w.name, w.name) for w in waypoints)
    if not phases or len(traj.t) < 2:
        return ((traj.duration, phases[-1] if phases else ''),)
    tcp = kin.fk(np.asarray(traj.q))[:, :3, 3]
    verts = np.vstack([tcp[0], [(w.x, w.y, w.z) for w in waypoints]])
    legs = np.diff(verts, axis=0)
    length = np.linalg.norm(legs, axis=1)
    start = np.concatenate([[0.0], np.cumsum(length)])
    best = np.full(len(tcp), np.inf)
    along = np.zeros(len(tcp))
    for j, (a, ab) in enumerate(zip(verts[:-1], legs, strict=True)):
        u = np.clip(((tcp - a) @ ab) / max(float(ab @ ab), 1e-18), 0.0, 1.0)
        d = np.linalg.norm(tcp - (a + u[:, None] * ab), axis=1)
        closer = d < best
        best[closer] = d[closer]
        along[closer] = start[j] + u[closer] * length[j]
    along = np.maximum.accumulate(along)
    t = np.asarray(traj.t)
    ends = []
    for k in range(len(phases)):
        reached = np.flatnonzero(along >= start[k + 1] - 1e-3)
        ends.append(float(t[reached[0]]) if len(reached) else traj.duration)
    ends[-1] = traj.duration
    return tuple(zip(np.maximum.accumulate(ends).tolist(), phases, strict=True))


def _phase_at(timeline: tuple[tuple[float, str], ...], t: float) -> str:
    for end, phase in timeline:
        if t <= end:
            return phase
    return timeline[-1][1]


class PickPlaceSequencer:
    """The executor's behaviour: pick and place over an ArmPort with checked core.motion plans.

    Nothing moves unless the whole plan (approach and lift / retract) passed the checks. The
    tare is the wrench at the still seal pose just before the vacuum goes on; the hold after
    the lift and the release after the retract are judged against it. With use_wrench False
    (a fast-forward cell, whose arm jumps without physics, so its wrench is not a static
    reading) the gripper's vacuum sensor judges instead. pick_rise [m]: how far above its lid
    a picked carton's bottom rises before it moves across (execution.layout.pick_rise).
    """

    def __init__(
        self,
        arm: ArmPort,
        planner: MotionPlanner | None = None,
        static_boxes: tuple[AABB, ...] = (),
        verify: VerifyParams | None = None,
        use_wrench: bool = True,
        arm_boxes: tuple[AABB, ...] = (),
        pick_rise: float = 0.0,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.arm = arm
        # The arm's sim time [s]: with one, each action leaves its feedback phases with the
        # times they began in `marks` (where a port's progress is not called as it goes, the
        # times come from the trajectory's arrival timeline).
        self.clock = clock
        self.marks: list[tuple[str, float]] = []
        self.pick_rise = pick_rise
        self.motion = planner or MotionPlanner()
        self.static_boxes = static_boxes
        self.arm_boxes = arm_boxes
        self.verify = verify or VerifyParams()
        self.use_wrench = use_wrench
        self.grasp: Grasp | None = None
        self.tare: ForceReading | None = None
        self.held_dims: tuple[float, float, float] | None = None  # carton in the cups [m]
        # [rad] tool yaw less the carton frame's yaw (the observed one, which its weighed CoG
        # is in) at the pick: the place keeps it, so the frame ends at the planned yaw.
        self.held_turn: float | None = None
        self.parked: Parked | None = None  # the photo park the next motion first leaves
        self.park_pose: ParkPose | None = None
        # Cartons placed since the last height map: obstacles for the moves until a new one.
        self.placed: list[AABB] = []
        # Cartons placed off the height map's area (set aside on the auxiliary table): no map
        # shows them, so they stay obstacles until a pick takes them back. Level 16 seed 10:
        # forgotten at the next map, a carried carton was swept through a set-aside one.
        self.off_map: list[AABB] = []

    def new_episode(self) -> None:
        """The cell was reset: nothing is held, parked or placed since the last height map."""
        self.grasp, self.tare, self.held_dims, self.held_turn = None, None, None, None
        self.parked = None
        self.placed = []
        self.off_map = []

    def heightmap_updated(self) -> None:
        """A new height map arrived: it shows the cartons placed so far."""
        self.placed = []

    def world(self, heightmap: HeightMap | None) -> CollisionWorld:
        """The collision world of a move: the height map (flat when None), the static boxes,
        the cartons no map shows yet (placed since it, or off its area) and the arm's boxes."""
        hm = heightmap if heightmap is not None else HeightMap.flat()
        field = HeightField.from_height_map(hm, margin=self.motion.params.map_margin)
        placed = tuple(self.placed) + tuple(self.off_map)
        return CollisionWorld(field, self.static_boxes, placed, self.arm_boxes)

    # Actions ----------------------------------------------------------------------------------
    def pick(
        self,
        observation: Observation,
        heightmap: HeightMap | None = None,
        feedback: Feedback | None = None,
    ) -> ExecResult:
        """Approach, vacuum on, lift, verify the hold from the wrench."""
        self.marks = []
        fb = self._marking(feedback)
        q = self.arm.joint_positions()
        if q is None:
            return _controller('no joint state received yet')
        fail, q = self._unpark(q, heightmap, fb)
        if fail is not None:
            return fail
        x, y, z = observation.position
        # A carton taken back from off the map is no longer an obstacle of its own pick.
        self.off_map = [b for b in self.off_map if not _contains_xy(b, x, y)]
        try:
            carton = CartonPose(x, y, z, observation.yaw, observation.dims_guess)
            plan = self.motion.plan_pick(q, carton, self.world(heightmap), rise=self.pick_rise)
        except MotionError as exc:
            return ExecResult(Outcome.IK_UNREACHABLE, str(exc), 'ik_unreachable')
        if not plan.ok:
            return _refused(plan)
        assert plan.trajectory is not None and plan.retreat is not None and plan.grasp is not None
        n_app = len(plan.waypoints) - 1
        total = plan.trajectory.duration + plan.retreat.duration
        motion = 0.0
        fail = self._move(plan.trajectory, plan.waypoints[:n_app], 0.0, total, fb)
        if fail is not None:
            return fail
        motion += plan.trajectory.duration
        tare = self.arm.wrench_after_motion() if self.use_wrench else None
        if tare is None and self.use_wrench:
            return _controller('no wrench sample after the approach', motion)
        fb('seal', _frac(motion, total))
        io = self.arm.set_vacuum(True)
        if not io.ok:
            return _vacuum_refused(f'vacuum on refused: {io.message}', motion)
        fail = self._move(plan.retreat, plan.waypoints[n_app:], motion, total, fb)
        if fail is not None:
            return fail
        motion += plan.retreat.duration
        fb('verify', 1.0)
        verdict = self._held_after_lift(tare)
        if verdict is None:
            return _controller('no wrench or vacuum reading after the lift', motion)
        if not verdict.ok:
            return ExecResult(Outcome.GRASP_SLIP, verdict.message, 'grasp_slip', motion_s=motion)
        self.grasp, self.tare = plan.grasp, tare
        self.held_dims = observation.dims_guess
        self.held_turn = wrap_pi(plan.waypoints[-1].yaw - observation.yaw)
        ratio = plan.grasp.capacity_ratio
        return ExecResult(
            Outcome.OK,
            verdict.message,
            active_cups=plan.grasp.n_cups,
            grip_capacity_ratio=0.0 if ratio is None else float(ratio),
            motion_s=motion,
        )

    def place(
        self,
        plan: PlacementPlan,
        spec: PackageSpec,
        heightmap: HeightMap,
        feedback: Feedback | None = None,
    ) -> ExecResult:
        """Approach the release pose, vacuum off, retract, verify the release from the wrench."""
        self.marks = []
        fb = self._marking(feedback)
        q = self.arm.joint_positions()
        if q is None:
            return _controller('no joint state received yet')
        fail, q = self._unpark(q, heightmap, fb)
        if fail is not None:
            return fail
        L, W, _ = spec.dims_m
        x, y, z = plan.position
        self.held_dims = spec.dims_m
        try:
            grasp = self.grasp if self.grasp is not None else plan_grasp(L, W, spec.mass_kg)
            target = CartonPose(x, y, z, plan.yaw, spec.dims_m)
            motion_plan = self.motion.plan_place(
                q, target, grasp, self.world(heightmap), held_turn=self.held_turn
            )
        except MotionError as exc:
            return ExecResult(Outcome.IK_UNREACHABLE, str(exc), 'ik_unreachable')
        if not motion_plan.ok:
            return _refused(motion_plan)
        app, ret = motion_plan.trajectory, motion_plan.retreat
        assert app is not None and ret is not None
        n_app = len(motion_plan.waypoints) - 1
        total = app.duration + ret.duration
        fail = self._move(app, motion_plan.waypoints[:n_app], 0.0, total, fb)
        if fail is not None:
            return fail
        motion = app.duration
        loaded = self.arm.wrench_after_motion() if self.use_wrench else None
        fb('release', _frac(motion, total))
        io = self.arm.set_vacuum(False)
        if not io.ok:
            return _vacuum_refused(f'vacuum off refused: {io.message}', motion)
        box = placed_box(x, y, z, plan.yaw, spec.dims_m)
        (self.placed if _on_map(heightmap, x, y) else self.off_map).append(box)
        fail = self._move(ret, motion_plan.waypoints[n_app:], motion, total, fb)
        if fail is not None:
            return fail
        motion += ret.duration
        verdict = self._released(loaded)
        if verdict is None:
            return _controller('no wrench or vacuum reading around the release', motion)
        if not verdict.ok:
            return ExecResult(Outcome.GRASP_SLIP, verdict.message, 'grasp_slip', motion_s=motion)
        self.grasp, self.tare, self.held_dims, self.held_turn = None, None, None, None
        return ExecResult(Outcome.OK, verdict.message, motion_s=motion)

    def park(
        self,
        heightmap: HeightMap | None,
        pose: ParkPose | None = None,
        feedback: Feedback | None = None,
    ) -> ExecResult:
        """Tool-down Cartesian move to the photo park pose (rise first), checked as a whole.

        A held carton (between pick and place) travels along and is part of the checks.
        """
        parked: list[Parked | None] = [None]

        def plan(q: np.ndarray) -> MotionResult:
            result, parked[0] = plan_park(
                self.motion, q, pose, self.world(heightmap), self._load()
            )
            return result

        out = self._simple_move(plan, feedback, 'already parked or out of the photos', 'parked')
        if out.ok and out.motion_s > 0:
            self.parked, self.park_pose = parked[0], pose
        return out

    def hover(
        self,
        heightmap: HeightMap | None,
        pose: tuple[float, float, float, float],
        feedback: Feedback | None = None,
    ) -> ExecResult:
        """Empty-arm tool-down Cartesian move to hover at pose (x, y, z [m], yaw [rad]; above
        the source station), checked as a whole; refused while a carton is held."""
        if self.grasp is not None:
            return ExecResult(
                Outcome.CONTROLLER_FAILED, 'hover refused: a carton is held; place it first'
            )
        x, y, z, yaw = pose

        def plan(q: np.ndarray) -> MotionResult:
            return self.motion.plan_hover(q, x, y, z, self.world(heightmap), yaw)

        out = self._simple_move(plan, feedback, 'already hovering', 'hovering')
        if out.ok and out.motion_s > 0:
            self.parked = None  # the arm has left any photo park
        return out

    def _simple_move(
        self,
        plan: Callable[[np.ndarray], MotionResult],
        feedback: Feedback | None,
        idle: str,
        done: str,
    ) -> ExecResult:
        """Plan from the current joints, refuse what fails its checks, else run it as one goal.
        `idle`: the message when nothing needs to move; `done`: after moving."""
        fb = feedback or (lambda phase, progress: None)
        q = self.arm.joint_positions()
        if q is None:
            return _controller('no joint state received yet')
        try:
            result = plan(q)
        except MotionError as exc:
            return ExecResult(Outcome.IK_UNREACHABLE, str(exc), 'ik_unreachable')
        if not result.ok:
            return _refused(result)
        if result.trajectory is None:
            return ExecResult(Outcome.OK, idle)
        traj = result.trajectory
        fail = self._move(traj, result.waypoints, 0.0, traj.duration, fb)
        if fail is not None:
            return fail
        return ExecResult(Outcome.OK, done, motion_s=traj.duration)

    def _load(self) -> CarriedLoad | None:
        if self.grasp is None or self.held_dims is None:
            return None
        return CarriedLoad(self.held_dims, self.grasp.offset)

    def _unpark(
        self, q: np.ndarray, heightmap: HeightMap | None, fb: Feedback
    ) -> tuple[ExecResult | None, np.ndarray]:
        """Out of the photo park to above the pallet when the arm is still parked: (failure, q).

        The next plan starts at the planned end of this move, as a retreat starts at its
        approach's end, rather than at a joint state that may predate the move.
        """
        parked, self.parked = self.parked, None
        world, load = self.world(heightmap), self._load()
        try:
            plan = plan_unpark(self.motion, q, parked, self.park_pose, world, load)
        except MotionError as exc:
            return ExecResult(Outcome.IK_UNREACHABLE, str(exc), 'ik_unreachable'), q
        if plan is None:
            return None, q
        if not plan.ok or plan.trajectory is None:
            return _refused(plan), q
        fail = self._move(
            plan.trajectory, plan.waypoints, 0.0, 0.0, lambda phase, _p: fb(phase, 0.0)
        )
        return fail, np.array(plan.trajectory.q[-1], dtype=float)

    # Helpers ----------------------------------------------------------------------------------
    def _mark(self, phase: str, t: float | None = None) -> None:
        if self.clock is None:
            return
        at = self.clock() if t is None else t
        if not self.marks or self.marks[-1][0] != phase:
            self.marks.append((phase, at))

    def _marking(self, feedback: Feedback | None) -> Feedback:
        """The feedback of an action, also marking its discrete steps (seal, release, verify)
        at the clock's time; motion phases are marked by _move."""
        fb = feedback or (lambda phase, progress: None)

        def out(phase: str, progress: float) -> None:
            if phase in ('seal', 'release', 'verify'):
                self._mark(phase)
            fb(phase, progress)

        return out

    def _held_after_lift(self, tare: ForceReading | None) -> Verdict | None:
        if not self.use_wrench:
            held = self.arm.vacuum_holding()
            if held is None:
                return None
            return Verdict(held, 0.0, 0.0, 'holding' if held else 'no seal after the lift')
        loaded = self.arm.wrench_after_motion()
        if loaded is None or tare is None:
            return None
        return verify_hold(tare, loaded, self.verify)

    def _released(self, loaded: ForceReading | None) -> Verdict | None:
        if not self.use_wrench:
            held = self.arm.vacuum_holding()
            if held is None:
                return None
            return Verdict(
                not held, 0.0, 0.0, 'still sealed after the retract' if held else 'released'
            )
        after = self.arm.wrench_after_motion()
        if after is None or (self.tare is None and loaded is None):
            return None
        return verify_release(self.tare, after, self.verify, loaded)

    def _move(
        self,
        traj: JointTrajectory,
        waypoints: tuple,
        done_s: float,
        total_s: float,
        fb: Feedback,
    ) -> ExecResult | None:
        """One controller goal with phase feedback; an ExecResult only when it failed."""
        timeline = arrival_timeline(traj, tuple(waypoints), self.motion.kin)
        t0 = 0.0
        if self.clock is not None:
            t0 = self.clock()
            begin = 0.0
            for end, phase in timeline:
                self._mark(phase, t0 + begin)
                begin = end
        fb(timeline[0][1], _frac(done_s, total_s))
        last_phase, last_frac = timeline[0][1], _frac(done_s, total_s)

        def progress(t: float) -> None:
            nonlocal last_phase, last_frac
            phase, frac = _phase_at(timeline, t), _frac(done_s + min(t, traj.duration), total_s)
            # Forward a phase change at once, progress in steps of 5 %.
            if phase != last_phase or frac >= last_frac + 0.05:
                last_phase, last_frac = phase, frac
                fb(phase, frac)

        res = self.arm.follow(traj, progress)
        if self.clock is not None and self.clock() > t0 + traj.duration + 1e-6:
            # The arm held still after the trajectory (a wrench dwell, a goal-time wait).
            self._mark('dwell', t0 + traj.duration)
        if not res.ok:
            # A port that knows the cause says it in its own words; else the controller's code.
            said = f'trajectory controller error_code {res.error_code}: {res.message}'
            return _controller(
                res.message if res.cause else said,
                done_s,
                res.error_code,
                res.cause,
            )
        return None


def _frac(done: float, total: float) -> float:
    return 0.0 if total <= 0 else max(0.0, min(1.0, done / total))


# FollowJointTrajectory error codes (control_msgs) that say the arm could not follow.
_TOLERANCE_CODES = (-4, -5)  # PATH_TOLERANCE_VIOLATED, GOAL_TOLERANCE_VIOLATED
_REFUSED_CODES = (-1, -2, -3)  # INVALID_GOAL, INVALID_JOINTS, OLD_HEADER_TIMESTAMP


def controller_cause(error_code: int | None) -> str:
    """The closed-vocabulary cause of a controller failure (the action's `cause` field).

    A tolerance abort means the arm was held back on its path: in the cell that is contact,
    so collision. A goal the controller refuses cannot be executed by this arm as planned:
    ik_unreachable. No answer, a cancel or a silent stream: timeout.
    """
    if error_code in _TOLERANCE_CODES:
        return 'collision'
    if error_code in _REFUSED_CODES:
        return 'ik_unreachable'
    return 'timeout'


def _controller(
    message: str,
    motion_s: float = 0.0,
    error_code: int | None = None,
    cause: str | None = None,
) -> ExecResult:
    return ExecResult(
        Outcome.CONTROLLER_FAILED,
        message,
        cause or controller_cause(error_code),
        motion_s=motion_s,
    )


def _vacuum_refused(message: str, motion_s: float) -> ExecResult:
    # The cups cannot be switched: the carton is not held (on) or not let go (off).
    return ExecResult(Outcome.CONTROLLER_FAILED, message, 'grasp_slip', motion_s=motion_s)


def _refused(plan: MotionResult) -> ExecResult:
    outcome = _REFUSED.get(plan.cause or '', Outcome.IK_UNREACHABLE)
    where = ''
    if plan.failing_waypoint is not None:
        name = plan.failing_name
        where = f' (failing waypoint {plan.failing_waypoint}{f" {name}" if name else ""})'
    return ExecResult(
        outcome,
        f'{plan.message}{where}',
        outcome.value,
        -1 if plan.failing_waypoint is None else int(plan.failing_waypoint),
    )


def _contains_xy(box: AABB, x: float, y: float) -> bool:
    """Whether (x, y) [m] lies within the box's footprint."""
    return box.lo[0] <= x <= box.hi[0] and box.lo[1] <= y <= box.hi[1]


def _on_map(heightmap: HeightMap | None, x: float, y: float) -> bool:
    """Whether (x, y) [m] lies on the height map's area (a later map shows what stands there);
    None (no map yet): the pallet's default area."""
    hm = heightmap if heightmap is not None else HeightMap.flat()
    ny, nx = hm.cells.shape
    ox, oy = hm.origin
    return ox <= x <= ox + nx * hm.cell_size and oy <= y <= oy + ny * hm.cell_size
