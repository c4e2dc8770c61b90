"""The figures marked in README.md and docs/benchmarks.md equal the current result files
(scripts/docs --check); the check fails on a marked figure that differs from its file, and
names the marker's file, line and the keys there are where a key path leads nowhere."""

from __future__ import annotations

import json
from pathlib import Path

from palletizer.cli import docs_figures
from palletizer.cli.docs_figures import DOCS, MARKER, check

ROOT = Path(__file__).resolve().parents[1]


def _crafted(tmp_path: Path, doc: str) -> Path:
    (tmp_path / 'benchmarks/results').mkdir(parents=True)
    (tmp_path / 'benchmarks/results/hardware.json').write_text(
        json.dumps({'commit': '269ef14', 'wall_s': 824.77, 'levels': {'11': {'episodes': 3}}})
    )
    (tmp_path / 'doc.md').write_text(doc)
    return tmp_path / 'doc.md'


def test_every_marked_figure_in_the_repository_equals_its_result_file():
    findings = check(ROOT)
    assert not findings, '\n'.join(map(str, findings)) + '\n(run scripts/docs to refresh them)'
    marked = sum(len(MARKER.findall((ROOT / d).read_text())) for d in DOCS)
    assert marked >= 20  # the headline figures are marked, not only a token few


def test_a_marked_figure_that_differs_fails_the_check_and_is_rewritten(tmp_path, capsys):
    doc = _crafted(
        tmp_path,
        'Title\n\nat <!-- fig hardware.commit -->269ef14<!-- /fig -->, '
        '<!-- fig hardware.wall_s :.0f -->900<!-- /fig --> s wall, level 11 '
        '<!-- fig hardware.levels.11.episodes -->3<!-- /fig --> episodes\n',
    )
    (finding,) = check(tmp_path, ['doc.md'])
    assert (finding.path, finding.line, finding.key) == (doc, 3, 'hardware.wall_s')
    assert (finding.text, finding.want) == ('900', '825')
    assert docs_figures.main(['--check', '--root', str(tmp_path), 'doc.md']) == 1
    assert "doc.md:3: fig hardware.wall_s: the text is '900'" in capsys.readouterr().err
    assert docs_figures.main(['--root', str(tmp_path), 'doc.md']) == 0
    assert '<!-- fig hardware.wall_s :.0f -->825<!-- /fig -->' in doc.read_text()
    assert docs_figures.main(['--check', '--root', str(tmp_path), 'doc.md']) == 0


def test_an_unknown_key_path_names_the_file_line_and_the_keys_there(tmp_path, capsys):
    _crafted(
        tmp_path,
        'one\n<!-- fig hardware.levels.12.episodes -->3<!-- /fig -->\n'
        '<!-- fig hardwar.wall_s -->825<!-- /fig -->\n',
    )
    first, second = check(tmp_path, ['doc.md'])
    assert first.line == 2 and first.want is None
    assert "no '12' in hardware.levels (keys: 11)" in str(first)
    assert second.line == 3 and 'result files: hardware' in str(second)
    # Rewriting keeps such a marker's text and still exits 1.
    assert docs_figures.main(['--root', str(tmp_path), 'doc.md']) == 1
    err = capsys.readouterr().err
    assert 'doc.md:2: fig hardware.levels.12.episodes' in err
    assert 'fig hardwar.wall_s -->825<!-- /fig -->' in (tmp_path / 'doc.md').read_text()


def test_a_marker_formats_scales_and_quotes_as_asked():
    assert docs_figures.render(0.6029, '100', '.1f') == '60.3'
    assert docs_figures.render(False) == 'false' and docs_figures.render(6.98) == '6.98'
    assert docs_figures.render('scripts/bench hardware', code=True) == '`scripts/bench hardware`'
