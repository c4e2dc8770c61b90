"""Each baseline on a tiny sequence: it picks the pose its rule names, and only allowed ones."""

from __future__ import annotations

from palletizer.core.bpp import BASELINES, Container, Pose, run_episode


def test_first_fit_takes_the_first_pose_in_scan_order():
    box = Container()
    box.place((2, 10, 1), Pose(0, 0, 0))  # a low strip along y at x 0-1
    # Nothing refuses x 0 (on the strip): first fit goes there, on top.
    assert BASELINES['first_fit']().choose(box, (3, 3, 3)) == Pose(0, 0, 0)


def test_dbl_prefers_depth_then_the_bottom():
    box = Container()
    box.place((2, 5, 4), Pose(0, 0, 0))  # a block at x 0-1, y 0-4, 4 high
    # The deepest x is 0: on the block (z 4) or beside it at y 5 (z 0): the bottom wins.
    assert BASELINES['dbl']().choose(box, (2, 2, 2)) == Pose(0, 5, 0)


def test_heightmap_minimisation_fills_a_pit_flush():
    box = Container()
    for y in (0, 3):
        box.place((10, 2, 2), Pose(0, y, 0))
    box.place((10, 5, 2), Pose(0, 5, 0))
    # A 10 x 1 pit at y 2, 2 deep: a 1 x 5 x 2 item fills it exactly, turned or not as it fits.
    pose = BASELINES['heightmap_min']().choose(box, (5, 1, 2))
    assert pose is not None and pose.y == 2 and pose.rot == 0
    assert box.check((5, 1, 2), pose).z == 0


def test_every_baseline_packs_a_short_sequence_with_allowed_poses_only():
    items = [(5, 5, 5), (5, 5, 5), (3, 4, 2), (4, 3, 5), (2, 2, 2), (1, 5, 3)]
    for name, make in BASELINES.items():
        ep = run_episode(make(), items)
        assert ep.outcome == 'exhausted', name  # run_episode ends 'refused' on a bad pose
        assert ep.utilisation == sum(a * b * c for a, b, c in items) / 1000, name


def test_a_baseline_says_none_when_nothing_is_allowed():
    box = Container()
    for x in (0, 5):
        for y in (0, 5):
            box.place((5, 5, 5), Pose(x, y, 0))
            box.place((5, 5, 4), Pose(x, y, 0))
    for name, make in BASELINES.items():
        assert make().choose(box, (1, 1, 2)) is None, name
