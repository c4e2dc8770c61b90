"""Configs load and validate; a bad file names the file, key path, value and what is allowed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from palletizer.core.config import load_config
from palletizer.core.errors import ConfigError

CONFIGS = Path(__file__).resolve().parents[2] / 'configs'


def test_shipped_configs_load_with_fourteen_levels_and_fifteen_types():
    cfg = load_config(CONFIGS)
    assert sorted(cfg.levels) == [11, 12, 13, 14, 15, 16, 17, 21, 22, 23, 31, 32, 33, 34]
    assert len(cfg.catalogue.types) == 15
    assert cfg.levels[34].load_level == 33 and cfg.levels[34].decor == 'plant'
    assert all(
        lv.id // 10 == {'table': 1, 'conveyor': 2, 'truck': 3}[lv.source]
        for lv in cfg.levels.values()
    )
    assert len(cfg.planner.heuristic.weights) == 14


def _broken(tmp_path: Path, name: str, edit) -> Path:
    root = tmp_path / 'configs'
    shutil.copytree(CONFIGS, root)
    doc = yaml.safe_load((root / name).read_text())
    edit(doc)
    (root / name).write_text(yaml.safe_dump(doc))
    return root


@pytest.mark.parametrize(
    'name, edit, match',
    [
        (
            'levels.yaml',
            lambda d: d['levels'][2].update(source='belt'),
            r"levels.yaml: levels\[2\].source = 'belt'; expected one of table, conveyor, truck",
        ),
        (
            'levels.yaml',
            lambda d: d['levels'][1].update(id=11),
            r'levels.yaml: levels\[1\].id = 11; duplicate level id',
        ),
        (
            'levels.yaml',
            lambda d: d['levels'][0].update(id=21),
            r'levels.yaml: levels\[0\].id = 21; a table level must be in the 1x decade',
        ),
        (
            'levels.yaml',
            lambda d: d['levels'][1]['types'].__setitem__(0, 'book_x'),
            r"levels.yaml: levels\[1\].types\[0\] = 'book_x'; expected a catalogue type: .*"
            r"\(did you mean 'book_s'\?\)",
        ),
        (
            'levels.yaml',
            lambda d: d['levels'][0].update(cog='centered'),
            r"levels\[0\].cog = 'centered'; expected one of centred, catalogue, adversarial",
        ),
        (
            'catalogue.yaml',
            lambda d: d['types']['small'].update(mass=-1),
            r'catalogue.yaml: types.small.mass = -1; expected a number in',
        ),
        (
            'cell.yaml',
            lambda d: d['gripper']['cups'].update(radius='big'),
            r"cell.yaml: gripper.cups.radius = 'big'; expected a number",
        ),
        (
            'cell.yaml',
            lambda d: d['physics'].update(integator='RK4'),
            r"cell.yaml: physics.integator: unknown key; .*\(did you mean 'integrator'\?\)",
        ),
        (
            'planner.yaml',
            lambda d: d['heuristic']['weights'].pop('bridge'),
            r'planner.yaml: heuristic.weights.bridge: missing required key',
        ),
        (
            'planner.yaml',
            lambda d: d['heuristic']['weights'].update(lowness=float('nan')),
            r'planner.yaml: heuristic.weights.lowness = nan; expected a number',
        ),
        (
            'perception.yaml',
            lambda d: d['heightmap']['cameras'].append('roof'),
            r"perception.yaml: heightmap.cameras\[3\] = 'roof'; expected a camera of cell.yaml",
        ),
        (
            'telemetry.yaml',
            lambda d: d['snapshots'].update(views=['front']),
            r"telemetry.yaml: snapshots.views\[0\] = 'front'; expected one of top, side, iso, camera",
        ),
    ],
)
def test_bad_config_names_file_key_value_and_allowed(tmp_path, name, edit, match):
    with pytest.raises(ConfigError, match=match):
        load_config(_broken(tmp_path, name, edit))


def test_missing_file_and_bad_yaml_are_named(tmp_path):
    root = tmp_path / 'configs'
    shutil.copytree(CONFIGS, root)
    (root / 'stability.yaml').write_text('jolts: [unclosed')
    with pytest.raises(ConfigError, match='stability.yaml: not valid YAML'):
        load_config(root)
    (root / 'stability.yaml').unlink()
    with pytest.raises(ConfigError, match='stability.yaml: file not found'):
        load_config(root)


def test_unknown_level_lists_the_valid_ones():
    with pytest.raises(ConfigError, match='level 41 does not exist; valid levels: 11, 12'):
        load_config(CONFIGS).level(41)
