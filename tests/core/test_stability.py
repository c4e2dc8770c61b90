"""Stability geometry: the SDK anchor numbers, hulls, overhang, yaw error, collapse, stacks."""

from __future__ import annotations

import math

import numpy as np
from palletizer.core.contracts import Placement
from palletizer.core.stability import (
    TRANSPORT_ACCEL_G,
    StackBox,
    StackModel,
    box_corners,
    collapsed,
    convex_hull,
    overhang,
    placement_error,
    polygon_overlap,
    stability_margin,
    support_hull,
    support_polygon,
    support_ratio,
    validate_stack,
    yaw_error,
)

BASE = [(-0.05, 0.0, 0.10, 0.06), (0.05, 0.0, 0.10, 0.06)]


def test_support_polygon_anchor():
    np.testing.assert_allclose(support_polygon(BASE), (-0.10, 0.10, -0.03, 0.03))
    assert support_polygon([]) is None


def test_stability_margin_anchor_numbers():
    np.testing.assert_allclose(stability_margin(0.0, 0.0, 0.05, BASE), 0.03 - 0.28 * 0.05)
    np.testing.assert_allclose(stability_margin(0.0, 0.0, 0.05, BASE), 0.016, atol=1e-12)
    assert stability_margin(0.0, 0.0, 0.08, BASE) < 0.016  # higher CoG, smaller margin
    assert stability_margin(0.0, 0.05, 0.05, BASE) < 0.0  # outside the base tips
    assert stability_margin(0.0, 0.0, 0.05, []) == 0.0
    assert stability_margin(0.0, 0.0, 0.05, [(0.0, 0.0, 0.0, 0.0)]) == 0.0  # degenerate
    assert TRANSPORT_ACCEL_G == 0.28


def test_margin_uses_the_hull_not_the_bounding_rectangle():
    # An L of two boxes: the bounding rect covers the empty corner, the hull cuts it diagonally.
    base = [(0.0, 0.0, 0.4, 0.1), (-0.15, 0.15, 0.1, 0.4)]
    # Near the empty corner (+x, +y) the rect says inside, the hull says outside.
    assert stability_margin(0.15, 0.25, 0.0, base) < 0.0
    rect = support_polygon(base)
    assert rect[0] < 0.15 < rect[1] and rect[2] < 0.25 < rect[3]


def test_convex_hull_is_ccw_and_drops_interior_and_collinear_points():
    rng = np.random.default_rng(3)
    inner = rng.uniform(-0.5, 0.5, (40, 2))
    square = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1], [0, -1], [1, 0]], dtype=float)
    hull = convex_hull(np.vstack([inner, square]))
    assert len(hull) == 4
    x, y = hull[:, 0], hull[:, 1]
    area2 = np.sum(x * np.roll(y, -1) - np.roll(x, -1) * y)
    np.testing.assert_allclose(area2 / 2, 4.0)  # positive: counter-clockwise


def test_rotated_base_uses_rotated_corners():
    base = [(0.0, 0.0, 0.4, 0.1, math.pi / 2)]
    np.testing.assert_allclose(support_polygon(base), (-0.05, 0.05, -0.2, 0.2), atol=1e-12)


def test_overhang_and_support_ratio():
    deck = (-0.6, 0.6, -0.4, 0.4)
    np.testing.assert_allclose(overhang((0.5, 0.63, 0.0, 0.2), deck), 0.03)
    assert overhang((-0.1, 0.1, -0.1, 0.1), deck) == 0.0
    np.testing.assert_allclose(
        support_ratio((0, 1, 0, 1), [(0, 0.5, 0, 1), (0.5, 0.8, 0, 1)]), 0.8
    )
    np.testing.assert_allclose(support_ratio((0, 1, 0, 1), [(0, 1, 0, 1), (0, 1, 0, 1)]), 1.0)


