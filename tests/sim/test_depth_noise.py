"""Depth sensor model: deterministic per (seed, step, camera), sigma ~ z^2, grazing and edge losses."""

from __future__ import annotations

import numpy as np
import pytest
from palletizer.core.config import load_config
from palletizer.sim.cell import Cell, CellOptions
from palletizer.sim.depth_noise import DepthNoise, apply_depth_noise, noise_key

D415 = DepthNoise()


def _K(w: int = 320, h: int = 240, f: float = 300.0) -> np.ndarray:
    return np.array([[f, 0, (w - 1) / 2], [0, f, (h - 1) / 2], [0, 0, 1.0]])


def _read(depth: np.ndarray, seed: int = 1, step: int = 10, name: str = 'top') -> np.ndarray:
    return apply_depth_noise(depth, D415, _K(), np.random.default_rng(noise_key(seed, step, name)))


def test_same_key_same_image_and_each_key_part_changes_it():
    flat = np.full((240, 320), 1.5, np.float32)
    a = _read(flat)
    np.testing.assert_array_equal(a, _read(flat))
    for other in (_read(flat, step=11), _read(flat, seed=2), _read(flat, name='diag_a')):
        assert not np.array_equal(a, other)


def test_sigma_grows_with_the_square_of_the_distance():
    stds = []
    for z in (1.0, 2.0):
        img = _read(np.full((240, 320), z, np.float32))
        ok = img > 0
        assert ok.mean() > 0.99  # a fronto-parallel plane loses nothing
        stds.append(float(np.std(img[ok] - z)))
    for z, s in zip((1.0, 2.0), stds, strict=True):
        assert s == pytest.approx(D415.sigma(z), rel=0.1)  # 1 mm quantisation adds ~0.3 mm^2
    assert stds[1] / stds[0] == pytest.approx(4.0, rel=0.15)


def test_output_is_quantised_to_the_depth_unit():
    img = _read(np.full((240, 320), 1.2345, np.float32))
    mm = img[img > 0] * 1000.0
    np.testing.assert_allclose(mm, np.round(mm), atol=1e-3)


def test_a_grazing_plane_loses_its_returns_and_a_facing_one_does_not():
    h, w, f = 240, 320, 300.0
    K = _K(w, h, f)
    # Plane through (0, 0, 2) tilted about the camera x axis by `deg`: z = 2 + tan(deg) * y.
    v = (np.arange(h) - K[1, 2])[:, None] / f
    lost = {}
    for deg in (10.0, 84.0):
        z = 2.0 / (1.0 - np.tan(np.radians(deg)) * v) * np.ones((1, w))
        z = np.where(z > 0, z, 0).astype(np.float32)
        centre = z[h // 2 - 5 : h // 2 + 5]
        img = apply_depth_noise(centre, D415, K, np.random.default_rng(0))
        lost[deg] = float((img[2:-2, 2:-2] == 0).mean())
    assert lost[10.0] < 0.01
    assert lost[84.0] > 0.8


def test_edges_lose_returns_and_fly_between_the_surfaces():
    depth = np.full((240, 320), 2.0, np.float32)
    depth[:, 160:] = 1.6  # a carton side seen edge-on: a 0.4 m step
    img = _read(depth)
    edge = img[:, 158:162]
    assert 0.3 < (edge == 0).mean() < 0.7
    flying = (edge > 1.65) & (edge < 1.95)
    assert 0.02 < flying.mean() < 0.2
    assert (img[:, :150] == 0).mean() < 0.01


@pytest.mark.sim
def test_the_configured_cell_is_noisy_and_the_ideal_one_is_not():
    cfg = load_config()
    noisy = Cell(options=CellOptions.from_config(cfg.cell))
    ideal = Cell()
    try:
        assert set(noisy.options.depth_noise or {}) >= set(cfg.perception.heightmap.fusion.cameras)
        a = noisy.capture(['top'], 160, 120, rgb=False)['top'].depth
        b = ideal.capture(['top'], 160, 120, rgb=False)['top'].depth
        ok = a > 0
        diff = np.abs(a[ok] - b[ok])
        # Noise everywhere, millimetres on surfaces; only flying pixels at depth steps (a few
        # per cent, placed between the two surfaces) stray further.
        assert np.median(diff) > 0 and np.percentile(diff, 95) < 0.05
        np.testing.assert_array_equal(a, noisy.capture(['top'], 160, 120, rgb=False)['top'].depth)
        # The ideal cell returns the render itself.
        rig = ideal._rig
        assert rig is not None
        raw = rig.capture(ideal.data, ['top'], 160, 120, rgb=False)['top'].depth
        np.testing.assert_array_equal(b, raw)
    finally:
        noisy.close()
        ideal.close()
