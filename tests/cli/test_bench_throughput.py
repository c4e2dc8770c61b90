"""scripts/bench throughput: figures from the cartons' cycles, and the physical limit's sums."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from palletizer.cli import bench
from palletizer.cli.bench_throughput import (
    LimitRecorder,
    _Episode,
    joint_move_s,
    parse_options,
    summarise,
)
from palletizer.core.cycle import CycleClock
from palletizer.core.motion import JointLimits
from palletizer.core.vocab import CyclePhase as P

LIMITS = JointLimits(velocity=(2.0,) * 6, acceleration=(5.0,) * 6)


def test_a_joint_move_is_bang_bang_when_short_and_a_trapezoid_when_long():
    q0 = np.zeros(6)
    # 0.4 rad < v^2/a = 0.8: accelerate half way, brake the rest, t = 2 sqrt(d/a)
    short = joint_move_s(q0, np.array([0.4, 0, 0, 0, 0, 0]), LIMITS)
    assert short == pytest.approx(2 * math.sqrt(0.4 / 5.0))
    # 3 rad: cruise at 2 rad/s, t = d/v + v/a; the slowest joint sets the move
    long = joint_move_s(q0, np.array([0.4, -3.0, 0, 0, 0, 0]), LIMITS)
    assert long == pytest.approx(3.0 / 2.0 + 2.0 / 5.0)
    assert joint_move_s(q0, q0, LIMITS) == 0.0


def _cycle(t0: float, phases: list[tuple[P, float]]):
    c = CycleClock()
    c.begin(phases[0][0], t0)
    t = t0
    for (_, dt), (nxt, _) in zip(phases, phases[1:], strict=False):
        t += dt
        c.mark(nxt, t)
    return c.close(t + phases[-1][1])


def _episode(planner: str, success: bool, cycles, limits=()):
    return _Episode(11, planner, 1, success, list(cycles), list(limits), 0, 1.0)


def test_figures_are_medians_over_the_cartons_cycles_and_means_add_up():
    a = _cycle(0.0, [(P.wait, 1.0), (P.descend, 1.0), (P.cross, 2.0)])  # 4 s
    b = _cycle(4.0, [(P.wait, 1.0), (P.descend, 3.0), (P.cross, 2.0)])  # 6 s
    c = _cycle(0.0, [(P.wait, 2.0), (P.descend, 1.0), (P.cross, 5.0)])  # 8 s
    limit = {'path_s': 2.0, 'joint_s': 1.0, 'motion_s': 3.0}
    out = summarise(
        [_episode('heuristic', True, [a, b], [limit]), _episode('beam', False, [c], [limit])]
    )['11']
    assert out['episodes'] == 2 and out['success_pct'] == 50.0 and out['cartons'] == 3
    assert out['cycle_s_per_carton_median'] == 6.0 and out['cartons_per_hour'] == 600.0
    assert out['phases_s_median']['descend'] == 1.0 and out['phases_s_median']['plan'] == 0.0
    assert sum(out['phases_s_mean'].values()) == pytest.approx(6.0)  # the mean cycle
    assert out['limit']['ratio_path'] == 3.0 and out['limit']['ratio_joint'] == 6.0
    assert out['planners']['heuristic']['cycle_s_per_carton_median'] == 5.0
    assert out['planners']['beam']['success_pct'] == 0.0


def test_placement_figures_are_the_referees_errors_and_the_smallest_margin():
    a = _episode('heuristic', True, [_cycle(0.0, [(P.cross, 4.0)])], [])
    b = _episode('beam', True, [_cycle(0.0, [(P.cross, 4.0)])], [])
    a.place_err_mm, a.margin_mm = [0.1, 0.3, 2.0], [120.0, 80.0]
    b.place_err_mm, b.margin_mm = [0.2], [-5.0]
    out = summarise([a, b])['11']['placement']
    assert out['placements'] == 4 and out['error_xy_mm_max'] == 2.0
    assert out['error_xy_mm_p95'] == round(float(np.percentile([0.1, 0.3, 2.0, 0.2], 95)), 3)
    assert out['stability_margin_mm_min'] == -5.0
    assert (
        summarise([_episode('beam', True, [], [])])['11']['placement']['error_xy_mm_max'] is None
    )


def test_failed_episodes_are_counted_by_their_cause():
    ok = _episode('heuristic', True, [_cycle(0.0, [(P.cross, 4.0)])])
    hit = _episode('beam', False, [])
    hit.failure = 'collision'
    lost = _episode('beam', False, [])
    lost.failure = 'wrong_placement'
    again = _episode('heuristic', False, [])
    again.failure = 'collision'
    out = summarise([ok, hit, lost, again])['11']
    assert out['failures'] == {'collision': 2, 'wrong_placement': 1}
    assert out['planners']['beam']['failures'] == {'collision': 1, 'wrong_placement': 1}
    assert out['planners']['heuristic']['failures'] == {'collision': 1}
    assert summarise([ok])['11']['failures'] == {}


class _Plans:
    """A planner double: each plan's duration is fixed, its trajectory ends at q_end."""

    def __init__(self, seconds: float, ok: bool = True):
        self.seconds, self.ok = seconds, ok
        self.kin = 'kin'

    def _plan(self, q, end):
        traj = SimpleNamespace(duration=self.seconds, q=np.array([q, end]))
        return SimpleNamespace(ok=self.ok, trajectory=traj if self.ok else None, retreat=None)

    def plan_pick(self, q, carton, *a, **k):
        return self._plan(q, np.full(6, carton))

    def plan_place(self, q, target, *a, **k):
        return self._plan(q, np.full(6, target))

    def plan_hover(self, q, x, *a, **k):
        return self._plan(q, np.full(6, x))