def test_polygon_overlap_of_yawed_footprints():
    unit = box_corners(0.0, 0.0, 1.0, 1.0)
    # A unit square and itself turned 45 deg meet in a regular octagon: 2 (sqrt 2 - 1).
    turned = box_corners(0.0, 0.0, 1.0, 1.0, math.pi / 4)
    np.testing.assert_allclose(polygon_overlap(unit, turned), 2 * (math.sqrt(2) - 1))
    np.testing.assert_allclose(polygon_overlap(unit, box_corners(0.5, 0.25, 1.0, 1.0)), 0.375)
    np.testing.assert_allclose(polygon_overlap(box_corners(0, 0, 0.2, 0.1, 0.3), unit), 0.02)
    assert polygon_overlap(unit, box_corners(1.0, 0.0, 1.0, 1.0)) == 0.0  # edges touch
    assert polygon_overlap(unit, box_corners(3.0, 0.0, 1.0, 1.0, 0.7)) == 0.0


def test_yaw_error_has_period_pi_and_half_pi_for_squares():
    np.testing.assert_allclose(yaw_error(0.0, math.pi + 0.05), 0.05)
    np.testing.assert_allclose(yaw_error(0.0, math.pi / 2), math.pi / 2)
    np.testing.assert_allclose(yaw_error(0.0, math.pi / 2 + 0.03, square=True), 0.03, atol=1e-12)
    exy, eyaw = placement_error(
        (0, 0, 0, 0.0), (0.003, 0.004, 0, -math.pi + 0.02), (0.4, 0.3, 0.2)
    )
    np.testing.assert_allclose((exy, eyaw), (0.005, 0.02), atol=1e-12)
    _, eyaw = placement_error((0, 0, 0, 0.0), (0, 0, 0, math.pi / 2), (0.3, 0.3, 0.2))
    np.testing.assert_allclose(eyaw, 0.0, atol=1e-12)
    # A measured square is a fraction of a millimetre off square: square_m says how far counts.
    near = (0.2609, 0.2608, 0.13)
    _, eyaw = placement_error((0, 0, 0, 0.0), (0, 0, 0, math.pi / 2), near)
    np.testing.assert_allclose(eyaw, math.pi / 2)
    _, eyaw = placement_error((0, 0, 0, 0.0), (0, 0, 0, math.pi / 2), near, square_m=0.01)
    np.testing.assert_allclose(eyaw, 0.0, atol=1e-12)
    _, eyaw = placement_error((0, 0, 0, 0.0), (0, 0, 0, math.pi / 2), (0.3, 0.28, 0.2), 0.01)
    np.testing.assert_allclose(eyaw, math.pi / 2)


def _p(pid: str, placed: bool) -> Placement:
    pose = (0.0, 0.0, 0.1, 0.0)
    return Placement(0, pid, 't', 1.0, (0.3, 0.2, 0.2), 1, pose, pose, 0, 0, 1, 0, placed)


def test_collapse_is_a_previously_placed_box_no_longer_placed():
    before = [_p('a', True), _p('b', True), _p('c', False)]
    assert collapsed(before, [_p('a', True), _p('b', True), _p('c', False)]) == []
    assert collapsed(before, [_p('a', True), _p('b', False), _p('c', True)]) == ['b']


def _box(x, y, z, ex, ey, h, m=1.0, cog=None):
    return StackBox(x, y, z, ex, ey, h, m, cog or (x, y, z + h / 2))


def test_validate_stack_accepts_a_column_and_rejects_a_cantilever():
    a = _box(0.0, 0.0, 0.0, 0.4, 0.3, 0.2)
    on_top = _box(0.0, 0.0, 0.2, 0.4, 0.3, 0.2)
    assert validate_stack([a, on_top]).ok
    lever = _box(0.25, 0.0, 0.2, 0.4, 0.3, 0.2)  # 62.5 % resting, CoG beyond the edge
    check = validate_stack([a, lever], min_support=0.3)
    assert not check.ok and check.reason == 'margin'
    assert validate_stack([a, lever]).reason == 'support'


