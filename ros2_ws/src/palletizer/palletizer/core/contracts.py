"""Value types passed between perception, weighing, planning, measurement and telemetry.

Why one file of this length: each type is small (validated fields, to_dict / from_dict), and
together they are the contract every layer shares, read as one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any, NamedTuple, cast

import numpy as np

from palletizer.core.config.cell import PalletConfig
from palletizer.core.errors import PalletizerError, close_match
from palletizer.core.vocab import Closed

__all__ = [
    'EUR_DECK_Z',
    'EpisodeResult',
    'FailureCause',
    'floats3',
    'HeightMap',
    'LidRect',
    'Observation',
    'PackageSpec',
    'PalletGeometry',
    'PalletState',
    'Placement',
    'PlacementPlan',
    'PlanResult',
]


class FailureCause(Closed):
    """Closed vocabulary of episode failures (docs/levels.md §2.4, docs/telemetry.md §8.2)."""

    no_detection = 'no_detection'
    ik_unreachable = 'ik_unreachable'
    collision = 'collision'
    grasp_slip = 'grasp_slip'
    wrong_placement = 'wrong_placement'
    timeout = 'timeout'
    stack_collapse = 'stack_collapse'
    overhang_violation = 'overhang_violation'

    @classmethod
    def noun(cls) -> str:
        return 'failure'

    @classmethod
    def error(cls) -> type[PalletizerError]:
        return PalletizerError


# ---------------------------------------------------------------------------------------------
# Normalisers shared by the dataclasses below.


def floats3(v: Sequence[float] | np.ndarray) -> tuple[float, float, float]:
    """The three values of a length-3 vector as Python floats (a ValueError for another length)."""
    x, y, z = v
    return float(x), float(y), float(z)


def _vec(value: Any, n: int, name: str) -> tuple[float, ...]:
    arr = np.asarray(value, dtype=float).reshape(-1)
    if arr.shape != (n,) or not np.all(np.isfinite(arr)):
        raise PalletizerError(f'{name} = {value!r}; expected {n} finite numbers')
    return tuple(float(v) for v in arr)


def _finite(value: Any, name: str, lo: float = -math.inf, hi: float = math.inf) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise PalletizerError(f'{name} = {value!r}; expected a number') from None
    if not math.isfinite(v) or not lo <= v <= hi:
        raise PalletizerError(f'{name} = {value!r}; expected a finite number in [{lo}, {hi}]')
    return v


def _set(obj: object, name: str, value: Any) -> None:
    object.__setattr__(obj, name, value)


def _plain(value: Any) -> Any:
    """JSON-safe copy: numpy scalars/arrays, tuples and enums become Python values and lists."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _simple_to_dict(obj: object) -> dict[str, Any]:
    return {f.name: _plain(getattr(obj, f.name)) for f in fields(obj)}  # type: ignore[arg-type]  # callers pass dataclasses


def _check_keys(cls: type, d: Mapping[str, Any]) -> None:
    names = [f.name for f in fields(cls)]
    unknown = [k for k in d if k not in names]
    missing = [k for k in names if k not in d]
    if unknown:
        raise PalletizerError(
            f'{cls.__name__}: unknown key {unknown[0]!r}; expected {", ".join(names)}'
            f'{close_match(unknown[0], names)}'
        )
    if missing:
        raise PalletizerError(f'{cls.__name__}: missing key {missing[0]!r}')


# ---------------------------------------------------------------------------------------------


# The EUR-1 pallet's deck top above the floor [m] (docs/cell.md §3.2): the default of every
# deck height in the code; the running value is cell.yaml pallet.size[2] (a test holds them equal).
EUR_DECK_Z = 0.144


