"""Telemetry node: records the episode topics to the run directory and a rosbag2 MCAP bag."""

from __future__ import annotations

import json
import os
import threading
from datetime import datetime
from pathlib import Path

import numpy as np
import rclpy
from palletizer_msgs.msg import EpisodeEvent, HeightMap, PalletState, Placement
from palletizer_msgs.srv import EndEpisode
from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import Image, JointState
from tf2_msgs.msg import TFMessage

from palletizer.core.config import load_config
from palletizer.core.contracts import EpisodeResult
from palletizer.core.errors import PalletizerError
from palletizer.nodes.convert import pallet_state_from_msg, placement_from_msg
from palletizer.nodes.qos import COMMANDS, EVENTS, LATCHED, SENSORS
from palletizer.telemetry import (
    TOPICS,
    BagWriter,
    RunWriter,
    TelemetryMode,
    check_event_count,
    encode_png,
    run_stamp,
)

__all__ = ['TelemetryNode', 'main']

_FIXED = ('mode', 'runs_dir', 'run_stamp', 'tag')
# Frames kept while waiting for their snapshot mark (a mark names two views per photo).
_MAX_FRAMES = 8


def _stamp_ns(stamp) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


class TelemetryNode(Node):
    """Writes episode events, placements and pallet states to disk, and every topic to a bag.

    ~/end_episode closes the open episode and confirms the event count; a message of a new
    seed opens its episode (and aborts an open one, which the director failed to end).
    """

    def __init__(self) -> None:
        super().__init__('telemetry')
        cfg = load_config().telemetry

        def param(name: str, default, what: str):
            return self.declare_parameter(
                name, default, ParameterDescriptor(description=what)
            ).value

        mode = TelemetryMode.parse(param('mode', cfg['mode'], 'disk | remote | off'), 'mode')
        runs_dir = param('runs_dir', cfg['runs_dir'], 'folder of run directories (relative: cwd)')
        stamp = param('run_stamp', '', 'YYYYmmdd-HHMMSS of the run; empty = wall clock at start')
        tag = param('tag', 'pallet', 'suffix of the run directory name')
        self.end_wait_s = float(
            param('end_wait_s', 2.0, '[s] how long end_episode waits for events still in flight')
        )
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.mode = mode
        self.run: RunWriter | None = None
        self.bag: BagWriter | None = None
        # Subscriptions and the service run on different threads: end_episode waits for events
        # still in flight, which only the subscription thread can deliver.
        self._lock = threading.Condition()
        self._subs = MutuallyExclusiveCallbackGroup()
        self.create_service(
            EndEpisode,
            '~/end_episode',
            self.on_end_episode,
            callback_group=MutuallyExclusiveCallbackGroup(),
        )
        if mode is TelemetryMode.off:
            self.get_logger().info('telemetry off: nothing is written')
            return
        # The run stamp is the one wall-clock read: it names the directory, nothing else.
        stamp = stamp or run_stamp(datetime.now())
        self.run = RunWriter(Path(os.path.expanduser(runs_dir)), stamp, tag)
        topics = {t: m for t, m in TOPICS.items() if t in cfg['bag']['topics']}
        if cfg['bag']['enabled']:
            self.bag = BagWriter(self.run.path / 'bag', topics)
        if mode is TelemetryMode.remote:
            self.get_logger().warning('remote replica not available yet: writing to disk only')
        self._raw(EpisodeEvent, 'episode_events', EVENTS, self.on_event)
        self._raw(Placement, 'placements', EVENTS, self.on_placement)
        self._raw(PalletState, 'pallet_states', EVENTS, self.on_pallet_state)
        self._raw(HeightMap, 'heightmap', LATCHED, self._recorder('/palletizer/heightmap'))
        self._raw(JointState, '/joint_states', SENSORS, self._recorder('/joint_states'))
        # /tf publishers are volatile: a transient-local reader would match none of them.
        self._raw(TFMessage, '/tf', COMMANDS, self._recorder('/tf'))
        self._raw(TFMessage, '/tf_static', LATCHED, self._recorder('/tf_static'))
        # Snapshots: the director's mark (seed, after_seq, views, stamp) and the cell bridge's
        # colour frames of that sim stamp, paired here whichever arrives first.
        self.views = tuple(cfg['snapshots']['views'])
        self._frames: dict[tuple[str, int], Image] = {}
        self._marks: list[tuple[int, int, tuple[str, ...], int]] = []
        self.create_subscription(
            EpisodeEvent,
            '/palletizer/snapshot_marks',
            self.on_mark,
            EVENTS,
            callback_group=self._subs,
        )
        for view in self.views:
            self.create_subscription(
                Image,
                f'/cameras/{view}/color/image_raw',
                lambda msg, v=view: self.on_frame(v, msg),
                COMMANDS,
                callback_group=self._subs,
            )
        self.get_logger().info(f'telemetry ready: {mode.value} -> {self.run.path}')

    def _raw(self, msg_type, topic: str, qos, callback) -> None:
        # raw=True: the bag stores the wire bytes; only the episode topics are deserialised.
        self.create_subscription(
            msg_type, topic, callback, qos, callback_group=self._subs, raw=True
        )

    def _on_set_parameters(self, params) -> SetParametersResult:
        for p in params:
            if p.name in _FIXED:
                return SetParametersResult(
                    successful=False, reason=f'{p.name} is fixed for the run; restart the node'
                )
        return SetParametersResult(successful=True)

    def _stamp(self) -> int:
        return max(0, self.get_clock().now().nanoseconds)  # sim time under use_sim_time

    def _record(self, topic: str, data: bytes) -> None:
        if self.bag is not None and topic in self.bag.topics:
            self.bag.write(topic, self._stamp(), data)

    def _recorder(self, topic: str):
        def record(data: bytes) -> None:
            with self._lock:
                self._record(topic, data)

        return record

    # -- episode topics -----------------------------------------------------------------------

    def on_event(self, data: bytes) -> None:
        msg = deserialize_message(data, EpisodeEvent)
        with self._lock:
            try:
                if self.run.open_seed != msg.seed:
                    if self.run.open_seed is not None:
                        self.get_logger().error(
                            f'event of seed {msg.seed} while episode {self.run.open_seed} is '
                            'open: aborting it (end_episode never came)'
                        )
                        self.run.abort()
                    self.run.begin(msg.seed)
                row = self.run.event(
                    msg.seq, msg.ts, msg.kind, json.loads(msg.payload_json or '{}'),
                    msg.package_id, seed=msg.seed,
                )  # fmt: skip
            except (PalletizerError, ValueError) as exc:
                self.get_logger().error(f'event seed {msg.seed} seq {msg.seq} dropped: {exc}')
                return
            # The bag's payload is the stored one, in mm and degrees as the message says.
            msg.payload_json = json.dumps(row['payload'], separators=(',', ':'))
            self._record('/palletizer/episode_events', serialize_message(msg))
            self._lock.notify_all()

    def on_placement(self, data: bytes) -> None:
        msg = deserialize_message(data, Placement)
        with self._lock:
            try:
                self.run.placement(placement_from_msg(msg))
            except (PalletizerError, ValueError) as exc:
                self.get_logger().error(f'placement seq {msg.seq} dropped: {exc}')
                return
            self._record('/palletizer/placements', data)

    def on_pallet_state(self, data: bytes) -> None:
        msg = deserialize_message(data, PalletState)
        with self._lock:
            try:
                self.run.pallet_state(pallet_state_from_msg(msg))
            except (PalletizerError, ValueError) as exc:
                self.get_logger().error(f'pallet state {msg.after_seq} dropped: {exc}')
                return
            self._record('/palletizer/pallet_states', data)

    # -- snapshots ----------------------------------------------------------------------------

    def on_mark(self, msg: EpisodeEvent) -> None:
        try:
            payload = json.loads(msg.payload_json)
            views = tuple(str(v) for v in payload['views'])
            stamp = int(payload['stamp_ns'])
        except (ValueError, KeyError, TypeError) as exc:
            self.get_logger().error(f'snapshot mark {msg.seq} dropped: {exc}')
            return
        with self._lock:
            self._marks.append((int(msg.seed), int(msg.seq), views, stamp))
            self._pair()

    def on_frame(self, view: str, msg: Image) -> None:
        with self._lock:
            self._frames[(view, _stamp_ns(msg.header.stamp))] = msg
            while len(self._frames) > _MAX_FRAMES:
                self._frames.pop(next(iter(self._frames)))
            self._pair()

    def _pair(self) -> None:
        """Write every mark whose frames are all here (caller holds the lock)."""
        waiting = []
        for seed, after_seq, views, stamp in self._marks:
            frames = [self._frames.get((v, stamp)) for v in views]
            if any(f is None for f in frames):
                waiting.append((seed, after_seq, views, stamp))
                continue
            for v in views:
                self._frames.pop((v, stamp), None)
            if self.run.open_seed != seed:
                self.get_logger().error(
                    f'snapshot {after_seq} of seed {seed} dropped: episode '
                    f'{self.run.open_seed} is open'
                )
                continue
            for view, img in zip(views, frames, strict=True):
                try:
                    if img.encoding != 'rgb8' or img.step != img.width * 3:
                        raise PalletizerError(
                            f'frame encoding {img.encoding!r} step {img.step}; expected rgb8, '
                            f'step {img.width * 3}'
                        )
                    rgb = np.frombuffer(bytes(img.data), np.uint8)
                    rgb = rgb.reshape(img.height, img.width, 3)
                    self.run.snapshot(after_seq, view, encode_png(rgb))
                except (PalletizerError, ValueError) as exc:
                    self.get_logger().error(f'snapshot {after_seq} {view} dropped: {exc}')
        self._marks = waiting
        self._lock.notify_all()

    def on_end_episode(self, req: EndEpisode.Request, res: EndEpisode.Response):
        if self.run is None:
            res.error_code = EndEpisode.Response.DISABLED
            res.error_msg = 'telemetry mode off: nothing is written'
            return res
        try:
            result = EpisodeResult.from_dict(json.loads(req.result_json))
        except (PalletizerError, ValueError, TypeError) as exc:
            res.error_code = EndEpisode.Response.INVALID_REQUEST
            res.error_msg = f'result_json: {exc}'
            return res
        with self._lock:
            # Events and snapshot frames travel on other topics than this request and may still
            # be in flight.
            self._lock.wait_for(
                lambda: (
                    self.run.open_seed == req.seed
                    and (self.run.open_events or 0) >= req.expected_events
                    and not any(m[0] == req.seed for m in self._marks)
                ),
                self.end_wait_s,
            )
            for seed, after_seq, views, _ in self._marks:
                if seed == req.seed:
                    self.get_logger().error(
                        f'snapshot {after_seq} of seed {seed}: frames {views} never came'
                    )
            self._marks = [m for m in self._marks if m[0] != req.seed]
            if self.run.open_seed != req.seed or result.seed != req.seed:
                res.error_code = EndEpisode.Response.NO_OPEN_EPISODE
                res.error_msg = (
                    f'seed {req.seed} (result seed {result.seed}) is not the open episode '
                    f'({self.run.open_seed})'
                )
                return res
            try:
                res.events_written = self.run.end(result)
            except PalletizerError as exc:
                res.error_code = EndEpisode.Response.INVALID_REQUEST
                res.error_msg = str(exc)
                return res
        try:
            check_event_count(req.seed, res.events_written, req.expected_events)
        except PalletizerError as exc:
            res.error_code = EndEpisode.Response.COUNT_MISMATCH
            res.error_msg = str(exc)
            self.get_logger().error(res.error_msg)
            return res
        res.error_code = EndEpisode.Response.OK
        return res

    def close(self) -> None:
        """Abort any open episode and finish the bag (also on Ctrl-C and SIGTERM)."""
        with self._lock:
            if self.run is not None:
                seed = self.run.open_seed
                if self.run.abort() is not None:
                    self.get_logger().warning(f'episode seed {seed} aborted at shutdown')
                self.run.close()
            if self.bag is not None:
                self.bag.close()


def main(args=None) -> None:
    rclpy.init(args=args)
    node = None
    try:
        node = TelemetryNode()
        executor = MultiThreadedExecutor(num_threads=2)
        executor.add_node(node)
        # A bounded wait instead of spin(): under load a SIGTERM during the wait-set wait was
        # seen to be lost (1 in ~20 stops hung in _wait_for_ready_callbacks), and then the bag
        # would never be closed. Polling ok() every 0.2 s makes the stop certain.
        while rclpy.ok():
            executor.spin_once(timeout_sec=0.2)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            node.close()
            node.destroy_node()
        rclpy.try_shutdown()


if __name__ == '__main__':
    main()
