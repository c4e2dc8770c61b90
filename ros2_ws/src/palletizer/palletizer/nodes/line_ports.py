"""The director's ports on a real cell's signals alone (docs/real-cell.md).

RosLine is the CellPort over the line's handshake on the robot's I/O and over the clock: it asks
for a carton on a digital output, learns that one has come from the photo-eye input, that the
line is done from another, and waits by watching the clock. It works the same against the
simulated cell's hardware profile and a real UR10e cell. (The RefereePort of a cell without
ground truth is core/placement_check.py PlacementCheck, over the perception port.)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from builtin_interfaces.msg import Time
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from ur_msgs.msg import IOStates
from ur_msgs.srv import SetIO

from palletizer.core.config import LineIO
from palletizer.core.ports import EpisodeAborted, Presented

__all__ = ['RosLine']

_IO = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
# [s, sim] how long the pallet exchange may take either way: the scenario's is a world reset
# (~2-5 s of wall time); an operator's, minutes (raise it with the plant's own figure).
READY_S = 60.0


class RosLine:
    """CellPort over I/O and the clock. `gauge` is tared after each reset, as RosCell does.

    present(): raises the request output, then waits (in sim time, `arrive_s` at most) for the
    photo-eye or the done input; drops the request once a carton has come. The carton gets
    the palletizer's own id, `carton-01`, `carton-02`, ...; the line never says which it is.
    """

    def __init__(
        self,
        node: Node,
        calls: Any,
        gauge: Any,
        line: LineIO,
        *,
        set_io_service: str,
        io_states_topic: str,
        arrive_s: float,
        stopping: Callable[[], bool],
    ) -> None:
        self.node, self.calls, self.gauge, self.line = node, calls, gauge, line
        self.arrive_s, self.stopping = float(arrive_s), stopping
        self.set_io_c = node.create_client(SetIO, set_io_service)
        self._cond = threading.Condition()
        self._inputs: set[int] | None = None
        node.create_subscription(IOStates, io_states_topic, self._on_io, _IO)
        self._t0 = 0.0
        self.count = 0
        self.source = ''

    # -- signals -----------------------------------------------------------------------------

    def _on_io(self, msg: IOStates) -> None:
        with self._cond:
            self._inputs = {int(d.pin) for d in msg.digital_in_states if d.state}
            self._cond.notify_all()

    def _now(self) -> float:
        return self.node.get_clock().now().nanoseconds * 1e-9

    @property
    def stamp(self) -> Time:
        return self.node.get_clock().now().to_msg()

    def _set(self, pin: int, on: bool, what: str) -> None:
        req = SetIO.Request(fun=SetIO.Request.FUN_SET_DIGITAL_OUT, pin=pin, state=float(on))
        res = self.calls.service(self.set_io_c, req, what, self.calls.t.quick_s)
        if not res.success:
            raise EpisodeAborted(f'{what}: the controller refused digital output {pin}')

    def _wait(self, until: Callable[[], bool], sim_s: float, what: str) -> bool:
        """Wait until `until()` (checked on each I/O state and every 20 ms) or `sim_s` of sim
        time; a clock that stands still for the wall-time budget aborts the episode."""
        end = self._now() + sim_s
        wall_end = time.monotonic() + self.calls.t.scaled(sim_s) + self.calls.t.quick_s
        with self._cond:
            while not until():
                if self.stopping():
                    raise EpisodeAborted(f'stopped while waiting for {what}')
                if self._now() >= end:
                    return False
                if time.monotonic() > wall_end:
                    raise EpisodeAborted(
                        f'waiting for {what}: the clock stood at {self._now():.2f} s '
                        '(is the cell running?)'
                    )
                self._cond.wait(0.02)
        return True

    def _on(self, pin: int) -> bool:
        return self._inputs is not None and pin in self._inputs

    # -- CellPort ----------------------------------------------------------------------------

    def reset(self, level: int, seed: int) -> int:
        """Wait until an empty pallet stands and the line is loaded (`ready_in`: the plant's, or
        the scenario's, doing), then tare the gauge. The count of cartons is the line's."""
        if not self._wait(lambda: self._inputs is not None, 10.0, 'the I/O states'):
            raise EpisodeAborted('no I/O states from the controller (io_and_status_controller)')
        if not self._wait(lambda: self._on(self.line.ready_in), READY_S, 'an empty pallet'):
            raise EpisodeAborted(
                f'no empty pallet: digital input {self.line.ready_in} (ready) stayed off for '
                f'{READY_S:g} s'
            )
        self._t0 = self._now()
        self.count = 0
        self.hold(self.gauge.hold_s)
        self.gauge.tare()
        return -1

    def present(self) -> Presented:
        io = self.line
        if not self._on(io.arrived_in) and not self._on(io.done_in):
            self._set(io.request_out, True, 'line request')
            came = self._wait(
                lambda: self._on(io.arrived_in) or self._on(io.done_in),
                self.arrive_s,
                'a carton from the line',
            )
            if not came:
                return Presented(None, 0, False, True, {'waited_s': self.arrive_s})
        if self._on(io.arrived_in):
            self._set(io.request_out, False, 'line request')
            self.count += 1
            return Presented(f'carton-{self.count:02d}', 0, False, False)
        return Presented(None, 0, True, False)  # done: the line has nothing more

    def finish(self) -> str:
        """This pallet is done: the four-phase exchange's first half (bridge/scenario.py). Raise
        `finished_out`, wait for `ready_in` to drop (the pallet is being taken), drop
        `finished_out`. '' when taken; else why not (the output stays up for the plant)."""
        io = self.line
        self._set(io.finished_out, True, 'pallet finished')
        if not self._wait(lambda: not self._on(io.ready_in), READY_S, 'the pallet taken'):
            return f'the pallet was not taken: digital input {io.ready_in} stayed on'
        self._set(io.finished_out, False, 'pallet finished')
        return ''

    def release(self, package_id: str) -> None:
        """Nothing to say: the photo-eye sees the carton go."""

    def settle(self, seconds: float) -> None:
        self.hold(seconds)

    def hold(self, seconds: float) -> None:
        """Let `seconds` of (sim) time pass."""
        if seconds > 0:
            self._wait(lambda: False, float(seconds), f'{seconds:g} s to pass')

    def sim_time(self) -> float:
        return self._now() - self._t0
