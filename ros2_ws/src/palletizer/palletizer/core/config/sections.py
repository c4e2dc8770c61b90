"""The typed records every config file loads into, and the builders that make them from the
schema-validated mappings (every key present and checked)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from palletizer.core.config._schema import _FRICTION, COG_MODES, DECORS, SOURCES
from palletizer.core.config._validate import (
    _bool,
    _list_of,
    _map_of,
    _num,
    _one_of,
    _Opt,
    _record,
    _text,
    _vec,
)
from palletizer.core.errors import ConfigError, close_match
from palletizer.core.params.detection import DetectionError, DetectorParams
from palletizer.core.params.fusion import FusionError, FusionParams
from palletizer.core.params.planning import BeamParams, BufferSettings, GridParams, HeuristicParams
from palletizer.core.vocab import PlannerKind, SnapshotView, TelemetryMode

# ---------------------------------------------------------------------------------------------
# Typed records.


LABEL_FACES = ('+x', '-x', '+y', '-y', 'none')


@dataclass(frozen=True)
class CartonRules:
    """What a pallet spec's rules read from a carton type (configs/catalogue.yaml): its board
    grade (a key of Catalogue.boards), label face (LABEL_FACES, package frame), fragility and
    group key."""

    board: str = 'C32'
    label: str = 'none'
    fragile: bool = False
    group: str = 'general'


@dataclass(frozen=True)
class Board:
    """A corrugated board grade: edge crush [N/m] and caliper [m]."""

    ect_n_m: float
    caliper_m: float


@dataclass(frozen=True)
class CartonType:
    """A declared carton type: full dims [m], mass [kg], true CoG offset [m] from the centre,
    and its pallet-spec attributes."""

    name: str
    dims: tuple[float, float, float]
    mass: float
    cog_offset: tuple[float, float, float]
    rgba: tuple[float, float, float, float]
    friction: tuple[float, float, float]
    rules: CartonRules = CartonRules()


@dataclass(frozen=True)
class RandomSpec:
    """Envelope of the random carton generator (ranges are [lo, hi])."""

    length: tuple[float, float]
    width: tuple[float, float]
    height: tuple[float, float]
    volume: tuple[float, float]
    max_aspect: float
    density: tuple[float, float]
    mass: tuple[float, float]
    max_attempts: int
    adversarial_fraction: float


@dataclass(frozen=True)
class Catalogue:
    """The carton types by name plus the random generator, and what the pallet spec's rules
    read: board grades, the stacking safety factor, the label's size and the random cartons'
    attributes."""

    types: Mapping[str, CartonType]
    random: RandomSpec
    friction: tuple[float, float, float]
    boards: Mapping[str, Board] = field(default_factory=lambda: {'C32': Board(5604.0, 0.004)})
    stack_safety_factor: float = 4.0
    label_size_m: tuple[float, float] = (0.148, 0.105)
    random_rules: CartonRules = CartonRules()

    def rules(self, type_name: str) -> CartonRules:
        """The pallet-spec attributes of a type (a random carton's for 'random' or any name
        the catalogue does not declare)."""
        t = self.types.get(type_name)
        return t.rules if t is not None else self.random_rules

    def crush_limit_kg(self, type_name: str, dims: Sequence[float]) -> float:
        """The most mass [kg] that may rest on a carton of this type and full dims [m]: its
        board's box compression by the simplified McKee formula, BCT = 5.87 ECT
        sqrt(caliper x perimeter), over g x stack_safety_factor (configs/catalogue.yaml)."""
        board = self.boards[self.rules(type_name).board]
        perimeter = 2.0 * (float(dims[0]) + float(dims[1]))
        bct = 5.87 * board.ect_n_m * math.sqrt(board.caliper_m * perimeter)
        return bct / (9.81 * self.stack_safety_factor)


@dataclass(frozen=True)
class Level:
    """One level: its source, load and staging jitter."""

    id: int
    source: str
    name: str
    n: int
    types: tuple[str, ...]
    yaw_jitter_deg: float
    pos_jitter_m: float
    cog: str
    loader_jitter: bool
    decor: str
    same_load_as: int | None
    # A rule level's pallet spec (configs/specs/<spec>.yaml; '' = none) and whether its cartons
    # carry their catalogue label as a visible patch on the label face (docs/pallet-spec.md).
    spec: str = ''
    labels: bool = False

    @property
    def load_level(self) -> int:
        """Level whose draw this level reuses (34 reuses 33: only scenery differs)."""
        return self.same_load_as if self.same_load_as is not None else self.id


@dataclass(frozen=True)
class PlannerConfig:
    """configs/planner.yaml: the default planner and each planner's parameters, built once.

    default: the planner a run gets when none is named; heuristic, beam, grid: the params the
    factory (core.planning.build_planner) builds each planner with; buffer: the set-aside
    buffer on the auxiliary table (core.planning.buffer).
    """

    default: PlannerKind
    heuristic: HeuristicParams
    beam: BeamParams
    grid: GridParams
    buffer: BufferSettings


@dataclass(frozen=True)
class HeightmapConfig:
    """configs/perception.yaml `heightmap`: the fusion's settings (their `cameras` are the pallet
    cameras fused) and whether the robot's own shape is cut out of the views."""

    fusion: FusionParams
    exclude_robot: bool


