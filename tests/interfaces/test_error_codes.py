"""One numbering of result codes: each server's band, a name and a number meaning the same in
every interface of the band, and the table of docs/interfaces.md §9.3 matching the files."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MSGS = ROOT / 'msgs' / 'palletizer_msgs'
DOC = ROOT / 'docs' / 'interfaces.md'

# The band of each server's interfaces (docs/interfaces.md §9.2).
BANDS = {
    'PlanPlacement': 1,
    'SetPalletSpec': 1,
    'GetPalletSpec': 1,
    'ResetCell': 2,
    'PresentCarton': 2,
    'ReleaseCarton': 2,
    'Capture': 2,
    'Settle': 2,
    'RunStability': 2,
    'GroundTruth': 2,
    'Pick': 3,
    'Place': 3,
    'MoveArm': 3,
    'Tare': 4,
    'Weigh': 4,
    'FuseHeightMap': 5,
    'Detect': 5,
    'MeasureHeld': 5,
    'MeasureLid': 5,
    'BeginEpisode': 6,
    'EndEpisode': 6,
}
_CONST = re.compile(r'^uint16 ([A-Z_]+) = (\d+)\b')


def _files() -> list[Path]:
    return sorted([*MSGS.glob('srv/*.srv'), *MSGS.glob('action/*.action')])


def _codes(path: Path) -> dict[str, int]:
    """The error_code constants of a response or result (the section after the first ---)."""
    sections = path.read_text().split('\n---\n')
    out = {}
    for line in sections[1].splitlines():
        m = _CONST.match(line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


def test_every_interface_with_a_result_has_ok_and_its_band():
    for path in _files():
        codes = _codes(path)
        assert path.stem in BANDS, f'{path.name}: add it to BANDS and docs/interfaces.md §9.2'
        assert codes.get('OK') == 0, path.name
        band = BANDS[path.stem]
        wrong = {n: c for n, c in codes.items() if n != 'OK' and c // 100 != band}
        assert not wrong, f'{path.name}: {wrong} outside band {band}xx'


def test_a_name_and_a_number_mean_the_same_in_every_interface_of_a_band():
    by_name: dict[tuple[int, str], set[int]] = defaultdict(set)
    by_code: dict[int, set[str]] = defaultdict(set)
    for path in _files():
        for name, code in _codes(path).items():
            if name != 'OK':
                by_name[(BANDS[path.stem], name)].add(code)
                by_code[code].add(name)
    assert {k: v for k, v in by_name.items() if len(v) > 1} == {}
    assert {k: v for k, v in by_code.items() if len(v) > 1} == {}


def test_the_documented_table_lists_every_code_and_no_other():
    rows = re.findall(r'^\| (\d{3}) \| ([A-Z_]+) \| ([^|]+) \|', DOC.read_text(), re.M)
    documented = {
        (int(c), n, frozenset(i.strip() for i in ifaces.split(','))) for c, n, ifaces in rows
    }
    used: dict[tuple[int, str], set[str]] = defaultdict(set)
    for path in _files():
        for name, code in _codes(path).items():
            if name != 'OK':
                used[(code, name)].add(path.stem)
    assert documented == {(c, n, frozenset(i)) for (c, n), i in used.items()}


@pytest.mark.parametrize('path', _files(), ids=lambda p: p.name)
def test_every_field_and_constant_has_an_end_of_line_comment(path):
    bare = [
        line
        for line in path.read_text().splitlines()
        if line.strip()
        and line.strip() != '---'
        and not line.lstrip().startswith('#')
        and '#' not in line
    ]
    assert bare == []
