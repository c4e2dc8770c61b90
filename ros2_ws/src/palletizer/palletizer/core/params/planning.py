"""Validated planner parameters; defaults are the reference cell's measured values.

Kept below core/config and core/planning (it imports only core.errors): the config builds these
records at load and the planners read them, so neither import runs upward.

The values and their measurements: docs/planners.md §6.3-6.8.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

from palletizer.core.errors import ConfigError, close_match

__all__ = [
    'BEAM_TERMS',
    'DEFAULT_BEAM_WEIGHTS',
    'DEFAULT_WEIGHTS',
    'TERMS',
    'BeamParams',
    'BufferSettings',
    'GridParams',
    'HeuristicParams',
    'check_weights',
    'read_weights',
]

# The 14 scoring terms of the score heuristic, in breakdown order (docs/planners.md §6.4).
TERMS: tuple[str, ...] = (
    'support_ratio',
    'com_margin',
    'lowness',
    'void_fill',
    'levelness',
    'peak_penalty',
    'lateral_proximity',
    'edge_flush',
    'seam_break',
    'overhang',
    'pallet_com',
    'reachability',
    'bridge',
    'gap_waste',
)

# Configured weights of the reference cell (pallet.yaml c6edd9b, docs/planners.md §6.4). They were
# tuned on a 0.60 x 0.40 pallet with a Panda; pallet_com 0.8 was re-measured on the EUR-1
# (level 11 seed 1: stack CoG 287 mm -> 10 mm off centre); reachability 0 on purpose (0.7 broke
# level 31).
DEFAULT_WEIGHTS: Mapping[str, float] = {
    'support_ratio': 1.0,
    'com_margin': 0.4,
    'lowness': 0.6,
    'void_fill': 1.2,
    'levelness': 0.8,
    'peak_penalty': 0.5,
    'lateral_proximity': 0.3,
    'edge_flush': 0.4,
    'seam_break': 0.2,
    'overhang': 0.5,
    'pallet_com': 0.8,
    'reachability': 0.0,
    'bridge': 0.5,
    'gap_waste': 0.8,
}

BEAM_TERMS: tuple[str, ...] = (
    'support',
    'tipping_margin',
    'centered_com',
    'low_height',
    'compactness',
    'regular_surface',
)

# Demonstrator weights 3.5/2.5/2.2/1.1/1.0/0.8 normalised by their sum 11.1
# (docs/planners.md §6.7).
DEFAULT_BEAM_WEIGHTS: Mapping[str, float] = {
    'support': 0.3153,
    'tipping_margin': 0.2252,
    'centered_com': 0.1982,
    'low_height': 0.0991,
    'compactness': 0.0901,
    'regular_surface': 0.0721,
}


def _err(where: str, key: str, value: Any, allowed: str) -> ConfigError:
    return ConfigError(f'{where}.{key} = {value!r}; expected {allowed}')


def _number(where: str, key: str, value: Any, lo: float, hi: float = math.inf) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or not lo <= value <= hi:
        raise _err(where, key, value, f'a finite number in [{lo}, {hi}]')
    return float(value)


def _integer(where: str, key: str, value: Any, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise _err(where, key, value, f'an integer >= {lo}')
    return int(value)


def _reserve(where: str, value: Any) -> tuple[float, float, float]:
    """The reserve box: three sizes L, W, H [m], each >= 1 mm."""
    if not isinstance(value, (list, tuple)) or len(value) != 3:
        raise _err(where, 'reserve', value, 'three sizes L, W, H [m] > 0')
    L, W, H = (_number(where, 'reserve', v, 1e-3) for v in value)
    return (L, W, H)


def _last_resort(where: str, value: Any, ratio: float) -> tuple[float, ...]:
    """Support ratios in [0, ratio), strictly decreasing (each a further relaxation)."""
    if not isinstance(value, (list, tuple)):
        raise _err(where, 'last_resort_support', value, f'a list of ratios below {ratio}')
    out = tuple(_number(where, 'last_resort_support', v, 0.0, 1.0) for v in value)
    if any(v >= ratio for v in out) or any(b >= a for a, b in itertools.pairwise(out)):
        raise _err(
            where,
            'last_resort_support',
            list(value),
            f'strictly decreasing ratios, each below min_support_ratio {ratio}',
        )
    return out


def _weights(where: str, key: str, value: Any, names: tuple[str, ...]) -> Mapping[str, float]:
    """All names exactly, each finite and >= 0, at least one > 0; read-only, in `names` order."""
    if not isinstance(value, Mapping):
        raise _err(where, key, value, f'a mapping of the {len(names)} weights {", ".join(names)}')
    for name in value:
        if name not in names:
            raise ConfigError(
                f'{where}.{key}.{name}: unknown weight; expected one of {", ".join(names)}'
                f'{close_match(str(name), names)}'
            )
    missing = [n for n in names if n not in value]
    if missing:
        raise ConfigError(
            f'{where}.{key}: missing weight {missing[0]!r}; all {len(names)} are required: '
            f'{", ".join(names)}'
        )
    out = {n: _number(where, f'{key}.{n}', value[n], 0.0) for n in names}
    if not any(v > 0.0 for v in out.values()):
        raise _err(where, key, dict(value), 'at least one weight > 0')
    return MappingProxyType(out)


def check_weights(
    value: Any, where: str = 'heuristic', key: str = 'weights'
) -> Mapping[str, float]:
    """The 14 heuristic weights, validated: all of TERMS, each finite and >= 0, at least one
    > 0, no other name. Raises ConfigError naming `where`.`key`, what was wrong and what is
    allowed."""
    return _weights(where, key, value, TERMS)


def read_weights(path: str | os.PathLike[str]) -> Mapping[str, float]:
    """The heuristic weights of a weights file (`planner_weights:=FILE`, JSON or YAML).

    The file is a mapping with `weights`: the 14 terms and their values (scripts/train writes
    best_weights.json in this form); its other top-level keys (weight_id, the training's
    figures) describe the weights and are not read. Raises ConfigError naming the file.
    """
    import yaml  # JSON is YAML too

    where = str(path)
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(
            f'{where}: cannot read the weights file ({exc.strerror or exc}); expected a JSON or '
            'YAML file with a `weights` mapping of the 14 heuristic terms'
        ) from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        # One line: the parser's problem and where, not its multi-line dump of the text.
        mark = getattr(exc, 'problem_mark', None)
        at = f' at line {mark.line + 1}, column {mark.column + 1}' if mark is not None else ''
        problem = getattr(exc, 'problem', None) or type(exc).__name__
        raise ConfigError(
            f'{where}: not JSON or YAML ({problem}{at}); expected a JSON or YAML file with a '
            '`weights` mapping of the 14 heuristic terms'
        ) from None
    if not isinstance(doc, Mapping) or 'weights' not in doc:
        keys = ', '.join(map(str, doc)) if isinstance(doc, Mapping) else type(doc).__name__
        raise ConfigError(
            f'{where}: no `weights` mapping (found {keys or "nothing"}); expected '
            f'weights: {{{", ".join(TERMS)}}}'
        )
    return check_weights(doc['weights'], where, 'weights')


def _from_mapping(cls: type, d: Any, where: str) -> Any:
    """Build a params dataclass from a config mapping; unknown keys are errors, absent = default."""
    if not isinstance(d, Mapping):
        raise ConfigError(f'{where} = {d!r}; expected a mapping of {cls.__name__} keys')
    names = [f.name for f in fields(cls)]
    for key in d:
        if key not in names:
            raise ConfigError(
                f'{where}.{key}: unknown key; expected one of {", ".join(names)}'
                f'{close_match(str(key), names)}'
            )
    kwargs = dict(d)
    try:
        return cls(**kwargs)
    except ConfigError as e:
        # Field validators name the dataclass; name the config location instead.
        raise ConfigError(str(e).replace(cls.__name__, where, 1)) from None


@dataclass(frozen=True)
class HeuristicParams:
    """Score heuristic parameters (docs/planners.md §6.2-6.4).

    weights: the 14 term weights (TERMS); cell: planning grid [m] (finer maps are max-pooled);
    clearance: air kept around a box inside a layer [m] (40 mm: no scrapes in 168 trials, 20 mm
    scraped); support_tol: height tolerance of "resting on" [m]; proximity_band: band beyond the
    clearance that counts as a neighbour [m]; levelness_scale: map std giving levelness 0.5 [m];
    useful_gap: narrowest useful gap [m] (0 = the box's shorter side); min_support_ratio;
    max_stack_height: hard cap on a box top above the deck [m] (EUR-1 paper limit 1.35; with a
    reach oracle the arm decides the real limit); lowness_scale: height above the deck where
    lowness reaches its floor [m] (0.55 is the height the reference IK sweep validated; 1.494
    diluted the gradient 3.4x and built towers, docs/planners.md §6.4); tie_eps: score quantum
    for ties; yaws: candidate yaws [deg], quarter turns only (the footprint is rasterised
    axis-aligned); 180/270 are added for off-centre CoGs; allow_unobserved: accept footprints
    touching unobserved cells; cup_gap, drop_clearance: TCP above the lid at release [m]
    (docs/cell.md §3.11);
    approach_height: also require the pose this far above the release pose [m] (0: the oracle
    checks the approach itself, as the analytic one does from the transit height down);
    reach_probe: lateral offset of the reachability probes [m]; stack_check: a slot must leave
    the stack quasi-statically stable (every box's load resultant inside its contact hull, as
    believed: planned poses, weighed CoGs), else the next-best slot is taken. reserve (L, W, H
    [m]), reserve_tries: while the map has a slot for a box of the reserve's size, the best
    valid slot that still leaves one (its footprint misses some such slot's window and ring)
    is taken, looked for among the first reserve_tries (0: off), so a large carton arriving
    late finds room. exclude_radius: a slot excluded by a replan (the executor refused its
    move) excludes the slots of its layer whose windows lie within this many cells of it.
    despeckle: lone map cells above all their neighbours are lowered by up to this much [m]
    before planning (heuristic_windows.despeckle; 0: off). last_resort_support: the least
    support ratios tried in turn, each below min_support_ratio, when a carton would otherwise
    end the episode (choose's last_resort; empty: none).
    """

    weights: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    cell: float = 0.010
    clearance: float = 0.040
    support_tol: float = 0.001
    proximity_band: float = 0.02
    levelness_scale: float = 0.2
    useful_gap: float = 0.0
    min_support_ratio: float = 0.60
    max_stack_height: float = 1.35
    lowness_scale: float = 0.55
    tie_eps: float = 1e-9
    yaws: tuple[float, ...] = (0.0, 90.0)
    allow_unobserved: bool = True
    cup_gap: float = 0.0015
    drop_clearance: float = 0.002
    approach_height: float = 0.0
    reach_probe: float = 0.02
    stack_check: bool = True
    reserve: tuple[float, float, float] = (0.55, 0.36, 0.26)
    reserve_tries: int = 0
    exclude_radius: int = 0
    despeckle: float = 0.0
    last_resort_support: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        w = 'HeuristicParams'
        object.__setattr__(self, 'weights', _weights(w, 'weights', self.weights, TERMS))
        for key, lo in (
            ('clearance', 0.0),
            ('support_tol', 0.0),
            ('proximity_band', 0.0),
            ('useful_gap', 0.0),
            ('cup_gap', 0.0),
            ('drop_clearance', 0.0),
            ('approach_height', 0.0),
            ('reach_probe', 0.0),
            ('despeckle', 0.0),
        ):
            object.__setattr__(self, key, _number(w, key, getattr(self, key), lo))
        for key in ('cell', 'levelness_scale', 'max_stack_height', 'lowness_scale', 'tie_eps'):
            value = getattr(self, key)
            object.__setattr__(self, key, _number(w, key, value, 1e-12))
        ratio = _number(w, 'min_support_ratio', self.min_support_ratio, 0.0, 1.0)
        object.__setattr__(self, 'min_support_ratio', ratio)
        yaws = self.yaws
        if (
            not isinstance(yaws, (list, tuple))
            or not yaws
            or any(
                isinstance(y, bool) or not isinstance(y, (int, float)) or float(y) % 90.0 != 0.0
                for y in yaws
            )
        ):
            raise _err(w, 'yaws', yaws, 'a non-empty list of quarter turns [deg] (0, 90, ...)')
        object.__setattr__(self, 'yaws', tuple(sorted({float(y) % 360.0 for y in yaws})))
        if not isinstance(self.allow_unobserved, bool):
            raise _err(w, 'allow_unobserved', self.allow_unobserved, 'true or false')
        if not isinstance(self.stack_check, bool):
            raise _err(w, 'stack_check', self.stack_check, 'true or false')
        object.__setattr__(self, 'reserve', _reserve(w, self.reserve))
        object.__setattr__(
            self, 'reserve_tries', _integer(w, 'reserve_tries', self.reserve_tries, 0)
        )
        object.__setattr__(
            self, 'exclude_radius', _integer(w, 'exclude_radius', self.exclude_radius, 0)
        )
        object.__setattr__(
            self,
            'last_resort_support',
            _last_resort(w, self.last_resort_support, self.min_support_ratio),
        )

    @classmethod
    def from_mapping(cls, d: Mapping[str, Any], where: str) -> HeuristicParams:
        """From configs/planner.yaml; raises ConfigError naming `where`, the key and value."""
        return _from_mapping(cls, d, where)  # type: ignore[no-any-return]  # builds cls itself


@dataclass(frozen=True)
class BeamParams:
    """Beam search parameters (docs/planners.md §6.7, measured in the demonstrator: seed 17, 10
    permutations -> 100 % strictly stable vs 50 % for first-fit).

    min_support_ratio; min_tipping_margin [m]; beam_width; lookahead (search depth, current box
    included); candidates_per_node; surface_samples: (nx, ny) samples of the top surface for
    regular_surface; clearance [m]; weights: the 6 components (BEAM_TERMS); max_height_m: height
    scale and cap above the deck [m]; level_tol: height match for resting on a top [m];
    map_tol: how far the height map may rise above a candidate's base before it is rejected
    (something unrecorded is there) [m]; reserve (L, W, H [m]), reserve_tries: while the stack
    has a valid, reachable move for a box of the reserve's size, the search starts only from
    those of the first reserve_tries first moves that still leave one (0: off), as the
    heuristic's reserve does. last_resort_support: the least support ratios tried in turn,
    each below min_support_ratio, when a carton would otherwise end the episode (choose's
    last_resort; empty: none), as the heuristic's. exclude_radius [m]: a slot excluded by a
    replan (the executor refused it) also excludes the first moves of its layer whose centre
    lies within this distance of it along x and y, at any turn, as the heuristic's (0: the
    slot alone).
    """

    min_support_ratio: float = 0.62
    min_tipping_margin: float = 0.008
    beam_width: int = 20
    lookahead: int = 3
    candidates_per_node: int = 40
    surface_samples: tuple[int, int] = (12, 10)
    clearance: float = 0.040
    weights: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_BEAM_WEIGHTS))
    max_height_m: float = 1.35
    level_tol: float = 0.004
    map_tol: float = 0.010
    reserve: tuple[float, float, float] = (0.55, 0.36, 0.26)
    reserve_tries: int = 0
    last_resort_support: tuple[float, ...] = ()
    exclude_radius: float = 0.0

    def __post_init__(self) -> None:
        w = 'BeamParams'
        object.__setattr__(self, 'reserve', _reserve(w, self.reserve))
        object.__setattr__(
            self, 'reserve_tries', _integer(w, 'reserve_tries', self.reserve_tries, 0)
        )
        object.__setattr__(self, 'weights', _weights(w, 'weights', self.weights, BEAM_TERMS))
        ratio = _number(w, 'min_support_ratio', self.min_support_ratio, 0.0, 1.0)
        object.__setattr__(self, 'min_support_ratio', ratio)
        object.__setattr__(
            self, 'last_resort_support', _last_resort(w, self.last_resort_support, ratio)
        )
        for key in ('min_tipping_margin', 'clearance', 'level_tol', 'map_tol', 'exclude_radius'):
            object.__setattr__(self, key, _number(w, key, getattr(self, key), 0.0))
        object.__setattr__(
            self, 'max_height_m', _number(w, 'max_height_m', self.max_height_m, 1e-3)
        )
        for key in ('beam_width', 'lookahead', 'candidates_per_node'):
            object.__setattr__(self, key, _integer(w, key, getattr(self, key), 1))
        s = self.surface_samples
        if not isinstance(s, (list, tuple)) or len(s) != 2:
            raise _err(w, 'surface_samples', s, 'two integers >= 1 (nx, ny)')
        samples = (
            _integer(w, 'surface_samples', s[0], 1),
            _integer(w, 'surface_samples', s[1], 1),
        )
        object.__setattr__(self, 'surface_samples', samples)

    @classmethod
    def from_mapping(cls, d: Mapping[str, Any], where: str) -> BeamParams:
        """From configs/planner.yaml; raises ConfigError naming `where`, the key and value."""
        return _from_mapping(cls, d, where)  # type: ignore[no-any-return]  # builds cls itself


@dataclass(frozen=True)
class GridParams:
    """Grid baseline parameters (docs/planners.md §6.8).

    clearance [m]; min_support_ratio (the heuristic's 0.60); level_tol: a top counts as this
    level within it [m] (6 mm); overlap_tol: vertical overlap tolerated between boxes [m] (3 mm).
    """

    clearance: float = 0.040
    min_support_ratio: float = 0.60
    level_tol: float = 0.006
    overlap_tol: float = 0.003

    def __post_init__(self) -> None:
        w = 'GridParams'
        for key in ('clearance', 'level_tol', 'overlap_tol'):
            object.__setattr__(self, key, _number(w, key, getattr(self, key), 0.0))
        ratio = _number(w, 'min_support_ratio', self.min_support_ratio, 0.0, 1.0)
        object.__setattr__(self, 'min_support_ratio', ratio)

    @classmethod
    def from_mapping(cls, d: Mapping[str, Any], where: str) -> GridParams:
        """From configs/planner.yaml; raises ConfigError naming `where`, the key and value."""
        return _from_mapping(cls, d, where)  # type: ignore[no-any-return]  # builds cls itself


@dataclass(frozen=True)
class BufferSettings:
    """slots: k, the most cartons set aside at once (0: no buffer); edge_margin [m] kept from
    the table's edges; gap [m] between two cartons set aside (the tool's clearance).
    configs/planner.yaml `buffer` gives them (Config.planner.buffer)."""

    slots: int = 0
    edge_margin: float = 0.01
    gap: float = 0.08