@dataclass(frozen=True)
class GaugeSettings:
    """configs/perception.yaml `gauge`: the wrist gauge's readings.

    samples: wrench samples averaged per reading; settle_s [s] held before they count;
    still_speed [rad/s] and still_steps: the arm counts as still below this joint speed for
    this many consecutive steps; hidden_limit [m]: worst planar leak of the blind axis before a
    tilted sweep; no_payload_kg: below this the cups hold nothing; tare_offsets [rad]: wrist_1..3
    offsets from home of the tare poses; weigh_on_lift: weigh on the lift first (core.gauge_lift),
    still only where that fit does not converge; lift_skip_s [s]: the part of the lift after the
    seal that the fit leaves out; zero_on_move: zero after each place from the empty tool's
    move back (core.gauge_lift.zero_on_move), still only where that is less certain.
    """

    samples: int
    settle_s: float
    still_speed: float
    still_steps: int
    hidden_limit: float
    no_payload_kg: float
    tare_offsets: tuple[tuple[float, float, float], ...]
    weigh_on_lift: bool = False
    lift_skip_s: float = 0.05
    zero_on_move: bool = False


@dataclass(frozen=True)
class PerceptionConfig:
    """configs/perception.yaml: height-map fusion, carton detection and the wrist gauge."""

    heightmap: HeightmapConfig
    detector: DetectorParams
    gauge: GaugeSettings


@dataclass(frozen=True)
class JoltTrials:
    """configs/stability.yaml `jolts`: lateral jolts of each level [g] along each axis."""

    levels_g: tuple[float, ...]
    axes: tuple[str, ...]
    duration: float
    settle_seconds: float
    hold_seconds: float
    rest_seconds: float
    max_shift_m: float


@dataclass(frozen=True)
class BeamTrial:
    """configs/stability.yaml `beam`: the stack set down on a narrow beam."""

    width: float
    height: float
    settle_seconds: float
    max_tilt_deg: float


@dataclass(frozen=True)
class EumosTrial:
    """configs/stability.yaml `eumos`: the EUMOS 40509-style acceleration trial."""

    accel_g: float
    ramp_s: float
    hold_s: float
    max_displacement_m: float


@dataclass(frozen=True)
class StabilityConfig:
    """configs/stability.yaml: the physical stability protocol."""

    jolts: JoltTrials
    beam: BeamTrial
    eumos: EumosTrial
    transport_accel_g: float


@dataclass(frozen=True)
class BagSettings:
    """configs/telemetry.yaml `bag`: whether a bag is written, its version, compression, topics."""

    enabled: bool
    version: int
    compression: str
    topics: tuple[str, ...]


@dataclass(frozen=True)
class SnapshotSettings:
    """configs/telemetry.yaml `snapshots`: the views photographed after each layer."""

    views: tuple[SnapshotView, ...]


@dataclass(frozen=True)
class PostgresSettings:
    """configs/telemetry.yaml `replica.postgres`: the libpq DSN ('' : from the environment)."""

    dsn: str


