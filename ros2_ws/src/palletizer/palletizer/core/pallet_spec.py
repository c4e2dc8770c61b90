"""The pallet spec: the rules a pallet is built to (docs/pallet-spec.md).

A spec is a YAML or JSON document with a schema (configs/pallet_spec.schema.json, generated from
the models here). Every rule is off unless the spec names it, so the empty spec `{}` builds the
pallets the workspace always built. Hard rules (the planners may never break them):
max_load_height_m, max_load_mass_kg, crush, fragile. Soft rules (scored with a weight):
weight_order, label_out, group_by. this_side_up always holds: every pick is tool-down on a
carton's lid, so no carton is ever turned over, and the spec may only say so.

load_spec validates a document and returns the typed, normalised spec, or raises SpecError,
whose `problems` name each bad key, the value given and what is allowed (one line each).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from palletizer.core.errors import PalletizerError, close_match

__all__ = [
    'Crush',
    'Fragile',
    'GroupBy',
    'LabelOut',
    'PalletSpec',
    'SpecError',
    'SpecProblem',
    'WeightOrder',
    'level_spec',
    'level_spec_path',
    'load_spec',
    'read_spec',
    'spec_schema',
]

# [m] above the deck: the EUR pallet's usual 1.8 m total less its 0.144 m deck, rounded down.
MAX_LOAD_HEIGHT_M = 1.65
# [kg] the EUR-1 pallet's rated load (configs/cell.yaml pallet.max_load_kg is the cell's).
MAX_LOAD_MASS_KG = 1500.0


class _Rule(BaseModel):
    model_config = ConfigDict(extra='forbid', frozen=True, strict=True)


class WeightOrder(_Rule):
    """Heavier below lighter: a carton resting on one lighter by more than tolerance_kg is an
    inversion."""

    tolerance_kg: float = Field(0.5, ge=0.0, le=50.0, description='[kg] allowed excess')
    weight: float = Field(1.0, ge=0.0, le=10.0, description='soft-rule weight in the score')


class Crush(_Rule):
    """The most mass that may rest on a carton: each type's crush_limit_kg from the catalogue
    (its board grade), or the override given here per type."""

    limits_kg: dict[str, Annotated[float, Field(gt=0.0, le=1000.0)]] = Field(
        default_factory=dict, description='[kg] per catalogue type, replacing its crush limit'
    )


class Fragile(_Rule):
    """Nothing on top of a fragile carton: the catalogue's fragile types and these."""

    types: list[str] = Field(default_factory=list, description='catalogue types also fragile')


class LabelOut(_Rule):
    """A carton with a label face shows it on the pallet's outside when it stands on the
    perimeter (within perimeter_band_m of the pallet's outline)."""

    weight: float = Field(1.0, ge=0.0, le=10.0, description='soft-rule weight in the score')
    perimeter_band_m: float = Field(
        0.05, ge=0.0, le=0.40, description='[m] from the outline that counts as the perimeter'
    )


class GroupBy(_Rule):
    """Keep the cartons of a group together: by type (SKU) or by the catalogue's group key
    (a store aisle)."""

    key: Literal['type', 'group'] = Field(description='what makes a group')
    weight: float = Field(1.0, ge=0.0, le=10.0, description='soft-rule weight in the score')


class PalletSpec(_Rule):
    """The rules one pallet is built to; a rule left out is off."""

    schema_version: Literal[1] = Field(1, alias='schema', description='spec format version')
    name: str = Field('', max_length=80, description='what the spec is for')
    max_load_height_m: float | None = Field(
        None, gt=0.0, le=MAX_LOAD_HEIGHT_M, description='[m] load top above the deck'
    )
    max_load_mass_kg: float | None = Field(
        None, gt=0.0, le=MAX_LOAD_MASS_KG, description='[kg] the load, pallet excluded'
    )
    weight_order: WeightOrder | None = None
    crush: Crush | None = None
    fragile: Fragile | None = None
    label_out: LabelOut | None = None
    this_side_up: Literal[True] = Field(
        True, description='always true: every pick is tool-down on the lid, none turns a carton'
    )
    group_by: GroupBy | None = None

    model_config = ConfigDict(extra='forbid', frozen=True, strict=True, populate_by_name=True)

    def to_dict(self) -> dict[str, Any]:
        """The normalised spec as JSON-safe data (rules that are off are left out)."""
        return self.model_dump(mode='json', by_alias=True, exclude_none=True)

    @property
    def empty(self) -> bool:
        """True when no rule is on (this_side_up always holds)."""
        return not any(getattr(self, k) is not None for k in _RULES)


_RULES = (
    'max_load_height_m',
    'max_load_mass_kg',
    'weight_order',
    'crush',
    'fragile',
    'label_out',
    'group_by',
)


@dataclass(frozen=True)
class SpecProblem:
    """One bad key: its dotted path, the value given and what is allowed."""

    key: str
    value: Any
    expected: str

    def __str__(self) -> str:
        return f'{self.key} = {self.value!r}; expected {self.expected}'


class SpecError(PalletizerError):
    """A pallet spec broke its schema; `problems` names every bad key, one per line."""

    def __init__(self, where: str, problems: list[SpecProblem]) -> None:
        self.problems = problems
        lines = '\n'.join(f'  {p}' for p in problems)
        super().__init__(f'{where}: {len(problems)} problem(s) in the pallet spec\n{lines}')


