"""In-process photos: per-layer and final PNGs of the configured views, results unchanged."""

from __future__ import annotations

import pytest
from palletizer.core.config import load_config
from palletizer.core.planning import build_planner
from palletizer.telemetry import decode_png
from palletizer.wiring.inprocess import MemorySink, PhotoMemorySink, run_inprocess

pytestmark = pytest.mark.sim


def test_level_13_seed_1_photographs_the_first_layer_and_the_end_without_changing_the_result():
    # Seven cartons on the deck, the eighth on them (level 12 seed 1 until the line watched
    # its station all along: its six now all fit on the deck).
    cfg = load_config()
    photo, sink = run_inprocess(13, 1, build_planner('heuristic'), sink=PhotoMemorySink())
    plain, _ = run_inprocess(13, 1, build_planner('heuristic'), sink=MemorySink())
    assert photo.success and photo.to_dict() == plain.to_dict()
    layers = [p.layer for p in sink.placements]
    assert layers == [1, 1, 1, 1, 1, 1, 1, 2]
    views = [v.value for v in cfg.telemetry.snapshots.views]
    seqs = (sink.placements[6].seq, sink.placements[7].seq)
    assert [(a, v) for a, v, _ in sink.snapshots] == [(a, v) for a in seqs for v in views]
    for _, view, png in sink.snapshots:
        w, h = cfg.cell.cameras[view].size
        img = decode_png(png)
        assert img.shape == (h, w, 3)
        assert img.std() > 10  # a rendered scene, not a blank frame
