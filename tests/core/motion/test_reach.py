"""Tests of the analytic reach oracle and the precomputed reach table."""

from __future__ import annotations

import math

import numpy as np
import pytest
from palletizer.core.motion import (
    HOME_Q,
    AnalyticReach,
    MotionError,
    MotionPlanner,
    ReachTable,
    Waypoint,
    build_reach_table,
    tool_down,
)

DECK = 0.144
ORACLE = AnalyticReach()


@pytest.fixture(scope='module')
def small_table():
    return build_reach_table(
        x_range=(0.4, 1.2, 0.2),
        y_range=(-0.4, 0.4, 0.2),
        z_range=(DECK + 0.10, DECK + 1.35, 0.25),
    )


def test_analytic_reach_accepts_the_pallet_centre_and_refuses_far_targets():
    ok = ORACLE.reachable(
        np.array([0.6, 2.6, 1.2, 0.6]),
        np.array([0.0, 0.0, 0.4, 0.0]),
        np.array([DECK + 0.3, 0.5, DECK + 0.10, DECK + 1.6]),
        np.zeros(4),
    )
    # Far pallet corner (1.27 m from the base axis) is out of reach at low height
    # (docs/planners.md §6.3: the far corner is 1.15 m away horizontally; the TCP also needs the
    # drop to deck + 0.10).
    np.testing.assert_array_equal(ok, [True, False, False, False])


def test_analytic_reach_keeps_the_query_shape():
    x = np.full((3, 2), 0.6)
    assert ORACLE.reachable(x, x * 0, x * 0 + 0.5, x * 0).shape == (3, 2)


def test_analytic_reach_agrees_with_a_checked_descent_plan():
    rng = np.random.default_rng(3)
    planner = MotionPlanner()
    n = 16
    pts = np.column_stack(
        [rng.uniform(-0.1, 1.4, n), rng.uniform(-0.5, 0.6, n), rng.uniform(0.25, 1.5, n)]
    )
    verdicts = ORACLE.reachable(pts[:, 0], pts[:, 1], pts[:, 2], np.zeros(n))
    assert verdicts.any() and not verdicts.all()
    for (x, y, z), verdict in zip(pts, verdicts, strict=True):
        top = max(0.94, z + 0.18)
        q_top = planner.kin.ik_nearest(tool_down(x, y, top, 0.0), np.array(HOME_Q))
        ok = q_top is not None and planner.plan_cartesian(q_top, [Waypoint(x, y, z, 0.0)]).ok
        assert ok == verdict, (x, y, z)


def test_reach_table_is_conservative_against_the_analytic_oracle(small_table):
    rng = np.random.default_rng(5)
    n = 400
    x = rng.uniform(0.4, 1.2, n)
    y = rng.uniform(-0.4, 0.4, n)
    z = rng.uniform(DECK + 0.10, DECK + 1.35, n)
    yaw = rng.choice([0.0, math.pi / 2, math.pi, 1.5 * math.pi], n)
    table = small_table.reachable(x, y, z, yaw)
    assert table.any()
    assert not np.any(table & ~ORACLE.reachable(x, y, z, yaw))


def test_reach_table_refuses_points_outside_its_grid(small_table):
    out = small_table.reachable(
        np.array([0.3, 0.6, 0.6]),
        np.array([0.0, 0.5, 0.0]),
        np.array([0.5, 0.5, 1.6]),
        np.zeros(3),
    )
    np.testing.assert_array_equal(out, [False, False, False])


def test_reach_table_off_grid_yaw_needs_both_neighbours(small_table):
    ok = small_table.ok.copy()
    ok[1] = False  # yaw 90 deg unreachable everywhere
    t = ReachTable(small_table.xs, small_table.ys, small_table.zs, small_table.yaws, ok)
    args = (np.array([0.7]), np.array([0.0]), np.array([DECK + 0.4]))
    assert t.reachable(*args, np.array([0.0]))[0]
    assert t.reachable(*args, np.array([math.radians(0.5)]))[0]
    assert not t.reachable(*args, np.array([math.radians(45.0)]))[0]
    assert not t.reachable(*args, np.array([math.radians(90.0)]))[0]


def test_reach_table_round_trips_through_npz_with_its_meta(small_table, tmp_path):
    path = tmp_path / 'reach.npz'
    small_table.save(path)
    loaded = ReachTable.load(path)
    np.testing.assert_array_equal(loaded.ok, small_table.ok)
    assert loaded.meta['params']['transit_height'] == 0.94
    assert 'numpy' in loaded.meta['versions']
    cov = loaded.coverage(DECK)
    assert cov['highest_any_height'] is not None


def test_reach_table_rejects_wrong_shape():
    with pytest.raises(MotionError, match='shape'):
        ReachTable(np.arange(3.0), np.arange(3.0), np.arange(3.0), np.zeros(1), np.ones((1, 3, 3)))


def test_reach_generator_cli_writes_a_loadable_table_and_summary(tmp_path, capsys):
    from palletizer.core.motion.reach import main

    out, summary = tmp_path / 'reach.npz', tmp_path / 'reach.yaml'
    assert main([str(out), '--summary', str(summary), '--xy-step', '0.4', '--z-step', '0.65']) == 0
    table = ReachTable.load(out)
    assert table.ok.shape == (4, 3, 3, 4)
    assert table.meta['grid']['x_range'] == [0.0, 1.2, 0.4]
    assert 'highest_any_height' in summary.read_text()
    assert '"fraction_by_height"' in capsys.readouterr().out


def test_reach_keeps_the_arm_off_every_box_the_executor_checks_round_a_table_pallet():
    # The executor refuses a path whose forearm or wrists come near any of arm_boxes; a reach
    # oracle that leaves one out offers slots the executor then refuses (level 15 seed 47:
    # three deck slots beside the pedestal, wrong_placement at 2 of 12).
    from palletizer.core.config import load_config
    from palletizer.core.motion import ReachParams
    from palletizer.execution.layout import arm_boxes

    boxes = np.asarray(ReachParams().arm_box, dtype=float).reshape(-1, 6)
    for b in arm_boxes(load_config(), 'table'):
        want = np.array([*b.lo, *b.hi], dtype=float)
        assert np.isclose(boxes, want, atol=1e-9).all(axis=1).any(), b.name


def test_reach_refuses_the_deck_slots_beside_the_pedestal_the_executor_refused():
    from palletizer.core.config import load_config

    # Level 15 seed 47's refused releases (TCP, world): the forearm would strike the pedestal.
    x = np.array([0.495, 0.34])
    y = np.array([-0.26, -0.255])
    z = np.array([0.299, 0.285])
    yaw = np.array([0.0, math.pi / 2])
    assert not ORACLE.reachable(x, y, z, yaw).any()
    table = ReachTable.load(load_config().reach_table)
    assert not table.reachable(x, y, z, yaw).any()
    # Control: the same slots 0.30 m further from the robot are reachable.
    assert ORACLE.reachable(x, y + 0.30, z, yaw).all()
    assert table.reachable(x, y + 0.30, z, yaw).all()
