"""The run's bag opens outside rosbags: Foxglove's `mcap` reader, and the metadata `ros2 bag info`
reads. (Decoding with rosbags is tests/telemetry/test_bag.py.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml
from mcap.reader import make_reader
from palletizer.telemetry import TOPICS, BagWriter

from tests.telemetry.test_bag import _kill_after, _write_episode


def mcap_summary(bag_dir: Path) -> dict:
    """Per topic: schema name and encoding, message encoding, and the messages read back."""
    (path,) = bag_dir.glob('*.mcap')
    with path.open('rb') as f:
        reader = make_reader(f)
        summary = reader.get_summary()
        assert summary is not None
        out = {
            c.topic: {
                'schema': summary.schemas[c.schema_id].name,
                'schema_encoding': summary.schemas[c.schema_id].encoding,
                'schema_text': summary.schemas[c.schema_id].data.decode(),
                'encoding': c.message_encoding,
                'count': 0,
                'stats': summary.statistics.channel_message_counts.get(cid, 0),
            }
            for cid, c in summary.channels.items()
        }
        for _, channel, _ in reader.iter_messages():
            out[channel.topic]['count'] += 1
    return out


def test_the_mcap_reader_finds_ros2msg_schemas_and_every_message(tmp_path):
    path = tmp_path / 'bag'
    with BagWriter(path) as bag:
        expected = _write_episode(bag, np.random.default_rng(0))
    got = mcap_summary(path)
    assert {t: g['count'] for t, g in got.items()} == expected
    assert {t: g['stats'] for t, g in got.items()} == expected
    assert {t: g['schema'] for t, g in got.items()} == dict(TOPICS)
    for g in got.values():
        assert (g['schema_encoding'], g['encoding']) == ('ros2msg', 'cdr')
    # Full definitions, dependencies included, as Foxglove needs them to decode.
    assert 'string[] name' in got['/joint_states']['schema_text']
    assert 'MSG: std_msgs/Header' in got['/joint_states']['schema_text']
    assert 'MSG: geometry_msgs/Transform' in got['/tf']['schema_text']


def test_metadata_has_what_ros2_bag_info_reads(tmp_path):
    path = tmp_path / 'bag'
    with BagWriter(path) as bag:
        expected = _write_episode(bag, np.random.default_rng(0))
    info = yaml.safe_load((path / 'metadata.yaml').read_text())['rosbag2_bagfile_information']
    assert info['version'] == 8 and info['storage_identifier'] == 'mcap'
    assert info['message_count'] == sum(expected.values())
    assert info['relative_file_paths'] == [next(path.glob('*.mcap')).name]
    assert info['duration']['nanoseconds'] >= 0
    assert 'nanoseconds_since_epoch' in info['starting_time']
    assert {'compression_format', 'compression_mode', 'files'} <= set(info)
    topics = {
        t['topic_metadata']['name']: (t['topic_metadata'], t['message_count'])
        for t in info['topics_with_message_count']
    }
    assert {n: c for n, (_, c) in topics.items()} == expected
    for name, (meta, _) in topics.items():
        assert meta['type'] == dict(TOPICS)[name]
        assert meta['serialization_format'] == 'cdr'
        assert 'offered_qos_profiles' in meta


def test_a_bag_killed_after_an_episode_end_opens_in_the_mcap_reader(tmp_path):
    path = tmp_path / 'bag'
    _kill_after(path, 2)
    got = mcap_summary(path)
    want = {**dict.fromkeys(TOPICS, 0), '/tf': 3, '/palletizer/episode_events': 1}
    assert {t: g['count'] for t, g in got.items()} == want
    assert all(g['schema_encoding'] == 'ros2msg' for g in got.values())
