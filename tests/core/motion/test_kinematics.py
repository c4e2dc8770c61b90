"""Tests of the UR10e FK/IK, frames and branch selection."""

from __future__ import annotations

import math

import numpy as np
import pytest
import ur_analytic_ik
from palletizer.core.motion import (
    HOME_Q,
    Frame,
    JointLimits,
    MotionError,
    UR10eKinematics,
    branch_family,
    fk_dh,
    ik_batch,
    tool_down,
    tool_down_batch,
    yaw_of,
)

DECK = 0.144
KIN = UR10eKinematics()


def _rot_angle(Ra: np.ndarray, Rb: np.ndarray) -> float:
    c = (np.trace(Ra.T @ Rb) - 1.0) / 2.0
    return float(np.arccos(np.clip(c, -1.0, 1.0)))


def test_dh_fk_matches_ur_analytic_ik_forward_kinematics():
    rng = np.random.default_rng(1)
    q = rng.uniform(-2 * np.pi, 2 * np.pi, (200, 6))
    ours = fk_dh(q)
    theirs = np.array([ur_analytic_ik.ur10e.forward_kinematics(*row) for row in q])
    np.testing.assert_allclose(ours, theirs, atol=1e-12)


def test_home_pose_points_tool_down_over_the_pallet_near_edge():
    T = KIN.fk(np.array(HOME_Q))
    np.testing.assert_allclose(T[:3, :3], np.diag([1.0, -1.0, -1.0]), atol=1e-4)
    # The reference sweep (docs/cell.md §3.1) puts pan -90 at x = 0.426 m over the pallet.
    assert T[0, 3] == pytest.approx(0.426, abs=0.002)
    assert -0.4 < T[1, 3] < 0.4
    assert branch_family(np.array(HOME_Q))


def test_observe_pose_lands_where_the_reference_measured_it():
    # docs/cell.md §3.1: pan +60 puts the TCP at (0.557, -1.143, 1.371); the reference mounted the
    # tool 0.10 m (not 0.11655) from wrist 3, so allow 20 mm.
    T = KIN.fk(np.array([1.0472, -2.0944, 1.5708, -1.5708, -1.5708, 0.0]))
    np.testing.assert_allclose(T[:3, 3], [0.557, -1.143, 1.371], atol=0.02)


def _envelope_poses() -> np.ndarray:
    poses = []
    for x in np.linspace(0.05, 1.15, 12):
        for y in np.linspace(-0.35, 0.35, 8):
            for dz in (0.10, 0.55):
                for yaw in (0.0, math.pi / 2):
                    poses.append((x, y, DECK + dz, yaw))
    # Pick stations: table / conveyor station at (-0.20, -0.80), surface z 0.58.
    for dx in (-0.1, 0.0, 0.1):
        for dy in (-0.1, 0.0, 0.1):
            for z in (0.60, 0.80, 0.94):
                poses.append((-0.20 + dx, -0.80 + dy, z, 0.0))
    return np.array(poses)


def test_fk_of_ik_is_within_a_tenth_of_a_millimetre_over_pallet_and_pick_stations():
    poses = _envelope_poses()
    for x, y, z, yaw in poses:
        T = tool_down(x, y, z, yaw)
        q = KIN.ik_nearest(T, np.array(HOME_Q))
        assert q is not None, (x, y, z, yaw)
        T2 = KIN.fk(q)
        assert np.linalg.norm(T2[:3, 3] - T[:3, 3]) < 1e-4
        assert _rot_angle(T2[:3, :3], T[:3, :3]) < 1e-6
        assert branch_family(q)
        assert KIN.limits.within(q)


def test_batch_ik_agrees_with_ur_analytic_ik_on_every_branch():
    poses = _envelope_poses()
    T_world = tool_down_batch(*poses.T)
    T_bf = KIN.to_base_flange(T_world)
    q, valid = ik_batch(T_bf)
    for i in range(0, len(poses), 7):
        theirs = np.array(ur_analytic_ik.ur10e.inverse_kinematics(np.ascontiguousarray(T_bf[i])))
        ours = q[i][valid[i]]
        assert len(ours) == len(theirs)
        # Same set of solutions up to 2 pi.
        diff = np.abs(np.angle(np.exp(1j * (ours[:, None, :] - theirs[None, :, :]))))
        assert np.all(diff.max(axis=2).min(axis=1) < 1e-7)


def test_ik_nearest_picks_the_branch_closest_to_the_reference():
    T = tool_down(0.6, 0.0, DECK + 0.3, 0.2)
    q_ref = np.array(HOME_Q)
    q = KIN.ik_nearest(T, q_ref)
    all_q = KIN.resolve_turns(KIN.ik_all(T), q_ref[None])
    fam = all_q[branch_family(all_q)]
    w = KIN.joint_weights
    dists = np.sqrt((((fam - q_ref) * w) ** 2).sum(axis=1))
    np.testing.assert_allclose(q, fam[np.argmin(dists)])


def test_ik_nearest_resolves_two_pi_equivalents_of_the_wrist():
    T = tool_down(0.6, 0.0, DECK + 0.3, 0.0)
    q0 = KIN.ik_nearest(T, np.array(HOME_Q))
    q_ref = q0.copy()
    q_ref[5] += 2 * np.pi - 0.05  # the wrist has turned almost a full turn
    q = KIN.ik_nearest(T, q_ref)
    assert q[5] == pytest.approx(q0[5] + 2 * np.pi, abs=1e-9)


def test_ik_nearest_returns_none_for_a_target_two_metres_away():
    assert KIN.ik_nearest(tool_down(2.6, 0.0, 0.5, 0.0), np.array(HOME_Q)) is None
    assert len(KIN.ik_all(tool_down(2.6, 0.0, 0.5, 0.0))) == 0


def test_ik_all_in_base_frame_round_trips():
    q_in = np.array([0.3, -1.2, 1.4, -1.8, -1.5, 0.7])
    T_base = KIN.fk(q_in, frame=Frame.BASE)
    sols = KIN.ik_all(T_base, frame=Frame.BASE)
    assert np.any(np.abs(np.angle(np.exp(1j * (sols - q_in)))).max(axis=1) < 1e-8)


def test_yaw_of_tool_down_pose_round_trips():
    yaws = np.array([-3.0, -1.0, 0.0, 0.5, 3.1])
    T = tool_down_batch(np.zeros(5), np.zeros(5), np.ones(5), yaws)
    np.testing.assert_allclose(yaw_of(T), yaws, atol=1e-12)


def test_branch_family_rejects_elbow_down_and_flipped_wrist():
    T = KIN.fk(np.array(HOME_Q), frame=Frame.BASE) @ np.linalg.inv(KIN.T_flange_tcp)
    q, valid = ik_batch(T[None])
    fam = branch_family(q[0][valid[0]])
    # 8 solutions, 2 shoulder branches, each with exactly one elbow-up unflipped member.
    assert valid.sum() == 8
    assert fam.sum() == 2


def test_joint_limits_reject_bad_values():
    with pytest.raises(MotionError, match='velocity'):
        JointLimits(velocity=(1.0, 1.0, 1.0, 1.0, 1.0, 0.0))
    with pytest.raises(MotionError, match='tcp_offset'):
        UR10eKinematics(tcp_offset=-0.1)
