"""Measurement: per-placement numbers and the pallet state from measured poses.

Rules: docs/measurement.md §7.1-7.2.
"""

from __future__ import annotations

import math

import numpy as np
from palletizer.core.contracts import PackageSpec, PalletGeometry
from palletizer.core.measure import (
    CONTACT_TOL_M,
    Tolerances,
    measure_placement,
    pallet_state,
    pallet_to_world,
    resting_support,
    world_to_pallet,
)

STD_M = PackageSpec('std_m-00', 'std_m', (0.42, 0.30, 0.18), 4.2, (0.05, 0.0, 0.01))


def _spec(i: int, cog=(0.0, 0.0, 0.0)) -> PackageSpec:
    return PackageSpec(f'std_m-{i:02d}', 'std_m', (0.42, 0.30, 0.18), 4.2, cog)


def test_world_and_pallet_frames_are_inverse():
    pose = (0.81, -0.25, 0.234, 0.3)
    np.testing.assert_allclose(world_to_pallet(pose), (0.21, -0.25, 0.09, 0.3), atol=1e-12)
    np.testing.assert_allclose(pallet_to_world(world_to_pallet(pose)), pose, atol=1e-12)


def test_measure_placement_errors_support_and_tolerances():
    planned = (-0.2, -0.1, 0.09, 0.0)
    actual = (-0.2 + 0.006, -0.1 - 0.008, 0.0899, math.pi + 0.02)
    p = measure_placement(0, STD_M, 1, planned, actual)
    np.testing.assert_allclose(p.error_xy_m, 0.010, atol=1e-12)
    np.testing.assert_allclose(p.error_yaw_rad, 0.02, atol=1e-12)
    assert p.placed and p.support_ratio == 1.0 and p.overhang_m == 0.0
    off = measure_placement(0, STD_M, 1, planned, (-0.2 + 0.021, -0.1, 0.09, 0.0))
    assert not off.placed
    loose = measure_placement(
        0, STD_M, 1, planned, (-0.2 + 0.021, -0.1, 0.09, 0.0), tolerances=Tolerances(xy_m=0.03)
    )
    assert loose.placed


def test_overhang_beyond_the_deck_unplaces_a_box():
    planned = (0.6 - 0.21 + 0.03, 0.0, 0.09, 0.0)  # 30 mm past the +x rim
    p = measure_placement(0, STD_M, 1, planned, planned)
    np.testing.assert_allclose(p.overhang_m, 0.03, atol=1e-12)
    np.testing.assert_allclose(p.support_ratio, (0.42 - 0.03) / 0.42)
    assert not p.placed


def test_layer_support_counts_the_previous_planned_layer_only():
    a = measure_placement(0, _spec(0), 1, (-0.2, 0.0, 0.09, 0.0), (-0.2, 0.0, 0.09, 0.0))
    top_pose = (-0.2 + 0.21, 0.0, 0.27, 0.0)  # half on a, half over air
    b = measure_placement(1, _spec(1), 2, top_pose, top_pose, [a])
    np.testing.assert_allclose((b.support_ratio, b.support_ratio_layer), (0.5, 0.5))
    c = measure_placement(2, _spec(2), 3, top_pose, top_pose, [a])
    assert c.support_ratio_layer == 0.0  # the reference's rule: nothing recorded in layer 2
    np.testing.assert_allclose(c.support_ratio, 0.5)  # as held: half of it stands on a


GAP = 0.002  # the release height a fast-forward carton keeps above what it stands on [m]


def _box(i: int, layer: int, dims, xy, base: float, others=(), yaw: float = 0.0):
    """A carton measured where it stands: bottom `base` above the deck, planned = actual."""
    spec = PackageSpec(f'box-{i:02d}', 'random', dims, 3.0, (0.0, 0.0, 0.0))
    pose = (xy[0], xy[1], base + dims[2] / 2, yaw)
    return measure_placement(i, spec, layer, pose, pose, list(others))


def test_a_layer_3_carton_standing_on_a_layer_1_carton_is_fully_supported():
    # Level 23 seed 1, random-06: the planner counts base heights, so a carton on a tall
    # layer-1 carton is layer 3 while the only layer-2 carton stands elsewhere.
    tall = _box(0, 1, (0.42, 0.30, 0.30), (-0.3, 0.0), 0.0)
    low = _box(1, 1, (0.42, 0.30, 0.12), (0.3, 0.0), 0.0)
    on_low = _box(2, 2, (0.42, 0.30, 0.12), (0.3, 0.0), 0.12 + GAP, [tall, low])
    top = _box(3, 3, (0.30, 0.20, 0.15), (-0.3, 0.0), 0.30 + GAP, [tall, low, on_low])
    np.testing.assert_allclose(top.support_ratio, 1.0)
    assert top.support_ratio_layer == 0.0


def test_a_carton_bridging_two_tops_of_equal_height_rests_on_both():
    tall = _box(0, 1, (0.42, 0.30, 0.30), (-0.21, 0.0), 0.0)  # x -0.42..0, top 0.30
    low = _box(1, 1, (0.42, 0.30, 0.12), (0.21, 0.0), 0.0)
    on_low = _box(2, 2, (0.42, 0.30, 0.18), (0.21, 0.0), 0.12, [tall, low])  # top 0.30 too
    bridge = _box(3, 3, (0.42, 0.30, 0.15), (0.0, 0.0), 0.30 + GAP, [tall, low, on_low])
    np.testing.assert_allclose(bridge.support_ratio, 1.0)
    np.testing.assert_allclose(bridge.support_ratio_layer, 0.5)  # the layer-2 half only


