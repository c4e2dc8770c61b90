"""Find configs/, read its YAML strictly, validate every file against its schema and build the
typed Config (load_config), with the checks that span keys or files."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from palletizer.core.config._schema import (
    _CAMERA,
    _CELL,
    _PERCEPTION,
    _PLANNER,
    _STABILITY,
    _TELEMETRY,
    SOURCES,
)
from palletizer.core.config._validate import (
    _map_of,
    _one_of,
    _record,
)
from palletizer.core.config.cell import (
    CameraConfig,
    CellConfig,
    RobotConfig,
    build_cameras,
    build_cell,
)
from palletizer.core.config.sections import (
    Catalogue,
    Level,
    PerceptionConfig,
    PlannerConfig,
    StabilityConfig,
    TelemetryConfig,
    _perception,
    _planner,
    _read_catalogue,
    _read_levels,
    _stability,
    _telemetry,
)
from palletizer.core.description import JOINTS
from palletizer.core.errors import ConfigError, close_match

CONFIG_FILES = (
    'catalogue.yaml',
    'levels.yaml',
    'cell.yaml',
    'planner.yaml',
    'perception.yaml',
    'stability.yaml',
    'telemetry.yaml',
)
REACH_TABLE_FILE = 'reach_ur10e.npz'  # built by python -m palletizer.core.motion.reach


@dataclass(frozen=True)
class Config:
    """All validated configuration, as loaded from one configs/ folder."""

    root: Path
    catalogue: Catalogue
    levels: Mapping[int, Level]
    default_level: int
    cell: CellConfig
    planner: PlannerConfig
    perception: PerceptionConfig
    stability: StabilityConfig
    telemetry: TelemetryConfig

    def level(self, level_id: int) -> Level:
        """The level with this id, or a ConfigError listing the valid ids."""
        if level_id not in self.levels:
            valid = ', '.join(str(i) for i in sorted(self.levels))
            raise ConfigError(f'level {level_id!r} does not exist; valid levels: {valid}')
        return self.levels[level_id]

    @property
    def reach_table(self) -> Path:
        """The UR10e reach table the heuristic planner plans with (configs/reach_ur10e.npz)."""
        return self.root / REACH_TABLE_FILE

    def levels_of(self, source: str) -> tuple[int, ...]:
        """Level ids of one source, ascending."""
        _one_of(*SOURCES)(source, 'source')
        return tuple(sorted(i for i, lv in self.levels.items() if lv.source == source))


def config_dir() -> Path:
    """The configs/ folder: $PALLETIZER_CONFIG_DIR, the installed share, or the repository's."""
    env = os.environ.get('PALLETIZER_CONFIG_DIR')
    if env:
        return Path(env)
    here = Path(__file__).resolve()
    for parent in here.parents:
        for cand in (parent / 'configs', parent / 'share' / 'palletizer' / 'configs'):
            if (cand / 'levels.yaml').is_file():
                return cand
    raise ConfigError(
        'cannot find the configs folder (levels.yaml); set PALLETIZER_CONFIG_DIR to the '
        "repository's configs/"
    )


_MERGE_TAG = 'tag:yaml.org,2002:merge'


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects a key given twice in one mapping (PyYAML keeps the last).

    Merge keys (`<<`) still override as YAML defines; only keys written twice are errors.
    """

    def construct_document(self, node: yaml.Node) -> Any:
        self._checked: set[int] = set()
        self._check_keys(node, '')
        return super().construct_document(node)

    def _check_keys(self, node: yaml.Node, where: str) -> None:
        if id(node) in self._checked:  # an alias of a checked node (maybe of itself)
            return
        self._checked.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self._check_keys(item, f'{where}[{i}]')
        elif isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE_TAG:
                    self._check_keys(value_node, where)
                    continue
                key = self.construct_object(key_node)
                sub = f'{where}.{key}' if where else str(key)
                line = key_node.start_mark.line + 1
                if key in seen:
                    raise ConfigError(
                        f'{sub}: duplicate key at line {line} (first at line {seen[key]}); '
                        f'expected each key once per mapping'
                    )
                seen[key] = line
                self._check_keys(value_node, sub)


def read_yaml(path: str | os.PathLike[str]) -> Any:
    """Parse one YAML file strictly; ConfigError naming the file when it cannot be read, is not
    UTF-8, is not valid YAML, or gives a key twice."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f'{path.name}: file not found in {path.parent}') from None
    except OSError as exc:
        raise ConfigError(
            f'{path.name}: cannot read {path}: {exc.strerror or exc}; expected a readable file'
        ) from None
    try:
        text = data.decode('utf-8')
    except UnicodeDecodeError as exc:
        line = data.count(b'\n', 0, exc.start) + 1
        raise ConfigError(
            f'{path.name}: byte 0x{data[exc.start]:02x} at line {line} is not UTF-8; expected '
            f'UTF-8 text'
        ) from None
    try:
        return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader: plain data only
    except ConfigError as exc:
        raise ConfigError(f'{path.name}: {exc}') from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, 'problem_mark', None)
        at = f' at line {mark.line + 1}, column {mark.column + 1}' if mark is not None else ''
        problem = getattr(exc, 'problem', None) or str(exc).splitlines()[0]
        raise ConfigError(f'{path.name}: not valid YAML{at}: {problem}') from None


def _check_joint_names(robot: RobotConfig) -> None:
    """The joints are the UR10e's, in order: core/description.py holds their one spelling (the
    UR driver's), and the URDF, the MuJoCo model and every node use it."""
    if robot.joint_names != JOINTS:
        raise ConfigError(
            f'cell.yaml: robot.joint_names = {list(robot.joint_names)!r}; expected the UR10e '
            f'joints in order: {", ".join(JOINTS)} (core/description.py)'
        )


