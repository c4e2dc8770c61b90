"""The episode ports wired to ROS services and actions (the director's side of the graph).

Each port turns one core call into a service or action call and back. A node that does not
answer within its timeout aborts the episode with a reason naming it (EpisodeAborted), so an
open episode is always closed.

Why one file of this length: the seven ports (cell, gauge, perception, planner, executor,
referee, sink) share one call helper (Calls: timeouts, a lost server, a stop), and each is the
mirror of one core port in core/episode.py.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from builtin_interfaces.msg import Time
from palletizer_msgs.action import Pick, Place
from palletizer_msgs.msg import EpisodeEvent
from palletizer_msgs.msg import PalletState as PalletStateMsg
from palletizer_msgs.msg import Placement as PlacementMsg
from palletizer_msgs.srv import (
    Capture,
    Detect,
    FuseHeightMap,
    GroundTruth,
    MeasureHeld,
    MeasureLid,
    MoveArm,
    PlanPlacement,
    PresentCarton,
    ReleaseCarton,
    ResetCell,
    RunStability,
    Settle,
    Tare,
    Weigh,
)
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
from palletizer.core.episode import (
    STOP_REASON_ENV,
    EpisodeAborted,
    MotionOutcome,
    Presented,
    last_resort_line,
)
from palletizer.core.errors import PalletizerError, UnknownKey
from palletizer.core.fusion import yaw_of_quat
from palletizer.core.planning import PlannerKind
from palletizer.execution import exec_result_from_msg, motion_outcome, return_request
from palletizer.nodes.action_client import OrderedActionClient
from palletizer.nodes.convert import (
    heightmap_from_msg,
    heightmap_to_msg,
    observation_from_msg,
    observation_to_msg,
    pallet_state_to_msg,
    placement_to_msg,
    plan_from_msg,
    plan_to_msg,
    reject_from_lists,
    spec_from_msg,
    spec_to_msg,
)
from palletizer.nodes.qos import EVENTS

__all__ = [
    'Calls',
    'Timeouts',
    'RosCell',
    'RosExecutor',
    'RosGauge',
    'RosPerception',
    'RosPlanner',
    'RosReferee',
    'RosSink',
    'stamp_s',
]


def stamp_s(t: Time) -> float:
    return t.sec + t.nanosec * 1e-9


@dataclass(frozen=True)
class Timeouts:
    """How long [s, wall] the director waits for a live node's answer, sized to the work asked.

    A dead node is noticed within the DDS lease instead (Calls). `speed` is the motion speed
    (0 = fast-forward): motion and simulated time run at 1/speed of real time, so the waits
    that contain them scale with it.
    """

    speed: float = 0.0
    # Bookkeeping answered from memory or one short computation (tare, weigh, telemetry,
    # parameters, ground truth, detection, fusion, one camera render): milliseconds when
    # healthy; 30 s leaves room for two loaded cores.
    quick_s: float = 30.0
    reset_s: float = 60.0  # the cell rebuilds its MuJoCo model and renderers: ~2-5 s
    plan_s: float = 60.0  # beam search on a full pallet: ~1-3 s on two cores
    # One pick or place: 6-8 s of motion at speed 1 (scripts/bench motion: 5.9 s median),
    # plus planning; 60 s of motion covers the longest reach-fitted moves.
    motion_s: float = 60.0
    # The conveyor or truck bringing the next carton: up to ~20 s of simulated time.
    present_s: float = 60.0
    # The stability trials: 15 jolts of ~2.9 s, 2 beams of ~2.4 s and EUMOS, ~50 s simulated.
    stability_s: float = 120.0

    def scaled(self, sim_s: float) -> float:
        """A wait that contains sim_s [s] of simulated time: 30 s plus that time at speed."""
        return 30.0 + (sim_s / self.speed if self.speed > 0 else sim_s)

    @property
    def motion(self) -> float:
        return self.scaled(self.motion_s)

    @property
    def present(self) -> float:
        return self.scaled(self.present_s)


def _node_of(name: str) -> str:
    """The node behind a service or action name: '/planner/plan' -> 'planner'."""
    return name.strip('/').split('/')[0] or name


class _ServerLost(PalletizerError):
    """The server vanished from the graph while a request was in flight."""


class Calls:
    """Blocking service and action calls from a worker thread while the executor spins.

    Every wait is bounded twice: by a timeout sized to the call's work (a live server that does
    not answer), and by the server's presence in the graph, checked every LIVENESS_S. A node
    that dies leaves the graph within the DDS participant lease (configs/fastdds.xml, set by the
    launcher). Then a `repeatable` request (read-only, or keyed so that a repeat does no harm)
    is sent again once the node is back, respawned; any other request, or a node that does not
    come back within `respawn_s`, aborts the episode with a reason that names the node.
    """

    # After discovery the server's reply writer can lag the client's reply reader: a request
    # sent at once may be answered into the void ("failed to send response"). A short pause
    # before the first call on each client closes that window.
    FIRST_CALL_PAUSE_S = 0.5
    LIVENESS_S = 0.5  # how often a wait checks that its server is still in the graph [s]

    def __init__(
        self,
        node: Node,
        abort: threading.Event,
        timeouts: Timeouts | None = None,
        discover_s: float = 30.0,
        respawn_s: float = 8.0,
    ) -> None:
        self.node = node
        self.abort = abort
        self.t = timeouts or Timeouts()
        # A node's first appearance: eight processes starting on two shared cores.
        self.discover_s = discover_s
        # A respawned node's return: the launcher's 1 s delay plus the node's start (imports,
        # config, the reach table), 2-4 s on two cores.
        self.respawn_s = respawn_s
        self.stop_reason = ''  # why the run is being stopped, when the launcher said
        self._ready: set[int] = set()
        self._known: dict[int, frozenset[bytes]] = {}  # each client's servers at its last answer

    def stop(self) -> None:
        """Abort the call in progress; the reason is the launcher's, when it wrote one."""
        path = os.environ.get(STOP_REASON_ENV, '')
        if path:
            try:
                self.stop_reason = Path(path).read_text(encoding='utf-8').strip()
            except OSError:
                pass  # no reason written: a signal from elsewhere
        self.abort.set()

    def _wait(
        self,
        fut,
        what: str,
        timeout_s: float,
        alive: Callable[[], bool] | None = None,
        limit_s: float | None = None,
        budget_s: float | None = None,
    ) -> Any:
        """The future's result; None when `limit_s` passed without an answer.

        Raises _ServerLost when `alive()` turns false, EpisodeAborted on a stop or after
        timeout_s [s].
        """
        done = threading.Event()
        fut.add_done_callback(lambda _f: done.set())
        t0 = time.monotonic()
        checked = t0
        while not done.wait(0.1):
            now = time.monotonic()
            if self.abort.is_set():
                why = f' ({self.stop_reason})' if self.stop_reason else ''
                raise EpisodeAborted(f'stopped while waiting for {what}{why}')
            if alive is not None and now - checked >= self.LIVENESS_S:
                checked = now
                if not alive():
                    raise _ServerLost(what)
            if limit_s is not None and now - t0 > limit_s:
                return None
            if now - t0 > timeout_s:
                said = timeout_s if budget_s is None else budget_s  # the whole call's budget
                raise EpisodeAborted(f'{what} did not answer within {said:g} s')
        if fut.exception() is not None:
            raise EpisodeAborted(f'{what} failed: {fut.exception()}')
        return fut.result()

    def _servers(self, client) -> frozenset[bytes]:
        """The GIDs of a service's servers (their reply writers): a restarted node has new ones,
        even when it is back before the old one's lease has expired."""
        infos = self.node.get_publishers_info_by_topic(f'rr{client.srv_name}Reply', no_mangle=True)
        return frozenset(bytes(i.endpoint_gid) for i in infos)

    def _discover(self, client, ready: Callable[[float], bool], name: str, what: str) -> None:
        if id(client) in self._ready:
            return
        if not ready(self.discover_s):
            raise EpisodeAborted(
                f'{what}: {name} is not available after {self.discover_s:.0f} s '
                f'(node {_node_of(name)} not running?)'
            )
        time.sleep(self.FIRST_CALL_PAUSE_S)
        self._ready.add(id(client))

    @staticmethod
    def _gone(name: str, what: str) -> EpisodeAborted:
        return EpisodeAborted(
            f'{what}: node {_node_of(name)} left the graph (died or restarted) while handling '
            'a request that cannot be repeated'
        )

    def _back(
        self,
        ready: Callable[[float], bool],
        name: str,
        what: str,
        repeatable: bool,
        first: bool = False,
    ) -> None:
        """After a lost server: return when it is back and the request may be sent (again)."""
        node = _node_of(name)
        if not repeatable:
            raise self._gone(name, what)
        if not ready(self.respawn_s):
            raise EpisodeAborted(
                f'{what}: node {node} left the graph (died) and did not come back within '
                f'{self.respawn_s:.0f} s'
            )
        time.sleep(self.FIRST_CALL_PAUSE_S)
        sent = 'request sent to the new one' if first else 'request sent again'
        print(f'  {what}: node {node} came back (respawned); {sent}', flush=True)

    def service(
        self,
        client,
        request,
        what: str,
        timeout_s: float,
        repeatable: bool = False,
        retry_s: float | None = None,
        again: Callable[[], Any] | None = None,
    ) -> Any:
        """Call and wait up to timeout_s [s] of a live server.

        `repeatable`: the request may be sent again (read-only, or keyed so a repeat does no
        harm): after the server came back from a restart, and with `retry_s` every retry_s
        seconds while unanswered (an answer lost right after discovery). `again` builds the
        request to send after a restart instead (e.g. after holding the arm still again, so a
        restarted gauge sees samples of its own).
        """

        def ready(t: float) -> bool:
            return client.wait_for_service(timeout_sec=t)

        self._discover(client, ready, client.srv_name, what)
        servers = self._servers(client)
        known = self._known.get(id(client))
        if known is not None and servers != known:
            # The server was replaced since the last call (a restart faster than its lease):
            # give the new one's reply writer time to match, and rebuild the request for it.
            self._back(ready, client.srv_name, what, repeatable=True, first=True)
            if again is not None:
                request = again()
            servers = self._servers(client)
        t0 = time.monotonic()
        while True:
            left = timeout_s - (time.monotonic() - t0)

            def alive(sent=servers) -> bool:
                # Gone, or replaced while the request was out: its answer will not come.
                now = self._servers(client)
                return bool(now) and now <= sent and client.service_is_ready()

            try:
                res = self._wait(
                    client.call_async(request),
                    what,
                    max(left, 0.1),
                    alive=alive,
                    limit_s=retry_s if repeatable else None,
                    budget_s=timeout_s,
                )
            except _ServerLost:
                self._back(ready, client.srv_name, what, repeatable)
                if again is not None:
                    request = again()
                servers = self._servers(client)
                continue
            if res is not None:
                self._known[id(client)] = servers
                return res
            if time.monotonic() - t0 > timeout_s:
                raise EpisodeAborted(f'{what} did not answer within {timeout_s:g} s')

    def action(
        self,
        client: OrderedActionClient,
        goal,
        what: str,
        timeout_s: float,
        feedback: Callable[[Any], None] | None = None,
    ) -> Any:
        """Send a goal and wait for its result up to timeout_s [s]; goals are never repeated
        (the arm may have moved), so a server that leaves the graph aborts the episode."""

        def ready(t: float) -> bool:
            return client.wait_for_server(timeout_sec=t)

        name = client._action_name
        self._discover(client, ready, name, what)
        try:
            handle = self._wait(
                client.send_goal_async(goal, feedback_callback=feedback),
                what,
                timeout_s,
                alive=client.server_is_ready,
            )
            if not handle.accepted:
                raise EpisodeAborted(f'{what}: goal rejected')
            return self._wait(
                handle.get_result_async(), what, timeout_s, alive=client.server_is_ready
            ).result
        except _ServerLost:
            raise self._gone(name, what) from None


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


