"""The line of the hardware profile: a PLC's carton handshake on the robot's digital I/O.

The palletizer raises a digital output to ask for the next carton. The line (the conveyor, the
operator at the table, the trailer's load) brings one to rest at the station, and a photo-eye
over it raises a digital input. When the arm lifts the carton away the beam clears and the input
drops; the line may then stage the next. A second input says the line has nothing more for this
pallet. The palletizer learns nothing else: no carton id, no count, no pose.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from palletizer.core.config import LineIO

__all__ = ['Line', 'LineState']

# [m] the photo-eye's beam: a held carton whose lid rose this far above where it rested has
# left it (a UR cell's station sensors sit a few centimetres over the surface).
BEAM_CLEAR_M = 0.05


@dataclass(frozen=True)
class LineState:
    """What the line shows on the inputs, and (for the scenario driver only) which carton."""

    arrived: bool
    done: bool
    jammed: bool
    presented: str | None


class Line:
    """The handshake over one Cell's source; `tick(cell)` runs between physics steps."""

    def __init__(self, io: LineIO) -> None:
        self.io = io
        self.reset()

    def reset(self) -> None:
        """A new load on an empty pallet: nothing asked for, nothing at the station, ready."""
        self.request = False
        self.finished = False  # the palletizer's finished_out
        self.ready = True  # ready_in: the plant's side of the pallet exchange
        self.presented: str | None = None
        self._rest: dict[str, float] = {}  # lid z where each carton the arm may take rested
        self.done = False
        self.jammed = False
        self.handed: list[str] = []  # the load's ids, in the order they were lifted away

    @property
    def handed_over(self) -> int:
        """Cartons lifted away from the station."""
        return len(self.handed)

    def set_output(self, pin: int, on: bool) -> bool:
        """A digital output the palletizer switched; False when the line has no such pin."""
        if pin == self.io.request_out:
            self.request = bool(on)
        elif pin == self.io.finished_out:
            self.finished = bool(on)
        else:
            return False
        return True

    def inputs(self) -> set[int]:
        """The digital inputs that are on."""
        on = set()
        if self.presented is not None:
            on.add(self.io.arrived_in)
        if self.done:
            on.add(self.io.done_in)
        if self.ready:
            on.add(self.io.ready_in)
        return on

    def outputs(self) -> set[int]:
        """The line's digital outputs that are on (the request, the pallet finished)."""
        return {
            p
            for p, on in (
                (self.io.request_out, self.request),
                (self.io.finished_out, self.finished),
            )
            if on
        }

    def state(self) -> LineState:
        return LineState(self.presented is not None, self.done, self.jammed, self.presented)

    def tick(self, cell: Any) -> None:
        """Clear the beam once the presented carton has been lifted away; with the request up
        and the station empty, have the source bring the next carton to rest (physics runs)."""
        taken = self._lifted_away(cell) if self.presented is not None else None
        if taken is not None:
            cell.release(taken)
            self.handed.append(taken)
            self.presented = None
        if self.presented is not None or not self.request or self.done or self.jammed:
            return
        if not self.ready:  # the pallet is being exchanged
            return
        got = cell.present()
        if got is None:
            st = cell.source.state()
            self.jammed, self.done = bool(st.jammed), bool(st.exhausted and not st.jammed)
            return
        self.presented = got.package_id
        # Where it rests; on the truck, where each carton of the load rests (any may be taken).
        truth = cell.ground_truth().cartons
        takeable = cell.source.forecast() if cell.source.kind == 'truck' else [got.package_id]
        self._rest = {p: float(truth[p].lid[2]) for p in takeable}

    def _lifted_away(self, cell: Any) -> str | None:
        """The carton the arm lifted clear of where it rested: the presented one or, on the
        truck (whose load stands there whole, none singled out), any carton of the load."""
        held = cell.suction.held
        if held is None:
            return None
        pid = cell.package_id(held)
        if pid != self.presented and not (
            cell.source.kind == 'truck' and pid in cell.source.forecast()
        ):
            return None  # not the line's: a carton taken back from the pallet or the buffer
        return pid if self._lid(cell, pid) - self._rest[pid] > BEAM_CLEAR_M else None

    @staticmethod
    def _lid(cell: Any, package_id: str) -> float:
        return float(cell.ground_truth().cartons[package_id].lid[2])
