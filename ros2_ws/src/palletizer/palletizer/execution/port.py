"""The episode loop's executor port over the pick/place sequencer, and the result mapping.

`motion_outcome` is the one mapping of an executor result (ExecResult) to the episode loop's
MotionOutcome; the in-process wiring calls it on the sequencer's results, and a Pick or Place
action result or a MoveArm response converted back to an ExecResult
(execution.messages.exec_result_from_msg) goes through it on the director's side. `return_request` is the place that puts a carton back at the source.
"""

from __future__ import annotations

import dataclasses

from palletizer.core.contracts import (
    FailureCause,
    HeightMap,
    Observation,
    PackageSpec,
    PlacementPlan,
)
from palletizer.core.ports import EpisodeAborted, MotionOutcome
from palletizer.core.vocab import CyclePhase
from palletizer.execution.layout import over_carton
from palletizer.execution.park import ParkPose
from palletizer.execution.sequencer import ExecResult, Outcome, PickPlaceSequencer, cycle_phase

__all__ = ['SequencerExecutor', 'motion_outcome', 'return_request']

# A place refused before anything moved: the carton is still held and another slot may do.
_REPLANNABLE = (Outcome.IK_UNREACHABLE, Outcome.COLLISION)


def motion_outcome(result: ExecResult, placing: bool = False) -> MotionOutcome:
    """The episode loop's view of a pick (placing False) or a place (True).

    A failed place still holds the carton when the plan was refused before any motion
    (ik_unreachable or collision outcomes); a controller failure, a slip or a pick leaves
    nothing known to be held. Details: a pick's active cups and grip capacity ratio (when the
    mass was known), a place's reach residual [m], a failure's failing waypoint (-1: none).

    An invalid request (a goal the executor could not read) is not a failure of the cell: no
    cause of the closed vocabulary fits it and another slot would be sent the same malformed
    goal, so it is never replanned; it raises EpisodeAborted, as the planner's invalid request
    does, and the episode closes as aborted.
    """
    if result.outcome is Outcome.INVALID_REQUEST:
        what = 'place' if placing else 'pick'
        raise EpisodeAborted(f'the executor refused the {what} goal: {result.message}')
    if result.ok:
        if placing:
            return MotionOutcome(True, details={'reach_residual_m': result.reach_residual_m})
        details: dict[str, float | int] = {'active_cups': int(result.active_cups)}
        if result.grip_capacity_ratio > 0:
            details['grip_capacity_ratio'] = round(result.grip_capacity_ratio, 2)
        return MotionOutcome(True, details=details)
    cause = FailureCause(result.cause) if result.cause else FailureCause.grasp_slip
    return MotionOutcome(
        False,
        cause,
        result.message,
        holding=placing and result.outcome in _REPLANNABLE,
        details={'failing_waypoint': int(result.failing_waypoint)},
    )


def return_request(observation: Observation) -> tuple[PlacementPlan, PackageSpec]:
    """The place that returns a held carton to where it was observed: a plan at the observed
    pose on the source's floor (layer 1, slot 'return') and the carton as observed (type
    unknown, 1 kg: the held grasp is kept, so the mass only names a fallback grasp)."""
    plan = PlacementPlan(observation.position, observation.yaw, 1, 'return', 0.0, 0.0, {})
    spec = PackageSpec(observation.package_id, 'unknown', observation.dims_guess, 1.0)
    return plan, spec


class SequencerExecutor:
    """ExecutorPort (core.episode) over a PickPlaceSequencer, called directly (in process).

    It plays the trajectory_executor node's part: the sequencer sees the last perceived height
    map (the node's latched one; `heightmap_updated` hands each new map over), `park` goes to
    the photo park pose, `ready` hovers the empty arm at ready_pose (None: stays put).
    """

    def __init__(
        self,
        sequencer: PickPlaceSequencer,
        park_pose: ParkPose | None = None,
        ready_pose: tuple[float, float, float, float] | None = None,
    ) -> None:
        self.seq = sequencer
        self.park_pose = park_pose or ParkPose()
        self.ready_pose = ready_pose
        self.heightmap: HeightMap | None = None  # the last perceived map
        self.parks = 0  # park moves executed

    def heightmap_updated(self, heightmap: HeightMap) -> None:
        """A new perceived map: it shows every carton placed so far."""
        self.heightmap = heightmap
        self.seq.heightmap_updated()

    def pick(self, observation: Observation) -> MotionOutcome:
        out = motion_outcome(self.seq.pick(observation, self.heightmap))
        return dataclasses.replace(out, phases=self._phases(placing=False))

    def place(self, plan: PlacementPlan, spec: PackageSpec, heightmap: HeightMap) -> MotionOutcome:
        out = motion_outcome(self.seq.place(plan, spec, heightmap), placing=True)
        return dataclasses.replace(out, phases=self._phases(placing=True))

    def _phases(self, placing: bool) -> tuple[tuple[CyclePhase, float], ...]:
        """The sequencer's marks of the last action as carton-cycle phases (none without a
        sequencer clock)."""
        return tuple((cycle_phase(name, placing), t) for name, t in self.seq.marks)

    def return_to_source(self, observation: Observation) -> MotionOutcome:
        """Put the held carton back where it was observed; nothing to do when none is held."""
        if self.seq.grasp is None:
            return MotionOutcome(True)
        plan, spec = return_request(observation)
        hm = self.heightmap if self.heightmap is not None else HeightMap.flat()
        return motion_outcome(self.seq.place(plan, spec, hm), placing=True)

    def park(self) -> MotionOutcome:
        """The photo park (checked Cartesian move); a refusal leaves the arm where it is."""
        res = self.seq.park(self.heightmap, self.park_pose)
        if res.ok and res.motion_s > 0:
            self.parks += 1
        return MotionOutcome(True) if res.ok else motion_outcome(res)

    def ready(self, above: Observation | None = None) -> MotionOutcome:
        """The empty arm to wait above the source (over the carton `above`, seen there, when
        given: layout.over_carton, at any source); a refusal leaves the arm where it is.
        Without a carton, a source without a ready pose (the truck) leaves the arm put."""
        if above is not None:
            pose = over_carton(above, self.seq.motion.params)
        elif self.ready_pose is not None:
            pose = self.ready_pose
        else:
            return MotionOutcome(True)
        res = self.seq.hover(self.heightmap, pose)
        return MotionOutcome(True) if res.ok else motion_outcome(res)