class HoldingCell(Protocol):
    """What the gauge needs of a cell port (RosCell, or line_ports.RosLine): let time pass with
    the arm still, and the time now."""

    @property
    def stamp(self) -> Time: ...

    def hold(self, seconds: float) -> None: ...


class RosGauge:
    """GaugePort over the wrist gauge; the arm is held still (cell settle) before each reading."""

    oracle = False

    def __init__(
        self, node: Node, calls: Calls, hold_s: float, prefix: str = '/wrist_gauge'
    ) -> None:
        self.calls = calls
        self.hold_s = hold_s
        self.tare_c = node.create_client(Tare, f'{prefix}/tare')
        self.weigh_c = node.create_client(Weigh, f'{prefix}/weigh')
        self.cell: HoldingCell | None = None
        self.last_error = ''
        self.tare_wrench: list[float] | None = None  # [N, N m] the episode's tare

    def _held(self, build: Callable[[Time], Any]) -> Callable[[], Any]:
        """A request built after holding the arm still again (a restarted gauge has not seen
        the samples of the previous hold)."""

        def again() -> Any:
            assert self.cell is not None
            self.cell.hold(self.hold_s)
            return build(self.cell.stamp)

        return again

    def tare(self) -> None:
        assert self.cell is not None

        def build(stamp: Time) -> Tare.Request:
            return Tare.Request(min_stamp=stamp)

        # The gripper is empty and still: a tare asked again of a restarted gauge is the same.
        res = self.calls.service(
            self.tare_c,
            build(self.cell.stamp),
            'wrist gauge tare',
            self.calls.t.quick_s,
            repeatable=True,
            again=self._held(build),
        )
        if res.error_code != Tare.Response.OK:
            raise EpisodeAborted(f'wrist gauge tare failed: {res.error_msg}')
        self.tare_wrench = [float(v) for v in res.wrench]

    def zero(self) -> None:
        """Tare again with the gripper empty (the episode loop calls it after each place, the
        arm still above the source), so the tare each weigh carries follows the sensor's drift;
        a refused zero keeps the previous tare, as in-process (wiring.gauge.WristGauge.zero)."""
        assert self.cell is not None
        self.cell.hold(self.hold_s)

        def build(stamp: Time) -> Tare.Request:
            return Tare.Request(min_stamp=stamp)

        res = self.calls.service(
            self.tare_c,
            build(self.cell.stamp),
            'wrist gauge zero',
            self.calls.t.quick_s,
            repeatable=True,
            again=self._held(build),
        )
        if res.error_code != Tare.Response.OK:
            print(f'  wrist gauge zero refused, the last tare kept: {res.error_msg}', flush=True)
            return
        self.tare_wrench = [float(v) for v in res.wrench]

    def weigh(self, observation: Observation) -> PackageSpec | None:
        assert self.cell is not None
        self.cell.hold(self.hold_s)

        def build(stamp: Time) -> Weigh.Request:
            return Weigh.Request(
                observation=observation_to_msg(observation),
                min_stamp=stamp,
                tare=self.tare_wrench or [0.0] * 6,
                has_tare=self.tare_wrench is not None,
            )

        res = self.calls.service(
            self.weigh_c,
            build(self.cell.stamp),
            'wrist gauge weigh',
            self.calls.t.quick_s,
            repeatable=True,  # it carries the tare: a restarted gauge weighs the same
            again=self._held(build),
        )
        if res.error_code != Weigh.Response.OK:
            self.last_error = f'{res.error_code}: {res.error_msg}'
            print(f'  wrist gauge: {self.last_error}', flush=True)
            return None
        return spec_from_msg(res.spec)


