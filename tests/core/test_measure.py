"""Measurement: per-placement numbers and the pallet state from measured poses (§7.1, §7.2)."""

from __future__ import annotations

import math

import numpy as np
from palletizer.core.contracts import PackageSpec, PalletGeometry
from palletizer.core.measure import (
    Tolerances,
    measure_placement,
    pallet_state,
    pallet_to_world,
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


def test_support_of_a_second_layer_box_counts_the_layer_below_only():
    a = measure_placement(0, _spec(0), 1, (-0.2, 0.0, 0.09, 0.0), (-0.2, 0.0, 0.09, 0.0))
    top_pose = (-0.2 + 0.21, 0.0, 0.27, 0.0)  # half on a, half over air
    b = measure_placement(1, _spec(1), 2, top_pose, top_pose, [a])
    np.testing.assert_allclose(b.support_ratio, 0.5)
    c = measure_placement(2, _spec(2), 3, top_pose, top_pose, [a])
    assert c.support_ratio == 0.0  # nothing recorded in layer 2


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
