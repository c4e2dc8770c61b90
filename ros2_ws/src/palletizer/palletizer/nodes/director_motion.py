"""The director's executor port: pick and place goals and the park and ready moves.

RosExecutor turns the episode loop's motion calls into the trajectory executor's Pick and Place
actions and MoveArm services, over the Calls helper (nodes/calls.py), and reads each result
through the one mapping the in-process wiring uses too (execution.motion_outcome); the goal's
feedback phases become the carton cycle's phases (core/cycle.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from builtin_interfaces.msg import Time
from palletizer_msgs.action import Pick, Place
from palletizer_msgs.srv import MoveArm
from rclpy.client import Client
from rclpy.node import Node

from palletizer.core.contracts import HeightMap, Observation, PackageSpec, PlacementPlan
from palletizer.core.ports import MotionOutcome
from palletizer.core.vocab import CyclePhase
from palletizer.execution import cycle_phase, exec_result_from_msg, motion_outcome, return_request
from palletizer.nodes.action_client import OrderedActionClient
from palletizer.nodes.calls import Calls
from palletizer.nodes.convert import heightmap_to_msg, observation_to_msg, plan_to_msg, spec_to_msg

__all__ = ['RosExecutor']


class RosExecutor:
    """ExecutorPort over the trajectory executor's pick and place actions."""

    def __init__(
        self,
        node: Node,
        calls: Calls,
        prefix: str = '/trajectory_executor',
        stamp: Callable[[], Time] = Time,
        refresh: Callable[[], None] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.calls = calls
        # The episode's sim time [s]: with it, a pick's or place's feedback phases are placed
        # in the time the goal took, so the episode's carton cycle shows them (core/cycle.py).
        self.clock = clock
        # Sim time of the director's last cell call: a goal's arm state is at least this recent
        # (the executor waits for it, so the first goal after a reset plans from the reset arm).
        # `refresh` brings that time up to date after the executor's own moves (park, ready,
        # pick and place), which advance sim time without a cell call of the director's: a
        # carton taken back from the buffer goes from its pick straight to its place, and the
        # place's goal must not ask for the time before the pick (the executor would wait for
        # it and time out).
        self.stamp = stamp
        self.refresh = refresh
        self.pick_c = OrderedActionClient(node, Pick, f'{prefix}/pick')
        self.place_c = OrderedActionClient(node, Place, f'{prefix}/place')
        self.park_c = node.create_client(MoveArm, f'{prefix}/park')
        self.ready_c = node.create_client(MoveArm, f'{prefix}/ready')
        self.heightmap: HeightMap | None = None

    def set_heightmap(self, heightmap: HeightMap | None) -> None:
        """The newest fused map (None at an episode's start): a return's collision world."""
        self.heightmap = heightmap

    def park(self) -> MotionOutcome:
        """The photo park (Cartesian, checked); a refusal leaves the arm where it is."""
        return self._move(self.park_c, 'park')

    def ready(self, above: Observation | None = None) -> MotionOutcome:
        """The empty arm's move to wait above the source (over the carton `above`, seen there,
        when given); a refusal leaves the arm put."""
        req = MoveArm.Request()
        if above is not None:
            req.over_carton, req.carton = True, observation_to_msg(above)
        return self._move(self.ready_c, 'ready', req)

    def _move(
        self, client: Client, what: str, req: MoveArm.Request | None = None
    ) -> MotionOutcome:
        """A MoveArm call, read as the in-process executor reads the sequencer's move: the
        cause from the response's field, through the one mapping (execution.motion_outcome)."""
        req = req if req is not None else MoveArm.Request()
        res = self.calls.service(client, req, what, self.calls.t.motion)
        if self.refresh is not None:
            self.refresh()
        out = exec_result_from_msg(res)
        if out.ok:
            return MotionOutcome(True)
        print(f'  {what} refused: {out.cause or out.outcome.value}: {out.message}', flush=True)
        return motion_outcome(out)

    def pick(self, observation: Observation) -> MotionOutcome:
        goal = Pick.Goal(observation=observation_to_msg(observation), min_stamp=self.stamp())
        res, phases = self._timed(self.pick_c, goal, 'pick', placing=False)
        return dataclasses.replace(motion_outcome(exec_result_from_msg(res)), phases=phases)

    def _timed(
        self, client: OrderedActionClient, goal: Any, what: str, placing: bool
    ) -> tuple[Any, tuple[tuple[CyclePhase, float], ...]]:
        """The action's result (after the refresh) and its feedback phases as cycle phases.

        A feedback message says the phase and the share of the goal's motion done, not the
        time: a phase is taken to begin at that share of the sim time the goal took, which
        spreads the goal's still dwells over its motion in proportion.
        """
        seen: list[tuple[str, float]] = []

        def feedback(msg: Any) -> None:
            fb = msg.feedback
            if not seen or seen[-1][0] != fb.phase:
                seen.append((str(fb.phase), float(fb.progress)))

        t0 = self.clock() if self.clock is not None else 0.0
        res = self.calls.action(
            client, goal, what, self.calls.t.motion, feedback=feedback if self.clock else None
        )
        if self.refresh is not None:
            self.refresh()
        if self.clock is None:
            return res, ()
        span = self.clock() - t0
        return res, tuple(
            (cycle_phase(phase, placing), t0 + min(max(share, 0.0), 1.0) * span)
            for phase, share in list(seen)
        )

    def place(self, plan: PlacementPlan, spec: PackageSpec, heightmap: HeightMap) -> MotionOutcome:
        goal = Place.Goal(
            plan=plan_to_msg(plan),
            spec=spec_to_msg(spec),
            heightmap=heightmap_to_msg(heightmap),
            min_stamp=self.stamp(),
        )
        res, phases = self._timed(self.place_c, goal, 'place', placing=True)
        out = motion_outcome(exec_result_from_msg(res), placing=True)
        return dataclasses.replace(out, phases=phases)

    def return_to_source(self, observation: Observation) -> MotionOutcome:
        """Put the held carton back where it was observed (the planner found no slot).

        A place at the observed pose: the plan's layer is the source's floor (1), its slot
        'return'; the collision world is the newest height map the director fetched.
        """
        plan, spec = return_request(observation)
        return self.place(plan, spec, self.heightmap or HeightMap.flat())
