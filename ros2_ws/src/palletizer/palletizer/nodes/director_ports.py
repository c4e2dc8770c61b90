"""The episode ports wired to ROS services and actions (the director's side of the graph).

Each port turns one core call into a service or action call and back, over the Calls helper
(nodes/calls.py): a node that does not answer within its timeout aborts the episode with a
reason naming it (EpisodeAborted), so an open episode is always closed. Here: the cell, the
planner, the executor, the referee and the sink; the gauge and the perception are in
sensing_ports.py.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from builtin_interfaces.msg import Time
from palletizer_msgs.action import Pick, Place
from palletizer_msgs.msg import EpisodeEvent
from palletizer_msgs.msg import PalletState as PalletStateMsg
from palletizer_msgs.msg import Placement as PlacementMsg
from palletizer_msgs.srv import (
    Capture,
    GroundTruth,
    MoveArm,
    PlanPlacement,
    PresentCarton,
    ReleaseCarton,
    ResetCell,
    RunStability,
    Settle,
)
from rclpy.client import Client
from rclpy.node import Node
from std_srvs.srv import Trigger

from palletizer.core.contracts import (
    HeightMap,
    Observation,
    PackageSpec,
    PalletState,
    Placement,
    PlacementPlan,
    PlanResult,
    floats3,
)
from palletizer.core.episode import last_resort_line
from palletizer.core.errors import UnknownKey
from palletizer.core.fusion import yaw_of_quat
from palletizer.core.planning import PlannerKind
from palletizer.core.ports import EpisodeAborted, MotionOutcome, Presented
from palletizer.core.vocab import CyclePhase
from palletizer.execution import (
    cycle_phase,
    exec_result_from_msg,
    motion_outcome,
    return_request,
)
from palletizer.nodes.action_client import OrderedActionClient
from palletizer.nodes.calls import Calls
from palletizer.nodes.convert import (
    heightmap_to_msg,
    observation_to_msg,
    pallet_state_to_msg,
    placement_to_msg,
    plan_from_msg,
    plan_to_msg,
    reject_from_lists,
    spec_to_msg,
    stamp_s,
)
from palletizer.nodes.qos import EVENTS
from palletizer.nodes.sensing_ports import RosGauge

__all__ = ['RosCell', 'RosExecutor', 'RosPlanner', 'RosReferee', 'RosSink']


class RosCell:
    """CellPort over the cell bridge's services; tares the wrist gauge after each reset."""

    def __init__(
        self, node: Node, calls: Calls, gauge: RosGauge, prefix: str = '/cell_bridge'
    ) -> None:
        self.calls = calls
        self.gauge = gauge
        self.reset_c = node.create_client(ResetCell, f'{prefix}/reset')
        self.present_c = node.create_client(PresentCarton, f'{prefix}/present')
        self.release_c = node.create_client(ReleaseCarton, f'{prefix}/release')
        self.settle_c = node.create_client(Settle, f'{prefix}/settle')
        self._t0 = 0.0
        self._now = 0.0
        self.stamp = Time()
        self.source = ''

    def _at(self, stamp: Time) -> None:
        if stamp_s(stamp) >= self._now:
            self._now = stamp_s(stamp)
            self.stamp = stamp

    def reset(self, level: int, seed: int) -> int:
        res = self.calls.service(
            self.reset_c,
            ResetCell.Request(level=level, seed=seed),
            'cell reset',
            self.calls.t.reset_s,
        )
        if res.error_code != ResetCell.Response.OK:
            raise EpisodeAborted(f'cell reset failed: {res.error_msg}')
        self._now = stamp_s(res.stamp)
        self.stamp = res.stamp
        self._t0 = self._now
        self.source = res.source
        self.hold(self.gauge.hold_s)
        self.gauge.tare()
        return int(res.n_cartons)

    def present(self) -> Presented:
        res = self.calls.service(
            self.present_c, PresentCarton.Request(), 'cell present', self.calls.t.present
        )
        self._at(res.stamp)
        st = res.state
        extras = json.loads(st.extras_json) if st.extras_json else {}
        pid = (
            res.package_id
            if res.error_code == PresentCarton.Response.OK and res.package_id
            else None
        )
        return Presented(
            pid, int(st.pending), bool(st.exhausted), bool(st.jammed), extras, tuple(res.forecast)
        )

    def release(self, package_id: str) -> None:
        res = self.calls.service(
            self.release_c,
            ReleaseCarton.Request(package_id=package_id),
            'cell release',
            self.calls.t.quick_s,
        )
        self._at(res.stamp)

    def settle(self, seconds: float) -> None:
        self.hold(seconds)

    def hold(self, seconds: float) -> None:
        res = self.calls.service(
            self.settle_c,
            Settle.Request(duration=float(seconds)),
            'cell settle',
            self.calls.t.scaled(seconds),
        )
        self._at(res.stamp)
        if res.error_code != Settle.Response.OK:  # INVALID_REQUEST: the world did not advance
            raise EpisodeAborted(f'cell settle of {seconds:g} s refused: {res.error_msg}')

    def sim_time(self) -> float:
        return self._now - self._t0