def test_the_recorder_sums_a_cartons_moves_and_returns_to_the_next_seal():
    rec = LimitRecorder(_Plans(2.0), _Plans(0.5))  # type: ignore[arg-type]
    assert rec.kin == 'kin'  # the rest is the inner planner's
    q = np.zeros(6)
    for seal in (0.0, 0.4):
        rec.plan_pick(q, seal)
        rec.plan_place(q, 1.0, None)
        rec.plan_hover(q, 0.2)
    rec.plan_pick(q, 0.0)  # picked, never placed: no cycle
    rows = rec.per_carton(LIMITS)
    assert len(rows) == 2
    assert rows[0]['path_s'] == 1.5 and rows[0]['motion_s'] == 6.0
    # seal 0 -> release 1 -> the next seal 0.4 (each under v^2/a = 0.8 or a trapezoid)
    assert rows[0]['joint_s'] == pytest.approx(
        joint_move_s(np.zeros(6), np.ones(6), LIMITS)
        + joint_move_s(np.ones(6), np.full(6, 0.4), LIMITS)
    )


def test_a_refused_uncapped_twin_is_counted_and_not_timed():
    rec = LimitRecorder(_Plans(2.0), _Plans(0.5, ok=False))  # type: ignore[arg-type]
    assert rec.plan_pick(np.zeros(6), 0.0).ok
    assert rec.failed == 1 and rec.moves == []


def test_options_default_to_the_reference_levels_seeds_1_to_20_and_both_planners():
    kw = parse_options([])
    assert kw['seeds'] == tuple(range(1, 21)) and kw['planners'] == ('heuristic', 'beam')
    assert kw['levels'] == (11, 12, 13, 21, 22, 23, 31, 32, 33) and kw['limit_levels'] == (11,)
    assert parse_options(['--levels', '11', '--seeds', '2'])['seeds'] == (1, 2)


def test_bad_options_stop_it_before_it_runs(capsys):
    with pytest.raises(SystemExit) as exc:
        bench.main(['throughput', '--seeds', '101'])
    assert exc.value.code == 2 and 'seeds above are reserved' in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_options(['--planners', 'bean'])
    assert "did you mean 'beam'" in capsys.readouterr().err


