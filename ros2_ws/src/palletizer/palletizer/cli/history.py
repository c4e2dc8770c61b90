"""`benchmarks/history.jsonl`: one line per benchmark run, appended, never rewritten.

`benchmarks/results/` holds one current file per benchmark; when a run replaces it, the run's
line here keeps its key figures with the commit they hold for. A line: `id` (a short stable
name, by default BENCHMARK@COMMIT, e.g. `hardware@269ef14`), `benchmark`, `commit` and `commit_from` (`file`: the result
file's own field; `folder name`: the name of the folder the file stood in; null: neither said),
`command` and `date` where recorded (else null), `source` (the file it was read from),
`figures_from` (`summary`, or `episodes.jsonl` for counts taken from episode lines) and
`figures`: the summary without its per-episode data.

    python -m palletizer.cli.history append benchmarks/results/hardware.json

`scripts/bench` appends the line of every result file it writes (cli/bench.py).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from palletizer.core.errors import PalletizerError

__all__ = [
    'HISTORY',
    'HistoryError',
    'append',
    'episodes_line',
    'history_line',
    'main',
    'read_history',
]

HISTORY = Path('benchmarks/history.jsonl')
# Lists of per-episode (or per-mismatch) records: not key figures, left out of a line.
PER_EPISODE = frozenset({'episodes', 'per_episode', 'mismatch_details'})
_SHA = re.compile(r'^[0-9a-f]{7,40}$')


class HistoryError(PalletizerError, ValueError):
    """A result file or history line that cannot be recorded; the message names the file."""


def _load(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise HistoryError(f'{path}: cannot read it ({exc.strerror})') from exc
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HistoryError(
            f'{path}: not JSON (line {exc.lineno} column {exc.colno}: {exc.msg})'
        ) from exc
    if not isinstance(doc, dict):
        raise HistoryError(f'{path}: a result file is one JSON object, not a {type(doc).__name__}')
    return doc


def _benchmark(doc: dict[str, Any], path: Path) -> str:
    """The benchmark that wrote `doc`: its own `benchmark` field, else told by its shape."""
    name = doc.get('benchmark')
    if isinstance(name, str) and name:
        return name
    if name is not None:
        raise HistoryError(f'{path}: `benchmark` is {name!r}, not a name')
    if 'reference' in doc and 'hard_levels' in doc:
        return 'reference'
    if 'results' in doc and 'n_seeds' in doc:
        return 'generalise'
    raise HistoryError(
        f'{path}: no `benchmark` field, and its keys ({", ".join(sorted(doc)) or "none"}) are '
        'neither a reference nor a generalise summary'
    )


def _figures(value: Any) -> Any:
    """`value` without its per-episode lists."""
    if isinstance(value, dict):
        return {
            k: _figures(v)
            for k, v in value.items()
            if not (k in PER_EPISODE and isinstance(v, list))
        }
    if isinstance(value, list):
        return [_figures(v) for v in value]
    return value


def _commit(doc: dict[str, Any], path: Path) -> str | None:
    commit = doc.get('commit', doc.get('git_sha'))
    if commit is None:
        return None
    if not isinstance(commit, str) or not _SHA.match(commit):
        raise HistoryError(f'{path}: `commit` is {commit!r}, not a git sha (7-40 hex digits)')
    return commit


def history_line(
    path: str | Path,
    *,
    line_id: str | None = None,
    commit: str | None = None,
    commit_from: str | None = None,
    command: str | None = None,
    date: str | None = None,
    benchmark: str | None = None,
) -> dict[str, Any]:
    """The history line of one result file. The file's own `commit`, `command` and `date` win
    over the arguments, which stand in where the file records none."""
    path = Path(path)
    doc = _load(path)
    name = benchmark or _benchmark(doc, path)
    own = _commit(doc, path)
    if own is None and commit is not None and not _SHA.match(commit):
        raise HistoryError(f'{path}: the commit given, {commit!r}, is not a git sha')
    sha = own if own is not None else commit
    own_command = doc.get('command')
    if own_command is not None and not isinstance(own_command, str):
        raise HistoryError(f'{path}: `command` is {own_command!r}, not a string')
    figures = _figures(doc)
    for key in ('benchmark', 'commit', 'git_sha', 'command', 'date'):
        figures.pop(key, None)
    return {
        'id': line_id or f'{name}@{sha or "unrecorded"}',
        'benchmark': name,
        'commit': sha,
        'commit_from': 'file' if own is not None else (commit_from if sha else None),
        'command': own_command if own_command is not None else command,
        'date': doc.get('date', date),
        'source': str(path),
        'figures_from': 'summary',
        'figures': figures,
    }


def episodes_line(
    path: str | Path, *, line_id: str, benchmark: str, folder_commit: str | None = None
) -> dict[str, Any]:
    """The history line of an episode log with no summary beside it: the counts per planner
    and level, taken from its lines. The commit is the lines' own where they agree on one."""
    path = Path(path)
    rows: list[dict[str, Any]] = []
    for n, text in enumerate(path.read_text().splitlines(), 1):
        if not text.strip():
            continue
        try:
            row = json.loads(text)
        except json.JSONDecodeError as exc:
            raise HistoryError(f'{path}:{n}: not JSON ({exc.msg})') from exc
        if not isinstance(row, dict) or 'success' not in row:
            raise HistoryError(f'{path}:{n}: not an episode line (no `success`)')
        rows.append(row)
    commits = {r.get('commit') for r in rows}
    own = commits.pop() if len(commits) == 1 else None
    figures: dict[str, Any] = {
        'episodes': len(rows),
        'episodes_ok': sum(r['success'] is True for r in rows),
        'cartons': sum(int(r.get('n_objects', 0)) for r in rows),
        'cartons_placed': sum(int(r.get('n_placed', 0)) for r in rows),
    }
    groups: dict[str, dict[str, dict[str, int]]] = {}
    for r in rows:
        level = groups.setdefault(str(r.get('planner')), {}).setdefault(
            str(r.get('level')), {'episodes': 0, 'episodes_ok': 0}
        )
        level['episodes'] += 1
        level['episodes_ok'] += r['success'] is True
    figures['planners'] = groups
    failures = Counter(str(r['failure']) for r in rows if r.get('failure'))
    figures['failures'] = dict(sorted(failures.items()))
    figures['seeds'] = sorted({r['seed'] for r in rows if 'seed' in r})
    sha = own if isinstance(own, str) else folder_commit
    return {
        'id': line_id,
        'benchmark': benchmark,
        'commit': sha,
        'commit_from': 'file' if isinstance(own, str) else ('folder name' if sha else None),
        'command': None,
        'date': None,
        'source': str(path),
        'figures_from': 'episodes.jsonl',
        'figures': figures,
    }