@dataclass(frozen=True)
class PalletGeometry:
    """Pallet placement in the world (docs/cell.md §3.2): EUR-1, deck top 0.144 m above the floor.

    centre_xy: pallet centre in the world [m]; size_xy: (length along X, width along Y) [m];
    deck_z: deck top height in the world [m]; max_mass_kg: rated load [kg];
    max_height_m: paper height limit above the deck [m].
    """

    centre_xy: tuple[float, float] = (0.60, 0.00)
    size_xy: tuple[float, float] = (1.20, 0.80)
    deck_z: float = EUR_DECK_Z
    max_mass_kg: float = 350.0
    max_height_m: float = 1.35

    @classmethod
    def from_config(cls, pallet: PalletConfig) -> PalletGeometry:
        """From configs/cell.yaml `pallet` (Config.cell.pallet), the one source of the pallet's
        geometry; the defaults above equal it (tests/core/test_contracts.py)."""
        return cls(
            centre_xy=pallet.centre,
            size_xy=(pallet.size[0], pallet.size[1]),
            deck_z=pallet.deck_z,
            max_mass_kg=pallet.max_load_kg,
            max_height_m=pallet.max_height,
        )

    @property
    def origin_xy(self) -> tuple[float, float]:
        """World XY of the pallet's (-x, -y) corner [m]."""
        return (
            self.centre_xy[0] - self.size_xy[0] / 2.0,
            self.centre_xy[1] - self.size_xy[1] / 2.0,
        )

    @property
    def half_diagonal(self) -> float:
        """Half the deck diagonal [m] (0.7211 for a EUR-1)."""
        return 0.5 * math.hypot(*self.size_xy)


@dataclass(frozen=True)
class Observation:
    """A detected carton at the pick station (world frame).

    position: (3,) carton centre [m]; yaw [rad]; dims_guess: (3,) L, W, H [m];
    confidence: detector belief in [0, 1].
    """

    package_id: str
    position: tuple[float, float, float]
    yaw: float
    dims_guess: tuple[float, float, float]
    confidence: float

    def __post_init__(self) -> None:
        _set(self, 'position', _vec(self.position, 3, 'Observation.position'))
        _set(self, 'yaw', _finite(self.yaw, 'Observation.yaw'))
        _set(self, 'dims_guess', _vec(self.dims_guess, 3, 'Observation.dims_guess'))
        _set(self, 'confidence', _finite(self.confidence, 'Observation.confidence', 0.0, 1.0))

    def to_dict(self) -> dict[str, Any]:
        return _simple_to_dict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Observation:
        _check_keys(cls, d)
        return cls(**d)


# A held carton's label face as read (package frame), '' for none read.
LABEL_FACES = ('', '+x', '-x', '+y', '-y')


@dataclass(frozen=True)
class PackageSpec:
    """What the planner knows about the carton in hand.

    dims_m: full L, W, H [m] with L along the package x axis; mass_kg [kg];
    cog_offset_m: (3,) centre of mass minus geometric centre, package frame [m];
    label_face: the side its label was seen on, package frame (+x, -x, +y, -y), or '' where no
    label was read.
    """

    package_id: str
    type_name: str
    dims_m: tuple[float, float, float]
    mass_kg: float
    cog_offset_m: tuple[float, float, float] = (0.0, 0.0, 0.0)
    label_face: str = ''

    def __post_init__(self) -> None:
        dims = _vec(self.dims_m, 3, 'PackageSpec.dims_m')
        if min(dims) <= 0.0:
            raise PalletizerError(f'PackageSpec.dims_m = {dims}; expected three sizes > 0')
        if self.label_face not in LABEL_FACES:
            raise PalletizerError(
                f'PackageSpec.label_face = {self.label_face!r}; expected one of '
                f'{", ".join(repr(f) for f in LABEL_FACES)}'
            )
        _set(self, 'dims_m', dims)
        _set(self, 'mass_kg', _finite(self.mass_kg, 'PackageSpec.mass_kg', 0.0))
        _set(self, 'cog_offset_m', _vec(self.cog_offset_m, 3, 'PackageSpec.cog_offset_m'))

    @property
    def footprint_area(self) -> float:
        """L x W [m^2]."""
        return self.dims_m[0] * self.dims_m[1]

    @property
    def grasp_width(self) -> float:
        """Shorter horizontal side [m]."""
        return min(self.dims_m[0], self.dims_m[1])

    def to_dict(self) -> dict[str, Any]:
        return _simple_to_dict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PackageSpec:
        _check_keys(cls, d)
        return cls(**d)


class LidRect(NamedTuple):
    """A lid as a rectangle fitted to the depth returns themselves, finer than the grid:
    centre x, y [m, world], yaw [rad] of its `length` side, length and width [m], and its
    height above the deck [m]."""

    x: float
    y: float
    yaw: float
    length: float
    width: float
    height: float