def test_an_uncapped_twin_slower_than_our_plan_counts_at_our_time():
    rec = LimitRecorder(_Plans(0.5), _Plans(2.0))  # type: ignore[arg-type]
    rec.plan_pick(np.zeros(6), 0.0)
    rec.plan_place(np.zeros(6), 1.0, None)
    assert rec.slower == 2 and rec.per_carton(LIMITS)[0]['path_s'] == 1.0


def test_weigh_options_run_each_way_once_and_compare_them(monkeypatch, capsys):
    from palletizer.cli import bench_throughput as bt

    assert parse_options([])['weighs'] is None  # the config's way
    assert parse_options(['--weigh', 'lift', 'still', 'lift'])['weighs'] == ('lift', 'still')
    with pytest.raises(SystemExit):
        parse_options(['--weigh', 'float'])
    assert "weigh 'float'; expected one of still, lift, track" in capsys.readouterr().err

    def episode(level, planner, seed, limit, weigh):
        # Each carton's cycle: 9 s of other phases, plus the weigh's 1.5 s hold when still.
        cycle = _cycle(0.0, [(P.cross, 9.0), (P.weigh, 1.5 if weigh == 'still' else 0.0)])
        lift = 1 if weigh == 'lift' else 0
        return _Episode(level, planner, seed, True, [cycle], [], 0, 0.1, 0, weigh, lift)

    monkeypatch.setattr(bt, '_episode', episode)
    out = bt.bench_throughput(
        levels=(11,), seeds=(1, 2), planners=('heuristic',), weighs=('still', 'lift')
    )
    assert out['weigh'] == ['still', 'lift']
    assert out['levels'] == out['by_weigh']['still']
    assert out['by_weigh']['lift']['11']['cartons_on_lift'] == 2
    assert out['by_weigh']['still']['11']['cartons_on_lift'] == 0
    assert out['lift_vs_still'] == {'11': round(9.0 / 10.5, 3)}


def test_tracking_the_zero_is_a_third_way_compared_with_still(monkeypatch):
    from palletizer.cli import bench_throughput as bt
    from palletizer.cli.weighing import config_weigh, with_weigh
    from palletizer.core.config import load_config

    cfg = load_config()
    g = with_weigh(cfg, 'track').perception.gauge
    assert g.weigh_on_lift and g.zero_on_move
    assert config_weigh(with_weigh(cfg, 'track')) == 'track'
    assert config_weigh(with_weigh(cfg, 'lift')) == 'lift'
    assert config_weigh(with_weigh(cfg, 'still')) == 'still'
    with pytest.raises(ValueError, match='expected one of still, lift, track'):
        with_weigh(cfg, 'fast')
    assert parse_options(['--weigh', 'still', 'track'])['weighs'] == ('still', 'track')

    def episode(level, planner, seed, limit, weigh):
        # 9 s of other phases; still: 1.5 s to weigh; still and lift: 1.5 s to zero.
        phases = [(P.cross, 9.0), (P.weigh, 1.5 if weigh == 'still' else 0.0)]
        phases.append((P.settle, 0.0 if weigh == 'track' else 1.5))
        phases.append((P.wait, 2.0 if level == 12 else 0.0))  # level 12 waits 2 s more
        on_move = 1 if weigh == 'track' else 0
        lift = weigh != 'still'
        scored = [
            {'package_id': 'a', 'mass_pct': 0.3 if lift else 0.6, 'com_mm': 1.0, 'lift': lift}
        ]
        return _Episode(
            level,
            planner,
            seed,
            True,
            [_cycle(0.0, phases)],
            [],
            0,
            0.1,
            0,
            weigh,
            int(lift),
            on_move,
            scored,
        )

    monkeypatch.setattr(bt, '_episode', episode)
    out = bt.bench_throughput(
        levels=(11, 12), seeds=(1,), planners=('heuristic',), weighs=('still', 'lift', 'track')
    )
    assert out['by_weigh']['track']['11']['cartons_zeroed_on_move'] == 1
    assert out['by_weigh']['lift']['11']['cartons_zeroed_on_move'] == 0
    assert out['lift_vs_still'] == {'11': round(10.5 / 12.0, 3), '12': round(12.5 / 14.0, 3)}
    assert out['track_vs_still'] == {'11': round(9.0 / 12.0, 3), '12': round(11.0 / 14.0, 3)}
    still, track = out['by_weigh']['still']['11']['gauge'], out['by_weigh']['track']['11']['gauge']
    assert still['mass_err_pct_p95'] == 0.6 and still['on_lift'] == 0
    assert still['on_lift_mass_err_pct_p95'] is None
    assert track['on_lift_mass_err_pct_p95'] == 0.3 and track['com_err_mm_p95'] == 1.0
    assert out['overall']['track']['cycle_s_per_carton_median_of_levels'] == 10.0
    assert out['overall']['still']['cartons_per_hour'] == round(3600 / 13.0, 1)
    assert out['overall']['lift']['success_pct'] == 100.0