def _check_joint_limits(robot: RobotConfig) -> None:
    """Each joint's lower limit below its upper one, and home and rest inside the limits."""
    lower, upper, names = robot.joint_lower, robot.joint_upper, robot.joint_names
    for i, (lo, hi) in enumerate(zip(lower, upper, strict=True)):
        if not lo < hi:
            raise ConfigError(
                f'cell.yaml: robot.joint_lower[{i}] = {lo!r} is not below robot.joint_upper[{i}] '
                f'= {hi!r} ({names[i]}); expected joint_lower < joint_upper for every joint'
            )
    for key, pose in (('home', robot.home), ('rest', robot.rest)):
        for i, q in enumerate(pose):
            if not lower[i] <= q <= upper[i]:
                raise ConfigError(
                    f'cell.yaml: robot.{key}[{i}] = {q!r} ({names[i]}); expected a value inside '
                    f'the joint limits [{lower[i]}, {upper[i]}]'
                )


def _check_payload(catalogue: Catalogue, cell: CellConfig) -> None:
    """No carton the catalogue can bring may weigh more than the arm carries with its gripper."""
    payload, gripper = cell.robot.payload_kg, cell.gripper.mass_kg
    capacity = payload - gripper
    why = (
        f'{capacity:g} kg: the robot carries {payload:g} kg (cell.yaml robot.payload_kg) minus '
        f'the {gripper:g} kg gripper (gripper.mass_kg)'
    )
    for name, t in catalogue.types.items():
        if t.mass > capacity:
            raise ConfigError(
                f'catalogue.yaml: types.{name}.mass = {t.mass!r}; expected at most {why}'
            )
    if catalogue.random.mass[1] > capacity:
        raise ConfigError(
            f'catalogue.yaml: random.mass = {list(catalogue.random.mass)!r}; expected a maximum '
            f'of at most {why}'
        )


def load_cameras(root: str | os.PathLike[str] | None = None) -> Mapping[str, CameraConfig]:
    """The cameras of cell.yaml alone, validated and typed, in file order: what the simulator
    needs at import, without validating every other file (load_config does that where a run
    starts)."""
    base = Path(root) if root is not None else config_dir()
    doc = read_yaml(base / 'cell.yaml')
    if not isinstance(doc, dict) or 'cameras' not in doc:
        raise ConfigError('cell.yaml: cameras: missing required key')
    try:
        return build_cameras(_map_of(_record(_CAMERA))(doc['cameras'], 'cameras'))
    except ConfigError as exc:
        raise ConfigError(f'cell.yaml: {exc}') from None


def load_config(root: str | os.PathLike[str] | None = None) -> Config:
    """Load and validate every file in configs/ (or `root`); raise ConfigError on the first problem."""
    base = Path(root) if root is not None else config_dir()
    docs = {name: read_yaml(base / name) for name in CONFIG_FILES}
    try:
        catalogue = _read_catalogue(docs['catalogue.yaml'], '')
    except ConfigError as exc:
        raise ConfigError(f'catalogue.yaml: {exc}') from None
    try:
        levels, default = _read_levels(docs['levels.yaml'], '', catalogue)
    except ConfigError as exc:
        raise ConfigError(f'levels.yaml: {exc}') from None
    free = {
        'cell.yaml': _CELL,
        'planner.yaml': _PLANNER,
        'perception.yaml': _PERCEPTION,
        'stability.yaml': _STABILITY,
        'telemetry.yaml': _TELEMETRY,
    }
    parsed = {}
    for name, schema in free.items():
        try:
            parsed[name] = _record(schema)(docs[name], '')
        except ConfigError as exc:
            raise ConfigError(f'{name}: {exc}') from None
    cell = build_cell(parsed['cell.yaml'])
    _check_joint_names(cell.robot)
    _check_joint_limits(cell.robot)
    _check_payload(catalogue, cell)
    cams = list(cell.cameras)
    det = parsed['perception.yaml']['detector']
    named = [
        (f'heightmap.cameras[{i}]', c)
        for i, c in enumerate(parsed['perception.yaml']['heightmap']['cameras'])
    ]
    named.append(('detector.camera', det['camera']))
    for key in ('truck_cameras', 'held_cameras', 'lid_cameras', 'label_cameras'):
        named += [(f'detector.{key}[{i}]', c) for i, c in enumerate(det[key] or ())]
    for where, cam in named:
        if cam not in cams:
            raise ConfigError(
                f'perception.yaml: {where} = {cam!r}; expected a camera of '
                f'cell.yaml: {", ".join(cams)}{close_match(cam, cams)}'
            )
    specs = sorted(p.stem for p in (base / 'specs').glob('*.yaml'))
    for lv in levels.values():
        if lv.spec and lv.spec not in specs:
            raise ConfigError(
                f'levels.yaml: levels[id={lv.id}].spec = {lv.spec!r}; expected a spec in '
                f'{base / "specs"}: {", ".join(specs) or "(none)"}{close_match(lv.spec, specs)}'
            )
    return Config(
        root=base,
        catalogue=catalogue,
        levels=levels,
        default_level=default,
        cell=cell,
        planner=_planner(parsed['planner.yaml']),
        perception=_perception(parsed['perception.yaml']),
        stability=_stability(parsed['stability.yaml']),
        telemetry=_telemetry(parsed['telemetry.yaml']),
    )
