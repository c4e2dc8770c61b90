"""Telemetry node: records the episode topics to the run directory and a rosbag2 MCAP bag.

Why a node of this length (the style guide asks about 300 lines): it converts each of the
episode topics and the Begin/EndEpisode services to the run writer's calls and answers every
refusal with its own code; the writing itself is in telemetry/ (run.py, bag.py, replica/).
"""

from __future__ import annotations

import functools
import json
import os
import sys
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import numpy as np
import rclpy
from builtin_interfaces.msg import Time
from palletizer_msgs.msg import EpisodeEvent, HeightMap, PalletState, Placement
from palletizer_msgs.srv import BeginEpisode, EndEpisode
from rcl_interfaces.msg import SetParametersResult
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import Image, JointState
from tf2_msgs.msg import TFMessage

from palletizer.core.config import load_config
from palletizer.core.contracts import EpisodeResult
from palletizer.core.errors import PalletizerError
from palletizer.core.ports import stop_cause
from palletizer.nodes.convert import pallet_state_from_msg, placement_from_msg
from palletizer.nodes.params import declare
from palletizer.nodes.qos import COMMANDS, EVENTS, LATCHED, SENSORS
from palletizer.nodes.spin import destroy_within, exit_now, init, spin_until_shutdown, start
from palletizer.telemetry import (
    TOPICS,
    Recorder,
    RecorderConfig,
    RunWriter,
    TelemetryMode,
    TelemetryWriteError,
    check_event_count,
    encode_png,
    run_stamp,
)
from palletizer.telemetry.replica import Replicator, adopt_orphans, choose_backend

__all__ = ['TelemetryNode', 'main']

_FIXED = ('mode', 'runs_dir', 'run_stamp', 'tag', 'min_free_mb')
# Frames kept while waiting for their snapshot mark (a mark names two views per photo).
_MAX_FRAMES = 8


