"""Recorder: begin_episode's outcomes, one run id per node, and a run folder that may fail."""

from __future__ import annotations

import json

import pytest
from palletizer.telemetry import (
    TOPICS,
    Begin,
    Recorder,
    RecorderConfig,
    TelemetryError,
    parse_run_info,
)
from rosbags.highlevel import AnyReader

from tests.telemetry._fixtures import result

STAMP = '20260509-073525'
INFO = json.dumps({'level': 12, 'task': 'conveyor', 'oracle': True, 'git_sha': 'abc1234'})


def _rec(tmp_path, bag: bool = False, min_free_bytes: int = 1) -> Recorder:
    cfg = RecorderConfig(
        tmp_path / 'runs', STAMP, 'pallet', min_free_bytes, TOPICS if bag else None
    )
    return Recorder(cfg)


def _lines(path):
    return [json.loads(ln) for ln in path.read_text().splitlines()]


def test_begin_binds_the_run_and_fills_an_aborted_line(tmp_path):
    rec = _rec(tmp_path)
    info = json.loads(INFO) | {'n_objects': 14}
    assert rec.begin(3, 'A', json.dumps(info)) == (Begin.OK, '')
    assert rec.run_dir == str(tmp_path / 'runs' / f'{STAMP}-pallet')
    assert rec.close() == 3
    (line,) = _lines(rec.run.path / 'episodes.jsonl')
    assert (line['level'], line['task'], line['n_objects'], line['oracle']) == (
        12,
        'conveyor',
        14,
        True,
    )


def test_a_second_run_id_is_refused_and_its_messages_are_dropped(tmp_path):
    rec = _rec(tmp_path)
    assert rec.begin(1, 'A', INFO)[0] is Begin.OK
    code, why = rec.begin(2, 'B', INFO)
    assert code is Begin.WRONG_RUN
    assert why.startswith('telemetry serves run A, not B: two runs share this ROS domain')
    assert rec.accepts('A') and rec.accepts('')  # '' = a publisher that gives no run id
    assert not rec.accepts('B') and not rec.accepts('B')
    assert rec.foreign == {'B': 2}
    assert rec.run.open_seed == 1


def test_begin_refuses_a_seed_twice_and_bad_requests(tmp_path):
    rec = _rec(tmp_path)
    assert rec.begin(1, 'A', INFO)[0] is Begin.OK
    assert rec.begin(1, 'A', INFO) == (Begin.ALREADY_OPEN, 'seed 1 was already begun in run A')
    rec.run.end(result(1, n_objects=1, n_placed=1))
    assert rec.begin(1, 'A', INFO)[0] is Begin.ALREADY_OPEN
    assert rec.begin(2, '', INFO)[0] is Begin.INVALID_REQUEST
    code, why = rec.begin(2, 'A', json.dumps({'level': 12, 'task': 't', 'oracel': True}))
    assert code is Begin.INVALID_REQUEST and "unknown key 'oracel'" in why
    assert "did you mean 'oracle'" in why


def test_begin_aborts_an_episode_whose_end_never_came(tmp_path):
    rec = _rec(tmp_path)
    rec.begin(1, 'A', INFO)
    code, why = rec.begin(2, 'A', INFO)
    assert code is Begin.OK and 'episode 1 is open: aborted it' in why
    rec.close()
    assert [ln['seed'] for ln in _lines(rec.run.path / 'episodes.jsonl')] == [1, 2]


def test_a_run_folder_that_cannot_be_made_is_cannot_write_and_retried(tmp_path):
    (tmp_path / 'runs').write_text('a file where the runs folder should be')
    rec = _rec(tmp_path)
    assert 'cannot create it' in rec.open() and rec.run is None
    code, why = rec.begin(1, 'A', INFO)
    assert code is Begin.CANNOT_WRITE and why == rec.error and rec.run_dir == ''
    assert rec.run_id == ''  # not bound: nothing was opened
    (tmp_path / 'runs').unlink()
    assert rec.begin(1, 'A', INFO)[0] is Begin.OK


def test_too_little_free_space_is_cannot_write(tmp_path):
    rec = _rec(tmp_path, min_free_bytes=10**15)
    code, why = rec.begin(1, 'A', INFO)
    assert code is Begin.CANNOT_WRITE and 'min_free_mb' in why


def test_the_bag_is_readable_after_each_episode_close(tmp_path):
    rec = _rec(tmp_path, bag=True)
    rec.begin(1, 'A', INFO)
    rec.bag.write('/tf', 5, rec.bag.encode('/tf', {}))
    rec.run.end(result(1, n_objects=1, n_placed=1))
    rec.checkpoint()
    with AnyReader([rec.run.path / 'bag']) as reader:
        assert [(c.topic, t) for c, t, _ in reader.messages()] == [('/tf', 5)]
    rec.close()


@pytest.mark.parametrize(
    ('info', 'match'),
    [
        ('[]', r"info_json = '\[\]'; expected a JSON object"),
        ('{', r'info_json: .*; expected a JSON object'),
        ('{"level": 1}', r'info_json: missing task, oracle, git_sha'),
        (
            '{"level": -1, "task": "t", "oracle": false, "git_sha": ""}',
            r'level = -1; expected an integer >= 0',
        ),
        (
            '{"level": 1, "task": "t", "oracle": "yes", "git_sha": ""}',
            r"oracle = 'yes'; expected true or false",
        ),
    ],
)
def test_run_info_is_checked(info, match):
    with pytest.raises(TelemetryError, match=match):
        parse_run_info(info)