class RosPlanner:
    """Planner protocol over the planner node; each plan request carries the stack so far."""

    oracle = False

    def __init__(self, node: Node, calls: Calls, kind: str, prefix: str = '/planner') -> None:
        self.calls = calls
        self.kind = PlannerKind(kind)
        self.plan_c = node.create_client(PlanPlacement, f'{prefix}/plan')
        self.reset_c = node.create_client(Trigger, f'{prefix}/reset')
        # The episode's placements and the specs weighed for them: every plan request carries
        # them, so it can be asked again of a restarted planner.
        self.placements: list[Placement] = []
        self.specs: dict[str, PackageSpec] = {}

    def reset(self) -> None:
        self.placements, self.specs = [], {}
        self.calls.service(
            self.reset_c, Trigger.Request(), 'planner reset', self.calls.t.quick_s, repeatable=True
        )

    def choose(
        self,
        spec: PackageSpec,
        heightmap: HeightMap,
        pallet: PalletState | None,
        excluded_slots: Collection[str] = (),
        last_resort: bool = False,
    ) -> PlanResult:
        req = PlanPlacement.Request(
            spec=spec_to_msg(spec),
            heightmap=heightmap_to_msg(heightmap),
            has_pallet=pallet is not None,
            excluded_slots=list(excluded_slots),
            last_resort=last_resort,
            placements=[placement_to_msg(p) for p in self.placements],
            placed_specs=[spec_to_msg(s) for s in self.specs.values()],
        )
        self.specs[spec.package_id] = spec
        if pallet is not None:
            req.pallet = pallet_state_to_msg(pallet)
        # Repeatable: the request carries the stack, so a restarted planner answers the same.
        res = self.calls.service(self.plan_c, req, 'planner', self.calls.t.plan_s, repeatable=True)
        if res.error_code == PlanPlacement.Response.INVALID_REQUEST:
            raise EpisodeAborted(f'planner refused the request: {res.error_msg}')
        summary = reject_from_lists(res.reject_reasons, res.reject_counts)
        return PlanResult(plan_from_msg(res.plan) if res.has_plan else None, summary)

    def record(self, placement: Placement) -> None:
        """The next plan request carries it to the planner node."""
        self.placements.append(placement)

    def set_forecast(self, specs: Sequence[PackageSpec]) -> None:
        """No forecast over ROS in this version: only an oracle gauge could weigh ahead."""


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

    def ready(self) -> MotionOutcome:
        """The empty arm's move to wait above the source; a refusal leaves the arm put."""
        return self._move(self.ready_c, 'ready')

    def _move(self, client: Client, what: str) -> MotionOutcome:
        """A MoveArm call, read as the in-process executor reads the sequencer's move: the
        cause from the response's field, through the one mapping (execution.motion_outcome)."""
        res = self.calls.service(client, MoveArm.Request(), what, self.calls.t.motion)
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


class RosReferee:
    """RefereePort over the cell's ground-truth service (scoring only), and the physical
    stability trials on the finished stack (the cell restores the stack afterwards)."""

    def __init__(self, node: Node, calls: Calls, prefix: str = '/cell_bridge') -> None:
        self.calls = calls
        self.truth_c = node.create_client(GroundTruth, f'{prefix}/ground_truth')
        self.stability_c = node.create_client(RunStability, f'{prefix}/run_stability')

    def stability(self) -> dict[str, Any]:
        """The trials' summary (held_all, per-axis held g, scores, beams, EUMOS); raises
        EpisodeAborted when the cell refuses."""
        res = self.calls.service(
            self.stability_c,
            RunStability.Request(jolts=True, beam=True, eumos=True),
            'cell stability trials',
            self.calls.t.scaled(self.calls.t.stability_s),
        )
        if res.error_code != RunStability.Response.OK:
            raise EpisodeAborted(f'cell stability trials: {res.error_msg}')
        return dict(json.loads(res.summary_json or '{}'))

    def _truth(self, package_ids: Sequence[str]) -> dict[str, Any]:
        """The ground truth's CartonTruth of each carton; UnknownKey for one it lacks."""
        res = self.calls.service(
            self.truth_c,
            GroundTruth.Request(),
            'referee',
            self.calls.t.quick_s,
            repeatable=True,
            retry_s=10.0,
        )
        by_id = {c.package_id: c for c in res.cartons}
        for pid in package_ids:
            if pid not in by_id:
                ids = ', '.join(sorted(by_id)) or '(none)'
                raise UnknownKey(
                    f'referee: package_id {pid!r} is not in the ground truth; it has {ids}'
                )
        return {pid: by_id[pid] for pid in package_ids}

    def poses(self, package_ids: Sequence[str]) -> Mapping[str, tuple[float, float, float, float]]:
        out = {}
        for pid, c in self._truth(package_ids).items():
            p, o = c.pose.position, c.pose.orientation
            out[pid] = (p.x, p.y, p.z, yaw_of_quat((o.w, o.x, o.y, o.z)))
        return out

    def cog_offsets(self, package_ids: Sequence[str]) -> Mapping[str, tuple[float, float, float]]:
        """True CoG offset [m] of each carton in its body frame (the frame of `poses`' yaw)."""
        return {pid: floats3(c.cog_offset_m) for pid, c in self._truth(package_ids).items()}