class RosPerception:
    """PerceptionPort over depth_fusion (detection and the fused height map)."""

    def __init__(
        self,
        node: Node,
        calls: Calls,
        oracle: bool,
        prefix: str = '/depth_fusion',
        stamp: Callable[[], Time] | None = None,
    ) -> None:
        self.calls = calls
        self.oracle = oracle
        # The cell's time now: each request asks for frames no older (streaming cameras).
        self.stamp = stamp or Time
        self.detect_c = node.create_client(Detect, f'{prefix}/detect')
        self.fuse_c = node.create_client(FuseHeightMap, f'{prefix}/fuse')
        self.held_c = node.create_client(MeasureHeld, f'{prefix}/measure_held')
        self.lid_c = node.create_client(MeasureLid, f'{prefix}/measure_lid')
        self.lid_reason = ''  # why the last set-aside lid measurement failed
        self.say: Callable[[str], None] = getattr(node, 'say', print)
        self.last: HeightMap | None = None  # the newest fused map
        self.held_reason = ''  # why the last in-hand measurement failed
        self.on_heightmap: Callable[[HeightMap], None] | None = None
        self.forget = True  # the next fusion starts the map afresh (an episode's first)

    def reset(self) -> None:
        """A new episode: the next fusion forgets what earlier ones saw."""
        self.forget = True
        self.last = None

    def detect(self, package_id: str) -> Observation | None:
        res = self.calls.service(
            self.detect_c,
            Detect.Request(min_stamp=self.stamp()),
            'detection',
            self.calls.t.quick_s,
            repeatable=True,
            retry_s=10.0,
        )
        seen = [observation_from_msg(o) for o in res.observations]
        for o in seen:
            if o.package_id == package_id:
                return o
        # A camera detector cannot read labels: its one detection is the presented carton.
        unnamed = [o for o in seen if not o.package_id]
        return dataclasses.replace(unnamed[0], package_id=package_id) if unnamed else None

    def measure_held(self, observation: Observation) -> Observation | None:
        got, self.held_reason = self._measure(
            self.held_c, MeasureHeld, observation, 'in-hand measurement'
        )
        return got

    def measure_lid(self, observation: Observation) -> Observation | None:
        got, self.lid_reason = self._measure(
            self.lid_c, MeasureLid, observation, 'set-aside lid measurement'
        )
        return got

    def _measure(
        self, client: Any, kind: Any, observation: Observation, what: str
    ) -> tuple[Observation | None, str]:
        """(the measured observation, '') of a MeasureHeld or MeasureLid call, or (None, why)."""
        res = self.calls.service(
            client,
            kind.Request(observation=observation_to_msg(observation), min_stamp=self.stamp()),
            what,
            self.calls.t.quick_s,
            repeatable=True,
            retry_s=10.0,
        )
        if res.error_code != kind.Response.OK:
            self.say(f'  {what} of {observation.package_id}: {res.error_msg}')
            return None, res.error_msg
        return observation_from_msg(res.observation), ''

    def heightmap(self) -> HeightMap:
        res = self.calls.service(
            self.fuse_c,
            FuseHeightMap.Request(forget=self.forget, min_stamp=self.stamp()),
            'height-map fusion',
            self.calls.t.quick_s,
            repeatable=True,
            retry_s=10.0,
        )
        if res.error_code != FuseHeightMap.Response.OK:
            raise EpisodeAborted(f'height-map fusion failed: {res.error_msg}')
        self.forget = False
        self.last = heightmap_from_msg(res.heightmap)
        if self.on_heightmap is not None:
            self.on_heightmap(self.last)
        return self.last


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
    ) -> None:
        self.calls = calls
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

    def _move(self, client, what: str) -> MotionOutcome:
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
        res = self.calls.action(
            self.pick_c,
            Pick.Goal(observation=observation_to_msg(observation), min_stamp=self.stamp()),
            'pick',
            self.calls.t.motion,
        )
        if self.refresh is not None:
            self.refresh()
        return motion_outcome(exec_result_from_msg(res))

    def place(self, plan: PlacementPlan, spec: PackageSpec, heightmap: HeightMap) -> MotionOutcome:
        goal = Place.Goal(
            plan=plan_to_msg(plan),
            spec=spec_to_msg(spec),
            heightmap=heightmap_to_msg(heightmap),
            min_stamp=self.stamp(),
        )
        res = self.calls.action(self.place_c, goal, 'place', self.calls.t.motion)
        if self.refresh is not None:
            self.refresh()
        return motion_outcome(exec_result_from_msg(res), placing=True)

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
        if self.calls is None or not self.photo_views:
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