def test_validate_stack_passes_loads_down_to_the_supporters():
    # A bridge over two boxes is stable, but a heavy box on the bridge's far end is carried by
    # the right support alone and must still be inside it.
    left = _box(-0.15, 0.0, 0.0, 0.2, 0.3, 0.2)
    right = _box(0.15, 0.0, 0.0, 0.2, 0.3, 0.2)
    bridge = _box(0.0, 0.0, 0.2, 0.5, 0.3, 0.1)
    check = validate_stack([left, right, bridge], min_support=0.5)
    assert check.ok
    np.testing.assert_allclose(check.support[2], 0.4 / 0.5)
    assert validate_stack([left, bridge], min_support=0.3).reason == 'margin'


def test_validate_stack_rejects_overlaps_and_out_of_bounds():
    a = _box(0.0, 0.0, 0.0, 0.4, 0.3, 0.2)
    b = _box(0.1, 0.0, 0.0, 0.4, 0.3, 0.2)
    assert validate_stack([a, b]).reason == 'overlap'
    assert validate_stack([_box(0.45, 0.0, 0.0, 0.4, 0.3, 0.2)]).reason == 'bounds'
    assert validate_stack([_box(0.0, 0.0, 0.0, 0.4, 0.3, 0.2, m=400.0)]).reason == 'mass'
    assert validate_stack([_box(0.0, 0.0, 1.3, 0.4, 0.3, 0.2)]).reason == 'height'


def test_incremental_stack_model_agrees_with_the_whole_stack_check():
    rng = np.random.default_rng(17)
    agree = {True: 0, False: 0}
    for _ in range(60):
        # A random two-layer stack of up to 4 boxes, then a random box on top of it.
        boxes = [_box(-0.3, -0.15, 0.0, 0.5, 0.36, 0.2, 5.0), _box(0.3, 0.15, 0.0, 0.5, 0.36, 0.2)]
        for _ in range(rng.integers(0, 3)):
            x, y = rng.uniform(-0.4, 0.4), rng.uniform(-0.25, 0.25)
            m = rng.uniform(1, 8)
            cog = (x + rng.uniform(-0.05, 0.05), y + rng.uniform(-0.05, 0.05), 0.3)
            cand = StackBox(x, y, 0.2, 0.3, 0.25, 0.2, m, cog)
            if validate_stack([*boxes, cand], min_support=0.3, min_margin=0.0).ok:
                boxes.append(cand)
        top = max(b.top for b in boxes)
        z = rng.choice([0.2, top])
        x, y = rng.uniform(-0.45, 0.45), rng.uniform(-0.3, 0.3)
        new = StackBox(x, y, z, 0.3, 0.2, 0.1, rng.uniform(1, 20), (x, y, z + 0.05))
        overlaps = validate_stack([*boxes, new], min_support=0.3, min_margin=0.01).reason
        if overlaps == 'overlap':
            continue
        whole = validate_stack([*boxes, new], min_support=0.3, min_margin=0.01)
        fast = StackModel(boxes, min_support=0.3, min_margin=0.01).add(new)
        assert fast.ok == whole.ok, (whole.reason, fast.reason)
        if whole.ok:
            np.testing.assert_allclose(fast.margin[0], whole.margin[-1])
        agree[whole.ok] += 1
    assert agree[True] > 5 and agree[False] > 5  # both outcomes exercised


def test_a_heavy_box_on_an_overhanging_end_tips_the_box_below_in_both_checks():
    base = _box(0.0, 0.0, 0.0, 0.4, 0.3, 0.2, 5.0)
    # Rests on 40 % of its length, CoG 50 mm inside the base's edge.
    middle = StackBox(0.25, 0.0, 0.2, 0.5, 0.3, 0.1, 1.0, (0.15, 0.0, 0.25))
    rules = {'min_support': 0.3, 'min_margin': 0.01}
    assert validate_stack([base, middle], **rules).ok
    model = StackModel([base, middle], **rules)
    for mass, ok in ((10.0, False), (0.01, True)):
        end = StackBox(0.4, 0.0, 0.3, 0.2, 0.2, 0.1, mass, (0.4, 0.0, 0.35))
        whole = validate_stack([base, middle, end], **rules)
        fast = model.add(end)
        assert whole.ok is ok and fast.ok is ok
        if not ok:
            assert whole.reason == fast.reason == 'margin'
            assert fast.margin[0] > 0.0  # the new box itself is fine: the one below tips