_MISSING = '<missing>'


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model whose fields are the keys at `loc` (a pydantic error location)."""
    model: type[BaseModel] = PalletSpec
    for part in loc:
        field = next(
            (f for n, f in model.model_fields.items() if part in (n, f.alias)),
            None,
        )
        if field is None:
            return None
        sub = next(
            (a for a in getattr(field.annotation, '__args__', (field.annotation,))
             if isinstance(a, type) and issubclass(a, BaseModel)),
            None,
        )  # fmt: skip
        if sub is None:
            return None
        model = sub
    return model


def _keys(model: type[BaseModel]) -> list[str]:
    return [f.alias or n for n, f in model.model_fields.items()]


def _problem(err: Mapping[str, Any]) -> SpecProblem:
    loc = tuple(p for p in err['loc'] if not str(p).startswith(('function-', 'union')))
    # pydantic names the member of an optional rule it tried ('WeightOrder'): drop it.
    loc = tuple(p for p in loc if not (isinstance(p, str) and p[:1].isupper()))
    key = '.'.join(str(p) for p in loc) or '(spec)'
    kind = err['type']
    if kind == 'extra_forbidden':
        model = _model_at(loc[:-1])
        allowed = _keys(model) if model is not None else []
        return SpecProblem(
            key,
            err.get('input'),
            f'a key among {", ".join(allowed)}{close_match(str(loc[-1]), allowed)}',
        )
    if kind == 'missing':
        return SpecProblem(key, _MISSING, 'a value: this key is required')
    msg = str(err['msg'])
    for lead in ('Input should be ', 'Value error, '):
        msg = msg.removeprefix(lead)
    if kind == 'literal_error' and loc == ('this_side_up',):
        msg += ': every pick is tool-down on the lid, so no carton is ever turned over'
    if kind in ('model_type', 'model_attributes_type', 'dict_type'):
        model = _model_at(loc)
        if model is not None:
            msg = f'a mapping with keys {", ".join(_keys(model))}, or null to leave the rule off'
    return SpecProblem(key, err.get('input'), msg)


def load_spec(
    doc: Any, types: Iterable[str] | None = None, where: str = 'pallet spec'
) -> PalletSpec:
    """The spec in `doc` (a mapping, as read from YAML or JSON; None is the empty spec),
    validated; `types`: the catalogue's type names, which crush and fragile must use. Raises
    SpecError naming every bad key."""
    if doc is None:
        doc = {}
    if not isinstance(doc, Mapping):
        raise SpecError(where, [SpecProblem('(spec)', doc, 'a mapping of rules')])
    problems: list[SpecProblem] = []
    spec = None
    try:
        spec = PalletSpec.model_validate(dict(doc))
    except ValidationError as exc:
        problems = [_problem(e) for e in exc.errors()]
    if types is not None:
        problems += _type_problems(doc, sorted(types))
    if problems or spec is None:
        raise SpecError(where, problems)
    return spec


def _type_problems(doc: Mapping[str, Any], known: list[str]) -> list[SpecProblem]:
    """The type names in crush and fragile that the catalogue does not have (read from the
    document as given, so they are reported with its other problems)."""
    crush = doc.get('crush')
    limits = crush.get('limits_kg') if isinstance(crush, Mapping) else None
    fragile = doc.get('fragile')
    listed = fragile.get('types') if isinstance(fragile, Mapping) else None
    named = [
        *((f'crush.limits_kg.{t}', t) for t in (limits if isinstance(limits, Mapping) else ())),
        *((f'fragile.types[{i}]', t) for i, t in enumerate(listed if isinstance(listed, list) else ())),
    ]  # fmt: skip
    return [
        SpecProblem(key, t, f'a catalogue type: {", ".join(known)}{close_match(str(t), known)}')
        for key, t in named
        if t not in known
    ]


def read_spec(path: str | Path, types: Iterable[str] | None = None) -> PalletSpec:
    """The spec in the YAML or JSON file at `path` (load_spec)."""
    import yaml

    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise SpecError(
            str(p), [SpecProblem('(file)', str(p), f'a readable file ({exc.strerror})')]
        ) from None
    try:
        doc = json.loads(text) if p.suffix == '.json' else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        first = str(exc).splitlines()[0]
        raise SpecError(str(p), [SpecProblem('(file)', first, 'YAML or JSON')]) from None
    return load_spec(doc, types, where=str(p))


def level_spec_path(cfg: Any, level: int) -> Path | None:
    """configs/specs/<spec>.yaml of rule level `level` (configs/levels.yaml `spec`), None for a
    level without one."""
    name = cfg.level(level).spec
    return Path(cfg.root) / 'specs' / f'{name}.yaml' if name else None


def level_spec(cfg: Any, level: int) -> PalletSpec | None:
    """The pallet spec rule level `level` is built to (configs/levels.yaml `spec`, read and
    checked against the catalogue's types), None for a level without one."""
    path = level_spec_path(cfg, level)
    return None if path is None else read_spec(path, cfg.catalogue.types)


def spec_schema() -> dict[str, Any]:
    """The spec's JSON Schema (configs/pallet_spec.schema.json is this, written out)."""
    schema = PalletSpec.model_json_schema(by_alias=True)
    schema['$schema'] = 'https://json-schema.org/draft/2020-12/schema'
    schema['title'] = 'palletizer pallet spec'
    return schema
