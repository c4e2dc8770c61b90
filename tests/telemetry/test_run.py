"""RunWriter: run layout, row columns, seq enforcement, snapshots, end counts and abort."""

from __future__ import annotations

import json
import os
import threading
from datetime import datetime

import numpy as np
import pytest
from palletizer.core.errors import PalletizerError
from palletizer.telemetry import (
    FILES,
    RunInfo,
    RunWriter,
    TelemetryError,
    check_event_count,
    run_stamp,
)

from tests.telemetry._fixtures import package_events, pallet_state, placement, png, result

STAMP = '20260509-073525'


def _lines(path):
    return [json.loads(ln) for ln in path.read_text().splitlines()]


def _episode(w: RunWriter, seed: int, n: int = 2) -> int:
    """Write n cartons of rows; return the number of events written."""
    seq = 0
    for i in range(n):
        for kind, pid, payload in package_events(f'p{i}', score=0.5 + 0.1 * i):
            w.event(seq, 0.5 * seq, kind, payload, pid, seed=seed)
            seq += 1
        w.placement(placement(i))
        w.pallet_state(pallet_state(i))
    return seq


def test_run_stamp_formats_the_given_time():
    assert run_stamp(datetime(2026, 5, 9, 7, 35, 25)) == STAMP


def test_run_directory_is_stamp_and_tag_and_never_reused(tmp_path):
    with RunWriter(tmp_path, STAMP, 'pallet') as w:
        assert w.path == tmp_path / f'{STAMP}-pallet'
        assert sorted(p.name for p in w.path.iterdir()) == sorted(FILES.values())
        w.begin(1)
    # a second run of the same second gets its own folder; the first one is left untouched
    with RunWriter(tmp_path, STAMP, 'pallet') as w2, RunWriter(tmp_path, STAMP, 'pallet') as w3:
        assert (w2.path.name, w3.path.name) == (f'{STAMP}-pallet-2', f'{STAMP}-pallet-3')
    assert len(_lines(w.path / 'episodes.jsonl')) == 1
    with pytest.raises(
        TelemetryError, match=r"run stamp = '2026-05-09'; expected YYYYmmdd-HHMMSS"
    ):
        RunWriter(tmp_path, '2026-05-09', 'x')
    with pytest.raises(TelemetryError, match=r"run tag = '../up'"):
        RunWriter(tmp_path, STAMP, '../up')


def test_runs_started_at_once_in_one_second_never_share_a_folder(tmp_path):
    paths: list = []
    errors: list = []
    gate = threading.Barrier(8)

    def start() -> None:
        gate.wait()
        try:
            with RunWriter(tmp_path / 'runs', STAMP, 'pallet') as w:
                paths.append(w.path.name)
        except Exception as exc:  # noqa: BLE001 - collected for the assert
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(paths) == sorted(
        [f'{STAMP}-pallet'] + [f'{STAMP}-pallet-{n}' for n in range(2, 9)]
    )


def test_episode_rows_have_si_columns_and_display_payloads(tmp_path):
    with RunWriter(tmp_path, STAMP) as w:
        w.begin(7, n_objects=2)
        n = _episode(w, 7)
        assert w.end(result(7)) == n == 10
    events = _lines(w.path / 'events.jsonl')
    assert [e['seq'] for e in events] == list(range(10))
    place = next(e for e in events if e['kind'] == 'place')
    assert place['payload'] == {'error_xy_mm': 4.2, 'error_yaw_deg': 0.7, 'overhang_mm': 0.0}
    assert place['seed'] == 7 and place['package_id'] == 'p0' and place['ts'] == 1.5
    assert events[0]['package_id'] is None  # perceive
    rows = _lines(w.path / 'placements.jsonl')
    p0 = placement(0)
    assert rows[0]['planned_pose'] == dict(zip('x y z yaw'.split(), p0.planned_pose, strict=True))
    np.testing.assert_allclose(rows[0]['dims_m'], [0.4, 0.3, 0.2])
    states = _lines(w.path / 'pallet_states.jsonl')
    assert set(states[1]) == {
        'seed',
        'after_seq',
        'mass_kg',
        'cog_x',
        'cog_y',
        'cog_z',
        'stability_margin_m',
        'fill_ratio',
        'settle_drift_m',
    }
    assert states[1]['cog_y'] == -0.02 and states[1]['after_seq'] == 1


