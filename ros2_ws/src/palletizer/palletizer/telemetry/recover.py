"""Recover a bag whose writer died: rebuild its MCAP file and metadata.yaml from what is readable.

    python -m palletizer.telemetry.recover runs/<run>/bag

Reads the MCAP file record by record up to the first one that is cut off or does not decode (a
torn checkpoint, a bag written before checkpoints existed), writes every message found so far
into a new bag, and puts it in place of the old one; the old MCAP file is kept as
<name>.mcap.orig. Prints one line: messages recovered per topic. Exit 2 with one line when
nothing is readable.
"""

from __future__ import annotations

import shutil
import struct
import sys
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from palletizer.core.errors import PalletizerError
from palletizer.telemetry.bag import BagWriter
from palletizer.telemetry.vocab import TelemetryError, TelemetryWriteError

__all__ = ['Salvage', 'main', 'recover', 'salvage']

_MAGIC = b'\x89MCAP0\r\n'
_SCHEMA, _CHANNEL, _MESSAGE, _CHUNK, _DATA_END = 0x03, 0x04, 0x05, 0x06, 0x0F
_U16, _U32, _U64 = struct.Struct('<H'), struct.Struct('<I'), struct.Struct('<Q')


@dataclass(frozen=True)
class Salvage:
    """What an MCAP file holds up to its first unreadable record.

    topics: channel id -> (topic, message type); messages: (channel id, log time [ns], CDR
    bytes) in file order; stopped: why the scan ended ('' at a clean end of the data section).
    """

    topics: dict[int, tuple[str, str]]
    messages: list[tuple[int, int, bytes]]
    stopped: str


class _Cut(PalletizerError):
    """A record is cut off or undecodable: the scan of the file stops there."""


def _take(buf: memoryview, pos: int, n: int) -> bytes:
    if pos + n > len(buf):
        raise _Cut(f'record at byte {pos} is cut off')
    return bytes(buf[pos : pos + n])


def _string(rec: bytes, pos: int) -> tuple[str, int]:
    (n,) = _U32.unpack_from(rec, pos)
    if pos + 4 + n > len(rec):
        raise _Cut('string past its record')
    return rec[pos + 4 : pos + 4 + n].decode(), pos + 4 + n


def _records(buf: memoryview, pos: int, end: int) -> Iterator[tuple[int, bytes, int]]:
    """(op, body, offset) of each whole record in buf[pos:end]."""
    while pos < end:
        head = _take(buf, pos, 9)
        op, (size,) = head[0], _U64.unpack_from(head, 1)
        if pos + 9 + size > end:
            raise _Cut(f'record 0x{op:02x} at byte {pos} is cut off')
        yield op, bytes(buf[pos + 9 : pos + 9 + size]), pos
        pos += 9 + size


def _unchunk(rec: bytes) -> bytes:
    _start, _end, size, crc = struct.unpack_from('<QQQI', rec, 0)
    compression, pos = _string(rec, 28)
    (n,) = _U64.unpack_from(rec, pos)
    data = rec[pos + 8 : pos + 8 + n]
    if len(data) != n:
        raise _Cut('chunk data cut off')
    if compression == 'zstd':
        try:
            from compression import zstd  # type: ignore[import-not-found]  # stdlib from Python 3.14
        except ImportError:
            from backports import zstd
        try:
            raw = zstd.decompress(data)
        except Exception as exc:  # noqa: BLE001 - any decoder error means a torn chunk
            raise _Cut(f'chunk does not decompress ({exc})') from None
    elif compression == '':
        raw = data
    else:
        raise _Cut(f'chunk compression {compression!r} not supported')
    if len(raw) != size or (crc and zlib.crc32(raw) != crc):
        raise _Cut('chunk size or checksum mismatch')
    return raw


