"""Configs load and validate; a bad file names the file, key path, value and what is allowed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from palletizer.core.config import load_config
from palletizer.core.errors import ConfigError

CONFIGS = Path(__file__).resolve().parents[2] / 'configs'


def test_shipped_configs_load_with_fourteen_levels_three_rule_levels_and_fifteen_types():
    cfg = load_config(CONFIGS)
    assert sorted(cfg.levels) == [
        11,
        12,
        13,
        14,
        15,
        16,
        17,
        18,
        21,
        22,
        23,
        24,
        31,
        32,
        33,
        34,
        35,
    ]
    rules = sorted(i for i, lv in cfg.levels.items() if lv.spec)
    assert rules == [18, 24, 35]
    assert all(cfg.levels[i].labels and cfg.levels[i].spec == 'store' for i in rules)
    assert not any(lv.labels for i, lv in cfg.levels.items() if i not in rules)
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
            'levels.yaml',
            lambda d: d['levels'][0].update(spec='stor'),
            r"levels.yaml: levels\[id=11\].spec = 'stor'; expected a spec in .*specs: store "
            r"\(did you mean 'store'\?\)",
        ),
        (
            'levels.yaml',
            lambda d: d['levels'][0].update(spec='../store'),
            r"levels\[0\].spec = '../store'; expected the name of a file in configs/specs",
        ),
        (
            'levels.yaml',
            lambda d: d['levels'][0].update(labels='yes'),
            r"levels\[0\].labels = 'yes'; expected",
        ),
        (
            'perception.yaml',
            lambda d: d['detector'].update(label_cameras=['label_c']),
            r"perception.yaml: detector.label_cameras\[0\] = 'label_c'; expected a camera of "
            r'cell.yaml',
        ),
        (
            'catalogue.yaml',
            lambda d: d['types']['small'].update(mass=-1),
            r'catalogue.yaml: types.small.mass = -1; expected a number in',
        ),
        (
            'catalogue.yaml',
            lambda d: d['types']['small'].update(board='C23'),
            r"catalogue.yaml: types.small.board = 'C23'; expected one of the boards: B32, C32, "
            r'C44, E23 \(did you mean',
        ),
        (
            'catalogue.yaml',
            lambda d: d['types']['small'].update(label='top'),
            r"catalogue.yaml: types.small.label = 'top'; expected one of \+x, -x, \+y, -y, none",
        ),
        (
            'catalogue.yaml',
            lambda d: d['random']['rules'].update(board='X9'),
            r"catalogue.yaml: random.rules.board = 'X9'; expected one of the boards",
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
            'cell.yaml',
            lambda d: d['robot']['joint_names'].reverse(),
            r"cell.yaml: robot.joint_names = \['wrist_3_joint', .*\]; expected the UR10e joints "
            r'in order: shoulder_pan_joint, shoulder_lift_joint, .* \(core/description.py\)',
        ),
        (
            'perception.yaml',
            lambda d: d['detector'].update(lid_cameras=['top', 'topp']),
            r"perception.yaml: detector.lid_cameras\[1\] = 'topp'; expected a camera of "
            r"cell.yaml: .*\(did you mean 'top'\?\)",
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


def test_every_section_is_a_frozen_typed_record():
    from dataclasses import FrozenInstanceError, fields, is_dataclass
    from types import MappingProxyType

    from palletizer.core.config import CameraConfig, CellConfig
    from palletizer.core.detection import DetectorParams
    from palletizer.core.heightmap_fusion import FusionParams
    from palletizer.core.planning import BeamParams, GridParams, HeuristicParams
    from palletizer.core.planning.buffer import BufferSettings
    from palletizer.core.vocab import PlannerKind, SnapshotView, TelemetryMode

    cfg = load_config(CONFIGS)

    def frozen_all_through(obj, where):
        """Every dataclass down the tree is frozen; every container is immutable."""
        if is_dataclass(obj):
            first = fields(obj)[0].name
            with pytest.raises(FrozenInstanceError):
                setattr(obj, first, getattr(obj, first))
            for f in fields(obj):
                frozen_all_through(getattr(obj, f.name), f'{where}.{f.name}')
        elif isinstance(obj, (dict, list, set)):
            raise AssertionError(f'{where} is a mutable {type(obj).__name__}')
        elif isinstance(obj, (tuple, MappingProxyType)):
            for item in obj.values() if isinstance(obj, MappingProxyType) else obj:
                frozen_all_through(item, where)

    for name in ('cell', 'planner', 'perception', 'stability', 'telemetry'):
        section = getattr(cfg, name)
        assert is_dataclass(section), name
        frozen_all_through(section, name)
    with pytest.raises(TypeError):
        cfg.planner.heuristic.weights['lowness'] = 9.0  # type: ignore[index]  # it is read-only
    p = cfg.planner
    assert p.default is PlannerKind.heuristic
    assert isinstance(p.heuristic, HeuristicParams) and isinstance(p.beam, BeamParams)
    assert isinstance(p.grid, GridParams) and isinstance(p.buffer, BufferSettings)
    assert isinstance(cfg.perception.heightmap.fusion, FusionParams)
    assert isinstance(cfg.perception.detector, DetectorParams)
    assert cfg.perception.gauge.samples == 600 and len(cfg.perception.gauge.tare_offsets) == 4
    assert cfg.stability.jolts.axes == ('x', 'y', 'z')
    assert cfg.telemetry.mode is TelemetryMode.disk
    assert cfg.telemetry.snapshots.views == (SnapshotView.top, SnapshotView.side)
    cell = cfg.cell
    assert isinstance(cell, CellConfig) and isinstance(cell.cameras, MappingProxyType)
    assert all(isinstance(c, CameraConfig) for c in cell.cameras.values())
    assert list(cell.cameras)[:2] == ['top', 'diag_a']  # file order
    assert cell.cameras['top'].size == (640, 480) and type(cell.cameras['top'].size[0]) is int
    assert cell.cameras['side'].depth_noise is None  # optional, absent
    assert cell.robot.dh.a2 == -0.6127 and cell.pallet.deck_z == 0.144
    assert type(cell.truck.max_column_items) is int and type(cell.physics.timestep) is float


def test_only_core_config_reads_the_sections_by_key():
    """cell, planner, perception, stability and telemetry are read by attribute everywhere
    else: no `<x>.cell[...]` nor `<x>.planner.get(...)` (nor the others) in the package, its
    tests or scripts."""
    import ast

    import palletizer

    sections = {'cell', 'planner', 'perception', 'stability', 'telemetry'}
    root = Path(palletizer.__file__).resolve().parent
    repo = Path(__file__).resolve().parents[2]
    files = [
        *root.rglob('*.py'),
        *(repo / 'tests').rglob('*.py'),
        *(repo / 'scripts').rglob('*.py'),
    ]
    found = []
    for path in files:
        if root / 'core' / 'config' in path.parents:
            continue
        tree = ast.parse(path.read_text(encoding='utf-8'), str(path))
        for node in ast.walk(tree):
            target = None
            if isinstance(node, ast.Subscript):
                target = node.value
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ('get', 'items', 'keys', 'values')
            ):
                target = node.func.value
            if isinstance(target, ast.Attribute) and target.attr in sections:
                found.append(f'{path}:{node.lineno}: {ast.unparse(node)[:80]}')
    assert found == []


def test_the_config_package_loads_no_module_above_it():
    """core/config builds the planners', detector's and fusion's parameter records from
    core/params, so loading the config loads none of the modules that read it."""
    import subprocess
    import sys

    code = (
        'import sys, palletizer.core.config as c; c.load_config(); '
        'print(sorted(m for m in sys.modules if m.startswith("palletizer.")))'
    )
    out = subprocess.run(
        [sys.executable, '-c', code], capture_output=True, text=True, check=True
    ).stdout
    loaded = eval(out)  # a printed list of module names
    assert 'palletizer.core.config' in loaded
    above = [
        m
        for m in loaded
        if not m.startswith(('palletizer.core.config', 'palletizer.core.params'))
        and m
        not in (
            'palletizer',
            'palletizer.core',
            'palletizer.core.errors',
            'palletizer.core.description',
        )
        and m != 'palletizer.core.vocab'
    ]
    assert above == []


def test_the_cameras_load_alone_and_a_bad_one_is_named(tmp_path):
    from palletizer.core.config import load_cameras

    assert list(load_cameras(CONFIGS)) == list(load_config(CONFIGS).cell.cameras)
    shutil.copytree(CONFIGS, tmp_path, dirs_exist_ok=True)
    text = (tmp_path / 'cell.yaml').read_text()
    (tmp_path / 'cell.yaml').write_text(text.replace('size: [640, 480]', 'size: [640.5, 480]', 1))
    with pytest.raises(
        ConfigError, match=r'cell.yaml: cameras.top.size\[0\] = 640.5; expected an integer'
    ):
        load_cameras(tmp_path)
    with pytest.raises(ConfigError, match=r'cell.yaml: cameras.top.size\[0\] = 640.5'):
        load_config(tmp_path)


def test_the_episode_settings_defaults_are_cell_yaml():
    """EpisodeSettings() (unit tests, the node's fallback) equals what cell.yaml gives, less
    the buffer, which the planner's settings add."""
    from dataclasses import replace

    from palletizer.core.episode import EpisodeSettings

    cell = load_config(CONFIGS).cell
    assert replace(EpisodeSettings.from_config(cell), buffer=None) == EpisodeSettings()
    longer = replace(cell, episode=replace(cell.episode, max_duration_s=900.0, place_retries=5))
    got = EpisodeSettings.from_config(longer)
    assert (got.max_duration_s, got.place_retries) == (900.0, 5)
