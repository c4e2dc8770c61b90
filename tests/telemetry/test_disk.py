"""Telemetry on a disk that refuses: missing, read-only and full folders, on real tmpfs mounts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from palletizer.telemetry import RunWriter, TelemetryWriteError, check_writable

STAMP = '20260509-073525'

_can_mount = os.geteuid() == 0 and shutil.which('unshare') is not None
needs_mount = pytest.mark.skipif(not _can_mount, reason='tmpfs mounts need root and unshare')

# Fills the tmpfs at argv[1] while a run has an open episode, then ends and aborts episodes.
_FULL_DISK = """
import json, os, sys
from pathlib import Path
from palletizer.telemetry import RunWriter, TelemetryWriteError, check_writable
from tests.telemetry._fixtures import result

mnt = Path(sys.argv[1])
out = {}
w = RunWriter(mnt / 'runs', '20260509-073525')
w.begin(1)
w.event(0, 0.5, 'perceive', {'seen': 1, 'confidence': 1.0})
with open(mnt / 'filler', 'wb', buffering=0) as f:  # take every free block
    try:
        while True:
            f.write(b'x' * 4096)
    except OSError:
        pass
episodes = w.path / 'episodes.jsonl'
try:
    w.end(result(1, n_objects=1, n_placed=1))
except TelemetryWriteError as exc:
    out['end'] = str(exc)
out['open_after_end'] = w.open_seed
out['episodes_bytes'] = episodes.stat().st_size
try:
    check_writable(mnt / 'runs', 1)
except TelemetryWriteError as exc:
    out['preflight'] = str(exc)
w.begin(2)
try:
    w.abort()
except TelemetryWriteError as exc:
    out['abort'] = str(exc)
os.unlink(mnt / 'filler')  # room again: the same writer goes on
w.begin(3)
w.end(result(3, n_objects=1, n_placed=1))
w.close()
out['lines'] = [json.loads(ln)['seed'] for ln in episodes.read_text().splitlines()]
print('RESULT ' + json.dumps(out))
"""


def _in_tmpfs(tmp_path: Path, options: str, code: str) -> dict:
    """Run `code` with argv[1] = a fresh tmpfs (mount namespace of its own); its RESULT line."""
    mnt = tmp_path / 'mnt'
    mnt.mkdir()
    script = 'mount -t tmpfs -o "$1" tmpfs "$2" && shift 2 && exec "$@"'
    proc = subprocess.run(
        ['unshare', '-m', '--propagation', 'private', 'sh', '-c', script, 'sh', options,
         str(mnt), sys.executable, '-c', code, str(mnt)],
        capture_output=True, text=True, timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('RESULT ')]
    assert proc.returncode == 0 and lines, proc.stdout[-2000:] + proc.stderr[-3000:]
    return json.loads(lines[0].split(' ', 1)[1])


def test_preflight_creates_a_missing_runs_folder(tmp_path):
    assert check_writable(tmp_path / 'a' / 'runs', 1) == tmp_path / 'a' / 'runs'
    assert (tmp_path / 'a' / 'runs').is_dir() and not any((tmp_path / 'a' / 'runs').iterdir())


def test_preflight_names_a_runs_folder_that_cannot_be_created(tmp_path):
    (tmp_path / 'file').write_text('x')
    with pytest.raises(
        TelemetryWriteError,
        match=r'runs folder .*/file/runs: cannot create it \(Not a directory\)',
    ):
        check_writable(tmp_path / 'file' / 'runs', 1)
    with pytest.raises(
        TelemetryWriteError, match=r'cannot create it \(a file of that name exists\)'
    ):
        RunWriter(tmp_path / 'file', STAMP)


def test_preflight_names_too_little_free_space(tmp_path):
    with pytest.raises(
        TelemetryWriteError,
        match=r'runs folder .*: [\d.]+ MB free; telemetry needs at least 1000000000.0 MB '
        r'\(configs/telemetry.yaml min_free_mb\)',
    ):
        check_writable(tmp_path, 10**15)


@needs_mount
def test_preflight_refuses_a_read_only_runs_folder(tmp_path):
    code = (
        'import sys\n'
        'from palletizer.telemetry import RunWriter, TelemetryWriteError, check_writable\n'
        'out = {}\n'
        'for name, call in (("check", lambda: check_writable(sys.argv[1], 1)),\n'
        '                   ("run", lambda: RunWriter(sys.argv[1], "20260509-073525"))):\n'
        '    try:\n'
        '        call()\n'
        '    except TelemetryWriteError as exc:\n'
        '        out[name] = str(exc)\n'
        'import json; print("RESULT " + json.dumps(out))\n'
    )
    got = _in_tmpfs(tmp_path, 'ro,size=64k', code)
    assert got['check'].endswith('not writable (Read-only file system)'), got
    assert 'cannot create it (Read-only file system)' in got['run'], got


@needs_mount
def test_a_full_disk_fails_end_and_abort_cleanly_and_the_writer_goes_on(tmp_path):
    got = _in_tmpfs(tmp_path, 'size=256k', _FULL_DISK)
    assert got['end'].endswith('episodes.jsonl: No space left on device'), got
    assert 'No space left on device' in got['abort'], got
    assert 'not writable (No space left on device)' in got['preflight'], got
    # the episodes were closed anyway, no half line stayed, and seed 3 was written after
    assert got['open_after_end'] is None and got['episodes_bytes'] == 0
    assert got['lines'] == [3]