def test_a_carton_half_over_the_deck_edge_rests_on_its_other_half():
    edge = _box(0, 1, (0.42, 0.30, 0.30), (0.39, 0.0), 0.0)  # flush with the +x rim
    low = _box(1, 1, (0.42, 0.30, 0.12), (-0.3, 0.0), 0.0)
    on_low = _box(2, 2, (0.42, 0.30, 0.12), (-0.3, 0.0), 0.12, [edge, low])
    out = _box(3, 3, (0.42, 0.30, 0.15), (0.60, 0.0), 0.30, [edge, low, on_low])
    np.testing.assert_allclose(out.support_ratio, 0.5)
    np.testing.assert_allclose(out.overhang_m, 0.21)
    assert out.support_ratio_layer == 0.0 and not out.placed


def test_a_carton_with_nothing_at_its_bottom_height_is_unsupported():
    under = _box(0, 1, (0.42, 0.30, 0.18), (0.0, 0.0), 0.0)
    hover = _box(1, 2, (0.42, 0.30, 0.18), (0.0, 0.0), 0.18 + 0.03, [under])  # 30 mm up
    assert hover.support_ratio == 0.0
    np.testing.assert_allclose(hover.support_ratio_layer, 1.0)  # the layer rule sees a
    lifted = _box(2, 1, (0.42, 0.30, 0.18), (0.3, 0.0), 0.03)  # 30 mm above the deck
    assert lifted.support_ratio == 0.0 and lifted.support_ratio_layer == 1.0


def test_contact_tolerance_takes_the_release_gap_and_sinking_but_not_a_hover():
    under = _box(0, 1, (0.42, 0.30, 0.18), (0.0, 0.0), 0.0)
    for gap, held in ((-0.0005, 1.0), (CONTACT_TOL_M - 1e-4, 1.0), (CONTACT_TOL_M + 1e-4, 0.0)):
        top = _box(1, 2, (0.42, 0.30, 0.18), (0.0, 0.0), 0.18 + gap, [under])
        assert top.support_ratio == held, gap
    pose = (0.0, 0.0, 0.27 + GAP, 0.0)
    strict = measure_placement(
        1, _spec(1), 2, pose, pose, [under], tolerances=Tolerances(contact_m=0.001)
    )
    assert strict.support_ratio == 0.0


def test_resting_support_uses_the_true_yawed_footprints():
    under = _box(0, 1, (0.50, 0.30, 0.18), (0.0, 0.0), 0.0)
    # A 0.30 x 0.30 carton turned 45 deg on a 0.50 x 0.30 one: two corners overhang in y.
    s = resting_support((0.0, 0.0, 0.18 + 0.1, math.pi / 4), (0.30, 0.30, 0.2), [under])
    half = 0.15 * math.sqrt(2.0)  # half-diagonal of the turned square
    corner = (half - 0.15) ** 2  # each of the two corners beyond y = +-0.15 (right isosceles)
    np.testing.assert_allclose(s, 1.0 - 2 * corner / 0.09)
    # A carton never carries itself, and the deck carries what stands on it.
    assert resting_support(under.actual_pose, under.dims_m, [under], package_id='box-00') == 1.0
    assert resting_support(under.actual_pose, under.dims_m, [under]) == 1.0  # the deck


def test_pallet_state_mass_cog_margin_fill_flatness():
    specs = [_spec(0, (0.05, 0.0, 0.0)), _spec(1, (0.05, 0.0, 0.0))]
    poses = [(-0.21, 0.0, 0.09, 0.0), (0.21, 0.0, 0.09, math.pi)]
    ps = [
        measure_placement(i, s, 1, q, q) for i, (s, q) in enumerate(zip(specs, poses, strict=True))
    ]
    st = pallet_state(1, ps, {s.package_id: s.cog_offset_m for s in specs})
    np.testing.assert_allclose(st.mass_kg, 8.4)
    # The yaw-rotated offsets point to opposite sides: the stack CoG stays at the centre.
    np.testing.assert_allclose(st.cog, (0.0, 0.0, 0.09), atol=1e-12)
    # Base hull spans x [-0.42, 0.42], y [-0.15, 0.15]: margin 0.15 - 0.28 x 0.09.
    np.testing.assert_allclose(st.stability_margin_m, 0.15 - 0.28 * 0.09)
    np.testing.assert_allclose(st.fill_ratio, 1.0)
    assert st.layer_flatness == 0.0


def test_pallet_state_counts_out_of_tolerance_boxes_but_not_off_pallet_ones():
    a = measure_placement(0, _spec(0), 1, (0.0, 0.0, 0.09, 0.0), (0.0, 0.0, 0.09, 0.0))
    moved = (0.05, 0.0, 0.09, 0.0)
    b = measure_placement(1, _spec(1), 1, (-0.4, 0.0, 0.09, 0.0), (-0.4 + 0.03, 0.0, 0.09, 0.0))
    gone = measure_placement(2, _spec(2), 1, moved, (2.0, 0.0, 0.09, 0.0))
    assert not b.placed
    st = pallet_state(2, [a, b, gone])
    np.testing.assert_allclose(st.mass_kg, 8.4)
    np.testing.assert_allclose(st.cog[0], (0.0 - 0.37) / 2)


def test_empty_pallet_state_is_zero():
    st = pallet_state(0, [], pallet=PalletGeometry())
    assert st.mass_kg == 0.0 and st.stability_margin_m == 0.0 and st.fill_ratio == 0.0
