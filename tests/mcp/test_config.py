"""The MCP server's settings: the speed cap from configs/telemetry.yaml `mcp` (a bad value named
with its key, --max-speed only lowering it), and --robot ur turning the simulation-only tools
off with a tool error that says why."""

from __future__ import annotations

import shutil
from pathlib import Path

import anyio
import pytest
import yaml
from palletizer.cli import mcp_server
from palletizer.cli.mcp_cell import SIM_ONLY, Cell
from palletizer.core.config import config_dir, load_config
from palletizer.core.errors import ConfigError, PalletizerError

from tests.mcp.conftest import connected

CONFIGS = config_dir()


def _configs(tmp_path: Path, mcp: object = None, drop: bool = False) -> Path:
    root = tmp_path / 'configs'
    shutil.copytree(CONFIGS, root)
    doc = yaml.safe_load((root / 'telemetry.yaml').read_text())
    if drop:
        doc.pop('mcp', None)
    else:
        doc['mcp'] = mcp
    (root / 'telemetry.yaml').write_text(yaml.safe_dump(doc))
    return root


def test_the_shipped_cap_is_real_speed_and_the_cell_takes_it(tmp_path):
    assert load_config().telemetry.mcp.speed_cap == 1.0
    c = Cell(tmp_path, tmp_path / 'runs')
    assert c.speed_cap == 1.0 and c.limits().speed_max == 1.0
    assert c.robot == 'sim' and c.limits().sim_only_off == []


def test_without_the_section_the_cap_is_real_speed(tmp_path):
    assert load_config(_configs(tmp_path, drop=True)).telemetry.mcp.speed_cap == 1.0


def test_a_configured_cap_is_read(tmp_path):
    cfg = load_config(_configs(tmp_path, {'speed_cap': 0.5}))
    assert cfg.telemetry.mcp.speed_cap == 0.5


@pytest.mark.parametrize(
    ('mcp', 'match'),
    [
        ({'speed_cap': 3.0}, r'telemetry.yaml: mcp.speed_cap = 3.0; expected a number in'),
        ({'speed_cap': 0}, r'telemetry.yaml: mcp.speed_cap = 0; expected a number in'),
        ({'speed_cap': 'fast'}, r"telemetry.yaml: mcp.speed_cap = 'fast'; expected a number"),
        ({'speedcap': 1.0}, r'telemetry.yaml: mcp.speedcap: unknown key; expected one of'),
        ({}, r'telemetry.yaml: mcp.speed_cap: missing required key'),
        ('fast', r"telemetry.yaml: mcp = 'fast'; expected a mapping with keys speed_cap"),
    ],
)
def test_a_bad_cap_is_named_with_its_key(tmp_path, mcp, match):
    with pytest.raises(ConfigError, match=match):
        load_config(_configs(tmp_path, mcp))


def test_the_server_reads_the_cap_and_the_flag_only_lowers_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv('PALLETIZER_CONFIG_DIR', str(_configs(tmp_path, {'speed_cap': 0.5})))
    made: list[Cell] = []

    class Stop(PalletizerError):
        pass

    def fake_build(cell, calls=None):
        made.append(cell)
        raise Stop('built')

    monkeypatch.setattr(mcp_server, 'build_server', fake_build)
    runs = ['--runs', str(tmp_path / 'runs')]
    for flags in ([], ['--max-speed', '0.25']):
        with pytest.raises(Stop):
            mcp_server.main([*runs, *flags])
    assert [c.speed_cap for c in made] == [0.5, 0.25]
    assert mcp_server.main([*runs, '--max-speed', '1.0']) == 2
    err = capsys.readouterr().err
    assert '--max-speed 1.0' in err and 'mcp.speed_cap' in err and '0.5' in err


def test_a_bad_robot_is_named(tmp_path):
    with pytest.raises(PalletizerError, match="robot 'abb'; expected one of sim, ur"):
        Cell(tmp_path, tmp_path / 'runs', robot='abb')  # type: ignore[arg-type]


def test_with_robot_ur_the_simulation_only_tools_are_off_and_say_why(tmp_path):
    cell = Cell(tmp_path, tmp_path / 'runs', robot='ur')

    async def go():
        async with connected(cell) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            run = await client.call_tool('run_episode', {'level': 11, 'seed': 1})
            stab = await client.call_tool('check_stability', {})
            preview = await client.call_tool(
                'preview_placement', {'dims_m': [0.4, 0.3, 0.2], 'mass_kg': 4.0}
            )
            state = await client.call_tool('get_cell_state', {})
            return names, run, stab, preview, state

    try:
        names, run, stab, preview, state = anyio.run(go)
    finally:
        cell.close()
    assert set(SIM_ONLY) <= names  # listed, so that the refusal can say why
    assert run.is_error
    text = run.content[0].text
    assert 'run_episode is a simulation-only tool' in text and '--robot ur' in text, text
    assert 'robot:=ur' in text and 'preview_placement' in text, text
    assert cell.manager.run is None  # nothing was started
    assert stab.is_error
    assert 'check_stability is a simulation-only tool' in stab.content[0].text
    assert not preview.is_error, preview.content  # planning moves nothing: allowed
    limits = state.structured_content['limits']
    assert limits['robot'] == 'ur' and limits['sim_only_off'] == list(SIM_ONLY)