def test_episode_line_is_the_result_with_oracle_sha_and_planner_breakdown(tmp_path):
    with RunWriter(tmp_path, STAMP) as w:
        w.begin(3)
        _episode(w, 3)
        w.end(result(3))
    (line,) = _lines(w.path / 'episodes.jsonl')
    expected = result(3).to_dict()
    assert {k: line[k] for k in expected if k != 'metrics'} == {
        k: v for k, v in expected.items() if k != 'metrics'
    }
    assert line['oracle'] is False and line['git_sha'] == 'abc1234'
    # two plans scored 0.5 and 0.6: per-term means and the mean score are derived from them
    assert line['metrics']['planner_score_breakdown'] == {'a': 0.55, 'b': 1.0}
    assert line['metrics']['mean_planner_score'] == 0.55
    assert line['metrics']['score'] == 1.0


def test_a_result_breakdown_is_kept_as_given(tmp_path):
    with RunWriter(tmp_path, STAMP) as w:
        w.begin(3)
        _episode(w, 3)
        w.end(result(3, planner_score_breakdown={'z': 0.1}))
    assert _lines(w.path / 'episodes.jsonl')[0]['metrics']['planner_score_breakdown'] == {'z': 0.1}


@pytest.mark.parametrize(('first', 'second', 'word'), [(4, 4, 'duplicate'), (4, 2, 'decreasing')])
def test_event_seq_must_strictly_increase(tmp_path, first, second, word):
    with RunWriter(tmp_path, STAMP) as w:
        w.begin(1)
        w.event(first, 0.0, 'perceive', {'seen': 1, 'confidence': 1.0})
        with pytest.raises(
            TelemetryError,
            match=rf'events: seq {second} after {first} in episode seed 1 is {word}',
        ):
            w.event(second, 0.1, 'perceive', {'seen': 1, 'confidence': 1.0})
    assert len(_lines(w.path / 'events.jsonl')) == 1


def test_placement_and_pallet_state_seq_must_strictly_increase(tmp_path):
    with RunWriter(tmp_path, STAMP) as w:
        w.begin(1)
        w.placement(placement(2))
        with pytest.raises(TelemetryError, match=r'placements: seq 2 after 2 .* duplicate'):
            w.placement(placement(2))
        w.pallet_state(pallet_state(2))
        with pytest.raises(TelemetryError, match=r'pallet_states: seq 1 after 2 .* decreasing'):
            w.pallet_state(pallet_state(1))


def test_seq_restarts_per_episode(tmp_path):
    with RunWriter(tmp_path, STAMP) as w:
        for seed in (1, 2):
            w.begin(seed)
            assert _episode(w, seed, n=1) == 5
            w.end(result(seed, n_objects=1, n_placed=1))
    assert [e['seq'] for e in _lines(w.path / 'events.jsonl')] == [0, 1, 2, 3, 4] * 2


def test_rows_need_an_open_episode_of_the_same_seed(tmp_path):
    with RunWriter(tmp_path, STAMP) as w:
        with pytest.raises(TelemetryError, match=r'event: no episode is open; call begin'):
            w.event(0, 0.0, 'perceive', {'seen': 0, 'confidence': 0.0})
        w.begin(5)
        with pytest.raises(
            TelemetryError, match=r'event: seed 6 is not the open episode \(seed 5\)'
        ):
            w.event(0, 0.0, 'perceive', {'seen': 0, 'confidence': 0.0}, seed=6)
        with pytest.raises(TelemetryError, match=r'begin\(seed=6\): episode seed 5 is still open'):
            w.begin(6)
        with pytest.raises(TelemetryError, match=r'end: result seed 6 is not the open episode 5'):
            w.end(result(6))
        w.abort()
        with pytest.raises(TelemetryError, match=r'seed 5 already has an episode'):
            w.begin(5)


