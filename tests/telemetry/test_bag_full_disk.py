"""A bag on a disk that fills mid-episode: a real 2 MiB tmpfs, the node's writer, both readers."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from mcap.reader import make_reader
from palletizer.telemetry import TOPICS, BagWriter, TelemetryWriteError
from palletizer.telemetry.recover import main, salvage
from rosbags.highlevel import AnyReader

_NY, _NX = 80, 120  # the 1.2 x 0.8 m pallet at perception.yaml's 0.010 m cell


@pytest.fixture
def tmpfs(tmp_path: Path):
    """A fresh 2 MiB tmpfs, unmounted afterwards; skipped where mounting is not permitted."""
    mnt = tmp_path / 'mnt'
    mnt.mkdir()
    if os.geteuid() != 0 or shutil.which('mount') is None:
        pytest.skip('mounting a tmpfs needs root and mount(8)')
    proc = subprocess.run(
        ['mount', '-t', 'tmpfs', '-o', 'size=2M', 'tmpfs', str(mnt)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        pytest.skip(f'mount -t tmpfs refused: {proc.stderr.strip()}')
    try:
        yield mnt
    finally:
        subprocess.run(['umount', '--lazy', str(mnt)], check=False)


def _heightmap(bag: BagWriter, k: int, rng: np.random.Generator) -> bytes:
    """A fused height map as the perception node publishes it: layers plus depth noise [m]."""
    store = bag.typestore
    cells = np.full(_NY * _NX, 0.25 * (1 + k // 10)) + rng.normal(0.0, 0.002, _NY * _NX)
    msg = store.types['palletizer_msgs/msg/HeightMap'](
        header=store.types['std_msgs/msg/Header'](
            stamp=store.types['builtin_interfaces/msg/Time'](sec=k, nanosec=0), frame_id='world'
        ),
        ny=_NY,
        nx=_NX,
        origin_x=-0.6,
        origin_y=-0.4,
        cell_size=0.01,
        cells=cells,
        observed=np.ones(_NY * _NX, dtype=np.bool_),
        lids=np.asarray([0.1, 0.0, 0.0, 0.4, 0.3, 0.25 * (1 + k // 10)]),  # one lid
    )
    return bytes(store.serialize_cdr(msg, 'palletizer_msgs/msg/HeightMap'))


def test_a_bag_on_a_full_tmpfs_keeps_every_chunk_that_reached_the_disk(tmpfs):
    rng = np.random.default_rng(7)
    path = tmpfs / 'runs' / 'run' / 'bag'
    path.parent.mkdir(parents=True)
    bag = BagWriter(path, TOPICS)  # the node's writer with the node's defaults
    joints = bag.encode(
        '/joint_states', {'name': [f'j{i}' for i in range(6)], 'position': [0.1] * 6}
    )
    written: list[tuple[str, int, int]] = []  # (topic, stamp [ns], CDR bytes) accepted
    refused = ''
    for k in range(400):  # 40 s of sim time: far more than 2 MiB of height maps
        for j in range(10):
            stamp = k * 100_000_000 + j * 10_000_000
            try:
                bag.write('/joint_states', stamp, joints)
                written.append(('/joint_states', stamp, len(joints)))
                if j == 0:
                    hm = _heightmap(bag, k, rng)
                    bag.write('/palletizer/heightmap', stamp, hm)
                    written.append(('/palletizer/heightmap', stamp, len(hm)))
            except TelemetryWriteError as exc:
                refused = str(exc)
                break
        if refused:
            break
        if k % 50 == 49:
            bag.checkpoint()  # an episode end
    assert refused, 'the 2 MiB tmpfs never filled'
    # one clear line: the bag, the cause and the free space
    assert str(path) in refused and 'No space left on device' in refused, refused
    assert ' free' in refused, refused
    bag.checkpoint()  # the node's episode end after the disk filled: no exception
    bag.close()

    mcap = path / 'bag.mcap'
    with mcap.open('rb') as f:
        reader = make_reader(f)
        by_mcap = [(ch.topic, m.log_time) for _, ch, m in reader.iter_messages()]
        summary = reader.get_summary()
        assert summary is not None and len(summary.channels) == len(TOPICS)
    with AnyReader([path]) as reader:
        by_rosbags = [(c.topic, t) for c, t, _ in reader.messages()]
        assert reader.message_count == len(by_rosbags)
        assert {c.topic for c in reader.connections} == set(TOPICS)
    kept = len(by_rosbags)
    assert by_mcap == by_rosbags
    # the bag holds a prefix of what was written: every message up to its last whole chunk
    assert by_rosbags == [(t, s) for t, s, _ in written[:kept]]
    lost = written[kept:]
    assert kept > 0.5 * len(written), (kept, len(written))
    # what is lost is at most one bounded chunk (plus the message that overflowed it)
    assert sum(n for _, _, n in lost) <= bag.chunk_bytes + max(n for _, _, n in written)
    # the recovery scanner reads the same messages from the file as it is
    assert [t for _, t, _ in salvage(mcap).messages] == [s for _, s in by_rosbags]
    print(f'full-disk bag: kept {kept} of {len(written)} messages; lost {len(lost)}')


def test_recover_rebuilds_a_bag_whose_first_chunk_was_torn_from_its_metadata(tmp_path, capsys):
    # As the writer before bounded chunks left it on a full disk: the header, then the first
    # chunk (which carried every schema and channel) cut off where the disk ended.
    path = tmp_path / 'bag'
    BagWriter(path, TOPICS).close()
    mcap = path / 'bag.mcap'
    data = mcap.read_bytes()
    header_end = 8 + 9 + int.from_bytes(data[9:17], 'little')
    mcap.write_bytes(data[:header_end] + b'\x06' + (5000).to_bytes(8, 'little') + bytes(40))
    assert salvage(mcap).topics == {}
    assert main([str(path)]) == 0
    assert capsys.readouterr().out.startswith(f'recovered 0 messages into {path}: /joint_states 0')
    with AnyReader([path]) as reader:
        assert {c.topic for c in reader.connections} == set(TOPICS)
    with mcap.open('rb') as f:
        assert len(make_reader(f).get_summary().channels) == len(TOPICS)
