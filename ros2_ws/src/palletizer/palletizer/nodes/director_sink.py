"""The director's sink port: the episode's events, placements, pallet states and photo marks.

RosSink publishes what the episode loop records on never-lossy topics for the telemetry node,
echoes the lines an operator follows, and has the cell bridge take each layer's photo.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from palletizer_msgs.msg import EpisodeEvent
from palletizer_msgs.msg import PalletState as PalletStateMsg
from palletizer_msgs.msg import Placement as PlacementMsg
from palletizer_msgs.srv import Capture
from rclpy.node import Node

from palletizer.core.contracts import PalletState, Placement
from palletizer.core.episode import last_resort_line
from palletizer.nodes.calls import Calls
from palletizer.nodes.convert import pallet_state_to_msg, placement_to_msg, stamp_s
from palletizer.nodes.qos import EVENTS

__all__ = ['RosSink']


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
