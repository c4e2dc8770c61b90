"""recover: a bag whose writer died opens again with every message of its whole chunks."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from palletizer.telemetry import BagWriter
from palletizer.telemetry.recover import main, salvage
from rosbags.highlevel import AnyReader, AnyReaderError

# The writer as it was before checkpoints: plain rosbags, summary and metadata only at close.
# About 1.3 MiB of joint states: one 1 MiB chunk goes to disk, the rest stays in memory.
_OLD_WRITER = """
import sys, time
from pathlib import Path
from rosbags.rosbag2 import Writer
from rosbags.rosbag2.enums import CompressionFormat, CompressionMode, StoragePlugin
from palletizer.telemetry import load_typestore
store = load_typestore()
w = Writer(Path(sys.argv[1]), version=8, storage_plugin=StoragePlugin.MCAP)
w.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
w.open()
conn = w.add_connection('/joint_states', 'sensor_msgs/msg/JointState', typestore=store)
for k in range(1300):
    w.write(conn, k, bytes(1000))
w.storage.bio.flush()
print('written', flush=True)
time.sleep(60)
"""


def _bag(path: Path, episodes: int) -> Path:
    """A bag of `episodes` checkpointed episodes of 5 /tf messages each, left open (no close)."""
    bag = BagWriter(path, {'/tf': 'tf2_msgs/msg/TFMessage'})
    for e in range(episodes):
        for k in range(5):
            bag.write('/tf', 100 * e + k, bag.encode('/tf', {}))
        bag.checkpoint()
    return next(path.glob('*.mcap'))


def _stamps(path: Path) -> list[int]:
    with AnyReader([path]) as reader:
        return [t for _, t, _ in reader.messages()]


def test_a_torn_summary_is_recovered_with_every_whole_chunk(tmp_path, capsys):
    mcap = _bag(tmp_path / 'bag', 2)
    data = mcap.read_bytes()
    mcap.write_bytes(data[:-60])  # killed while the summary was being rewritten
    with pytest.raises(AnyReaderError, match='magic'):
        _stamps(tmp_path / 'bag')
    assert main([str(tmp_path / 'bag')]) == 0
    assert capsys.readouterr().out.strip() == (
        f'recovered 10 messages into {tmp_path / "bag"}: /tf 10'
    )
    assert _stamps(tmp_path / 'bag') == [0, 1, 2, 3, 4, 100, 101, 102, 103, 104]
    assert (tmp_path / 'bag' / 'bag.mcap.orig').read_bytes() == data[:-60]


def test_a_chunk_cut_in_the_middle_is_dropped_whole(tmp_path):
    bag = BagWriter(tmp_path / 'bag', {'/tf': 'tf2_msgs/msg/TFMessage'})
    for e in range(2):
        for k in range(5):
            bag.write('/tf', 100 * e + k, bag.encode('/tf', {}))
        bag.checkpoint()
        if e == 0:
            second = bag._storage.bio.tell()  # where the second chunk starts
    mcap = next((tmp_path / 'bag').glob('*.mcap'))
    mcap.write_bytes(mcap.read_bytes()[: second + 30])
    found = salvage(mcap)
    assert [t for _, t, _ in found.messages] == [0, 1, 2, 3, 4]
    assert found.stopped == f'record 0x06 at byte {second} is cut off'


def test_a_killed_writer_of_the_old_kind_is_recovered(tmp_path):
    path = tmp_path / 'bag'
    proc = subprocess.Popen(
        [sys.executable, '-c', _OLD_WRITER, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline() == 'written\n'
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()
    assert not (path / 'metadata.yaml').exists()
    with pytest.raises((AnyReaderError, FileNotFoundError), match='metadata'):
        _stamps(path)
    assert main([str(path)]) == 0
    stamps = _stamps(path)
    assert len(stamps) > 900 and stamps == list(range(len(stamps)))


def test_nothing_readable_is_one_line_and_exit_2(tmp_path, capsys):
    (tmp_path / 'bag').mkdir()
    (tmp_path / 'bag' / 'bag.mcap').write_bytes(b'')
    assert main([str(tmp_path / 'bag')]) == 2
    assert capsys.readouterr().err.strip() == (
        f'recover: error: {tmp_path / "bag" / "bag.mcap"}: 0 bytes, no MCAP magic; '
        'nothing to recover'
    )
