"""The telemetry node's snapshots: the director's marks paired with the cell's colour frames.

A mark (seed, after_seq, views, stamp) on /palletizer/snapshot_marks names the frames of one
photo; the cell bridge sends them on /cameras/<view>/color/image_raw stamped with that sim
time. Mark and frames pair here whichever arrives first, under the node's lock, and an
episode's end forgets its marks still waiting (nodes/telemetry_episodes.py).
"""

from __future__ import annotations

import json
import threading
from typing import Any, Protocol

import numpy as np
from builtin_interfaces.msg import Time
from palletizer_msgs.msg import EpisodeEvent
from sensor_msgs.msg import Image

from palletizer.core.errors import PalletizerError
from palletizer.telemetry import Recorder, encode_png

__all__ = ['MAX_FRAMES', 'Mark', 'SnapshotOwner', 'Snapshots', 'parse_mark', 'stamp_ns']

# Frames kept while waiting for their snapshot mark (a mark names two views per photo).
MAX_FRAMES = 8

# seed, after_seq, views, stamp [ns]
Mark = tuple[int, int, tuple[str, ...], int]


def stamp_ns(stamp: Time) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def parse_mark(msg: EpisodeEvent) -> Mark:
    """The mark a snapshot-mark message carries; ValueError, KeyError or TypeError when its
    payload is not {"views", "stamp_ns"}."""
    payload = json.loads(msg.payload_json)
    views = tuple(str(v) for v in payload['views'])
    stamp = int(payload['stamp_ns'])
    return int(msg.seed), int(msg.seq), views, stamp


def _png(img: Image) -> bytes:
    """The PNG of an rgb8 frame; PalletizerError for another encoding or row step."""
    if img.encoding != 'rgb8' or img.step != img.width * 3:
        raise PalletizerError(
            f'frame encoding {img.encoding!r} step {img.step}; expected rgb8, step {img.width * 3}'
        )
    rgb = np.frombuffer(bytes(img.data), np.uint8)
    rgb = rgb.reshape(img.height, img.width, 3)
    return encode_png(rgb)


class SnapshotOwner(Protocol):
    """What the snapshots use of the telemetry node (nodes/telemetry.py)."""

    lock: threading.Condition  # the subscriptions' and services' lock

    def get_logger(self) -> Any: ...

    def recorder_on(self) -> Recorder:
        """The recorder (telemetry is on)."""
        ...

    def mine(self, run_id: str, what: str) -> bool:
        """False (logged once) for a message of another run than the bound one."""
        ...


class Snapshots:
    """Marks waiting for their frames and frames waiting for their mark, of `node`'s run."""

    def __init__(self, node: SnapshotOwner) -> None:
        self.node = node
        self.frames: dict[tuple[str, int], Image] = {}
        self.marks: list[Mark] = []
        self.late: set[tuple[str, int]] = set()  # frames of marks dropped at an episode end

    def on_mark(self, msg: EpisodeEvent) -> None:
        try:
            mark = parse_mark(msg)
        except (ValueError, KeyError, TypeError) as exc:
            self.node.get_logger().error(f'snapshot mark {msg.seq} dropped: {exc}')
            return
        with self.node.lock:
            if not self.node.mine(msg.run_id, 'snapshot mark'):
                return
            self.marks.append(mark)
            self._pair()

    def on_frame(self, view: str, msg: Image) -> None:
        key = (view, stamp_ns(msg.header.stamp))
        with self.node.lock:
            if key in self.late:  # its episode has ended without it
                self.late.discard(key)
                return
            self.frames[key] = msg
            while len(self.frames) > MAX_FRAMES:
                self.frames.pop(next(iter(self.frames)))
            self._pair()

    def _pair(self) -> None:
        """Write every mark whose frames are all here into the open episode (caller holds the
        lock), and wake an end_episode waiting for them."""
        run = self.node.recorder_on().run
        error = self.node.get_logger().error
        waiting = []
        for seed, after_seq, views, stamp in self.marks:
            found = [self.frames.get((v, stamp)) for v in views]
            frames = [f for f in found if f is not None]
            if len(frames) < len(found):
                waiting.append((seed, after_seq, views, stamp))
                continue
            for v in views:
                self.frames.pop((v, stamp), None)
            open_seed = None if run is None else run.open_seed
            if run is None or open_seed != seed:
                error(f'snapshot {after_seq} of seed {seed} dropped: episode {open_seed} is open')
                continue
            for view, img in zip(views, frames, strict=True):
                try:
                    run.snapshot(after_seq, view, _png(img))
                except (PalletizerError, ValueError) as exc:
                    error(f'snapshot {after_seq} {view} dropped: {exc}')
        self.marks = waiting
        self.node.lock.notify_all()

    def waiting(self, seed: int) -> bool:
        """A mark of episode `seed` still waits for its frames."""
        return any(m[0] == seed for m in self.marks)

    def forget(self, seed: int) -> None:
        """Episode `seed` ends: log each of its marks whose frames never came (caller holds the
        lock)."""
        for mark_seed, after_seq, views, stamp in self.marks:
            if mark_seed == seed:
                self.node.get_logger().error(
                    f'snapshot {after_seq} of seed {mark_seed}: frames {views} never came'
                )
                # Frames still on their way must not pair with a later mark of the same
                # sim time (the next episode's clock starts at zero again).
                for v in views:
                    if self.frames.pop((v, stamp), None) is None:
                        self.late.add((v, stamp))
        self.marks = [m for m in self.marks if m[0] != seed]
