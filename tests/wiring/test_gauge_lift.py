"""The in-process wrist gauge weighs on the lift, and holds still only where that fit waits."""

from __future__ import annotations

import dataclasses

import pytest
from palletizer.core.config import load_config
from palletizer.core.cycle import spans_from_payload
from palletizer.core.loads import draw_load
from palletizer.core.planning import build_planner
from palletizer.core.vocab import CyclePhase
from palletizer.wiring.inprocess import MemorySink, run_inprocess

pytestmark = pytest.mark.sim


def _config(on_lift: bool, on_move: bool = False):
    cfg = load_config()
    gauge = dataclasses.replace(cfg.perception.gauge, weigh_on_lift=on_lift, zero_on_move=on_move)
    return dataclasses.replace(cfg, perception=dataclasses.replace(cfg.perception, gauge=gauge))


def _level_11(on_lift: bool, on_move: bool = False):
    """Level 11 seed 1 in-process, interpolated, oracle perception, the wrist gauge."""
    return run_inprocess(
        11,
        1,
        build_planner('heuristic'),
        speed=1.0,
        config=_config(on_lift, on_move),
        sink=MemorySink(),
        perception='oracle',
    )


def _weigh_s(sink: MemorySink, phase: CyclePhase = CyclePhase.weigh) -> list[float]:
    """Each carton's `phase` [s sim] from its cycle (the settle events)."""
    out = []
    for _, _, kind, _, payload in sink.events:
        if kind == 'settle':
            spans = spans_from_payload(payload)
            out.append(sum(s.duration_s for s in spans if s.phase is phase))
    return out


def test_level_11_weighs_every_carton_on_the_lift_within_1_percent_and_never_stops_to():
    truth = {d.package_id: d.spec for d in draw_load(11, 1, load_config())}
    result, sink = _level_11(True)
    assert result.success, [e for e in sink.events if e[2] == 'fail']
    picks = [(pid, p) for _, _, kind, pid, p in sink.events if kind == 'pick']
    assert len(picks) == 4 and all(p.get('weighed') == 'lift' for _, p in picks)
    for pid, p in picks:
        assert p['mass_kg'] == pytest.approx(truth[pid].mass_kg, rel=0.01), pid
    assert max(_weigh_s(sink)) < 0.05  # no hold: the plan follows the lift's last sample

    # The same episode weighed still holds 1.5 s for each carton (settle 0.3 s + 600 samples).
    _, still = _level_11(False)
    assert not any(p.get('weighed') for _, _, k, _, p in still.events if k == 'pick')
    assert min(_weigh_s(still)) > 1.4


def test_level_11_zeroes_on_the_move_back_and_still_weighs_within_1_percent():
    truth = {d.package_id: d.spec for d in draw_load(11, 1, load_config())}
    result, sink = _level_11(True, on_move=True)
    assert result.success, [e for e in sink.events if e[2] == 'fail']
    settles = [p for _, _, kind, _, p in sink.events if kind == 'settle']
    assert len(settles) == 4 and all(p.get('zeroed') == 'move' for p in settles)
    # The zero after each place holds nothing: the settle phase is the referee's alone, and
    # the move back outlasts it.
    assert max(_weigh_s(sink, CyclePhase.settle)) < 0.05
    picks = [(pid, p) for _, _, kind, pid, p in sink.events if kind == 'pick']
    assert len(picks) == 4
    for pid, p in picks:  # every weigh after the first is against a tare taken on the move
        assert p['mass_kg'] == pytest.approx(truth[pid].mass_kg, rel=0.01), pid

    # Zeroing still, the same episode holds 1.5 s after each place.
    _, still = _level_11(True)
    assert not any(p.get('zeroed') for _, _, k, _, p in still.events if k == 'settle')
    assert min(_weigh_s(still, CyclePhase.settle)) > 1.4
