"""Value validators of the config schema: each takes (value, where) and returns the normalised
value or raises a ConfigError that names the key path, the bad value and what is allowed."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from palletizer.core.errors import ConfigError, close_match

Validator = Callable[[Any, str], Any]


def _fail(where: str, value: Any, allowed: str) -> ConfigError:
    return ConfigError(f'{where} = {value!r}; expected {allowed}')


def _num(lo: float = -math.inf, hi: float = math.inf, *, integer: bool = False) -> Validator:
    def check(v: Any, where: str) -> float | int:
        kind = 'an integer' if integer else 'a number'
        ok_type = isinstance(v, int) if integer else isinstance(v, (int, float))
        if isinstance(v, bool) or not ok_type or not math.isfinite(v):
            raise _fail(where, v, f'{kind} in [{lo}, {hi}]')
        if not lo <= v <= hi:
            raise _fail(where, v, f'{kind} in [{lo}, {hi}]')
        return int(v) if integer else float(v)

    return check


def _vec(
    n: int | None, lo: float = -math.inf, hi: float = math.inf, *, integer: bool = False
) -> Validator:
    item = _num(lo, hi, integer=integer)

    def check(v: Any, where: str) -> tuple[float, ...]:
        size = f'{n} numbers' if n is not None else 'numbers'
        if not isinstance(v, (list, tuple)) or (n is not None and len(v) != n):
            raise _fail(where, v, f'a list of {size} in [{lo}, {hi}]')
        return tuple(item(x, f'{where}[{i}]') for i, x in enumerate(v))

    return check


def _one_of(*allowed: Any) -> Validator:
    def check(v: Any, where: str) -> Any:
        if v not in allowed:
            names = [str(a) for a in allowed]
            raise ConfigError(
                f'{where} = {v!r}; expected one of {", ".join(names)}{close_match(v, names)}'
            )
        return v

    return check


def _bool(v: Any, where: str) -> bool:
    if not isinstance(v, bool):
        raise _fail(where, v, 'true or false')
    return v


def _text(v: Any, where: str) -> str:
    if not isinstance(v, str) or not v:
        raise _fail(where, v, 'a non-empty string')
    return v


def _text_or_empty(v: Any, where: str) -> str:
    if not isinstance(v, str):
        raise _fail(where, v, 'a string (may be empty)')
    return v


def _list_of(item: Validator, min_len: int = 0) -> Validator:
    def check(v: Any, where: str) -> tuple[Any, ...]:
        if not isinstance(v, list) or len(v) < min_len:
            raise _fail(where, v, f'a list of at least {min_len} items')
        return tuple(item(x, f'{where}[{i}]') for i, x in enumerate(v))

    return check


def _map_of(item: Validator) -> Validator:
    def check(v: Any, where: str) -> dict[str, Any]:
        if not isinstance(v, dict) or not v:
            raise _fail(where, v, 'a non-empty mapping')
        return {str(k): item(x, f'{where}.{k}') for k, x in v.items()}

    return check


@dataclass(frozen=True)
class _Opt:
    """Marks a schema entry optional, with a default."""

    validator: Any
    default: Any = None


def _record(schema: Mapping[str, Any]) -> Validator:
    """Validate a mapping against a schema; nested dicts are sub-records; unknown keys are errors."""

    def check(v: Any, where: str) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise _fail(where, v, f'a mapping with keys {", ".join(schema)}')
        out: dict[str, Any] = {}
        for key in v:
            if key not in schema:
                raise ConfigError(
                    f'{f"{where}.{key}" if where else key}: unknown key; expected one of '
                    f'{", ".join(schema)}'
                    f'{close_match(key, schema)}'
                )
        for key, spec in schema.items():
            sub = f'{where}.{key}' if where else key
            optional = isinstance(spec, _Opt)
            rule = spec.validator if optional else spec
            if key not in v:
                if optional:
                    out[key] = spec.default
                    continue
                raise ConfigError(f'{sub}: missing required key')
            out[key] = _record(rule)(v[key], sub) if isinstance(rule, dict) else rule(v[key], sub)
        return out

    return check
