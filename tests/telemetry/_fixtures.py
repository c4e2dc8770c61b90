"""Shared builders for telemetry tests: a small PNG, contract rows and one episode's stream."""

from __future__ import annotations

import struct
import zlib

import numpy as np
from palletizer.core.contracts import EpisodeResult, PalletState, Placement


def png(width: int, height: int, seed: int = 0) -> bytes:
    """A valid RGB PNG of random pixels (seeded)."""
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, 256, size=(height, width * 3), dtype=np.uint8)
    raw = b''.join(b'\x00' + r.tobytes() for r in rows)

    def chunk(tag: bytes, data: bytes) -> bytes:
        return (
            struct.pack('>I', len(data)) + tag + data + struct.pack('>I', zlib.crc32(tag + data))
        )

    ihdr = struct.pack('>IIBBBBB', width, height, 8, 2, 0, 0, 0)
    return (
        b'\x89PNG\r\n\x1a\n'
        + chunk(b'IHDR', ihdr)
        + chunk(b'IDAT', zlib.compress(raw))
        + chunk(b'IEND', b'')
    )


def placement(seq: int, placed: bool = True, rng: np.random.Generator | None = None) -> Placement:
    rng = rng or np.random.default_rng(seq)
    x, y = rng.uniform(-0.4, 0.4), rng.uniform(-0.3, 0.3)
    return Placement(
        seq=seq,
        package_id=f'p{seq:02d}',
        package_type='A',
        mass_kg=float(rng.uniform(2.0, 12.0)),
        dims_m=(0.4, 0.3, 0.2),
        layer=1,
        planned_pose=(x, y, 0.1, 0.0),
        actual_pose=(x + 0.004, y - 0.003, 0.1, 0.01),
        error_xy_m=0.005,
        error_yaw_rad=0.01,
        support_ratio=1.0,
        overhang_m=0.0,
        placed=placed,
    )


def pallet_state(after_seq: int) -> PalletState:
    return PalletState(
        after_seq=after_seq,
        mass_kg=5.0 * (after_seq + 1),
        cog=(0.01, -0.02, 0.1),
        stability_margin_m=0.3,
        fill_ratio=0.5,
        settle_drift_m=0.001,
        layer_flatness=0.002,
    )


def result(seed: int, n_objects: int = 2, n_placed: int = 2, **metrics) -> EpisodeResult:
    return EpisodeResult(
        seed=seed,
        level=11,
        n_objects=n_objects,
        n_placed=n_placed,
        n_misrouted=0,
        success=n_placed == n_objects,
        duration_s=42.5,
        failure=None if n_placed == n_objects else 'wrong_placement',
        oracle=False,
        git_sha='abc1234',
        task='table',
        metrics={'score': n_placed / n_objects, **metrics},
    )


def package_events(package_id: str, layer: int = 1, score: float = 0.8) -> list[tuple]:
    """(kind, package_id, SI payload) of one carton: perceive, pick, plan, place, settle."""
    return [
        ('perceive', None, {'seen': 1, 'confidence': 0.97, 'source': 'table'}),
        ('pick', package_id, {'mass_kg': 7.5, 'type': 'A', 'cog_offset_m': [0.01, 0.0, -0.002]}),
        (
            'plan',
            package_id,
            {'layer': layer, 'slot': 's1', 'score': score, 'breakdown': {'a': score, 'b': 1.0}},
        ),
        ('place', package_id, {'error_xy_m': 0.0042, 'error_yaw_rad': 0.0123, 'overhang_m': 0.0}),
        ('settle', package_id, {'layer': layer, 'drift_m': 0.0007}),
    ]
