"""The episode's sensing ports wired to ROS: the wrist gauge (tare, zero, weigh) and the
perception (detect, fuse the height map, measure a lid), each the mirror of one core port in
core/episode.py over the Calls helper (nodes/calls.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol

from builtin_interfaces.msg import Time
from palletizer_msgs.srv import (
    Detect,
    FuseHeightMap,
    MeasureHeld,
    MeasureLid,
    Tare,
    Weigh,
)
from rclpy.node import Node

from palletizer.core.contracts import (
    HeightMap,
    Observation,
    PackageSpec,
)
from palletizer.core.detection.label import LabelSeen
from palletizer.core.gauge_lift import weigh_topped_up
from palletizer.core.ports import EpisodeAborted
from palletizer.nodes.calls import Calls
from palletizer.nodes.convert import (
    heightmap_from_msg,
    observation_from_msg,
    observation_to_msg,
    spec_from_msg,
    stamp_s,
)

__all__ = ['HoldingCell', 'RosGauge', 'RosPerception']


class HoldingCell(Protocol):
    """What the gauge needs of a cell port (RosCell, or line_ports.RosLine): let time pass with
    the arm still, and the time now (a stamp, and the episode's sim time)."""

    @property
    def stamp(self) -> Time: ...

    def hold(self, seconds: float) -> None: ...

    def sim_time(self) -> float: ...


class RosGauge:
    """GaugePort over the wrist gauge; the arm is held still (cell settle) before each reading."""

    oracle = False

    def __init__(
        self,
        node: Node,
        calls: Calls,
        hold_s: float,
        prefix: str = '/wrist_gauge',
        on_lift: bool = False,
        on_move: bool = False,
    ) -> None:
        self.calls = calls
        self.hold_s = hold_s
        # Weigh on the lift first (configs/perception.yaml gauge.weigh_on_lift), as in-process.
        self.on_lift = on_lift
        self.last_weigh = ''  # 'lift' | 'lift_hold' | 'still' | '' (none)
        # Zero on the move back first (configs/perception.yaml gauge.zero_on_move), as in-process.
        self.on_move = on_move
        self.last_zero = ''  # 'move' | 'still' | '' (none)
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

    def zero(self, moved_since: float | None = None) -> None:
        """Tare again with the gripper empty (the episode loop calls it after each place, the
        arm still above the source), so the tare each weigh carries follows the sensor's drift;
        a refused zero keeps the previous tare, as in-process (wiring.gauge.WristGauge.zero).
        moved_since [s sim]: when the empty move there began; with on_move the tare comes
        from that move where it is certain enough, without holding still."""
        assert self.cell is not None
        if self.on_move and moved_since is not None:
            # The episode's sim time as a stamp: the stamp now less the time since.
            since = stamp_s(self.cell.stamp) - (self.cell.sim_time() - moved_since)
            ns = int(round(since * 1e9))
            req = Tare.Request(
                min_stamp=self.cell.stamp,
                on_move=True,
                moved_since=Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000),
            )
            res = self.calls.service(
                self.tare_c, req, 'wrist gauge zero on the move', self.calls.t.quick_s
            )
            if res.error_code == Tare.Response.OK:
                self.tare_wrench = [float(v) for v in res.wrench]
                self.last_zero = 'move'
                return
        self.last_zero = 'still'
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

    def _weigh_on_lift(self, observation: Observation) -> PackageSpec | None:
        """The carton weighed on the lift that ended now, or None (hold and weigh still)."""
        assert self.cell is not None
        req = Weigh.Request(
            observation=observation_to_msg(observation),
            min_stamp=self.cell.stamp,
            tare=self.tare_wrench or [0.0] * 6,
            has_tare=self.tare_wrench is not None,
            on_lift=True,
        )
        res = self.calls.service(
            self.weigh_c, req, 'wrist gauge weigh on the lift', self.calls.t.quick_s
        )
        if res.error_code != Weigh.Response.OK:
            return None
        return spec_from_msg(res.spec)

    def weigh(self, observation: Observation) -> PackageSpec | None:
        assert self.cell is not None
        self.last_weigh = ''
        held = 0.0
        if self.on_lift:
            spec, held = weigh_topped_up(
                lambda: self._weigh_on_lift(observation), self.cell.hold, self.hold_s
            )
            if spec is not None:
                self.last_weigh = 'lift' if held == 0 else 'lift_hold'
                return spec
        self.cell.hold(max(0.0, self.hold_s - held))

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
        self.last_weigh = 'still'
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
        self.held_label: LabelSeen | None = None  # the last held carton's label, where read
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

    def _read_label(self, res: Any) -> None:
        """held_label from a MeasureHeld response (None where the label was not read)."""
        self.held_label = (
            LabelSeen(
                res.label_face,
                how=res.label_how if res.label_face else '',
                reason='' if res.label_face else res.label_how,
            )
            if res.label_read
            else None
        )

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
        if kind is MeasureHeld:
            self._read_label(res)
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