def test_a_way_adds_levers_to_its_weighing_and_is_named_for_them(monkeypatch, capsys):
    from palletizer.cli import bench_throughput as bt
    from palletizer.cli.weighing import check_way, config_way, with_way
    from palletizer.core.config import load_config
    from palletizer.core.errors import InvalidValue

    cfg = load_config()
    assert config_way(cfg) == 'still'
    fast = with_way(cfg, 'track+early+joint')
    assert fast.cell.motion.transit == 'joint' and fast.cell.episode.detect_early
    assert fast.perception.gauge.zero_on_move
    assert config_way(fast) == 'track+joint+early' == check_way('track+early+joint')
    back = with_way(fast, 'lift')
    assert back.cell.motion.transit == 'cartesian' and not back.cell.episode.detect_early
    with pytest.raises(InvalidValue, match="'curvy'; expected one of still, lift, track, then"):
        check_way('track+curvy')
    with pytest.raises(InvalidValue, match='names a lever twice'):
        check_way('track+joint+joint')
    opts = parse_options(['--weigh', 'still', 'track+joint', 'track+early+joint'])
    assert opts['weighs'] == ('still', 'track+joint', 'track+joint+early')
    with pytest.raises(SystemExit):
        parse_options(['--weigh', 'track+fast'])
    assert "'fast'; expected one of still, lift, track" in capsys.readouterr().err
    calls = []

    def episode(level, planner, seed, limit, weigh):
        calls.append(weigh)
        # 9 s to cross in the world, 7 s in joint space; 1.5 s to weigh still.
        cross = 7.0 if 'joint' in weigh.split('+') else 9.0
        phases = [(P.cross, cross), (P.weigh, 1.5 if weigh.startswith('still') else 0.0)]
        return _Episode(level, planner, seed, True, [_cycle(0.0, phases)], [], 0, 0.1, 0, weigh)

    monkeypatch.setattr(bt, '_episode', episode)
    out = bt.bench_throughput(
        levels=(11,),
        seeds=(1,),
        planners=('heuristic',),
        weighs=('still', 'track', 'still+joint', 'track+joint'),
    )
    assert calls == ['still', 'track', 'still+joint', 'track+joint']
    assert out['weigh'] == ['still', 'track', 'still+joint', 'track+joint']
    assert out['levels'] == out['by_weigh']['still']
    assert out['by_weigh']['track+joint']['11']['cycle_s_per_carton_median'] == 7.0
    assert out['track+joint_vs_still'] == {'11': round(7.0 / 10.5, 3)}
    assert out['still+joint_vs_still'] == {'11': round(8.5 / 10.5, 3)}
    assert out['overall']['track']['cycle_s_per_carton_median_of_levels'] == 9.0