def read_history(history: str | Path = HISTORY) -> list[dict[str, Any]]:
    """Every line of the history, each checked to be a JSON object with an `id`."""
    path = Path(history)
    if not path.exists():
        return []
    lines = []
    for n, text in enumerate(path.read_text().splitlines(), 1):
        try:
            line = json.loads(text)
        except json.JSONDecodeError as exc:
            raise HistoryError(f'{path}:{n}: not JSON ({exc.msg})') from exc
        if not isinstance(line, dict) or not isinstance(line.get('id'), str):
            raise HistoryError(f'{path}:{n}: a history line is a JSON object with an `id`')
        lines.append(line)
    return lines


def append(line: dict[str, Any], history: str | Path = HISTORY) -> dict[str, Any]:
    """Append `line` to the history file, leaving every earlier byte as it was. An `id` that is
    already there gets `-2`, `-3`, ... (two runs at one commit are two lines)."""
    path = Path(history)
    taken = {h['id'] for h in read_history(path)}
    base, k = line['id'], 2
    while line['id'] in taken:
        line = {**line, 'id': f'{base}-{k}'}
        k += 1
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and path.stat().st_size and not path.read_bytes().endswith(b'\n'):
        raise HistoryError(f'{path}: its last line is unfinished; it is not appended to')
    with path.open('a') as f:
        f.write(json.dumps(line, sort_keys=True) + '\n')
    return line


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog='python -m palletizer.cli.history',
        description='Append the line of a result file to benchmarks/history.jsonl.',
    )
    sub = p.add_subparsers(dest='action', required=True)
    a = sub.add_parser('append', help='append the line of one result file')
    a.add_argument('result', help='a result file, e.g. benchmarks/results/hardware.json')
    a.add_argument('--history', default=str(HISTORY), help=f'the history file (default {HISTORY})')
    a.add_argument('--id', dest='line_id', help='the line id (default BENCHMARK@COMMIT)')
    a.add_argument('--command', help='the command that wrote the file, if it records none')
    a.add_argument('--commit', help='the commit, if the file records none')
    ns = p.parse_args(argv)
    try:
        line = history_line(
            ns.result,
            line_id=ns.line_id,
            commit=ns.commit,
            commit_from='given' if ns.commit else None,
            command=ns.command,
        )
        line = append(line, ns.history)
    except HistoryError as exc:
        print(f'history: {exc}', file=sys.stderr)
        return 1
    print(f'history: appended {line["id"]} to {ns.history}', file=sys.stderr)
    return 0


if __name__ == '__main__':
    sys.exit(main())
