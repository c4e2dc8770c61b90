"""The item types, the seeded sequences and the frozen table (and its drift test)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from palletizer.core.bpp import sequences as seqs
from palletizer.core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[3]


def test_the_125_types_are_every_side_from_1_to_5():
    types = seqs.ITEM_TYPES
    assert len(types) == len(set(types)) == 125
    assert {s for t in types for s in t} == {1, 2, 3, 4, 5}


def test_a_sequence_is_seeded_and_draws_every_type():
    assert seqs.draw_sequence(7, 50) == seqs.draw_sequence(7, 50)
    assert seqs.draw_sequence(7, 50) != seqs.draw_sequence(8, 50)
    many = seqs.draw_sequence(1, 5000)
    assert set(many) == set(seqs.ITEM_TYPES)


def test_the_frozen_table_still_matches_the_generator():
    path = ROOT / seqs.DEFAULT_TABLE
    table = seqs.read(path)
    found = seqs.mismatches(table)
    assert not found, (
        f'{seqs.DEFAULT_TABLE} no longer matches the sequence generator:\n  '
        + '\n  '.join(found)
        + f'\nrefreeze with: {seqs.refreeze_command(seqs.DEFAULT_TABLE, table.seeds)} '
        '(then rerun scripts/bench bpp: the published results used the old sequences)'
    )


def test_a_changed_generator_is_caught_and_named(tmp_path):
    doc = seqs.freeze(range(1, 4), length=10)
    doc['sequences']['2'][3] = [9, 9, 9]
    path = seqs.write(doc, tmp_path / 't.json')
    found = seqs.mismatches(seqs.read(path))
    assert found == [f'seed 2: item 3 frozen (9, 9, 9), drawn {seqs.draw_sequence(2, 10)[3]}']
    doc = seqs.freeze(range(1, 4), length=10)
    doc['generator'] = '0' * 64
    found = seqs.mismatches(seqs.read(seqs.write(doc, tmp_path / 'h.json')))
    assert len(found) == 1 and 'hash differs' in found[0]


def test_a_wrong_schema_says_how_to_refreeze(tmp_path):
    doc = seqs.freeze(range(1, 3), length=5)
    doc['schema'] = 99
    path = tmp_path / 'old.json'
    path.write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match='refreeze with: scripts/bench bpp --freeze --seeds 1-2'):
        seqs.read(path)