@dataclass(frozen=True, eq=False)
class HeightMap:
    """Pallet surface heights on a regular grid.

    cells: (ny, nx) heights above the deck [m]; world X runs along axis 1, Y along axis 0.
    observed: (ny, nx) bool, False where no sensor saw the cell (None means all observed).
    origin: world XY of the pallet's (-x, -y) corner [m]; cell_size: cell edge [m].
    lids: the lid rectangles a fusion fitted to its returns (none for other maps); they do not
    take part in the map's key or equality, which are the grid's.
    Non-finite cells become unobserved with height 0, and the arrays are private read-only copies,
    so the caller's map is never mutated.
    """

    cells: np.ndarray
    observed: np.ndarray | None = None
    origin: tuple[float, float] = (0.0, -0.4)
    cell_size: float = 0.010
    lids: tuple[LidRect, ...] = ()

    def __post_init__(self) -> None:
        cells = np.array(self.cells, dtype=float, copy=True)
        if cells.ndim != 2 or cells.size == 0:
            raise PalletizerError(f'HeightMap.cells shape {cells.shape}; expected (ny, nx) > 0')
        if self.observed is None:
            observed = np.ones(cells.shape, dtype=bool)
        else:
            observed = np.array(self.observed, dtype=bool, copy=True)
            if observed.shape != cells.shape:
                raise PalletizerError(
                    f'HeightMap.observed shape {observed.shape}; expected {cells.shape}'
                )
        bad = ~np.isfinite(cells)
        observed[bad] = False
        cells[bad] = 0.0
        cells[~observed] = 0.0
        cells.flags.writeable = False
        observed.flags.writeable = False
        _set(self, 'cells', cells)
        _set(self, 'observed', observed)
        _set(self, 'origin', _vec(self.origin, 2, 'HeightMap.origin'))
        _set(self, 'cell_size', _finite(self.cell_size, 'HeightMap.cell_size', 1e-6))
        lids = []
        for i, r in enumerate(self.lids):
            v = tuple(float(x) for x in r)
            if len(v) != 6 or not all(math.isfinite(x) for x in v):
                raise PalletizerError(
                    f'HeightMap.lids[{i}] is {r!r}; expected 6 finite numbers '
                    '(x, y, yaw, length, width, height)'
                )
            lids.append(LidRect(*v))
        _set(self, 'lids', tuple(lids))

    @classmethod
    def flat(cls, pallet: PalletGeometry | None = None, cell_size: float = 0.010) -> HeightMap:
        """An empty, fully observed pallet at `cell_size` [m] resolution."""
        p = pallet or PalletGeometry()
        nx = round(p.size_xy[0] / cell_size)
        ny = round(p.size_xy[1] / cell_size)
        return cls(np.zeros((ny, nx)), None, p.origin_xy, cell_size)

    @property
    def shape(self) -> tuple[int, int]:
        ny, nx = self.cells.shape
        return ny, nx

    @property
    def top(self) -> float:
        """Highest observed cell above the deck [m]; 0 when nothing is observed."""
        obs = self.observed
        assert obs is not None
        return float(self.cells[obs].max()) if obs.any() else 0.0

    @property
    def observed_ratio(self) -> float:
        """Fraction of cells seen by a sensor, in [0, 1]."""
        assert self.observed is not None
        return float(self.observed.mean())

    def key(self) -> bytes:
        """Bytes that identify the map's content (cells, mask, origin, cell size)."""
        assert self.observed is not None
        head = np.array([*self.shape, *self.origin, self.cell_size], dtype=float).tobytes()
        return head + self.cells.tobytes() + np.packbits(self.observed).tobytes()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HeightMap) and self.key() == other.key()

    __hash__ = None  # type: ignore[assignment]  # equal by content, so unhashable (array data)

    def to_dict(self) -> dict[str, Any]:
        return {
            'cells': self.cells.tolist(),
            'observed': self.observed.tolist() if self.observed is not None else None,
            'origin': list(self.origin),
            'cell_size': self.cell_size,
            'lids': [list(r) for r in self.lids],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HeightMap:
        _check_keys(cls, {'lids': [], **d})  # maps written without lids read as having none
        return cls(
            np.asarray(d['cells'], dtype=float),
            None if d['observed'] is None else np.asarray(d['observed'], dtype=bool),
            cast(tuple[float, float], tuple(d['origin'])),
            d['cell_size'],
            cast(tuple[LidRect, ...], tuple(tuple(r) for r in d.get('lids', ()))),
        )


@dataclass(frozen=True)
class PlacementPlan:
    """Where the planner wants the carton (world frame).

    position: (3,) carton centre [m]; yaw [rad]; layer: 1-based layer index; slot: stable name;
    score: planner score (heuristic: [0, 1]); predicted_support: supported fraction in [0, 1];
    breakdown: term name -> value (heuristic: the 14 terms, each in [0, 1]).
    """

    position: tuple[float, float, float]
    yaw: float
    layer: int
    slot: str
    score: float
    predicted_support: float
    breakdown: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _set(self, 'position', _vec(self.position, 3, 'PlacementPlan.position'))
        _set(self, 'yaw', _finite(self.yaw, 'PlacementPlan.yaw'))
        if int(self.layer) < 1:
            raise PalletizerError(f'PlacementPlan.layer = {self.layer!r}; expected >= 1')
        _set(self, 'layer', int(self.layer))
        _set(self, 'score', _finite(self.score, 'PlacementPlan.score'))
        _set(
            self,
            'predicted_support',
            _finite(self.predicted_support, 'PlacementPlan.predicted_support', 0.0, 1.0),
        )
        _set(self, 'breakdown', {str(k): float(v) for k, v in self.breakdown.items()})

    def to_dict(self) -> dict[str, Any]:
        return _simple_to_dict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PlacementPlan:
        _check_keys(cls, d)
        return cls(**d)


@dataclass(frozen=True)
class Placement:
    """One attempted carton as measured after settling (PALLET frame, docs/measurement.md §7.1).

    Poses are (x, y, z, yaw): x, y of the carton centre from the pallet centre [m], z of the
    carton centre above the deck top [m], yaw [rad]. dims_m: L, W, H [m]; mass_kg [kg];
    error_xy_m [m]; error_yaw_rad [rad]; overhang_m [m] beyond the deck; placed: within the
    placement tolerances.
    support_ratio in [0, 1]: the share of the bottom footprint that rests on what carries it as
    the stack holds it (the deck, or the tops of cartons at the carton's bottom height).
    support_ratio_layer in [0, 1]: the reference's figure (docs/measurement.md §7.1), overlap
    with the deck for layer 1, else with the cartons of the previous planned layer; None where
    not measured.
    """

    seq: int
    package_id: str
    package_type: str
    mass_kg: float
    dims_m: tuple[float, float, float]
    layer: int
    planned_pose: tuple[float, float, float, float]
    actual_pose: tuple[float, float, float, float]
    error_xy_m: float
    error_yaw_rad: float
    support_ratio: float
    overhang_m: float
    placed: bool
    support_ratio_layer: float | None = None

    def __post_init__(self) -> None:
        _set(self, 'seq', int(self.seq))
        _set(self, 'mass_kg', _finite(self.mass_kg, 'Placement.mass_kg', 0.0))
        _set(self, 'dims_m', _vec(self.dims_m, 3, 'Placement.dims_m'))
        _set(self, 'layer', int(self.layer))
        _set(self, 'planned_pose', _vec(self.planned_pose, 4, 'Placement.planned_pose'))
        _set(self, 'actual_pose', _vec(self.actual_pose, 4, 'Placement.actual_pose'))
        _set(self, 'error_xy_m', _finite(self.error_xy_m, 'Placement.error_xy_m', 0.0))
        _set(self, 'error_yaw_rad', _finite(self.error_yaw_rad, 'Placement.error_yaw_rad', 0.0))
        _set(self, 'support_ratio', _finite(self.support_ratio, 'Placement.support_ratio', 0, 1))
        _set(self, 'overhang_m', _finite(self.overhang_m, 'Placement.overhang_m', 0.0))
        _set(self, 'placed', bool(self.placed))
        if self.support_ratio_layer is not None:
            layer = _finite(self.support_ratio_layer, 'Placement.support_ratio_layer', 0, 1)
            _set(self, 'support_ratio_layer', layer)

    @property
    def base_z(self) -> float:
        """Measured bottom of the carton above the deck [m]."""
        return self.actual_pose[2] - self.dims_m[2] / 2.0

    @property
    def top_z(self) -> float:
        """Measured top of the carton above the deck [m]."""
        return self.actual_pose[2] + self.dims_m[2] / 2.0

    def to_dict(self) -> dict[str, Any]:
        return _simple_to_dict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Placement:
        _check_keys(cls, d)
        return cls(**d)


@dataclass(frozen=True)
class PalletState:
    """The stack after attempt `after_seq` (PALLET frame, docs/measurement.md §7.2).

    mass_kg [kg]; cog: (3,) centre of mass, XY from the pallet centre, Z above the deck [m];
    stability_margin_m [m] (negative tips); fill_ratio in [0, 1]; settle_drift_m [m];
    layer_flatness: top-height spread of the highest layer [m].
    """

    after_seq: int
    mass_kg: float
    cog: tuple[float, float, float]
    stability_margin_m: float
    fill_ratio: float
    settle_drift_m: float
    layer_flatness: float

    def __post_init__(self) -> None:
        _set(self, 'after_seq', int(self.after_seq))
        _set(self, 'mass_kg', _finite(self.mass_kg, 'PalletState.mass_kg', 0.0))
        _set(self, 'cog', _vec(self.cog, 3, 'PalletState.cog'))
        _set(self, 'stability_margin_m', _finite(self.stability_margin_m, 'stability_margin_m'))
        _set(self, 'fill_ratio', _finite(self.fill_ratio, 'PalletState.fill_ratio', 0.0))
        _set(self, 'settle_drift_m', _finite(self.settle_drift_m, 'settle_drift_m', 0.0))
        _set(self, 'layer_flatness', _finite(self.layer_flatness, 'layer_flatness', 0.0))

    def to_dict(self) -> dict[str, Any]:
        return _simple_to_dict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PalletState:
        _check_keys(cls, d)
        return cls(**d)


@dataclass(frozen=True)
class PlanResult:
    """A planner's answer: a plan, or None with counts of rejected candidates per reason.

    An empty reject_summary with no plan means no candidate existed at all (the carton does not
    fit even an empty pallet), which differs from "every candidate was rejected".
    """

    plan: PlacementPlan | None
    reject_summary: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _set(self, 'reject_summary', {str(k): int(v) for k, v in self.reject_summary.items()})

    def to_dict(self) -> dict[str, Any]:
        return {
            'plan': None if self.plan is None else self.plan.to_dict(),
            'reject_summary': dict(self.reject_summary),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PlanResult:
        _check_keys(cls, d)
        plan = None if d['plan'] is None else PlacementPlan.from_dict(d['plan'])
        return cls(plan, d['reject_summary'])


@dataclass(frozen=True)
class EpisodeResult:
    """One line of episodes.jsonl (docs/telemetry.md §8.7).

    duration_s: simulated episode time [s]; failure: the first failure or None;
    task: the level's source (table, conveyor, truck); metrics: JSON-safe summary.
    Invariants: success implies no failure and every carton placed; 0 <= n_placed <= n_objects.
    """

    seed: int
    level: int
    n_objects: int
    n_placed: int
    n_misrouted: int
    success: bool
    duration_s: float
    failure: FailureCause | None
    oracle: bool
    git_sha: str
    task: str
    metrics: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ('seed', 'level', 'n_objects', 'n_placed', 'n_misrouted'):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise PalletizerError(f'EpisodeResult.{name} = {v!r}; expected an integer')
            _set(self, name, int(v))
        if self.n_objects < 0 or not 0 <= self.n_placed <= self.n_objects:
            raise PalletizerError(
                f'EpisodeResult.n_placed = {self.n_placed}; expected 0 <= n_placed <= '
                f'n_objects = {self.n_objects}'
            )
        if self.n_misrouted < 0:
            raise PalletizerError(f'EpisodeResult.n_misrouted = {self.n_misrouted}; expected >= 0')
        _set(self, 'duration_s', _finite(self.duration_s, 'EpisodeResult.duration_s', 0.0))
        if self.failure is not None:
            _set(self, 'failure', FailureCause.parse(self.failure))
        _set(self, 'success', bool(self.success))
        _set(self, 'oracle', bool(self.oracle))
        if self.success and self.failure is not None:
            raise PalletizerError(
                f'EpisodeResult.success = True with failure = {self.failure.value!r}; '
                'expected failure = None on success'
            )
        if self.success and self.n_placed != self.n_objects:
            raise PalletizerError(
                f'EpisodeResult.success = True with n_placed = {self.n_placed} of '
                f'{self.n_objects}; expected every carton placed'
            )
        if not isinstance(self.task, str) or not self.task:
            raise PalletizerError(f'EpisodeResult.task = {self.task!r}; expected a source name')
        _set(self, 'metrics', _plain(dict(self.metrics)))

    def to_dict(self) -> dict[str, Any]:
        return _simple_to_dict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> EpisodeResult:
        _check_keys(cls, d)
        return cls(**d)