@dataclass(frozen=True)
class SupabaseSettings:
    """configs/telemetry.yaml `replica.supabase`: the Storage bucket of the snapshot PNGs."""

    bucket: str


@dataclass(frozen=True)
class ReplicaSettings:
    """configs/telemetry.yaml `replica`: timeout_s [s] connect / HTTP timeout; batch: rows per
    transaction; backoff_s [s]: first and longest wait between retries (the first two of the
    file's list, all the replicator reads); drain_s [s]: how long
    the telemetry node waits at shutdown for its outbox to drain."""

    timeout_s: float
    batch: int
    backoff_s: tuple[float, float]
    drain_s: float
    postgres: PostgresSettings
    supabase: SupabaseSettings


@dataclass(frozen=True)
class McpSettings:
    """configs/telemetry.yaml `mcp`: the speed cap of scripts/mcp's run_episode (1 = real UR10e
    speed; --max-speed may lower it)."""

    speed_cap: float = 1.0


@dataclass(frozen=True)
class TelemetryConfig:
    """configs/telemetry.yaml: mode (never off: that is chosen per run), the runs folder, the free
    space it needs [MB], the bag, the snapshots and the replica."""

    mode: TelemetryMode
    runs_dir: str
    min_free_mb: float
    bag: BagSettings
    snapshots: SnapshotSettings
    replica: ReplicaSettings
    mcp: McpSettings = McpSettings()


# ---------------------------------------------------------------------------------------------
# Typed sections, built from the schema-validated mappings (every key is present and checked).


def _planner(d: Mapping[str, Any]) -> PlannerConfig:
    b = d['buffer']
    return PlannerConfig(
        default=PlannerKind.parse(d['default'], 'planner.yaml: default'),
        heuristic=HeuristicParams.from_mapping(d['heuristic'], 'planner.yaml: heuristic'),
        beam=BeamParams.from_mapping(d['beam'], 'planner.yaml: beam'),
        grid=GridParams.from_mapping(d['grid'], 'planner.yaml: grid'),
        buffer=BufferSettings(int(b['slots']), float(b['edge_margin']), float(b['gap'])),
    )


def _perception(d: Mapping[str, Any]) -> PerceptionConfig:
    hm, g = d['heightmap'], d['gauge']
    try:
        fusion = FusionParams.from_config(hm)
        detector = DetectorParams.from_config(d['detector'])
    except (FusionError, DetectionError) as exc:
        raise ConfigError(f'perception.yaml: {exc}') from None
    return PerceptionConfig(
        heightmap=HeightmapConfig(fusion=fusion, exclude_robot=bool(hm['exclude_robot'])),
        detector=detector,
        gauge=GaugeSettings(
            samples=int(g['samples']),
            settle_s=float(g['settle_s']),
            still_speed=float(g['still_speed']),
            still_steps=int(g['still_steps']),
            hidden_limit=float(g['hidden_limit']),
            no_payload_kg=float(g['no_payload_kg']),
            tare_offsets=tuple((float(x), float(y), float(z)) for x, y, z in g['tare_offsets']),
            weigh_on_lift=bool(g['weigh_on_lift']),
            lift_skip_s=float(g['lift_skip_s']),
            zero_on_move=bool(g['zero_on_move']),
        ),
    )


def _stability(d: Mapping[str, Any]) -> StabilityConfig:
    j, b, e = d['jolts'], d['beam'], d['eumos']
    return StabilityConfig(
        jolts=JoltTrials(
            levels_g=tuple(j['levels_g']),
            axes=tuple(j['axes']),
            duration=j['duration'],
            settle_seconds=j['settle_seconds'],
            hold_seconds=j['hold_seconds'],
            rest_seconds=j['rest_seconds'],
            max_shift_m=j['max_shift_m'],
        ),
        beam=BeamTrial(b['width'], b['height'], b['settle_seconds'], b['max_tilt_deg']),
        eumos=EumosTrial(e['accel_g'], e['ramp_s'], e['hold_s'], e['max_displacement_m']),
        transport_accel_g=d['transport_accel_g'],
    )


