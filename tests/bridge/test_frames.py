"""Cell frames, camera optical frames and intrinsics, referee records and the step stream."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from palletizer.bridge import (
    TRUTH_PREFIX,
    StepStream,
    camera_frames,
    camera_matrices,
    carton_records,
    cell_frames,
)
from palletizer.core.config import load_config
from palletizer.core.loads import draw_load
from palletizer.sim.cameras import Intrinsics
from palletizer.sim.cell import Cell


def _rot(q):
    w, x, y, z = q
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


@pytest.mark.sim
def test_cell_frames_give_the_pallet_and_name_truth_cartons_apart():
    cfg = load_config()
    cell = Cell(cfg.level(21), 1)
    frames = {f.child: f for f in cell_frames(cell)}
    assert frames['pallet'].parent == 'world'
    # The robot's frames belong to the state publisher: no second parent for any of them.
    assert not {'base_link', 'base', 'flange', 'tool0', 'tcp'} & set(frames)
    truth = [c for c in frames if c.startswith(TRUTH_PREFIX)]
    assert len(truth) == len(cell.carton_indices()) and f'{TRUTH_PREFIX}std_m-00' in truth
    assert not [c for c in cell_frames(cell, truth=False) if c.child.startswith(TRUTH_PREFIX)]


@pytest.mark.sim
def test_the_published_robot_description_lands_on_the_simulated_tcp():
    """world -> base_link -> ... -> tool0 -> tcp through the state publisher's static transforms
    and link chain ends where MuJoCo's tcp site is, in position and orientation."""
    import mujoco
    from palletizer.core.description import LINKS, link_transforms, static_transforms
    from palletizer.core.motion import UR10eKinematics
    from palletizer.sim.robot import ARM_JOINTS

    cell = Cell()
    cfg = load_config()
    dh = dataclasses.asdict(cfg.cell.robot.dh)
    fixed = {
        child: (parent, T)
        for parent, child, T in static_transforms(
            UR10eKinematics().T_world_base, cfg.cell.gripper.tcp_offset
        )
    }
    rng = np.random.default_rng(2)
    m, d = cell.model, cell.data
    adr = [int(m.joint(j).qposadr[0]) for j in ARM_JOINTS]
    for q in rng.uniform(-2.5, 2.5, size=(20, 6)):
        d.qpos[adr] = q
        moving = {LINKS[i + 1]: (LINKS[i], T) for i, T in enumerate(link_transforms(dh, q))}
        tree = {**fixed, **moving}
        T, frame = np.eye(4), 'tcp'
        while frame != 'world':
            parent, step = tree[frame]
            T, frame = step @ T, parent
        mujoco.mj_kinematics(m, d)
        pos, rot = cell.tcp_pose()
        np.testing.assert_allclose(T[:3, 3], pos, atol=1e-9)
        np.testing.assert_allclose(T[:3, :3], rot, atol=1e-9)


@pytest.mark.sim
def test_camera_optical_frames_look_along_z_at_their_target():
    cfg = load_config()
    cell = Cell()
    for f in camera_frames(cell, ['top', 'station']):
        cam = cfg.cell.cameras[f.child.removesuffix('_optical')]
        look = np.asarray(cam.look_at) - np.asarray(cam.pos)
        np.testing.assert_allclose(f.pos, cam.pos, atol=1e-6)
        np.testing.assert_allclose(_rot(f.quat)[:, 2], look / np.linalg.norm(look), atol=1e-6)


def test_camera_matrices_are_the_pinhole_in_row_major_order():
    k, r, p = camera_matrices(Intrinsics(640, 480, 500.0, 500.0, 319.5, 239.5))
    np.testing.assert_allclose(k, [500, 0, 319.5, 0, 500, 239.5, 0, 0, 1])
    np.testing.assert_allclose(r, np.eye(3).ravel())
    np.testing.assert_allclose(p, [500, 0, 319.5, 0, 0, 500, 239.5, 0, 0, 0, 1, 0])


@pytest.mark.sim
def test_carton_records_take_mass_and_cog_from_the_draw():
    cell = Cell(load_config().level(21), 1)
    draws = {d.package_id: d for d in draw_load(21, 1)}
    recs = carton_records(cell.ground_truth(), draws)
    assert [r.package_id for r in recs] == [d.package_id for d in draw_load(21, 1)]
    first = draws[recs[0].package_id]
    assert recs[0].mass == pytest.approx(first.mass) and recs[0].type_name == first.type_name
    np.testing.assert_allclose(recs[0].dims, first.dims, atol=1e-9)
    assert carton_records(cell.ground_truth(), {})[0].mass == 0.0


@pytest.mark.sim
def test_step_stream_emits_every_tenth_step_whoever_steps():
    cell = Cell()
    times = []
    stream = StepStream(lambda: times.append(cell.time), every=10)
    stream.attach(cell)
    cell.step(35)
    cell.settle(0.03)  # 15 more steps: 50 in all
    np.testing.assert_allclose(times, [0.02, 0.04, 0.06, 0.08], atol=1e-9)
    with pytest.raises(ValueError, match='every = 0'):
        StepStream(lambda: None, every=0)
