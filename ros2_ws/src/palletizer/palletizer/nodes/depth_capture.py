"""The depth-fusion node's captures: fresh frames of named cameras and the arm's joints at them.

With the cell's capture service (the simulated cell's) the node asks for a capture and waits for
the frames of its stamp; without one (a real cell's cameras stream on their own) it takes the
first frames stamped at or after the time asked for. `call` is the node's one way to call a
service from inside a service callback.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
from builtin_interfaces.msg import Time
from palletizer_msgs.srv import Capture, MeasureHeld, MeasureLid
from rclpy.client import Client

from palletizer.core.views import CameraView
from palletizer.nodes.camera_inputs import CameraInputs
from palletizer.nodes.convert import stamp_s

__all__ = ['FrameCapture', 'call']


def call(client: Client | None, request: Any, timeout: float = 30.0) -> Any:
    """The answer of `client` to `request`, or None (no client, no server, no answer in time)."""
    if client is None or not client.wait_for_service(timeout_sec=10.0):
        return None
    done = threading.Event()
    fut = client.call_async(request)
    fut.add_done_callback(lambda _f: done.set())
    done.wait(timeout=timeout)
    return fut.result() if fut.done() else None


class FrameCapture:
    """Captures of `inputs`' cameras through `capture` (None: the frames stream); `joint_names`
    orders the arm's joints, `frames_timeout_s` [s, wall] bounds each wait for frames."""

    def __init__(
        self,
        inputs: CameraInputs,
        capture: Client | None,
        joint_names: Sequence[str],
        frames_timeout_s: float,
    ) -> None:
        self.inputs = inputs
        self.capture = capture
        self.joint_names = joint_names
        self.frames_timeout_s = frames_timeout_s
        self.mark = 0
        self.capture_q: np.ndarray | None = None

    def views(
        self, names: Sequence[str], rgb: bool, min_stamp: float
    ) -> tuple[list[CameraView], float] | str:
        """(views, stamp) of a fresh capture of `names`, or why there is none; self.mark is the
        message count before the capture was asked for, self.capture_q the arm's joints at the
        capture (from the capture's answer; None without a capture service)."""
        self.mark = self.inputs.mark()
        self.capture_q = None
        if self.capture is not None:
            res = call(self.capture, Capture.Request(cameras=list(names)))
            if res is None or res.error_code != Capture.Response.OK:
                return 'no capture: ' + ('no answer' if res is None else res.error_msg)
            stamp = stamp_s(res.stamp)
            pos = dict(zip(res.joint_names, res.joint_positions, strict=False))
            if all(n in pos for n in self.joint_names):
                self.capture_q = np.array([pos[n] for n in self.joint_names], dtype=float)
        else:
            got = self.inputs.streamed(names, min_stamp, rgb, self.mark, self.frames_timeout_s)
            if got is None:
                return (
                    f'no frames of {", ".join(names)} stamped at or after {min_stamp:.3f} s '
                    f'within {self.frames_timeout_s} s'
                )
            return got
        if stamp < min_stamp - 1e-9:
            return f'capture at {stamp:.3f} s is older than {min_stamp:.3f} s'
        views = self.inputs.views(names, stamp, rgb, self.mark, timeout=self.frames_timeout_s)
        if views is None:
            return f'frames of {", ".join(names)} at {stamp:.3f} s did not all arrive'
        return views, stamp

    def joints(self, stamp: float) -> np.ndarray | None:
        """The arm's joints when the frames at `stamp` were taken: the capture's own (a joint
        state stamped alike may predate it: in fast-forward the arm moves without sim time
        passing, and a backlog of such states can still be arriving), else the first joint
        state stamped at or after the frames that arrived after the capture was asked for."""
        if self.capture_q is not None:
            return self.capture_q
        return self.inputs.joints_at(stamp, self.joint_names, self.mark)

    def views_and_joints(
        self,
        names: Sequence[str],
        min_stamp: Time,
        res: MeasureHeld.Response | MeasureLid.Response,
        rgb: bool = False,
    ) -> tuple[list[CameraView], np.ndarray, float] | None:
        """(views, q, stamp) of a fresh depth capture of `names` (and colour, with rgb) and the
        arm's joints at it, or None with res's STALE_FRAMES and the why set."""
        got = self.views(names, rgb, stamp_s(min_stamp))
        if isinstance(got, str):
            res.error_code, res.error_msg = res.STALE_FRAMES, got
            return None
        views, stamp = got
        q = self.joints(stamp)
        if q is None:
            res.error_code = res.STALE_FRAMES
            res.error_msg = f'no joint state at {stamp:.3f} s to place the arm in the views'
            return None
        return views, q, stamp
