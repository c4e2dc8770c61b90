"""The trajectory executor's goals: the pick and place actions and the park and ready services.

One motion at a time (a second goal is refused, not queued); each waits for a joint state of
its own epoch, forgets the previous episode once the cell's clock has rewound, runs the
sequencer (execution/sequencer.py) and keeps MoveIt's view of what the gripper carries. The
current height map lives here too: it arrives both on the latched topic and in the place goal.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable

from palletizer_msgs.action import Pick, Place
from palletizer_msgs.srv import MoveArm
from rclpy.action import ActionServer, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node

from palletizer.core.contracts import HeightMap
from palletizer.core.errors import PalletizerError
from palletizer.execution import (
    ExecResult,
    Outcome,
    ParkPose,
    PickPlaceSequencer,
    controller_cause,
    exec_result_to_msg,
    over_carton,
)
from palletizer.execution.maps import CurrentMap
from palletizer.execution.sequencer import Feedback
from palletizer.nodes.convert import (
    heightmap_from_msg,
    observation_from_msg,
    plan_from_msg,
    spec_from_msg,
    stamp_s,
)
from palletizer.nodes.executor_arm import DriverArm, JointFeed
from palletizer.nodes.moveit_view import CellScene
from palletizer.nodes.spin import quiet_at_stop

__all__ = ['ExecutorGoals']

# Refusals before anything moved: what the gripper holds is unchanged.
_NOTHING_MOVED = (Outcome.IK_UNREACHABLE, Outcome.COLLISION, Outcome.INVALID_REQUEST)


class ExecutorGoals:
    """Serves ~/pick and ~/place (actions) and ~/park and ~/ready (MoveArm) on `node`.

    arm: whose vacuum a new episode switches off; publish_scene: publishes `scene`;
    ready_pose: x, y, z [m], yaw [rad] where the empty arm waits, or None.
    """

    # A joint state stamped this far past the goal's min_stamp is from another epoch (the
    # previous episode, whose rewind has not arrived): in lockstep the newest joint state is at
    # the director's last cell call, so a goal's min_stamp is the newest stamp, not older.
    STALE_S = 1.0

    def __init__(
        self,
        node: Node,
        seq: PickPlaceSequencer,
        arm: DriverArm,
        feed: JointFeed,
        scene: CellScene,
        publish_scene: Callable[[], None],
        server_timeout: float,
        park_pose: ParkPose,
        ready_pose: tuple[float, float, float, float] | None,
        callback_group: CallbackGroup,
    ) -> None:
        self.node = node
        self.seq = seq
        self.arm = arm
        self.feed = feed
        self.scene = scene
        self.publish_scene = publish_scene
        self.server_timeout = server_timeout
        self.park_pose = park_pose
        self.ready_pose = ready_pose
        # The busy lock (not the group: rclpy runs action execution outside the groups) keeps
        # a park from running alongside a pick or a place.
        self.busy = threading.Lock()
        self._goal_epoch = 0  # the epoch of the last pick or place
        self._hm_epoch = 0  # the epoch in which the height map arrived
        self._map = CurrentMap()  # the newest fused map
        self.servers = [
            ActionServer(
                node,
                kind,
                f'~/{kind.__name__.lower()}',
                execute_callback=quiet_at_stop(node, cb, functools.partial(self._stopped, kind)),
                goal_callback=self.on_goal,
                callback_group=callback_group,
            )
            for kind, cb in ((Pick, self.on_pick), (Place, self.on_place))
        ]
        node.create_service(MoveArm, '~/park', self.on_park, callback_group=callback_group)
        node.create_service(MoveArm, '~/ready', self.on_ready, callback_group=callback_group)

    def adopt(self, hm: HeightMap) -> None:
        """Make `hm` the current map, unless it is the current one already.

        The fused map reaches this node twice, on the latched topic and in the place goal, in
        either order. Only a new map shows the cartons placed since the last one, so only a new
        map clears them from the sequencer's obstacles; the second copy changes nothing (the
        copy on the topic used to clear the carton the place had just put down, when it came
        late: the next pick then planned in another world than the in-process loop's).
        """
        with self.feed.lock:
            if not self._map.offer(hm):
                return
            self._hm_epoch = self.feed.epoch
            self.seq.heightmap_updated()

    def on_goal(self, _goal: Pick.Goal | Place.Goal) -> GoalResponse:
        # One motion at a time: a second goal is refused rather than queued behind the first.
        return GoalResponse.REJECT if self.busy.locked() else GoalResponse.ACCEPT

    def _run(
        self,
        handle: ServerGoalHandle,
        kind: type[Pick] | type[Place],
        work: Callable[[Feedback], ExecResult],
    ) -> tuple[Pick.Result | Place.Result, ExecResult]:
        def feedback(phase: str, progress: float) -> None:
            handle.publish_feedback(kind.Feedback(phase=phase, progress=float(progress)))

        t0 = time.monotonic()
        with self.busy:
            stale = self._wait_state(stamp_s(handle.request.min_stamp))
            if stale:
                out: ExecResult = ExecResult(
                    Outcome.CONTROLLER_FAILED, stale, controller_cause(None)
                )
            else:
                self._episode_boundary()
                out = work(feedback)
        res = exec_result_to_msg(out, kind.Result())
        (handle.succeed if out.ok else handle.abort)()
        self.node.get_logger().info(
            f'{kind.__name__.lower()}: {out.outcome.value} ({out.message}); '
            f'{time.monotonic() - t0:.2f} s wall, {out.motion_s:.2f} s of motion'
        )
        return res, out

    def _wait_state(self, want: float) -> str:
        """Wait for a joint state of the goal's epoch at or after `want` [s] of sim time (zero:
        no wait), so that a first goal after a reset plans from the reset arm and the episode
        boundary is seen; an error message on timeout, else ''."""
        if want <= 0.0:
            return ''
        end = time.monotonic() + self.server_timeout
        while True:
            newest = self.feed.newest()
            if want - 1e-6 <= newest <= want + self.STALE_S:
                return ''
            if time.monotonic() >= end:
                return (
                    f'no joint state at sim time {want:.3f} s within {self.server_timeout:.0f} s '
                    f'(newest {newest:.3f} s)'
                )
            time.sleep(0.005)

    def _episode_boundary(self) -> None:
        """Forget the previous episode's grasp, park and placed cartons once the cell's clock
        has rewound (a reset) since the last pick or place."""
        with self.feed.lock:
            epoch = self.feed.epoch
        if epoch != self._goal_epoch:
            self._goal_epoch = epoch
            if self._hm_epoch != epoch:
                self._map.clear()  # the previous episode's stack
            self.seq.new_episode()
            self.arm.vac_on = False  # the reset cell's vacuum is off
            self.scene.reset()
            self.publish_scene()
            self.node.get_logger().info('sim time rewound: new episode, held state cleared')

    def _invalid(
        self, handle: ServerGoalHandle, kind: type[Pick] | type[Place], exc: Exception
    ) -> Pick.Result | Place.Result:
        """A goal that does not convert: INVALID_REQUEST, no cause (not a failure of the cell),
        and nothing moves."""
        handle.abort()
        out = ExecResult(Outcome.INVALID_REQUEST, f'invalid {kind.__name__} request: {exc}')
        self.node.get_logger().warning(f'{kind.__name__.lower()}: {out.message}')
        return exec_result_to_msg(out, kind.Result())

    def _stopped(self, kind: type[Pick] | type[Place]) -> Pick.Result | Place.Result:
        """The result of a goal that a stop (Ctrl-C) cut short: the controller's motion ended
        with the node."""
        out = ExecResult(Outcome.CONTROLLER_FAILED, 'the trajectory executor stopped')
        return exec_result_to_msg(out, kind.Result())

    def on_pick(self, handle: ServerGoalHandle) -> Pick.Result:
        try:
            obs = observation_from_msg(handle.request.observation)
        except (PalletizerError, ValueError) as exc:
            return self._invalid(handle, Pick, exc)
        res, out = self._run(handle, Pick, lambda fb: self.seq.pick(obs, self._map.map, fb))
        if out.ok:
            self.scene.picked(obs.dims_guess)
        elif out.outcome not in _NOTHING_MOVED:
            self.scene.dropped()
        self.publish_scene()
        return res

    def on_place(self, handle: ServerGoalHandle) -> Place.Result:
        req = handle.request
        try:
            plan, spec = plan_from_msg(req.plan), spec_from_msg(req.spec)
            hm = heightmap_from_msg(req.heightmap)
        except (PalletizerError, ValueError) as exc:
            return self._invalid(handle, Place, exc)

        def place(fb: Feedback) -> ExecResult:
            self.adopt(hm)
            return self.seq.place(plan, spec, hm, fb)

        res, out = self._run(handle, Place, place)
        if out.ok:
            self.scene.placed(plan, spec)
        elif out.outcome not in _NOTHING_MOVED:
            self.scene.dropped()  # whether the carton is still held is not known
        self.publish_scene()
        return res

    def on_park(self, _req: MoveArm.Request, res: MoveArm.Response) -> MoveArm.Response:
        """Tool-down Cartesian move to the photo park pose; a refusal carries code and cause."""
        return self._service_move(
            res, 'park', lambda: self.seq.park(self._map.map, self.park_pose)
        )

    def on_ready(self, req: MoveArm.Request, res: MoveArm.Response) -> MoveArm.Response:
        """Empty arm to wait above the source (ready_pose; over the request's carton, seen at
        the station, with over_carton, at any source); a refusal carries code and cause. OK
        without moving when this source has no ready pose and no carton is given."""
        pose = self.ready_pose
        if req.over_carton:
            pose = over_carton(observation_from_msg(req.carton), self.seq.motion.params)
        if pose is None:
            return exec_result_to_msg(ExecResult(Outcome.OK), res)
        return self._service_move(res, 'ready', lambda: self.seq.hover(self._map.map, pose))

    def _service_move(
        self, res: MoveArm.Response, what: str, move: Callable[[], ExecResult]
    ) -> MoveArm.Response:
        """Run a MoveArm service's move unless a pick or place holds the arm; log it."""
        t0 = time.monotonic()
        if not self.busy.acquire(blocking=False):
            # The arm is not free to take the goal: the controller's part, as in _run.
            busy = 'a pick or place is running'
            return exec_result_to_msg(
                ExecResult(Outcome.CONTROLLER_FAILED, busy, controller_cause(None)), res
            )
        try:
            self._episode_boundary()
            out = move()
        finally:
            self.busy.release()
        exec_result_to_msg(out, res)
        self.node.get_logger().info(
            f'{what}: {out.outcome.value} ({out.message}); {time.monotonic() - t0:.2f} s wall, '
            f'{out.motion_s:.2f} s of motion'
        )
        return res
