"""Level loads: which cartons a (level, seed) brings, drawn with counter-based randomness."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Protocol

import numpy as np

from palletizer.core.config import Catalogue, Config, Level, load_config
from palletizer.core.contracts import floats3
from palletizer.core.errors import ConfigError

if TYPE_CHECKING:
    from palletizer.core.contracts import PackageSpec

__all__ = [
    'CartonDraw',
    'LoadTable',
    'draw_carton',
    'draw_load',
    'frozen_table',
    'set_frozen_table',
    'staging_jitter',
]


class LoadTable(Protocol):
    """What draw_load and staging_jitter read of a frozen load table (core/frozen_loads.py's
    FrozenLoads, which imports this module: the table is named by its shape, not imported)."""

    @property
    def draws(self) -> Mapping[tuple[int, int], Sequence[CartonDraw]]: ...

    @property
    def jitter(self) -> Mapping[tuple[int, int], Sequence[tuple[float, float, float]]]: ...

    def __contains__(self, key: object) -> bool: ...


# A frozen load table this process answers from (core/frozen_loads.py); None: the generator.
_frozen: LoadTable | None = None


def frozen_table() -> LoadTable | None:
    """The frozen load table draw_load and staging_jitter answer from, or None."""
    return _frozen


def set_frozen_table(table: LoadTable | None) -> None:
    """Answer draw_load and staging_jitter from `table` for the (level, seed) pairs it holds
    (None: always the generator). Benchmark workers set it once (core/frozen_loads.py)."""
    global _frozen
    _frozen = table


# Stream ids keep the draws for different purposes independent of each other.
_STREAM_ORDER = 1
_STREAM_CARTON = 2
_STREAM_STAGING = 3


def _rng(*key: int) -> np.random.Generator:
    """A generator keyed by a tuple of non-negative ints: the same key gives the same stream."""
    return np.random.default_rng(np.random.SeedSequence([int(k) for k in key]))


@dataclass(frozen=True)
class CartonDraw:
    """One carton of a load: true size [m], mass [kg] and CoG offset [m] in the package frame."""

    index: int
    package_id: str
    type_name: str
    dims: tuple[float, float, float]
    mass: float
    cog_offset: tuple[float, float, float]
    rgba: tuple[float, float, float, float]
    friction: tuple[float, float, float]
    # On a level with labels (configs/levels.yaml `labels`): the face its label is stuck on
    # (+x/-x/+y/-y, package frame) and the label's width and height on that face [m]; '' and
    # (0, 0) where the carton shows none.
    label: str = ''
    label_size: tuple[float, float] = (0.0, 0.0)

    @property
    def spec(self) -> PackageSpec:
        """The true PackageSpec (what an oracle gauge would report)."""
        from palletizer.core.contracts import PackageSpec

        return PackageSpec(
            package_id=self.package_id,
            type_name=self.type_name,
            dims_m=self.dims,
            mass_kg=self.mass,
            cog_offset_m=self.cog_offset,
        )


@lru_cache(maxsize=4)
def _default_config() -> Config:
    return load_config()


def _type_order(level: Level, seed: int, index: int) -> str:
    """Declared lists are shuffled and walked, batch by batch: each type appears as listed."""
    batch, pos = divmod(index, len(level.types))
    order = _rng(_STREAM_ORDER, level.load_level, seed, batch).permutation(len(level.types))
    return level.types[int(order[pos])]


def _random_dims(cat: Catalogue, rng: np.random.Generator) -> tuple[tuple[float, ...], float]:
    r = cat.random
    for _ in range(r.max_attempts):
        length, width = rng.uniform(*r.length), rng.uniform(*r.width)
        length, width = max(length, width), min(length, width)
        height = rng.uniform(*r.height)
        volume = length * width * height
        mass = rng.uniform(*r.density) * volume
        if not r.volume[0] <= volume <= r.volume[1]:
            continue
        if length > r.max_aspect * height or not r.mass[0] <= mass <= r.mass[1]:
            continue
        return (round(length, 3), round(width, 3), round(height, 3)), round(mass, 3)
    raise ConfigError(
        f'catalogue.yaml: random: no carton satisfied the envelope in {r.max_attempts} draws'
    )


def draw_carton(
    level_id: int, seed: int, index: int, attempt: int = 0, config: Config | None = None
) -> CartonDraw:
    """Carton `index` of (level, seed); depends on nothing drawn for other cartons."""
    cfg = config or _default_config()
    level = cfg.level(level_id)
    if not 0 <= index < level.n:
        raise ConfigError(
            f'carton index {index} out of range for level {level_id} (n = {level.n})'
        )
    if seed < 0 or attempt < 0:
        raise ConfigError(f'seed and attempt must be >= 0; got seed={seed}, attempt={attempt}')
    cat = cfg.catalogue
    rng = _rng(_STREAM_CARTON, level.load_level, seed, index, attempt)
    type_name = _type_order(level, seed, index)
    palette = [t.rgba for t in cat.types.values()]
    if type_name == 'random':
        dims, mass = _random_dims(cat, rng)
        catalogue_cog = (0.0, 0.0, 0.0)
        rgba = palette[index % len(palette)]
    else:
        t = cat.types[type_name]
        dims, mass, catalogue_cog, rgba = t.dims, t.mass, t.cog_offset, t.rgba
    cog: tuple[float, ...]
    if level.cog == 'centred':
        cog = (0.0, 0.0, 0.0)
    elif level.cog == 'catalogue':
        cog = tuple(catalogue_cog)
    else:
        # Adversarial: push every CoG to the envelope edge with random signs, and low
        # (docs/levels.md §1.4).
        f = cat.random.adversarial_fraction
        sx, sy = rng.choice((-1.0, 1.0), size=2)
        cog = (sx * f * dims[0] / 2, sy * f * dims[1] / 2, -f * dims[2] / 2)
    label, label_size = _label(cat, level, type_name, dims)
    return CartonDraw(
        index=index,
        package_id=f'{type_name}-{index:02d}',
        type_name=type_name,
        dims=floats3(dims),
        mass=float(mass),
        cog_offset=floats3(cog),
        rgba=(float(rgba[0]), float(rgba[1]), float(rgba[2]), float(rgba[3])),
        friction=cat.friction,
        label=label,
        label_size=label_size,
    )


# The most of a face a label may cover, each way: a label larger than 90 % of its face is
# printed smaller (an A6 label on a 100 mm high book carton).
LABEL_FILL = 0.9


def _label(
    cat: Catalogue, level: Level, type_name: str, dims: Sequence[float]
) -> tuple[str, tuple[float, float]]:
    """The label face and the label's (width, height) on it [m], fitted to the face; ('', (0, 0))
    on a level without labels or for a type without one."""
    face = cat.rules(type_name).label
    if not level.labels or face == 'none':
        return '', (0.0, 0.0)
    across = dims[1] if face[1] == 'x' else dims[0]  # an end face spans W, a side face L
    w, h = cat.label_size_m
    w = min(w, LABEL_FILL * across)
    h = min(h, LABEL_FILL * dims[2])
    return face, (round(w, 4), round(h, 4))


def draw_load(level_id: int, seed: int, config: Config | None = None) -> list[CartonDraw]:
    """All cartons of (level, seed), in arrival order (attempt 0); from the frozen table when
    one is set and holds (level, seed)."""
    if _frozen is not None and (level_id, seed) in _frozen:
        return list(_frozen.draws[level_id, seed])
    cfg = config or _default_config()
    return [draw_carton(level_id, seed, i, 0, cfg) for i in range(cfg.level(level_id).n)]


def staging_jitter(
    level_id: int, seed: int, index: int, attempt: int = 0, config: Config | None = None
) -> tuple[float, float, float]:
    """Staging offset (dx [m], dy [m], dyaw [rad]) of carton `index`, uniform in +-jitter;
    attempt 0 from the frozen table when one is set and holds (level, seed)."""
    if attempt == 0 and _frozen is not None and (level_id, seed) in _frozen:
        offsets = _frozen.jitter[level_id, seed]
        if 0 <= index < len(offsets):
            return offsets[index]
    cfg = config or _default_config()
    level = cfg.level(level_id)
    rng = _rng(_STREAM_STAGING, level.load_level, seed, index, attempt)
    j = level.pos_jitter_m
    dx, dy = rng.uniform(-j, j, size=2) if j > 0 else (0.0, 0.0)
    yj = math.radians(level.yaw_jitter_deg)
    dyaw = rng.uniform(-yj, yj) if yj > 0 else 0.0
    if level.labels:
        # A labelled carton arrives either way round: its label may face any side.
        dyaw += math.pi * float(rng.integers(0, 2))
    return float(dx), float(dy), float(dyaw)
