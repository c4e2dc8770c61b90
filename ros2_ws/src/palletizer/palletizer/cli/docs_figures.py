"""`scripts/docs`: the figures in the docs that come from the current result files.

A figure taken from `benchmarks/results/<name>.json` is written between two HTML comments:

    <!-- fig hardware.placement_check_err_mm_p95 -->6.98<!-- /fig -->
    <!-- fig hardware.wall_s :.0f -->825<!-- /fig -->
    <!-- fig bpp.target.utilisation_mean *100 :.1f -->60.3<!-- /fig -->
    <!-- fig hardware.command code -->`scripts/bench hardware --seeds 3`<!-- /fig -->

The key path starts with the file's name and goes down by dotted keys (a list by its index).
The value is written as JSON writes it (a string as it is), or scaled by `*N` and formatted by a
Python format spec `:SPEC`; `code` writes it as inline code. `scripts/docs` rewrites the text
between each pair from the files; `scripts/docs --check` changes nothing and exits 1 listing
every marker whose text differs from its source, or whose key path does not exist.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from palletizer.core.errors import PalletizerError

__all__ = ['DOCS', 'MARKER', 'Finding', 'check', 'main', 'render', 'rewrite']

# The Markdown files that carry markers, relative to the repository root.
DOCS = ('README.md', 'docs/benchmarks.md', 'docs/comparisons.md')
RESULTS = 'benchmarks/results'
MARKER = re.compile(
    r'<!-- fig (?P<key>[^\s>]+)(?: \*(?P<scale>[0-9.]+))?(?: :(?P<spec>[^\s>]+))?'
    r'(?P<code> code)? -->(?P<text>.*?)<!-- /fig -->'
)
_OPEN = re.compile(r'<!-- fig\b')


@dataclass(frozen=True)
class Finding:
    """One marker whose text is not its source's: `want` is None where the source is missing."""

    path: Path
    line: int
    key: str
    text: str
    want: str | None
    why: str = ''

    def __str__(self) -> str:
        where = f'{self.path}:{self.line}: fig {self.key}'
        if self.want is None:
            return f'{where}: {self.why}'
        return f'{where}: the text is {self.text!r}, the result file says {self.want!r}'


class KeyPathError(PalletizerError, LookupError):
    """A key path that leads nowhere; the message says where it stopped and what is there."""


def _lookup(key: str, results: Path, cache: dict[str, Any]) -> Any:
    name, *parts = key.split('.')
    if name not in cache:
        path = results / f'{name}.json'
        if not path.is_file():
            have = ', '.join(sorted(p.stem for p in results.glob('*.json'))) or 'none'
            raise KeyPathError(f'no {path} (result files: {have})')
        cache[name] = json.loads(path.read_text())
    value, walked = cache[name], name
    for part in parts:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            if isinstance(value, dict):
                there = f'keys: {", ".join(sorted(value)) or "none"}'
            elif isinstance(value, list):
                there = f'a list of {len(value)}'
            else:
                there = f'the value {json.dumps(value)}'
            raise KeyPathError(f'no {part!r} in {walked} ({there})')
        walked = f'{walked}.{part}'
    return value


def render(
    value: Any, scale: str | None = None, spec: str | None = None, code: bool = False
) -> str:
    """A value as a marker writes it."""
    if scale is not None:
        value = value * float(scale)
    if spec is not None:
        text = format(value, spec)
    else:
        text = value if isinstance(value, str) else json.dumps(value)
    return f'`{text}`' if code else text


def rewrite(
    path: Path, results: Path, cache: dict[str, Any] | None = None
) -> tuple[str, list[Finding]]:
    """The file's text with every marker's text from its source, and the markers that differed
    (or lead nowhere: those keep their text)."""
    cache = {} if cache is None else cache
    findings: list[Finding] = []
    out = []
    for n, line in enumerate(path.read_text().splitlines(keepends=True), 1):

        def one(m: re.Match[str], n: int = n) -> str:
            key, text = m['key'], m['text']
            try:
                value = _lookup(key, results, cache)
                want = render(value, m['scale'], m['spec'], bool(m['code']))
            except (KeyPathError, ValueError, TypeError) as exc:
                findings.append(Finding(path, n, key, text, None, str(exc)))
                return m[0]
            if want != text:
                findings.append(Finding(path, n, key, text, want))
            return m[0][: m.start('text') - m.start()] + want + '<!-- /fig -->'

        new = MARKER.sub(one, line)
        if len(_OPEN.findall(line)) != len(MARKER.findall(line)):
            findings.append(
                Finding(path, n, '?', line.strip(), None, 'a marker not closed on its line')
            )
        out.append(new)
    return ''.join(out), findings


def check(root: Path, docs: Sequence[str] = DOCS, results: str = RESULTS) -> list[Finding]:
    """Every marker in `docs` whose text differs from its source."""
    cache: dict[str, Any] = {}
    found: list[Finding] = []
    for doc in docs:
        found += rewrite(root / doc, root / results, cache)[1]
    return found


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog='scripts/docs',
        description='Rewrite the marked figures in the docs from benchmarks/results/*.json.',
    )
    p.add_argument('--check', action='store_true', help='change nothing; exit 1 on a difference')
    p.add_argument('--root', default='.', help='the repository root (default .)')
    p.add_argument('docs', nargs='*', default=list(DOCS), help=f'default: {" ".join(DOCS)}')
    ns = p.parse_args(argv)
    root = Path(ns.root)
    cache: dict[str, Any] = {}
    bad = 0
    for doc in ns.docs:
        text, findings = rewrite(root / doc, root / RESULTS, cache)
        for f in findings:
            print(f, file=sys.stderr)
        missing = [f for f in findings if f.want is None]
        bad += len(missing) if not ns.check else len(findings)
        if not ns.check and findings:
            (root / doc).write_text(text)
            print(
                f'docs: {doc}: {len(findings) - len(missing)} figures rewritten', file=sys.stderr
            )
    if ns.check and not bad:
        print(f'docs: every marked figure in {", ".join(ns.docs)} equals its result file')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