def test_unknown_kind_and_bad_rows_are_rejected_before_writing(tmp_path):
    with RunWriter(tmp_path, STAMP) as w:
        w.begin(1)
        with pytest.raises(TelemetryError, match=r"event kind = 'grasp'; expected one of"):
            w.event(0, 0.0, 'grasp', {})
        with pytest.raises(TelemetryError, match=r'ts = -1.0; expected finite seconds >= 0'):
            w.event(0, -1.0, 'perceive', {'seen': 1, 'confidence': 1.0})
        with pytest.raises(TelemetryError, match=r"Placement: .*unknown key 'sequence'"):
            w.placement({'sequence': 1})
        # the failed calls consumed no seq
        w.event(0, 0.0, 'perceive', {'seen': 1, 'confidence': 1.0})
    assert len(_lines(w.path / 'events.jsonl')) == 1


def test_mapping_rows_and_results_are_accepted(tmp_path):
    with RunWriter(tmp_path, STAMP) as w:
        w.begin(9)
        w.placement(placement(0).to_dict())
        w.pallet_state(pallet_state(0).to_dict())
        assert w.end(result(9, n_objects=1, n_placed=1).to_dict()) == 0
    assert _lines(w.path / 'episodes.jsonl')[0]['seed'] == 9


def test_end_checks_n_objects_against_begin(tmp_path):
    with RunWriter(tmp_path, STAMP) as w:
        w.begin(1, n_objects=3)
        with pytest.raises(TelemetryError, match=r'n_objects 2 differs from begin\(n_objects=3\)'):
            w.end(result(1, n_objects=2))


def test_snapshot_paths_rows_and_vocabulary(tmp_path):
    with RunWriter(tmp_path, STAMP) as w:
        w.begin(12)
        top = w.snapshot(3, 'top', png(8, 5))
        side = w.snapshot(3, 'side', png(4, 2, seed=1))
        assert top == w.path / '12' / '003-top.png' and side.name == '003-side.png'
        assert top.read_bytes() == png(8, 5)
        with pytest.raises(TelemetryError, match=r"view = 'front'; expected one of top, side"):
            w.snapshot(4, 'front', png(2, 2))
        with pytest.raises(TelemetryError, match=r"after_seq 3 view 'top' already written"):
            w.snapshot(3, 'top', png(2, 2))
        with pytest.raises(TelemetryError, match=r'expected PNG bytes'):
            w.snapshot(5, 'iso', b'GIF89a....')
        w.abort()
    rows = _lines(w.path / 'snapshots.jsonl')
    assert [(r['path'], r['width'], r['height']) for r in rows] == [
        ('12/003-top.png', 8, 5),
        ('12/003-side.png', 4, 2),
    ]
    assert not (w.path / '12' / '004-front.png').exists()


def test_abort_closes_with_no_invented_failure(tmp_path):
    w = RunWriter(tmp_path, STAMP, info=RunInfo(level=11, task='table', git_sha='f00'))
    w.begin(4, n_objects=3)
    w.event(0, 0.25, 'perceive', {'seen': 1, 'confidence': 1.0})
    w.event(1, 3.456, 'pick', {'mass_kg': 1.0, 'type': 'A'}, 'p0')
    w.placement(placement(0, placed=True))
    w.placement(placement(1, placed=False))
    assert w.abort() == 2
    assert w.open_seed is None and w.abort() is None
    w.close()
    (line,) = _lines(w.path / 'episodes.jsonl')
    assert line == {
        'seed': 4,
        'level': 11,
        'n_objects': 3,
        'n_placed': 1,
        'n_misrouted': 0,
        'success': False,
        'duration_s': 3.456,
        'failure': None,
        'oracle': False,
        'git_sha': 'f00',
        'task': 'table',
        'metrics': {'aborted': True},
    }


