"""The executor port over the sequencer: one mapping of ExecResult to the episode's MotionOutcome."""

from __future__ import annotations

import numpy as np
import pytest
from palletizer.core.contracts import FailureCause, HeightMap, Observation
from palletizer.core.ports import EpisodeAborted
from palletizer.execution import (
    ExecResult,
    Outcome,
    PickPlaceSequencer,
    SequencerExecutor,
    motion_outcome,
    over_carton,
    return_request,
)

from tests.core.test_episode import World, _run
from tests.execution.test_sequencer import RecordingArm, _obs, _place_args


def test_a_pick_reports_its_cups_and_the_capacity_ratio_only_when_known():
    out = motion_outcome(ExecResult(Outcome.OK, 'holding', active_cups=16))
    assert out.ok and out.details == {'active_cups': 16}
    out = motion_outcome(ExecResult(Outcome.OK, active_cups=9, grip_capacity_ratio=17.834))
    assert out.details == {'active_cups': 9, 'grip_capacity_ratio': 17.83}


def test_a_place_reports_its_reach_residual():
    out = motion_outcome(ExecResult(Outcome.OK, reach_residual_m=0.002), placing=True)
    assert out.ok and out.details == {'reach_residual_m': 0.002}


@pytest.mark.parametrize(
    'outcome, cause, placing, holding',
    [
        (Outcome.IK_UNREACHABLE, 'ik_unreachable', True, True),
        (Outcome.COLLISION, 'collision', True, True),
        (Outcome.GRASP_SLIP, 'grasp_slip', True, False),
        (Outcome.CONTROLLER_FAILED, 'collision', True, False),  # a path tolerance abort
        (Outcome.CONTROLLER_FAILED, 'timeout', True, False),
        (Outcome.IK_UNREACHABLE, 'ik_unreachable', False, False),
    ],
)
def test_only_a_place_refused_before_moving_still_holds_the_carton(
    outcome, cause, placing, holding
):
    res = ExecResult(outcome, 'why', cause, failing_waypoint=3)
    out = motion_outcome(res, placing=placing)
    assert not out.ok and out.cause is FailureCause(cause) and out.reason == 'why'
    assert out.holding is holding and out.details == {'failing_waypoint': 3}


@pytest.mark.parametrize('placing', [False, True])
def test_an_invalid_request_is_not_replanned_but_aborts_the_episode(placing):
    res = ExecResult(Outcome.INVALID_REQUEST, 'invalid Pick request: dims_guess = (0.3, 0.2)')
    what = 'place' if placing else 'pick'
    with pytest.raises(EpisodeAborted, match=f'the executor refused the {what} goal: invalid'):
        motion_outcome(res, placing=placing)


def test_an_episode_whose_place_is_invalid_closes_aborted_after_one_plan():
    w = World(n=1)
    invalid = ExecResult(Outcome.INVALID_REQUEST, 'invalid Place request: bad spec')
    w.place = lambda plan, spec, hm: motion_outcome(invalid, placing=True)
    r = _run(w)
    assert not r.success and r.failure is None and r.metrics['aborted'] is True
    assert 'the executor refused the place goal' in r.metrics['abort_reason']
    assert [k for _, k, _, _ in w.events].count('plan') == 1  # no slot tried again


def test_a_failure_without_a_cause_reads_as_a_grasp_slip():
    out = motion_outcome(ExecResult(Outcome.CONTROLLER_FAILED, 'vacuum off refused'))
    assert out.cause is FailureCause.grasp_slip


def test_the_return_is_a_place_at_the_observed_pose_on_layer_1():
    obs = _obs()
    plan, spec = return_request(obs)
    assert plan.position == obs.position and plan.yaw == obs.yaw
    assert (plan.layer, plan.slot) == (1, 'return')
    assert spec.package_id == obs.package_id and spec.dims_m == obs.dims_guess


def test_the_port_picks_places_and_forgets_placed_cartons_with_each_new_map():
    arm = RecordingArm()
    seq = PickPlaceSequencer(arm)
    port = SequencerExecutor(seq)
    picked = port.pick(_obs())
    assert picked.ok and picked.details == {'active_cups': 16}
    placed = port.place(*_place_args())
    assert placed.ok and arm.io == [True, False] and len(seq.placed) == 1
    port.heightmap_updated(HeightMap.flat())
    assert seq.placed == [] and port.heightmap is not None


def test_a_refused_place_keeps_the_carton_and_the_port_returns_it_to_the_source():
    arm = RecordingArm()
    port = SequencerExecutor(PickPlaceSequencer(arm))
    assert port.pick(_obs()).ok
    refused = port.place(*_place_args(z_stack=0.6))
    assert not refused.ok and refused.holding and refused.cause is FailureCause.collision
    back = port.return_to_source(_obs())
    assert back.ok and arm.io == [True, False] and not arm.holding
    assert port.return_to_source(_obs()).ok  # nothing held: nothing to do
    assert arm.io == [True, False]


def test_ready_without_a_pose_stays_put_and_a_held_carton_refuses_the_hover():
    arm = RecordingArm()
    assert SequencerExecutor(PickPlaceSequencer(arm)).ready().ok and arm.goals == []
    port = SequencerExecutor(PickPlaceSequencer(arm), ready_pose=(-0.2, -0.8, 1.06, 0.0))
    assert port.pick(_obs()).ok
    sent = len(arm.goals)
    out = port.ready()
    assert not out.ok and 'a carton is held' in out.reason and len(arm.goals) == sent


def test_ready_over_a_seen_carton_waits_above_it_and_the_pick_then_only_drops():
    arm = RecordingArm()
    seq = PickPlaceSequencer(arm)
    port = SequencerExecutor(seq, ready_pose=(-0.2, -1.22, 1.06, 0.0))
    obs = _obs()
    x, y, z, yaw = over_carton(obs, seq.motion.params)
    lid = obs.position[2] + obs.dims_guess[2] / 2
    p = seq.motion.params
    assert (x, y, yaw) == (obs.position[0], obs.position[1], obs.yaw)
    assert z == max(p.transit_height, lid + p.cup_gap + p.place_clearance)
    tall = Observation('t', (-0.2, -0.8, 0.58 + 0.3), 0.0, (0.4, 0.3, 0.6), 0.9)
    assert over_carton(tall, p)[2] == pytest.approx(0.58 + 0.6 + p.cup_gap + p.place_clearance)
    assert port.ready(obs).ok
    T = seq.motion.kin.fk(arm.q)
    assert np.allclose(T[:3, 3], (x, y, z), atol=1e-3)
    assert port.pick(obs).ok
    approach = arm.goals[-2]  # the approach, then the lift
    tcp = np.array([seq.motion.kin.fk(q)[:3, 3] for q in approach.q])
    assert tcp[:, 2].max() <= z + 1e-3  # no rise: it keeps the height it waited at, and drops
    assert tcp[-1, 2] == pytest.approx(lid + p.cup_gap, abs=1e-3)
    assert np.abs(tcp[:, :2] - tcp[-1, :2]).max() < 0.01  # over the carton all the way down


def test_a_source_without_a_ready_pose_still_waits_over_a_carton_seen_there():
    arm = RecordingArm()
    port = SequencerExecutor(PickPlaceSequencer(arm))  # the truck: no wait pose beside it
    assert port.ready().ok and arm.goals == []
    assert port.ready(_obs()).ok and len(arm.goals) == 1
