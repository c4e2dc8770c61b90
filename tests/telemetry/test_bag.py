"""BagWriter round trip: a rosbag2 MCAP v8 bag with zstd chunks that rosbags AnyReader decodes."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from palletizer.telemetry import TOPICS, BagWriter, TelemetryError, load_typestore
from rosbags.highlevel import AnyReader

# Writes an episode, checkpoints (as the node does at an episode end), writes part of a second
# episode, says so, and waits to be killed.
_KILLED_WRITER = """
import sys, time
from palletizer.telemetry import BagWriter
bag = BagWriter(sys.argv[1])
print('open', flush=True)
sys.stdin.readline()
for k in range(3):
    bag.write('/tf', 1000 * k, bag.encode('/tf', {}))
ev = {'run_id': 'r', 'seed': 1, 'seq': 0, 'kind': 'plan', 'payload_json': '{}'}
bag.write('/palletizer/episode_events', 5000, bag.encode('/palletizer/episode_events', ev))
bag.checkpoint()
for k in range(4):
    bag.write('/tf', 9000 + k, bag.encode('/tf', {}))
print('written', flush=True)
time.sleep(60)
"""


def _write_episode(bag: BagWriter, rng: np.random.Generator) -> dict[str, int]:
    joints = [f'j{i}' for i in range(6)]
    for k in range(20):
        q = rng.uniform(-np.pi, np.pi, 6)
        bag.write(
            '/joint_states',
            1_000_000 * k,
            bag.encode('/joint_states', {'name': joints, 'position': q}),
        )
    for k in range(4):
        tf = {
            'transforms': [
                {
                    'header': {'frame_id': 'world'},
                    'child_frame_id': 'tool0',
                    'transform': {'translation': {'x': 0.1 * k}, 'rotation': {'w': 1.0}},
                }
            ]
        }
        bag.write('/tf', 5_000_000 * k, bag.encode('/tf', tf))
    for seq, kind in enumerate(['perceive', 'pick', 'plan']):
        ev = {
            'run_id': 'r',
            'seed': 3,
            'seq': seq,
            'ts': 0.5 * seq,
            'kind': kind,
            'payload_json': json.dumps({'seq': seq}),
        }
        bag.write(
            '/palletizer/episode_events',
            10_000_000 + seq,
            bag.encode('/palletizer/episode_events', ev),
        )
    pl = {
        'seq': 0,
        'package_id': 'p0',
        'dims_m': [0.4, 0.3, 0.2],
        'planned_pose': {'x': 0.1, 'yaw': 1.5},
        'placed': True,
    }
    bag.write('/palletizer/placements', 20_000_000, bag.encode('/palletizer/placements', pl))
    ps = {'after_seq': 0, 'mass_kg': 7.5, 'cog': {'x': 0.01, 'z': 0.1}}
    bag.write('/palletizer/pallet_states', 20_000_001, bag.encode('/palletizer/pallet_states', ps))
    cells = rng.uniform(0, 0.5, 12)
    hm = {'ny': 3, 'nx': 4, 'cell_size': 0.01, 'cells': cells, 'observed': cells > 0.1}
    bag.write('/palletizer/heightmap', 20_000_002, bag.encode('/palletizer/heightmap', hm))
    return {
        '/joint_states': 20,
        '/tf': 4,
        '/tf_static': 0,
        '/palletizer/episode_events': 3,
        '/palletizer/placements': 1,
        '/palletizer/pallet_states': 1,
        '/palletizer/heightmap': 1,
    }


def test_bag_round_trip_holds_every_topic_with_counts_and_decodable_messages(tmp_path):
    path = tmp_path / 'bag'
    with BagWriter(path) as bag:
        expected = _write_episode(bag, np.random.default_rng(0))
        assert bag.counts == expected
    meta = yaml.safe_load((path / 'metadata.yaml').read_text())['rosbag2_bagfile_information']
    assert meta['version'] == 8 and meta['storage_identifier'] == 'mcap'
    mcap = next(path.glob('*.mcap')).read_bytes()
    assert mcap.startswith(b'\x89MCAP0\r\n') and b'zstd' in mcap
    rng = np.random.default_rng(0)
    with AnyReader([path]) as reader:
        assert {c.topic: c.msgcount for c in reader.connections} == expected
        assert {c.topic: c.msgtype for c in reader.connections} == dict(TOPICS)
        msgs = [
            (c.topic, t, reader.deserialize(raw, c.msgtype)) for c, t, raw in reader.messages()
        ]
    joints = [m for topic, _, m in msgs if topic == '/joint_states']
    np.testing.assert_allclose(joints[0].position, rng.uniform(-np.pi, np.pi, 6))
    events = [m for topic, _, m in msgs if topic == '/palletizer/episode_events']
    assert [(e.seq, e.kind, json.loads(e.payload_json)) for e in events] == [
        (0, 'perceive', {'seq': 0}),
        (1, 'pick', {'seq': 1}),
        (2, 'plan', {'seq': 2}),
    ]
    (pl,) = [m for topic, _, m in msgs if topic == '/palletizer/placements']
    assert pl.placed and pl.planned_pose.yaw == 1.5
    np.testing.assert_allclose(pl.dims_m, [0.4, 0.3, 0.2])
    (hm,) = [m for topic, _, m in msgs if topic == '/palletizer/heightmap']
    assert (hm.ny, hm.nx) == (3, 4) and hm.observed.dtype == bool
    stamps = [t for topic, t, _ in msgs if topic == '/tf']
    assert stamps == [0, 5_000_000, 10_000_000, 15_000_000]


def test_bag_rejects_unknown_topics_fields_and_reuse(tmp_path):
    with BagWriter(tmp_path / 'bag') as bag:
        with pytest.raises(
            TelemetryError,
            match=r"bag topic '/joint_state'; expected one of .*did you mean '/joint_states'",
        ):
            bag.write('/joint_state', 0, b'')
        with pytest.raises(
            TelemetryError, match=r"unknown field 'positions' of sensor_msgs/msg/JointState"
        ):
            bag.encode('/joint_states', {'positions': [0.0]})
        with pytest.raises(TelemetryError, match=r'dims_m: 2 values; expected 3'):
            bag.encode('/palletizer/placements', {'dims_m': [0.1, 0.2]})
        with pytest.raises(TelemetryError, match=r'stamp_ns = -1; expected an integer >= 0'):
            bag.write('/tf', -1, b'')
    with pytest.raises(TelemetryError, match=r'exists already'):
        BagWriter(tmp_path / 'bag')
    with pytest.raises(TelemetryError, match=r'is closed'):
        bag.write('/tf', 0, b'')


def test_registered_palletizer_types_hash_like_the_rosidl_build():
    store = load_typestore()
    found = 0
    for prefix in os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep):
        share = Path(prefix) / 'share' / 'palletizer_msgs' / 'msg'
        for desc in sorted(share.glob('*.json')) if prefix else []:
            doc = json.loads(desc.read_text())
            name = doc['type_hashes'][0]['type_name']
            assert store.hash_rihs01(name) == doc['type_hashes'][0]['hash_string'], name
            found += 1
    if not found:
        pytest.skip('palletizer_msgs is not built: run scripts/setup and source scripts/env.sh')


@pytest.mark.skipif(
    importlib.util.find_spec('palletizer_msgs') is None, reason='palletizer_msgs not built'
)
def test_rclpy_serialised_messages_are_stored_byte_for_byte(tmp_path):
    from palletizer_msgs.msg import PalletState
    from rclpy.serialization import serialize_message

    msg = PalletState(after_seq=4, mass_kg=12.5, stability_margin_m=-0.01, layer_flatness=0.003)
    msg.cog.x, msg.cog.z = 0.02, 0.3
    cdr = serialize_message(msg)
    with BagWriter(tmp_path / 'bag') as bag:
        bag.write('/palletizer/pallet_states', 7, cdr)
    with AnyReader([tmp_path / 'bag']) as reader:
        ((conn, t, raw),) = list(reader.messages())
        got = reader.deserialize(raw, conn.msgtype)
    assert bytes(raw) == cdr and t == 7
    assert (got.after_seq, got.mass_kg, got.cog.z, got.layer_flatness) == (4, 12.5, 0.3, 0.003)


def _kill_after(path: Path, lines: int) -> None:
    """Run the writer, SIGKILL it after it printed `lines` lines (1: opened, 2: checkpointed)."""
    proc = subprocess.Popen(
        [sys.executable, '-c', _KILLED_WRITER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline() == 'open\n'
        if lines > 1:
            proc.stdin.write('go\n')
            proc.stdin.flush()
            assert proc.stdout.readline() == 'written\n'
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdin.close()
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL


def test_bag_killed_after_an_episode_end_opens_with_the_messages_up_to_it(tmp_path):
    path = tmp_path / 'bag'
    _kill_after(path, 2)
    with AnyReader([path]) as reader:
        counts = {c.topic: c.msgcount for c in reader.connections}
        got = [(c.topic, t) for c, t, _ in reader.messages()]
    assert counts == {**dict.fromkeys(TOPICS, 0), '/tf': 3, '/palletizer/episode_events': 1}
    assert got == [('/tf', 0), ('/tf', 1000), ('/tf', 2000), ('/palletizer/episode_events', 5000)]


def test_bag_killed_before_any_message_opens_empty_with_every_topic(tmp_path):
    path = tmp_path / 'bag'
    _kill_after(path, 1)
    with AnyReader([path]) as reader:
        assert {c.topic: c.msgcount for c in reader.connections} == dict.fromkeys(TOPICS, 0)
        assert list(reader.messages()) == []


def test_bag_closed_after_checkpoints_is_one_clean_mcap(tmp_path):
    path = tmp_path / 'bag'
    with BagWriter(path) as bag:
        first = _write_episode(bag, np.random.default_rng(1))
        bag.checkpoint()
        bag.checkpoint()  # nothing new: summary only
        _write_episode(bag, np.random.default_rng(2))
    mcap = next(path.glob('*.mcap')).read_bytes()
    assert mcap.startswith(b'\x89MCAP0\r\n') and mcap.endswith(b'\x89MCAP0\r\n')
    assert mcap.count(b'\x89MCAP0\r\n') == 2  # no interim footer left inside
    with AnyReader([path]) as reader:
        assert {c.topic: c.msgcount for c in reader.connections} == {
            t: 2 * n for t, n in first.items()
        }
        assert len(list(reader.messages())) == 2 * sum(first.values())