def _stamp_ns(stamp: Time) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


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

        mode = TelemetryMode.parse(
            declare(self, 'mode', cfg.mode.value, 'disk | postgres | supabase | off'), 'mode'
        )
        runs_dir = declare(
            self, 'runs_dir', cfg.runs_dir, 'folder of run directories (relative: cwd)'
        )
        stamp = declare(
            self, 'run_stamp', '', 'YYYYmmdd-HHMMSS of the run; empty = wall clock at start'
        )
        tag = declare(self, 'tag', 'pallet', 'suffix of the run directory name')
        min_free_mb = float(
            declare(self, 'min_free_mb', cfg.min_free_mb, '[MB] free space the runs folder needs')
        )
        # The wait ends as soon as everything is in; its length matters only under load, when
        # the last photo's two frames (~1 MB each) reached this node more than 2 s after the
        # director's end_episode (level 31 -n 3 on two busy cores lost a final photo at 2 s).
        self.end_wait_s = float(
            declare(
                self,
                'end_wait_s',
                10.0,
                '[s] how long end_episode waits for events and photo frames still in flight',
            )
        )
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.mode = mode
        self.rec: Recorder | None = None
        self.replicator: Replicator | None = None
        self.drain_s = cfg.replica.drain_s
        self._dropped: set[str] = set()  # what was logged once: foreign run ids, no run folder
        # Subscriptions and the service run on different threads: end_episode waits for events
        # still in flight, which only the subscription thread can deliver.
        self._lock = threading.Condition()
        self._subs = MutuallyExclusiveCallbackGroup()
        services = MutuallyExclusiveCallbackGroup()
        self.create_service(
            BeginEpisode, '~/begin_episode', self.on_begin_episode, callback_group=services
        )
        self.create_service(
            EndEpisode, '~/end_episode', self.on_end_episode, callback_group=services
        )
        if mode is TelemetryMode.off:
            self.get_logger().info('telemetry off: nothing is written')
            return
        # The run stamp is the one wall-clock read: it names the directory, nothing else.
        topics = {t: m for t, m in TOPICS.items() if t in cfg.bag.topics}
        self.rec = Recorder(
            RecorderConfig(
                runs_dir=Path(os.path.expanduser(runs_dir)),
                stamp=stamp or run_stamp(datetime.now()),
                tag=tag,
                min_free_bytes=int(min_free_mb * 1e6),
                bag_topics=topics if cfg.bag.enabled else None,
                outbox=mode in (TelemetryMode.postgres, TelemetryMode.supabase),
            )
        )
        if self.rec.open():
            # Stay up: begin_episode answers CANNOT_WRITE, so the director fails at once.
            self.get_logger().error(f'telemetry cannot write: {self.rec.error}')
        choice = choose_backend(mode.value, cfg.replica)
        self.replica_line = choice.line
        if choice.backend is not None:
            self.replicator = Replicator(
                choice.backend,
                self._log_line,
                batch=cfg.replica.batch,
                backoff_s=cfg.replica.backoff_s,
            )
            if self.rec.run is not None:
                self.replicator.add(self.rec.run.path)
            for run_dir, note in adopt_orphans(self.rec.cfg.runs_dir, self.rec.run_dir):
                self.replicator.add(run_dir)
                if note:
                    self.get_logger().warning(note)
            self.replicator.start()
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
        self._frames: dict[tuple[str, int], Image] = {}
        self._marks: list[tuple[int, int, tuple[str, ...], int]] = []
        self._late: set[tuple[str, int]] = set()  # frames of marks dropped at an episode end
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
                functools.partial(self.on_frame, view),
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

    def _on_set_parameters(self, params: list[Parameter]) -> SetParametersResult:
        for p in params:
            if p.name in _FIXED:
                return SetParametersResult(
                    successful=False, reason=f'{p.name} is fixed for the run; restart the node'
                )
        return SetParametersResult(successful=True)

    def _stamp(self) -> int:
        return max(0, self.get_clock().now().nanoseconds)  # sim time under use_sim_time

    def _once(self, key: str, line: str) -> None:
        if key not in self._dropped:
            self._dropped.add(key)
            self.get_logger().error(line)

    def _recorder_on(self) -> Recorder:
        """The recorder, for the callbacks: they are subscribed only when telemetry is on."""
        assert self.rec is not None, 'telemetry off: nothing is subscribed'
        return self.rec

    def _record(self, topic: str, data: bytes) -> None:
        bag = self._recorder_on().bag
        if bag is not None and topic in bag.topics:
            try:
                bag.write(topic, self._stamp(), data)
            except TelemetryWriteError as exc:
                self._once('bag', f'bag messages dropped from now: {exc}')

    def _replica_check(self) -> None:
        """Log once when rows could not be queued for the replica (the disk has them)."""
        run = self._recorder_on().run
        sink = None if run is None else run.replica
        if sink is not None and sink.error:
            self._once('outbox', f'replica outbox: {sink.error}; scripts/replicate can backfill')

    def _mine(self, run_id: str, what: str) -> bool:
        """False (logged once per run id) for a message of another run than the bound one."""
        rec = self._recorder_on()
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
            with self._lock:
                self._record(topic, data)

        return record

    # -- episode topics -----------------------------------------------------------------------

    def on_event(self, data: bytes) -> None:
        msg = deserialize_message(data, EpisodeEvent)
        with self._lock:
            if not self._mine(msg.run_id, 'event'):
                return
            try:
                note = self._recorder_on().adopt(msg.seed, msg.run_id)
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
            self._lock.notify_all()

    def on_placement(self, data: bytes) -> None:
        msg = deserialize_message(data, Placement)
        with self._lock:
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
        with self._lock:
            try:
                self._run().pallet_state(pallet_state_from_msg(msg))
            except TelemetryWriteError as exc:
                self._once('write', f'pallet states dropped: {exc}')
                return
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
            if not self._mine(msg.run_id, 'snapshot mark'):
                return
            self._marks.append((int(msg.seed), int(msg.seq), views, stamp))
            self._pair()

    def on_frame(self, view: str, msg: Image) -> None:
        key = (view, _stamp_ns(msg.header.stamp))
        with self._lock:
            if key in self._late:  # its episode has ended without it
                self._late.discard(key)
                return
            self._frames[key] = msg
            while len(self._frames) > _MAX_FRAMES:
                self._frames.pop(next(iter(self._frames)))
            self._pair()

    def _pair(self) -> None:
        """Write every mark whose frames are all here (caller holds the lock)."""
        waiting = []
        for seed, after_seq, views, stamp in self._marks:
            found = [self._frames.get((v, stamp)) for v in views]
            frames = [f for f in found if f is not None]
            if len(frames) < len(found):
                waiting.append((seed, after_seq, views, stamp))
                continue
            for v in views:
                self._frames.pop((v, stamp), None)
            run = self._recorder_on().run
            open_seed = None if run is None else run.open_seed
            if open_seed != seed:
                self.get_logger().error(
                    f'snapshot {after_seq} of seed {seed} dropped: episode {open_seed} is open'
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
                    self._run().snapshot(after_seq, view, encode_png(rgb))
                except (PalletizerError, ValueError) as exc:
                    self.get_logger().error(f'snapshot {after_seq} {view} dropped: {exc}')
        self._marks = waiting
        self._lock.notify_all()

    def _run(self) -> RunWriter:
        rec = self._recorder_on()
        if rec.run is None:
            raise TelemetryWriteError(f'no run folder: {rec.error}')
        return rec.run

    def on_begin_episode(
        self, req: BeginEpisode.Request, res: BeginEpisode.Response
    ) -> BeginEpisode.Response:
        if self.rec is None:
            res.error_code = BeginEpisode.Response.DISABLED
            res.error_msg = 'telemetry mode off: nothing is written'
            return res
        with self._lock:
            outcome, why = self.rec.begin(req.seed, req.run_id, req.info_json)
            res.run_dir = self.rec.run_dir
        res.error_code = getattr(BeginEpisode.Response, outcome.name)
        res.error_msg = why
        if why:
            log = self.get_logger()
            (log.warning if res.error_code == BeginEpisode.Response.OK else log.error)(why)
        return res

    def on_end_episode(
        self, req: EndEpisode.Request, res: EndEpisode.Response
    ) -> EndEpisode.Response:
        if self.rec is None:
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
            run = self.rec.run
            if run is None:
                res.error_code = EndEpisode.Response.WRITE_FAILED
                res.error_msg = f'no run folder: {self.rec.error}'
                return res
            # Events and snapshot frames travel on other topics than this request and may still
            # be in flight.
            self._lock.wait_for(
                lambda: (
                    run.open_seed == req.seed
                    and (run.open_events or 0) >= req.expected_events
                    and not any(m[0] == req.seed for m in self._marks)
                ),
                self.end_wait_s,
            )
            for seed, after_seq, views, stamp in self._marks:
                if seed == req.seed:
                    self.get_logger().error(
                        f'snapshot {after_seq} of seed {seed}: frames {views} never came'
                    )
                    # Frames still on their way must not pair with a later mark of the same
                    # sim time (the next episode's clock starts at zero again).
                    for v in views:
                        if self._frames.pop((v, stamp), None) is None:
                            self._late.add((v, stamp))
            self._marks = [m for m in self._marks if m[0] != req.seed]
            if run.open_seed != req.seed or result.seed != req.seed:
                res.error_code = EndEpisode.Response.NO_OPEN_EPISODE
                res.error_msg = (
                    f'seed {req.seed} (result seed {result.seed}) is not the open episode '
                    f'({run.open_seed})'
                )
                return res
            try:
                res.events_written = run.open_events or 0
                res.events_written = run.end(result)
                self.rec.checkpoint()
                if self.replicator is not None:
                    self.replicator.wake()  # ship the episode's final row now, not at a poll
            except TelemetryWriteError as exc:
                res.error_code = EndEpisode.Response.WRITE_FAILED
                res.error_msg = f'episode seed {req.seed} not recorded: {exc}'
                self.get_logger().error(res.error_msg)
                return res
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
        if self.rec is None:
            return
        with self._lock:
            try:
                seed = self.rec.close(stop_cause(self._launcher_pid))
                if seed is not None:
                    self._log_line('warning', f'episode seed {seed} aborted at shutdown')
            except PalletizerError as exc:
                self._log_line('error', f'telemetry could not close the run: {exc}')
            for run_id, n in self.rec.foreign.items():
                self._log_line('warning', f'{n} messages of run {run_id} were dropped')
        if self.replicator is not None:
            self.replicator.wake()
            drained = self.replicator.stop(self.drain_s)
            r = self.replicator
            where = self.rec.run_dir or self.rec.cfg.runs_dir
            if drained:
                self._log_line(
                    'info',
                    f'replica: {r.shipped} rows shipped, {r.rejected} refused; outbox drained',
                )
            elif r.state == 'disabled':
                self._log_line(
                    'warning',
                    f'replica off (see above): the rows wait in the outbox; once fixed, '
                    f'scripts/replicate {where} ships them',
                )
            else:
                self._log_line(
                    'warning',
                    f'replica: {r.shipped} rows shipped; rows are left in the outbox '
                    f'({r.error or r.state}): the next start or scripts/replicate {where} '
                    'ships them',
                )


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
