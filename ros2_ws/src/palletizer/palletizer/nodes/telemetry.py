"""Telemetry node: records the episode topics to the run directory and a rosbag2 MCAP bag.

It converts each of the episode topics to the run writer's calls; the writing itself is in
telemetry/ (run.py, bag.py, replica/). Its parts beside it: the parameters
(telemetry_params.py), the Begin/EndEpisode services (telemetry_episodes.py), the snapshot
pairing (telemetry_snapshots.py) and the replica (telemetry_replica.py).
"""

from __future__ import annotations

import functools
import json
import os
import sys
import threading
from collections.abc import Callable

import rclpy
from palletizer_msgs.msg import EpisodeEvent, HeightMap, PalletState, Placement
from palletizer_msgs.srv import BeginEpisode, EndEpisode
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import Image, JointState
from tf2_msgs.msg import TFMessage

from palletizer.core.config import load_config
from palletizer.core.errors import PalletizerError
from palletizer.core.ports import stop_cause
from palletizer.nodes.convert import pallet_state_from_msg, placement_from_msg
from palletizer.nodes.qos import COMMANDS, EVENTS, LATCHED, SENSORS
from palletizer.nodes.spin import destroy_within, exit_now, init, spin_until_shutdown, start
from palletizer.nodes.telemetry_episodes import EpisodeServices
from palletizer.nodes.telemetry_params import declare_params, refuse_fixed
from palletizer.nodes.telemetry_replica import start_replica, stop_replica
from palletizer.nodes.telemetry_snapshots import Snapshots
from palletizer.telemetry import (
    Recorder,
    RunWriter,
    TelemetryMode,
    TelemetryWriteError,
)
from palletizer.telemetry.replica import Replicator

__all__ = ['TelemetryNode', 'main']