def test_the_extra_load_travels_down_more_than_one_level():
    base = _box(0.0, 0.0, 0.0, 0.4, 0.3, 0.2, 5.0)
    middle = StackBox(0.25, 0.0, 0.2, 0.5, 0.3, 0.1, 1.0, (0.15, 0.0, 0.25))
    light = StackBox(0.4, 0.0, 0.3, 0.2, 0.2, 0.1, 0.01, (0.4, 0.0, 0.35))
    heavy = StackBox(0.4, 0.0, 0.4, 0.2, 0.2, 0.1, 10.0, (0.4, 0.0, 0.45))
    rules = {'min_support': 0.3, 'min_margin': 0.01}
    assert validate_stack([base, middle, light], **rules).ok
    assert validate_stack([base, middle, light, heavy], **rules).reason == 'margin'
    assert StackModel([base, middle, light], **rules).add(heavy).reason == 'margin'


def test_the_stack_checks_hull_of_rects_is_the_support_hulls_to_the_last_bit():
    # validate_stack and StackModel take the hull of contact patches as Python floats
    # (_rect_hull, _edges_distance): the same doubles as support_hull + _hull_distance.
    from palletizer.core.stability import _edges_distance, _hull_distance, _rect_hull

    rng = np.random.default_rng(5)
    for _ in range(400):
        rects = []
        for _ in range(rng.integers(1, 5)):
            x0, y0 = rng.uniform(-0.6, 0.5), rng.uniform(-0.4, 0.3)
            rects.append((x0, x0 + rng.uniform(0.01, 0.4), y0, y0 + rng.uniform(0.01, 0.3)))
        boxes = [
            (0.5 * (r[0] + r[1]), 0.5 * (r[2] + r[3]), r[1] - r[0], r[3] - r[2]) for r in rects
        ]
        hull = support_hull(boxes)
        edges = _rect_hull(rects)
        assert len(edges) == len(hull)
        for x, y in rng.uniform(-0.6, 0.6, (5, 2)):
            assert _edges_distance(edges, x, y) == _hull_distance(hull, x, y)
    assert _edges_distance(_rect_hull([]), 0.0, 0.0) == -math.inf


def test_stack_model_finds_the_boxes_validate_stack_flags_as_measured():
    # StackModel flags the boxes already breaking a rule in its own load pass: the same as
    # validate_stack with nothing enforced, no overlap test and no early stop.
    rng = np.random.default_rng(23)
    flagged = 0
    for _ in range(80):
        boxes = [_box(-0.3, -0.15, 0.0, 0.5, 0.36, 0.2, 5.0), _box(0.3, 0.15, 0.0, 0.5, 0.36, 0.2)]
        for _ in range(rng.integers(1, 6)):
            x, y = rng.uniform(-0.55, 0.55), rng.uniform(-0.35, 0.35)
            z = float(rng.choice([0.2, 0.2, 0.35]))
            cog = (x + rng.uniform(-0.1, 0.1), y + rng.uniform(-0.1, 0.1), z + 0.05)
            boxes.append(StackBox(x, y, z, 0.3, 0.25, 0.15, rng.uniform(1, 20), cog))
        rules = {'min_support': 0.5, 'min_margin': 0.01, 'max_height_m': 0.5}
        model = StackModel(boxes, **rules)
        whole = validate_stack(
            boxes, **rules, check_overlaps=False, enforce=[False] * len(boxes), stop_early=False
        )
        assert np.array_equal(model.failed, whole.failed)
        flagged += int(whole.failed.any())
    assert 10 < flagged < 80  # stacks with and without a failing box