def _telemetry(d: Mapping[str, Any]) -> TelemetryConfig:
    bag, r = d['bag'], d['replica']
    return TelemetryConfig(
        mode=TelemetryMode.parse(d['mode'], 'telemetry.yaml: mode', error=ConfigError),
        runs_dir=d['runs_dir'],
        min_free_mb=float(d['min_free_mb']),
        bag=BagSettings(bag['enabled'], bag['version'], bag['compression'], tuple(bag['topics'])),
        snapshots=SnapshotSettings(
            tuple(
                SnapshotView.parse(v, f'telemetry.yaml: snapshots.views[{i}]', error=ConfigError)
                for i, v in enumerate(d['snapshots']['views'])
            )
        ),
        replica=ReplicaSettings(
            timeout_s=r['timeout_s'],
            batch=r['batch'],
            backoff_s=(r['backoff_s'][0], r['backoff_s'][1]),
            drain_s=r['drain_s'],
            postgres=PostgresSettings(r['postgres']['dsn']),
            supabase=SupabaseSettings(r['supabase']['bucket']),
        ),
        mcp=McpSettings(speed_cap=float(d['mcp']['speed_cap'])),
    )


def _read_catalogue(doc: Any, where: str) -> Catalogue:
    carton_rules = {
        'board': _Opt(_text, 'C32'),
        'label': _Opt(_one_of(*LABEL_FACES), 'none'),
        'fragile': _Opt(_bool, False),
        'group': _Opt(_text, 'general'),
    }
    rules = {
        'schema': _num(1, 1, integer=True),
        'friction': _FRICTION,
        'stack_safety_factor': _Opt(_num(1.0, 20.0), 4.0),
        'label_size_m': _Opt(_vec(2, 0.01, 1.0), (0.148, 0.105)),
        'boards': _Opt(
            _map_of(_record({'ect_n_m': _num(100.0, 1e5), 'caliper_m': _num(1e-4, 0.05)})),
            {'C32': {'ect_n_m': 5604.0, 'caliper_m': 0.004}},
        ),
        'types': _map_of(
            _record(
                {
                    'dims': _vec(3, 0.01, 3.0),
                    'mass': _num(0.01, 100.0),
                    'cog_offset': _vec(3, -1.0, 1.0),
                    'rgba': _vec(4, 0.0, 1.0),
                    **carton_rules,
                }
            )
        ),
        'random': {
            'length': _vec(2, 0.01, 3.0),
            'width': _vec(2, 0.01, 3.0),
            'height': _vec(2, 0.01, 3.0),
            'volume': _vec(2, 0.0, 10.0),
            'max_aspect': _num(1.0, 100.0),
            'density': _vec(2, 1.0, 10000.0),
            'mass': _vec(2, 0.0, 100.0),
            'max_attempts': _num(1, 10**7, integer=True),
            'adversarial_fraction': _num(0.0, 1.0),
            'rules': _Opt(carton_rules, None),
        },
    }
    d = _record(rules)(doc, where)
    boards = {k: Board(**b) for k, b in d['boards'].items()}

    def carton_rules_of(r: Mapping[str, Any] | None, key: str) -> CartonRules:
        if r is None:
            r = {k: v.default for k, v in carton_rules.items()}
        if r['board'] not in boards:
            raise ConfigError(
                f'{key}.board = {r["board"]!r}; expected one of the boards: {", ".join(boards)}'
                f'{close_match(r["board"], boards)}'
            )
        return CartonRules(**r)

    friction = d['friction']
    types: dict[str, CartonType] = {}
    for name, t in d['types'].items():
        if name == 'random':
            raise ConfigError('types.random: the name random is reserved for the generator')
        half = [t['dims'][0] / 2, t['dims'][1] / 2, t['dims'][2] / 2]
        for axis in range(3):
            if abs(t['cog_offset'][axis]) > half[axis]:
                raise ConfigError(
                    f'types.{name}.cog_offset[{axis}] = {t["cog_offset"][axis]!r}; '
                    f'expected a value inside the box, |x| <= {half[axis]}'
                )
        kw = {k: t[k] for k in carton_rules}
        types[name] = CartonType(
            name,
            t['dims'],
            t['mass'],
            t['cog_offset'],
            t['rgba'],
            friction,
            carton_rules_of(kw, f'types.{name}'),
        )
    r = dict(d['random'])
    random_rules = carton_rules_of(r.pop('rules'), 'random.rules')
    for key in ('length', 'width', 'height', 'volume', 'density', 'mass'):
        lo, hi = r[key]
        if lo > hi:
            raise ConfigError(f'random.{key} = {list(r[key])!r}; expected [lo, hi] with lo <= hi')
    return Catalogue(
        types=types,
        random=RandomSpec(**r),
        friction=friction,
        boards=boards,
        stack_safety_factor=d['stack_safety_factor'],
        label_size_m=d['label_size_m'],
        random_rules=random_rules,
    )


