"""The documents hold together: the MkDocs site builds with --strict (a broken link, a missing
anchor or a page left out of the nav fails it), every citation of the design as `ARCHITECTURE`
with a section sign names a numbered section of docs/architecture.md, and the README stays a
front door (at most 300 lines) whose relative links lead to files and headings that exist.
Each check is also shown failing on a crafted input."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml
from markdown.extensions.toc import slugify

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / 'docs' / 'architecture.md'
README_MAX_LINES = 300

# `ARCHITECTURE §6`, `ARCHITECTURE §3, §6` or `docs/architecture.md §6`.
_CITATION = re.compile(r'(?:ARCHITECTURE|docs/architecture\.md) §(\d+)((?:\s*(?:,|and)\s*§\d+)*)')
_SECTION = re.compile(r'^#{2,6}\s+(\d+)\.\s', re.M)
_LINK = re.compile(r'!?\[[^\]]*\]\(([^)\s]+)\)')
_HEADING = re.compile(r'^#{1,6}\s+(.+?)\s*#*\s*$', re.M)
_FENCE = re.compile(r'^```.*?^```', re.M | re.S)
# Folders that are not the repository's own text: the environment, build outputs, the site.
_SKIP = {'.git', '.venv', 'build', 'install', 'log', 'node_modules', 'site', '__pycache__'}


def cited_sections(text: str) -> list[int]:
    """The section numbers of every citation of the design in `text`."""
    found = []
    for m in _CITATION.finditer(text):
        found.append(int(m.group(1)))
        found += [int(n) for n in re.findall(r'§(\d+)', m.group(2))]
    return found


def sections(text: str) -> set[int]:
    """The numbers of the numbered headings (`## 6. ...`) of a page."""
    return {int(n) for n in _SECTION.findall(text)}


def unresolved_citations(files: dict[str, str], design: str) -> list[str]:
    """`file: §N` for each citation whose section the design page lacks."""
    have = sections(design)
    return [
        f'{name}: §{n}'
        for name, text in files.items()
        for n in cited_sections(text)
        if n not in have
    ]


def anchors(text: str) -> set[str]:
    """The anchors MkDocs (Python-Markdown's toc) gives the headings of a page."""
    return {slugify(re.sub(r'[`*]', '', h), '-') for h in _HEADING.findall(_FENCE.sub('', text))}


def broken_links(page: Path) -> list[str]:
    """Relative links of a Markdown page that lead to no file, or to no heading of one."""
    broken = []
    for target in _LINK.findall(_FENCE.sub('', page.read_text(encoding='utf-8'))):
        if re.match(r'[a-z][a-z0-9+.-]*:', target) or target.startswith('#'):
            continue  # a URL, or an anchor of the page itself
        path, _, anchor = target.partition('#')
        dest = (page.parent / path).resolve()
        if not dest.exists():
            broken.append(f'{target}: no such file')
        elif anchor and dest.suffix == '.md' and anchor not in anchors(dest.read_text('utf-8')):
            broken.append(f'{target}: no heading with that anchor')
    return broken


def _repository_text() -> dict[str, str]:
    files = {}
    for folder, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in _SKIP]
        for name in names:
            if name.endswith(('.py', '.md')):
                path = Path(folder) / name
                files[str(path.relative_to(ROOT))] = path.read_text(encoding='utf-8')
    return files


def _mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, '-m', 'mkdocs', 'build', '--strict', '-f', str(config), '-d', str(site)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_site_builds_strict(tmp_path):
    run = _mkdocs_build(ROOT / 'mkdocs.yml', tmp_path / 'site')
    assert run.returncode == 0, run.stdout + run.stderr
    assert (tmp_path / 'site' / 'architecture' / 'index.html').is_file()


def test_a_broken_link_or_a_missing_anchor_fails_the_strict_build(tmp_path):
    config = yaml.safe_load((ROOT / 'mkdocs.yml').read_text(encoding='utf-8'))
    (tmp_path / 'docs').mkdir()
    (tmp_path / 'docs' / 'other.md').write_text('# Other\n\n## 6. A section\n')
    config.update(docs_dir='docs', nav=['index.md', 'other.md'])
    (tmp_path / 'mkdocs.yml').write_text(yaml.safe_dump(config))
    for bad in ('[gone](missing.md)', '[gone](other.md#7-no-such-section)'):
        (tmp_path / 'docs' / 'index.md').write_text(
            f'# Home\n\n{bad} and [fine](other.md#6-a-section)\n'
        )
        run = _mkdocs_build(tmp_path / 'mkdocs.yml', tmp_path / 'site')
        assert run.returncode != 0, bad
        assert bad.split('(')[1].split('#')[0].rstrip(')') in run.stdout + run.stderr
    (tmp_path / 'docs' / 'index.md').write_text('# Home\n\n[fine](other.md#6-a-section)\n')
    run = _mkdocs_build(tmp_path / 'mkdocs.yml', tmp_path / 'site')
    assert run.returncode == 0, run.stdout + run.stderr


def test_every_architecture_citation_names_a_numbered_section():
    files = _repository_text()
    assert sum(len(cited_sections(t)) for t in files.values()) >= 10  # the checker finds them
    assert unresolved_citations(files, ARCHITECTURE.read_text(encoding='utf-8')) == []


def test_the_citation_check_fails_on_a_section_the_design_lacks():
    design = '# Architecture\n\n## 1. One\n\n## 6. Six\n\n### 6.1 Not a section number\n'
    assert sections(design) == {1, 6}
    sign = '§'  # spelt apart, so that this file cites no missing section itself
    text = (
        f'(ARCHITECTURE {sign}6) (ARCHITECTURE {sign}1, {sign}99) (docs/architecture.md {sign}42)'
    )
    assert cited_sections(text) == [6, 1, 99, 42]
    assert unresolved_citations({'x.py': text}, design) == ['x.py: §99', 'x.py: §42']


def test_the_readme_is_a_front_door():
    lines = (ROOT / 'README.md').read_text(encoding='utf-8').splitlines()
    assert len(lines) <= README_MAX_LINES, f'README.md has {len(lines)} lines'
    assert '`scripts/test -q`' in '\n'.join(lines)  # CI runs the test command it gives


def test_the_readme_links_lead_somewhere():
    assert broken_links(ROOT / 'README.md') == []


def test_the_link_check_fails_on_a_missing_file_or_heading(tmp_path):
    (tmp_path / 'docs').mkdir()
    (tmp_path / 'docs' / 'page.md').write_text('# Page\n\n## 6. The Python package\n')
    readme = tmp_path / 'README.md'
    readme.write_text(
        '[a](docs/page.md) [b](docs/page.md#6-the-python-package) [c](https://example.org/x)\n'
        '[d](docs/missing.md) [e](docs/page.md#no-such-heading) ![f](docs/images/none.png)\n'
        '```\n[g](not/a/link.md)\n```\n'
    )
    assert broken_links(readme) == [
        'docs/missing.md: no such file',
        'docs/page.md#no-such-heading: no heading with that anchor',
        'docs/images/none.png: no such file',
    ]
