"""One exception hierarchy: every exception class of the package derives from PalletizerError,
and the package raises no bare built-in error on purpose (the STYLE "Errors" rule)."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import palletizer
import pytest
from palletizer.core.errors import InvalidType, InvalidValue, PalletizerError, UnknownKey

PKG = Path(palletizer.__file__).parent
_BUILTIN_ERRORS = {n for n in dir(builtins) if n.endswith(('Error', 'Exception'))} | {
    'BaseException'
}
# Raised by protocol, not as the project's errors: a module's __getattr__ must raise
# AttributeError, and SystemExit ends a command-line entry point.
_ALLOWED_RAISES = {'AttributeError', 'SystemExit'}


def _sources() -> list[Path]:
    return sorted(p for p in PKG.rglob('*.py') if 'node_modules' not in p.parts)


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ''


def test_every_exception_class_derives_from_palletizer_error():
    bare = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                bases = {_name(b) for b in node.bases}
                if bases & _BUILTIN_ERRORS and 'PalletizerError' not in bases:
                    if not (path.name == 'errors.py' and node.name == 'PalletizerError'):
                        bare.append(f'{path.relative_to(PKG)}: class {node.name}')
    assert bare == []


def test_no_builtin_error_is_raised_on_purpose():
    raised = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Raise) and node.exc is not None:
                name = _name(node.exc)
                if name in _BUILTIN_ERRORS and name not in _ALLOWED_RAISES:
                    raised.append(f'{path.relative_to(PKG)}: raise {name}')
    assert raised == []


def test_the_builtin_kinds_are_still_caught_by_their_old_handlers():
    from palletizer.bridge.stream import steps_per_sample
    from palletizer.core.oracle import oracle_flag

    with pytest.raises(ValueError, match=r'rate_hz = 0.0, timestep = 0.002; expected both > 0'):
        steps_per_sample(0.0, 0.002)
    with pytest.raises(PalletizerError):
        steps_per_sample(0.0, 0.002)
    with pytest.raises(TypeError, match='no oracle flag'):
        oracle_flag(object())
    assert issubclass(InvalidValue, ValueError) and issubclass(InvalidType, TypeError)
    assert issubclass(UnknownKey, KeyError) and issubclass(UnknownKey, PalletizerError)
    assert str(UnknownKey("package_id 'x'; expected one of a, b")) == (
        "package_id 'x'; expected one of a, b"
    )


def test_the_oracle_gauge_names_an_unknown_carton_and_the_ones_in_the_load():
    from palletizer.core.contracts import Observation
    from palletizer.core.gauge import OracleGauge
    from palletizer.core.loads import draw_load

    draws = draw_load(11, 1)
    gauge = OracleGauge(d.spec for d in draws)
    ids = sorted(d.package_id for d in draws)
    obs = Observation(ids[0] + 'x', (0.0, 0.0, 0.0), 0.0, (0.4, 0.3, 0.2), 1.0)
    with pytest.raises(
        UnknownKey, match=rf"package_id '{ids[0]}x' is not in the load; expected one of {ids[0]}, "
    ):
        gauge.weigh(obs)
    with pytest.raises(KeyError):
        gauge.weigh(obs)