def test_an_aborted_episode_line_has_the_run_info_given_at_begin(tmp_path):
    # Nothing ended before: RunInfo comes only from begin (it used to be filled only at end,
    # so the line said level, task, n_objects null and oracle false on an oracle run).
    w = RunWriter(tmp_path, STAMP)
    info = RunInfo(level=12, task='conveyor', oracle=True, git_sha='abc1234')
    w.begin(3, n_objects=14, info=info)
    w.event(0, 0.5, 'perceive', {'seen': 1, 'confidence': 1.0})
    w.close()
    (line,) = _lines(w.path / 'episodes.jsonl')
    assert (line['level'], line['task'], line['n_objects'], line['oracle'], line['git_sha']) == (
        12,
        'conveyor',
        14,
        True,
        'abc1234',
    )
    assert line['metrics'] == {
        'aborted': True,
        'abort_reason': 'the run closed with the episode open',
    }


def _fsynced(monkeypatch) -> list[str]:
    """Paths passed to os.fsync from now on (the real fsync still runs)."""
    synced: list[str] = []
    real = os.fsync

    def spy(fd: int) -> None:
        synced.append(os.readlink(f'/proc/self/fd/{fd}'))
        real(fd)

    monkeypatch.setattr(os, 'fsync', spy)
    return synced


@pytest.mark.parametrize('close', ['end', 'abort'])
def test_episode_files_snapshots_and_folders_are_fsynced_when_an_episode_closes(
    tmp_path, monkeypatch, close
):
    w = RunWriter(tmp_path, STAMP)
    w.begin(4)
    n = _episode(w, 4, n=1)
    synced = _fsynced(monkeypatch)
    w.snapshot(0, 'top', png(4, 4))
    assert n == 5
    if close == 'end':
        w.end(result(4, n_objects=1, n_placed=1))
    else:
        w.abort()
    w.close()
    names = {os.path.relpath(p, w.path) for p in synced}
    assert {*FILES.values(), '4/000-top.png', '4', '.'} <= names


def test_an_exception_in_the_with_block_still_closes_the_episode(tmp_path):
    with pytest.raises(RuntimeError, match='crash'):
        with RunWriter(tmp_path, STAMP) as w:
            w.begin(8)
            raise RuntimeError('crash')
    (line,) = _lines(w.path / 'episodes.jsonl')
    assert line['seed'] == 8 and line['metrics']['aborted'] is True and line['n_objects'] is None
    with pytest.raises(TelemetryError, match=r'closed'):
        w.begin(9)


def test_abort_after_an_ended_episode_uses_what_the_run_learned(tmp_path):
    with RunWriter(tmp_path, STAMP) as w:
        w.begin(1)
        w.end(result(1, n_objects=1, n_placed=1))
        w.begin(2)
    lines = _lines(w.path / 'episodes.jsonl')
    assert (lines[1]['level'], lines[1]['task'], lines[1]['git_sha']) == (11, 'table', 'abc1234')


def test_event_count_confirmation():
    check_event_count(3, 12, 12)
    with pytest.raises(
        PalletizerError, match=r'episode seed 3: 11 events written, the director published 12'
    ):
        check_event_count(3, 11, 12)


def test_placement_rows_keep_the_reference_support_next_to_the_as_held_one(tmp_path):
    import dataclasses

    with RunWriter(tmp_path, '20260101-000000') as run:
        run.begin(1)
        held = dataclasses.replace(placement(0), support_ratio=1.0, support_ratio_layer=0.0)
        row = run.placement(held)
    assert row['support_ratio'] == 1.0 and row['support_ratio_layer'] == 0.0
    line = json.loads((run.path / 'placements.jsonl').read_text().splitlines()[0])
    assert line['support_ratio'] == 1.0 and line['support_ratio_layer'] == 0.0
