"""The live view's pieces that need no graph: the detection drawn on the station frame, and the
topic messages turned into telemetry's records."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip('palletizer_msgs', reason='palletizer_msgs is not built: run scripts/setup')

from palletizer.panel.observer import draw_detection, placement_record, state_record  # noqa: E402
from palletizer_msgs.msg import PalletState, Placement  # noqa: E402

# A camera 2 m above the world origin looking straight down (optical z = world -z).
K = np.array([[500.0, 0.0, 320.0], [0.0, 500.0, 240.0], [0.0, 0.0, 1.0]])
T = np.array(
    [[0.0, -1.0, 0.0, 0.0], [-1.0, 0.0, 0.0, 0.0], [0.0, 0.0, -1.0, 2.0], [0.0, 0.0, 0.0, 1.0]]
)


def _green(img: np.ndarray) -> np.ndarray:
    b, g, r = (img[..., i].astype(int) for i in range(3))
    return (g > 200) & (r < 80) & (b < 80)


def test_the_detected_box_is_drawn_where_the_camera_sees_it():
    rgb = np.full((480, 640, 3), 90, np.uint8)
    # A 0.4 x 0.2 x 0.2 m box centred 0.1 m up: its top 1.8 m from the camera, so 111 x 56 px.
    det = {'x': 0.0, 'y': 0.0, 'z': 0.1, 'yaw': 0.0, 'dims': [0.4, 0.2, 0.2]}
    img = draw_detection(rgb, K, T, det)
    ys, xs = np.nonzero(_green(img))
    assert len(xs) > 200
    # World x runs along image -v and world y along -u here: the long side is vertical.
    assert xs.min() == pytest.approx(320 - 500 * 0.1 / 1.8, abs=2)
    assert xs.max() == pytest.approx(320 + 500 * 0.1 / 1.8, abs=2)
    assert ys.min() == pytest.approx(240 - 500 * 0.2 / 1.8, abs=2)
    assert ys.max() == pytest.approx(240 + 500 * 0.2 / 1.8, abs=2)
    # Without a detection the frame comes back unchanged (in OpenCV's BGR order).
    plain = draw_detection(rgb, K, T, None)
    assert not _green(plain).any() and plain.shape == rgb.shape


def test_a_box_behind_the_camera_is_not_drawn():
    rgb = np.zeros((480, 640, 3), np.uint8)
    det = {'x': 0.0, 'y': 0.0, 'z': 3.0, 'yaw': 0.3, 'dims': [0.4, 0.2, 0.2]}
    assert not _green(draw_detection(rgb, K, T, det)).any()


def test_topic_messages_become_telemetry_records():
    p = Placement(seq=7, package_id='std_m-01', package_type='std_m', layer=2, placed=True)
    p.dims_m = [0.4, 0.3, 0.2]
    p.actual_pose.x, p.actual_pose.yaw = 0.25, 1.5
    rec = placement_record(p)
    assert rec['seq'] == 7 and rec['actual_pose']['x'] == 0.25 and rec['dims_m'] == [0.4, 0.3, 0.2]
    assert rec['actual_pose']['yaw'] == 1.5 and rec['placed'] is True
    s = PalletState(after_seq=7, stability_margin_m=0.12)
    s.cog.x, s.cog.z = 0.1, 0.3
    assert state_record(s) == {
        'after_seq': 7,
        'cog_x': 0.1,
        'cog_y': 0.0,
        'cog_z': 0.3,
        'stability_margin_m': 0.12,
    }


def test_the_live_state_follows_episodes_and_forgets_a_finished_run():
    from palletizer.panel.observer import LiveState

    live = LiveState()
    pick = {'seed': 1, 'seq': 1, 'ts': 1.0, 'kind': 'pick', 'package_id': 'a-00', 'payload': {}}
    live.on_event({**pick, 'run_id': 'r1'})
    live.on_placement(
        {
            'seq': 2, 'package_id': 'a-00', 'package_type': 'a', 'dims_m': [0.4, 0.3, 0.2],
            'layer': 1, 'planned_pose': {'x': 0.0, 'y': 0.0, 'z': 0.1, 'yaw': 0.0},
            'actual_pose': {'x': 0.0, 'y': 0.0, 'z': 0.1, 'yaw': 0.0}, 'error_xy_m': 0.0,
            'support_ratio': 1.0, 'placed': True,
        }
    )  # fmt: skip
    live.on_camera(b'png', None)
    assert len(live.snapshot()['scene']['cartons']) == 1 and live.snapshot()['camera_seq'] == 1
    live.on_event({**pick, 'seed': 2, 'run_id': 'r1'})  # the next episode starts afresh
    assert live.snapshot()['scene']['cartons'] == []
    before = live.version
    live.reset()
    snap = live.snapshot()
    assert live.version > before and live.camera_png is None
    assert snap['camera_seq'] == 0 and snap['heightmap'] is None and snap['rows'] == []


def test_the_urdf_root_is_the_one_link_no_joint_has_as_child():
    from palletizer.panel.observer import urdf_root

    from tests.panel.robot_panel import FIXTURE_URDF

    assert urdf_root(FIXTURE_URDF) == 'base_link'
    two_roots = '<robot name="r"><link name="a"/><link name="b"/></robot>'
    assert urdf_root(two_roots) is None
    assert urdf_root('not xml <') is None


def test_the_live_state_keeps_the_robot_in_the_pallet_frame_and_forgets_it_on_reset():
    from palletizer.panel.observer import LiveState

    live = LiveState()
    live.on_robot_description('<robot name="r"/>')
    T = np.eye(4)
    T[:3, :3] = [[-1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, 0.0, 1.0]]
    T[:3, 3] = (0.6, -0.72, 0.48)
    live.on_robot_origin(T)
    joints_before = live.joints_version
    live.on_joints(['a', 'b'], [0.5, -1.25])
    live.on_joints(['a'], [0.75])  # a message that names some joints keeps the others
    robot = live.robot()
    assert robot['urdf'] == '<robot name="r"/>' and robot['joints'] == {'a': 0.75, 'b': -1.25}
    cx, cy = live.pallet.centre_xy
    want = T.copy()
    want[:3, 3] -= (cx, cy, live.pallet.deck_z)
    np.testing.assert_allclose(np.reshape(robot['origin'], (4, 4)), want, atol=1e-6)
    assert live.joints_version == joints_before + 2
    before = live.robot_version
    live.reset()
    assert live.robot() == {'urdf': None, 'origin': None, 'joints': {}}
    assert live.robot_version > before