class RosSink:
    """SinkPort publishing episode events, placements and pallet states (never lossy QoS).

    With `photo_views` and `calls`, layer_photo has the cell bridge render those cameras (they
    go out on /cameras/<view>/color/image_raw stamped with the cell's sim time) and publishes a
    snapshot mark on /palletizer/snapshot_marks: an EpisodeEvent of kind 'snapshot' whose seq is the
    after_seq, payload {"views", "stamp_ns"}; the telemetry node pairs mark and frames by stamp.
    The marks topic is not the events topic, so the event stream and its count are unchanged.
    """

    def __init__(
        self,
        node: Node,
        run_id: str,
        echo: Callable[[str], None],
        calls: Calls | None = None,
        photo_views: Sequence[str] = (),
        cell_prefix: str = '/cell_bridge',
    ) -> None:
        self.events = node.create_publisher(EpisodeEvent, 'episode_events', EVENTS)
        self.placements = node.create_publisher(PlacementMsg, 'placements', EVENTS)
        self.states = node.create_publisher(PalletStateMsg, 'pallet_states', EVENTS)
        self.marks = node.create_publisher(EpisodeEvent, '/palletizer/snapshot_marks', EVENTS)
        # The photos are the simulated cell's renders on request: no client without them.
        self.capture_c = (
            node.create_client(Capture, f'{cell_prefix}/capture') if photo_views else None
        )
        self.calls = calls
        self.photo_views = tuple(photo_views)
        self.photos = 0  # snapshot marks published
        self.run_id = run_id
        self.seed = 0
        self.count = 0
        self.echo = echo
        self._last: Placement | None = None

    def begin(self, seed: int) -> None:
        self.seed = seed
        self.count = 0

    def event(
        self, seq: int, ts: float, kind: str, package_id: str, payload: Mapping[str, Any]
    ) -> None:
        self.events.publish(
            EpisodeEvent(
                run_id=self.run_id,
                seed=self.seed,
                seq=seq,
                ts=ts,
                kind=kind,
                package_id=package_id,
                payload_json=json.dumps(payload, sort_keys=True),
            )
        )
        self.count += 1
        if 'buffer_slot' in payload:  # a set-aside (place) or a take-back (pick)
            arrow = '->' if kind == 'place' else '<-'
            self.echo(f'  {package_id:12s} {arrow} buffer {payload["buffer_slot"]}')
        if kind == 'plan' and payload.get('last_resort'):
            self.echo(f'  {package_id:12s} {last_resort_line(payload)}')
        if kind == 'fail':
            self.echo(
                f'  {package_id or "-":12s} fail: {payload.get("cause")} '
                f'{payload.get("reason", "")}'.rstrip()
            )

    def placement(self, placement: Placement) -> None:
        self.placements.publish(placement_to_msg(placement))
        self._last = placement

    def layer_photo(self, after_seq: int) -> None:
        if self.calls is None or self.capture_c is None:  # no photo_views: no client
            return
        req = Capture.Request(cameras=list(self.photo_views))
        res = self.calls.service(
            self.capture_c, req, 'cell capture', self.calls.t.quick_s, repeatable=True
        )
        if res.error_code != Capture.Response.OK:
            self.echo(f'  snapshot {after_seq:03d} not taken: {res.error_msg}')
            return
        stamp_ns = res.stamp.sec * 1_000_000_000 + res.stamp.nanosec
        self.marks.publish(
            EpisodeEvent(
                run_id=self.run_id,
                seed=self.seed,
                seq=after_seq,
                ts=stamp_s(res.stamp),
                kind='snapshot',
                package_id='',
                payload_json=json.dumps({'views': list(self.photo_views), 'stamp_ns': stamp_ns}),
            )
        )
        self.photos += 1

    def pallet_state(self, state: PalletState) -> None:
        self.states.publish(pallet_state_to_msg(state))
        p = self._last
        if p is not None:
            self.echo(
                f'  {p.package_id:12s} {p.package_type:9s} L{p.layer}  '
                f'error {p.error_xy_m * 1000:5.1f} mm  support {p.support_ratio * 100:3.0f} %  '
                f'margin {state.stability_margin_m * 1000:+6.1f} mm  '
                f'{"ok" if p.placed else "NOT PLACED"}'
            )
