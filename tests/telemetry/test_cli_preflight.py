"""scripts/palletize checks the runs folder before it starts the graph (exit 2, one line)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from palletizer.cli import palletize

CONFIGS = Path(__file__).resolve().parents[2] / 'configs'


class _NoGraph:
    """Stands in for GraphRunner: a runs folder that cannot take the run never starts it."""

    def __init__(self, *args, **kwargs):
        pytest.fail('the node graph was started although telemetry cannot write')


class _Started(Exception):
    pass


class _Graph:
    def __init__(self, *args, **kwargs):
        raise _Started


@pytest.fixture
def configs(tmp_path, monkeypatch) -> Path:
    root = tmp_path / 'configs'
    shutil.copytree(CONFIGS, root)
    monkeypatch.setenv('PALLETIZER_CONFIG_DIR', str(root))
    monkeypatch.chdir(tmp_path)
    return root


def _set(configs: Path, key: str, value: str) -> None:
    path = configs / 'telemetry.yaml'
    lines = path.read_text().splitlines()
    lines = [f'{key}: {value}' if ln.startswith(f'{key}:') else ln for ln in lines]
    path.write_text('\n'.join(lines) + '\n')


def test_palletize_stops_before_the_graph_when_the_runs_folder_cannot_be_made(
    configs, tmp_path, monkeypatch, capsys
):
    (tmp_path / 'runs').write_text('a file where the runs folder should be')
    monkeypatch.setattr(palletize, 'GraphRunner', _NoGraph)
    assert palletize.main(['--level', '11']) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f'palletize: error: runs folder {tmp_path / "runs"}: cannot create it '
        '(a file of that name exists)'
    )


def test_palletize_stops_before_the_graph_without_the_free_space(configs, monkeypatch, capsys):
    _set(configs, 'min_free_mb', '9000000')
    monkeypatch.setattr(palletize, 'GraphRunner', _NoGraph)
    assert palletize.main(['--level', '11']) == 2
    err = capsys.readouterr().err
    assert err.startswith('palletize: error: runs folder ') and 'min_free_mb' in err


def test_palletize_without_telemetry_skips_the_check(configs, tmp_path, monkeypatch):
    (tmp_path / 'runs').write_text('a file where the runs folder should be')
    monkeypatch.setattr(palletize, 'GraphRunner', _Graph)
    with pytest.raises(_Started):
        palletize.main(['--level', '11', '--no-telemetry'])