def salvage(mcap: str | Path) -> Salvage:
    """Scan an MCAP file (ros2 profile) up to its first cut-off or undecodable record."""
    buf = memoryview(Path(mcap).read_bytes())
    if bytes(buf[:8]) != _MAGIC:
        raise TelemetryError(f'{mcap}: {len(buf)} bytes, no MCAP magic; nothing to recover')
    schemas: dict[int, str] = {}
    topics: dict[int, tuple[str, str]] = {}
    messages: list[tuple[int, int, bytes]] = []

    def take(op: int, rec: bytes) -> None:
        if op == _SCHEMA:
            (sid,) = _U16.unpack_from(rec, 0)
            schemas[sid], _ = _string(rec, 2)
        elif op == _CHANNEL:
            cid, sid = struct.unpack_from('<HH', rec, 0)
            topic, _ = _string(rec, 4)
            topics[cid] = (topic, schemas.get(sid, ''))
        elif op == _MESSAGE:
            cid, _seq, log_time, _pub = struct.unpack_from('<HIQQ', rec, 0)
            if cid in topics:
                messages.append((cid, log_time, rec[22:]))

    stopped = ''
    try:
        first = next(_records(buf, 8, len(buf)))  # the header record
        for op, rec, _ in _records(buf, first[2] + 9 + len(first[1]), len(buf)):
            if op == _DATA_END:
                break
            if op == _CHUNK:
                raw = memoryview(_unchunk(rec))
                found = [(o, r) for o, r, _ in _records(raw, 0, len(raw))]
                for o, r in found:  # all or nothing: a chunk is the unit of a checkpoint
                    take(o, r)
            else:
                take(op, rec)
    except (_Cut, struct.error, UnicodeDecodeError, StopIteration) as exc:
        stopped = str(exc) or 'end of file'
    return Salvage(topics, messages, stopped)


def _metadata_topics(path: Path) -> dict[str, str]:
    """topic -> message type from a rosbag2 metadata.yaml; {} when it is missing or unreadable."""
    try:
        info = YAML(typ='safe').load(path.read_text(encoding='utf-8'))
        entries = info['rosbag2_bagfile_information']['topics_with_message_count']
        return {
            str(e['topic_metadata']['name']): str(e['topic_metadata']['type']) for e in entries
        }
    except (OSError, YAMLError, KeyError, TypeError):
        return {}


def recover(bag_dir: str | Path) -> dict[str, int]:
    """Rebuild bag_dir's MCAP file and metadata.yaml from its readable messages.

    Returns messages per topic. The old file is kept as <name>.mcap.orig.
    """
    bag = Path(bag_dir)
    files = sorted(bag.glob('*.mcap'))
    if len(files) != 1:
        raise TelemetryError(f'{bag}: {len(files)} .mcap files; expected one')
    mcap = files[0]
    found = salvage(mcap)
    types = {topic: msgtype for topic, msgtype in found.topics.values()}
    if not types:
        # A bag written before its channels went to the data section: when its first chunk
        # was torn (a full disk), only metadata.yaml still names the topics.
        types = _metadata_topics(bag / 'metadata.yaml')
    if not types:
        raise TelemetryError(
            f'{mcap}: no channel is readable ({found.stopped}); nothing to recover'
        )
    tmp = bag.with_name(bag.name + '.recovering')
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        with BagWriter(tmp, types) as out:
            for cid, stamp, data in found.messages:
                out.write(found.topics[cid][0], stamp, data)
            out.checkpoint()
            if out.stopped:
                raise TelemetryWriteError(out.stopped)
            counts = dict(out.counts)
    except TelemetryError:
        shutil.rmtree(tmp, ignore_errors=True)  # the bag stays as it was; free space first
        raise
    mcap.replace(mcap.with_name(mcap.name + '.orig'))
    (tmp / f'{tmp.name}.mcap').replace(mcap)
    (tmp / 'metadata.yaml').replace(bag / 'metadata.yaml')
    text = (bag / 'metadata.yaml').read_text(encoding='utf-8')
    (bag / 'metadata.yaml').write_text(
        text.replace(f'{tmp.name}.mcap', mcap.name), encoding='utf-8'
    )
    shutil.rmtree(tmp, ignore_errors=True)
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print('usage: python -m palletizer.telemetry.recover <bag_dir>', file=sys.stderr)
        return 2
    try:
        counts = recover(args[0])
    except (TelemetryError, OSError) as exc:
        print(f'recover: error: {exc}', file=sys.stderr)
        return 2
    shown = ', '.join(f'{t} {n}' for t, n in counts.items())
    print(f'recovered {sum(counts.values())} messages into {args[0]}: {shown}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
