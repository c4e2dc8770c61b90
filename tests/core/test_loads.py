"""Level loads: counter-based draws, declared types walked in shuffled batches, 34 == 33."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest
from palletizer.core.config import load_config
from palletizer.core.loads import draw_carton, draw_load, staging_jitter

CFG = load_config(Path(__file__).resolve().parents[2] / 'configs')


@pytest.mark.parametrize('level', sorted(CFG.levels))
def test_every_level_draws_its_n_cartons_inside_the_envelope(level):
    load = draw_load(level, 1, CFG)
    lv = CFG.levels[level]
    assert len(load) == lv.n and len({c.package_id for c in load}) == lv.n
    for c in load:
        assert c.mass <= 8.5 and all(
            abs(o) <= d / 2 for o, d in zip(c.cog_offset, c.dims, strict=True)
        )
    if lv.types != ('random',):
        # Each declared type appears as often as listed (per full batch).
        assert Counter(c.type_name for c in load[: len(lv.types)]) == Counter(lv.types)


def test_carton_k_does_not_depend_on_attempts_of_other_cartons():
    a = draw_carton(13, 5, 3, attempt=0, config=CFG)
    draw_carton(13, 5, 2, attempt=4, config=CFG)
    assert draw_carton(13, 5, 3, attempt=0, config=CFG) == a
    assert draw_carton(13, 5, 3, attempt=1, config=CFG) != a


def test_same_seed_same_load_other_seed_other_order():
    assert draw_load(12, 3, CFG) == draw_load(12, 3, CFG)
    assert [c.type_name for c in draw_load(12, 3, CFG)] != [
        c.type_name for c in draw_load(12, 4, CFG)
    ] or [c.type_name for c in draw_load(12, 5, CFG)] != [
        c.type_name for c in draw_load(12, 3, CFG)
    ]


def test_level_34_draws_exactly_the_load_of_33():
    assert draw_load(34, 2, CFG) == draw_load(33, 2, CFG)
    assert staging_jitter(34, 2, 1, config=CFG) == staging_jitter(33, 2, 1, config=CFG)


def test_adversarial_cog_sits_at_the_envelope_edge_and_low():
    for c in draw_load(23, 1, CFG):
        assert abs(abs(c.cog_offset[0]) - 0.25 * c.dims[0] / 2) < 1e-12
        assert abs(c.cog_offset[2] + 0.25 * c.dims[2] / 2) < 1e-12


def test_staging_jitter_stays_within_the_level_bounds():
    import math

    lv = CFG.levels[23]
    for i in range(lv.n):
        dx, dy, dyaw = staging_jitter(23, 1, i, config=CFG)
        assert abs(dx) <= lv.pos_jitter_m and abs(dy) <= lv.pos_jitter_m
        assert abs(dyaw) <= math.radians(lv.yaw_jitter_deg)
    assert staging_jitter(11, 1, 0, config=CFG) == (0.0, 0.0, 0.0)


def test_a_rule_level_labels_its_cartons_and_turns_some_half_round():
    lv = CFG.levels[18]
    draws = draw_load(18, 1, CFG)
    for d in draws:
        face = CFG.catalogue.rules(d.type_name).label
        assert d.label == face  # every type of the store order carries one
        across = d.dims[1] if face[1] == 'x' else d.dims[0]
        assert 0 < d.label_size[0] <= min(0.148, 0.9 * across)
        assert 0 < d.label_size[1] <= min(0.105, 0.9 * d.dims[2])
    turns = [
        round((staging_jitter(18, s, i, 0, CFG)[2]) / math.pi)
        for s in range(1, 6)
        for i in range(lv.n)
    ]
    assert set(turns) == {0, 1}  # either way round
    # A level without labels: no label, and its staging never turned half round.
    assert all(d.label == '' and d.label_size == (0.0, 0.0) for d in draw_load(12, 1, CFG))
    j = math.radians(CFG.levels[12].yaw_jitter_deg)
    assert all(abs(staging_jitter(12, s, i, 0, CFG)[2]) <= j for s in (1, 2) for i in range(6))
