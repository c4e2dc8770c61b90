"""Real episodes on the simulated cell through the in-process wiring (camera perception)."""

from __future__ import annotations

import pytest
from palletizer.core.episode import EVENT_KINDS
from palletizer.core.planning import build_planner
from palletizer.wiring.inprocess import MemorySink, run_inprocess

pytestmark = pytest.mark.sim


@pytest.mark.parametrize('level, speed', [(11, 1.0), (21, 0.0), (31, 0.0)])
def test_seed_1_episode_places_every_carton(level, speed):
    result, sink = run_inprocess(
        level, 1, build_planner('heuristic'), speed=speed, sink=MemorySink()
    )
    assert result.success, [e for e in sink.events if e[2] == 'fail']
    assert result.n_placed == result.n_objects and result.failure is None
    assert result.oracle is False  # cameras and the wrist gauge: nothing read truth
    assert len(sink.placements) == result.n_objects
    assert all(p.placed and p.error_xy_m < 0.02 for p in sink.placements)
    seqs = [e[0] for e in sink.events]
    assert seqs == list(range(len(seqs))) and {e[2] for e in sink.events} <= set(EVENT_KINDS)
    assert sink.states[-1].stability_margin_m > 0


def test_fast_forward_episode_is_identical_line_for_line():
    a = run_inprocess(12, 2, build_planner('heuristic'), sink=MemorySink())
    b = run_inprocess(12, 2, build_planner('heuristic'), sink=MemorySink())
    assert a[0].to_dict() == b[0].to_dict()
    assert a[1].events == b[1].events


def test_the_wrist_gauge_weighs_every_level_11_carton_within_30_g_in_a_short_hold():
    """60 wrench samples at 250 Hz (1 N noise per axis): each weigh holds 0.34 s."""
    from palletizer.core.config import load_config
    from palletizer.core.loads import draw_load

    result, sink = run_inprocess(11, 1, build_planner('heuristic'), speed=1.0, sink=MemorySink())
    truth = {d.package_id: d.mass for d in draw_load(11, 1, load_config())}
    picks = [e for e in sink.events if e[2] == 'pick']
    assert len(picks) == result.n_objects == 4
    for _seq, _ts, _kind, pid, payload in picks:
        assert abs(payload['mass_kg'] - truth[pid]) < 0.030, (pid, payload['mass_kg'], truth[pid])