class TelemetryNode(Node):
    """Writes episode events, placements and pallet states to disk, and every topic to a bag.

    ~/begin_episode opens an episode and binds the node to the director's run id (messages of
    another run id are dropped); ~/end_episode closes it and confirms the event count. A
    message of a new seed without begin still opens its episode (and aborts an open one,
    which the director failed to end). When the disk refuses, the node stays up and answers
    with CANNOT_WRITE or WRITE_FAILED.
    """

    def __init__(self) -> None:
        super().__init__('telemetry')
        self._launcher_pid = os.getppid()  # a different parent at close: the launcher died
        cfg = load_config().telemetry
        params = declare_params(self, cfg)
        self.mode = mode = params.mode
        self.end_wait_s = params.end_wait_s
        self.add_on_set_parameters_callback(refuse_fixed)
        self.rec: Recorder | None = None
        self.replicator: Replicator | None = None
        self.drain_s = cfg.replica.drain_s
        self._dropped: set[str] = set()  # what was logged once: foreign run ids, no run folder
        # Subscriptions and the service run on different threads: end_episode waits for events
        # still in flight, which only the subscription thread can deliver.
        self.lock = threading.Condition()
        self._subs = MutuallyExclusiveCallbackGroup()
        services = MutuallyExclusiveCallbackGroup()
        self.snapshots = Snapshots(self)
        self.episodes = EpisodeServices(self)
        self.create_service(
            BeginEpisode, '~/begin_episode', self.episodes.begin, callback_group=services
        )
        self.create_service(
            EndEpisode, '~/end_episode', self.episodes.end, callback_group=services
        )
        if mode is TelemetryMode.off:
            self.get_logger().info('telemetry off: nothing is written')
            return
        self.rec = Recorder(params.recorder_config(cfg))
        if self.rec.open():
            # Stay up: begin_episode answers CANNOT_WRITE, so the director fails at once.
            self.get_logger().error(f'telemetry cannot write: {self.rec.error}')
        self.replicator, self.replica_line = start_replica(
            mode, cfg.replica, self.rec, self._log_line
        )
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
        self.views = tuple(v.value for v in cfg.snapshots.views)
        self.create_subscription(
            EpisodeEvent,
            '/palletizer/snapshot_marks',
            self.snapshots.on_mark,
            EVENTS,
            callback_group=self._subs,
        )
        for view in self.views:
            self.create_subscription(
                Image,
                f'/cameras/{view}/color/image_raw',
                functools.partial(self.snapshots.on_frame, view),
                COMMANDS,
                callback_group=self._subs,
            )
        self.get_logger().info(
            f'telemetry ready: {mode.value} -> {self.rec.run_dir or "-"} · {self.replica_line}'
        )

    def _log_line(self, level: str, line: str) -> None:
        """A line of the replicator or of the shutdown, at `level` (info, warning, error)."""
        # After Ctrl-C the context is shut down and a logger call cannot reach /rosout (rcl
        # prints an error per line): the closing lines go to stderr, in the logger's format.
        if not self.context.ok():
            print(f'[{level.upper()}] [telemetry]: {line}', file=sys.stderr, flush=True)
            return
        # One call site per severity: rclpy refuses a call site whose severity changes.
        log = self.get_logger()
        if level == 'info':
            log.info(line)
        elif level == 'warning':
            log.warning(line)
        else:
            log.error(line)

    def _raw(
        self, msg_type: type, topic: str, qos: QoSProfile, callback: Callable[[bytes], None]
    ) -> None:
        # raw=True: the bag stores the wire bytes; only the episode topics are deserialised.
        self.create_subscription(
            msg_type, topic, callback, qos, callback_group=self._subs, raw=True
        )

    def _stamp(self) -> int:
        return max(0, self.get_clock().now().nanoseconds)  # sim time under use_sim_time

    def _once(self, key: str, line: str) -> None:
        if key not in self._dropped:
            self._dropped.add(key)
            self.get_logger().error(line)

    def recorder_on(self) -> Recorder:
        """The recorder, for the callbacks: they are subscribed only when telemetry is on."""
        assert self.rec is not None, 'telemetry off: nothing is subscribed'
        return self.rec

    def _record(self, topic: str, data: bytes) -> None:
        bag = self.recorder_on().bag
        if bag is not None and topic in bag.topics:
            try:
                bag.write(topic, self._stamp(), data)
            except TelemetryWriteError as exc:
                self._once('bag', f'bag messages dropped from now: {exc}')

    def _replica_check(self) -> None:
        """Log once when rows could not be queued for the replica (the disk has them)."""
        run = self.recorder_on().run
        sink = None if run is None else run.replica
        if sink is not None and sink.error:
            self._once('outbox', f'replica outbox: {sink.error}; scripts/replicate can backfill')

    def mine(self, run_id: str, what: str) -> bool:
        """False (logged once per run id) for a message of another run than the bound one."""
        rec = self.recorder_on()
        if rec.accepts(run_id):
            return True
        self._once(
            f'run:{run_id}',
            f'{what} of run {run_id} dropped: this node serves run {rec.run_id} (two runs '
            'on one ROS domain?); counted in the shutdown line',
        )
        return False

    def _recorder(self, topic: str) -> Callable[[bytes], None]:
        def record(data: bytes) -> None:
            with self.lock:
                self._record(topic, data)

        return record

    # -- episode topics -----------------------------------------------------------------------

    def on_event(self, data: bytes) -> None:
        msg = deserialize_message(data, EpisodeEvent)
        with self.lock:
            if not self.mine(msg.run_id, 'event'):
                return
            try:
                note = self.recorder_on().adopt(msg.seed, msg.run_id)
                if note:
                    self.get_logger().error(note)
                row = self._run().event(
                    msg.seq, msg.ts, msg.kind, json.loads(msg.payload_json or '{}'),
                    msg.package_id, seed=msg.seed,
                )  # fmt: skip
            except TelemetryWriteError as exc:
                self._once('write', f'events dropped: {exc}')
                return
            except (PalletizerError, ValueError) as exc:
                self.get_logger().error(f'event seed {msg.seed} seq {msg.seq} dropped: {exc}')
                return
            self._replica_check()
            # The bag's payload is the stored one, in mm and degrees as the message says.
            msg.payload_json = json.dumps(row['payload'], separators=(',', ':'))
            self._record('/palletizer/episode_events', serialize_message(msg))
            self.lock.notify_all()

    def on_placement(self, data: bytes) -> None:
        msg = deserialize_message(data, Placement)
        with self.lock:
            try:
                self._run().placement(placement_from_msg(msg))
            except TelemetryWriteError as exc:
                self._once('write', f'placements dropped: {exc}')
                return
            except (PalletizerError, ValueError) as exc:
                self.get_logger().error(f'placement seq {msg.seq} dropped: {exc}')
                return
            self._record('/palletizer/placements', data)

    def on_pallet_state(self, data: bytes) -> None:
        msg = deserialize_message(data, PalletState)
        with self.lock:
            try:
                self._run().pallet_state(pallet_state_from_msg(msg))
            except TelemetryWriteError as exc:
                self._once('write', f'pallet states dropped: {exc}')
                return
            except (PalletizerError, ValueError) as exc:
                self.get_logger().error(f'pallet state {msg.after_seq} dropped: {exc}')
                return
            self._record('/palletizer/pallet_states', data)

    def _run(self) -> RunWriter:
        rec = self.recorder_on()
        if rec.run is None:
            raise TelemetryWriteError(f'no run folder: {rec.error}')
        return rec.run

    def close(self) -> None:
        """Abort any open episode and finish the bag (also on Ctrl-C and SIGTERM)."""
        if self.rec is None:
            return
        with self.lock:
            try:
                seed = self.rec.close(stop_cause(self._launcher_pid))
                if seed is not None:
                    self._log_line('warning', f'episode seed {seed} aborted at shutdown')
            except PalletizerError as exc:
                self._log_line('error', f'telemetry could not close the run: {exc}')
            for run_id, n in self.rec.foreign.items():
                self._log_line('warning', f'{n} messages of run {run_id} were dropped')
        if self.replicator is not None:
            stop_replica(self.replicator, self.drain_s, self.rec, self._log_line)


def main(args: list[str] | None = None) -> None:
    init(args)  # Ctrl-C stops the node like SIGTERM: no KeyboardInterrupt
    node = None
    try:
        node = start(TelemetryNode)
        executor = start(lambda: MultiThreadedExecutor(num_threads=2))
        executor.add_node(node)
        # A bounded wait instead of spin(): under load a SIGTERM during the wait-set wait was
        # seen to be lost (1 in ~20 stops hung in _wait_for_ready_callbacks), and then the bag
        # would never be closed. Polling ok() every 0.2 s makes the stop certain.
        spin_until_shutdown(executor, poll_s=0.2)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            node.close()
            destroy_within(node)
        rclpy.try_shutdown()
    exit_now(0)  # a stop: the bag is closed; skip the interpreter's finalization (nodes/spin.py)


if __name__ == '__main__':
    main()