def _spec_name(v: Any, where: str) -> str:
    """A spec file's name under configs/specs, without the .yaml: letters, digits, _ and -."""
    name = _text(v, where)
    if not re.fullmatch(r'[A-Za-z0-9_-]+', name):
        raise ConfigError(
            f'{where} = {name!r}; expected the name of a file in configs/specs without its '
            f'.yaml (letters, digits, _ and -)'
        )
    return name


def _read_levels(doc: Any, where: str, catalogue: Catalogue) -> tuple[dict[int, Level], int]:
    rules = {
        'schema': _num(1, 1, integer=True),
        'default_level': _num(10, 99, integer=True),
        'levels': _list_of(lambda v, w: v, 1),
    }
    d = _record(rules)(doc, where)
    type_names = [*catalogue.types, 'random']
    level_rule = _record(
        {
            'id': _num(10, 99, integer=True),
            'source': _one_of(*SOURCES),
            'name': _text,
            'n': _num(1, 200, integer=True),
            'types': _list_of(_text, 1),
            'yaw_jitter_deg': _num(0.0, 180.0),
            'pos_jitter_m': _num(0.0, 0.5),
            'cog': _one_of(*COG_MODES),
            'loader_jitter': _Opt(_bool, False),
            'decor': _Opt(_one_of(*DECORS), 'cell'),
            'same_load_as': _Opt(_num(10, 99, integer=True)),
            'spec': _Opt(_spec_name, ''),
            'labels': _Opt(_bool, False),
        }
    )
    levels: dict[int, Level] = {}
    for i, raw in enumerate(d['levels']):
        here = f'levels[{i}]'
        lv = level_rule(raw, here)
        if lv['id'] in levels:
            raise ConfigError(f'{here}.id = {lv["id"]!r}; duplicate level id (ids must be unique)')
        decade = SOURCES[lv['source']]
        if lv['id'] // 10 != decade:
            raise ConfigError(
                f'{here}.id = {lv["id"]!r}; a {lv["source"]} level must be in the {decade}x '
                f'decade ({decade}0-{decade}9)'
            )
        for j, name in enumerate(lv['types']):
            if name not in type_names:
                raise ConfigError(
                    f'{here}.types[{j}] = {name!r}; expected a catalogue type: '
                    f'{", ".join(type_names)}{close_match(name, type_names)}'
                )
        if 'random' in lv['types'] and len(lv['types']) > 1:
            raise ConfigError(f'{here}.types = {list(lv["types"])!r}; random cannot be mixed')
        if len(lv['types']) > lv['n']:
            # A longer list would be truncated and drop whole types (docs/levels.md §2.2).
            raise ConfigError(
                f'{here}.types has {len(lv["types"])} entries but n = {lv["n"]}; expected at '
                f'most n types'
            )
        if lv['source'] != 'truck' and lv['loader_jitter']:
            raise ConfigError(f'{here}.loader_jitter = true; only truck levels have a loader')
        levels[lv['id']] = Level(**lv)
    for lv in levels.values():
        if lv.same_load_as is not None:
            twin = levels.get(lv.same_load_as)
            if twin is None or twin.source != lv.source or twin.same_load_as is not None:
                raise ConfigError(
                    f'levels[id={lv.id}].same_load_as = {lv.same_load_as!r}; expected the '
                    f'id of another {lv.source} level that has its own load'
                )
    if d['default_level'] not in levels:
        raise ConfigError(
            f'default_level = {d["default_level"]!r}; expected one of '
            f'{", ".join(str(i) for i in sorted(levels))}'
        )
    return levels, d['default_level']
