"""The line of the hardware profile: a carton on request, a photo-eye, and the end of the load."""

from __future__ import annotations

import numpy as np
import pytest
from palletizer.bridge.line import BEAM_CLEAR_M, Line
from palletizer.core.config import load_config
from palletizer.sim.cell import Cell
from palletizer.sim.servo import Trajectory

from tests.sim._cellkit import cartesian_move, ik_tool_down, joint_move

pytestmark = pytest.mark.sim


def _lift_presented(cell: Cell, pid: str, rise: float) -> None:
    """Pick the presented carton and lift it `rise` [m] (the arm's own moves, physics on)."""
    lid = cell.ground_truth().cartons[pid].lid
    above = lid + [0, 0, 0.25]
    cell.track(joint_move(cell.q, ik_tool_down(above, cell.q)))
    cell.track(cartesian_move(cell.q, above, lid + [0, 0, 0.0015], 2.0, 0.3))
    assert cell.set_vacuum(True).sealed
    cell.track(cartesian_move(cell.q, lid + [0, 0, 0.0015], lid + [0, 0, rise], 2.0, 0.5))


def _jump(cell: Cell, tcp: np.ndarray) -> None:
    q = ik_tool_down(tcp, cell.q)
    cell.track(Trajectory(np.zeros(1), q[None], np.zeros((1, 6)), np.zeros((1, 6))), speed=0)


def _take_away(cell: Cell, pid: str) -> None:
    """Fast-forward: seal on the carton, lift it 0.3 m, set it down on the pallet, let go."""
    lid = cell.ground_truth().cartons[pid].lid
    _jump(cell, lid + [0, 0, 0.0015])
    assert cell.set_vacuum(True).sealed
    _jump(cell, lid + [0, 0, 0.3])


def _drop(cell: Cell, k: int) -> None:
    _jump(cell, np.array([0.35 + 0.25 * k, 0.0, 1.0]))
    cell.set_vacuum(False)
    cell.settle(1.0)


def test_a_carton_comes_only_when_asked_the_eye_sees_it_and_clears_when_it_is_lifted_away():
    cfg = load_config()
    io = cfg.cell.hardware.line
    cell = Cell(cfg.level(11), seed=1)
    line = Line(io)
    line.tick(cell)
    ready = io.ready_in  # an empty pallet stands and the load is there
    assert line.inputs() == {ready} and line.presented is None  # nothing asked for
    assert not line.set_output(io.request_out + 5, True)  # not the line's pin
    assert line.set_output(io.request_out, True) and line.outputs() == {io.request_out}
    line.tick(cell)
    pid = line.presented
    assert pid is not None and line.inputs() == {io.arrived_in, ready}
    before = cell.source.state().pending
    # Sealed but not yet clear of the beam: the eye still sees it.
    _lift_presented(cell, pid, BEAM_CLEAR_M / 2)
    line.set_output(io.request_out, False)
    line.tick(cell)
    assert line.presented == pid and line.inputs() == {io.arrived_in, ready}
    cell.track(
        cartesian_move(cell.q, cell.tcp_pose()[0], cell.tcp_pose()[0] + [0, 0, 0.2], 2.0, 0.5)
    )
    line.tick(cell)
    assert line.presented is None and line.inputs() == {ready} and line.handed == [pid]
    assert cell.source.state().pending == before - 1  # the source was told: the next may come
    line.tick(cell)
    assert line.presented is None  # the request is down: nothing new


def test_the_done_input_rises_when_the_load_is_exhausted_and_nothing_stands_at_the_station():
    cfg = load_config()
    io = cfg.cell.hardware.line
    cell = Cell(cfg.level(11), seed=1)
    line = Line(io)
    line.set_output(io.request_out, True)
    n = cell.source.state().pending
    line.tick(cell)
    for k in range(n):
        pid = line.presented
        assert pid is not None, f'carton {k + 1} of {n} did not come: {line.state()}'
        assert not line.done
        _take_away(cell, pid)
        # The beam clears; with the request still up the next carton comes in the same tick.
        line.tick(cell)
        assert line.presented != pid and line.handed_over == k + 1
        _drop(cell, k)
    assert line.done and line.inputs() == {io.done_in, io.ready_in} and not line.jammed
    np.testing.assert_equal(cell.source.state().exhausted, True)


def test_the_pallet_exchange_outputs_and_a_line_that_waits_while_the_pallet_is_away():
    cfg = load_config()
    io = cfg.cell.hardware.line
    cell = Cell(cfg.level(11), seed=1)
    line = Line(io)
    assert line.set_output(io.finished_out, True) and line.outputs() == {io.finished_out}
    line.ready = False  # the plant took the pallet (bridge/scenario.py's side)
    line.set_output(io.request_out, True)
    line.tick(cell)
    assert line.presented is None and io.ready_in not in line.inputs()  # no carton meanwhile
    line.reset()  # the next load on an empty pallet
    assert line.inputs() == {io.ready_in} and line.outputs() == set() and line.handed == []


def test_on_the_truck_the_arm_may_take_another_carton_of_the_load_than_the_one_presented():
    # A trailer's cartons are all there: a palletizer that ranks the tops itself may take
    # another carton of a tie than the source's first. The line hands over the one lifted
    # away, the source is told so, and the next carton comes.
    cfg = load_config()
    io = cfg.cell.hardware.line
    cell = Cell(cfg.level(31), seed=1)
    line = Line(io)
    line.set_output(io.request_out, True)
    line.tick(cell)
    first = line.presented
    other = next(p for p in cell.source.forecast() if p != first)
    before = cell.source.state().pending
    _take_away(cell, other)
    line.tick(cell)
    assert line.handed == [other] and cell.source.state().pending == before - 1
    assert line.presented is not None and line.presented != other
    assert other not in cell.source.forecast() and first in cell.source.forecast()
