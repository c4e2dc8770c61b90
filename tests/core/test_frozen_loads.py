"""Frozen load tables (core/frozen_loads.py, scripts/loads): the committed tables still match
the generator (the drift test), the drift test can fail, and a table in use is what draw_load
answers, whatever the generator draws."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from palletizer.cli.bench_reference import HARD_LEVELS, MAIN_LEVELS
from palletizer.cli.loads import DEFAULT_TABLE, GENERATOR, check_loads
from palletizer.cli.loads import main as loads_main
from palletizer.core import loads
from palletizer.core.errors import ConfigError, InvalidValue
from palletizer.core.frozen_loads import (
    SCHEMA,
    freeze,
    mismatches,
    read,
    refreeze_command,
    use,
)

ROOT = Path(__file__).resolve().parents[2]
TABLES = sorted((ROOT / DEFAULT_TABLE.parent).glob('*.json'))


def test_the_benchmark_ranges_are_frozen():
    table = read(ROOT / DEFAULT_TABLE)
    assert set(MAIN_LEVELS + HARD_LEVELS) <= set(table.levels)
    assert set(range(1, 51)) <= set(table.seeds)
    assert max(table.seeds) <= 100  # seeds above 100 are for independent checks only


@pytest.mark.parametrize('path', TABLES, ids=[p.name for p in TABLES])
def test_every_frozen_table_matches_the_generator(path):
    table = read(path)
    found = mismatches(table, limit=3)
    assert not found, (
        f'{path.name} no longer matches the load generator:\n  '
        + '\n  '.join(found)
        + f'\nIf the change is meant, refreeze: {refreeze_command(path, table.levels, table.seeds)}'
    )


def _small_table(tmp_path: Path, edit=None) -> Path:
    doc = freeze([11, 33], [1, 2])
    if edit is not None:
        edit(doc)
    path = tmp_path / 'small.json'
    path.write_text(json.dumps(doc))
    return path


def test_the_drift_test_fails_on_a_load_the_generator_no_longer_draws(tmp_path, capsys):
    def heavier(doc):
        doc['loads']['33:2']['cartons'][3]['mass'] += 0.5

    path = _small_table(tmp_path, heavier)
    found = mismatches(read(path))
    assert len(found) == 1 and found[0].startswith('level 33 seed 2: carton 3:')
    assert loads_main(['check', str(path)]) == 1
    err = capsys.readouterr().err
    assert 'scripts/loads freeze --levels 11 33 --seeds 1-2 --out' in err

    def shifted(doc):
        doc['loads']['11:1']['jitter'][0][1] += 0.001

    assert mismatches(read(_small_table(tmp_path, shifted))) == [
        'level 11 seed 1: the arrival jitter differs'
    ]
    assert loads_main(['check', str(_small_table(tmp_path))]) == 0


def test_a_table_in_use_is_what_draw_load_answers(tmp_path):
    def edited(doc):
        doc['loads']['11:1']['cartons'][0]['mass'] = 9.25
        doc['loads']['11:1']['jitter'][1] = [0.001, -0.002, 0.003]

    table = read(_small_table(tmp_path, edited))
    drawn = loads.draw_load(11, 1)
    with use(table):
        frozen = loads.draw_load(11, 1)
        assert frozen[0].mass == 9.25 and frozen[1:] == drawn[1:]
        assert loads.staging_jitter(11, 1, 1) == (0.001, -0.002, 0.003)
        assert loads.draw_load(12, 1) == loads.draw_load(12, 1, None)  # not in the table
    assert loads.draw_load(11, 1) == drawn and loads.frozen_table() is None


def test_a_benchmark_names_the_pairs_its_table_lacks(tmp_path):
    path = _small_table(tmp_path)
    assert check_loads(GENERATOR, [11], [51]) == GENERATOR
    assert check_loads(str(path), [11, 33], [1, 2]).startswith(f'{path} (generator ')
    with pytest.raises(InvalidValue, match=r'lacks 2 .*level 11 seed 3 first.*--loads generator'):
        check_loads(str(path), [11], [2, 3, 4])


def test_a_table_of_another_schema_is_refused_with_the_command_to_refreeze(tmp_path):
    def old(doc):
        doc['schema'] = SCHEMA + 1

    with pytest.raises(ConfigError, match=r'schema = 2; expected 1 .*scripts/loads freeze'):
        read(_small_table(tmp_path, old))
