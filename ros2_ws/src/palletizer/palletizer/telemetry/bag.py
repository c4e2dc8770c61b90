"""BagWriter: a rosbag2 MCAP bag (version 8, zstd chunks) of the episode and robot topics."""

from __future__ import annotations

import os
import shutil
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from io import BytesIO, StringIO
from pathlib import Path
from types import TracebackType
from typing import Any, Final

import numpy as np
from rosbags.interfaces import (
    Nodetype,
    Qos,
    QosDurability,
    QosHistory,
    QosLiveliness,
    QosReliability,
    QosTime,
)
from rosbags.rosbag2 import Writer, WriterError
from rosbags.rosbag2.enums import CompressionFormat, CompressionMode, StoragePlugin
from rosbags.rosbag2.metadata import dump_qos_v8
from rosbags.rosbag2.storage_mcap import McapWriter, PendingChunk
from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore
from ruamel.yaml import YAML

from palletizer.core.errors import close_match
from palletizer.telemetry.vocab import TelemetryError, TelemetryWriteError

__all__ = [
    'BAG_VERSION',
    'CHUNK_BYTES',
    'CHUNK_S',
    'TOPICS',
    'BagWriter',
    'find_msg_dir',
    'load_typestore',
]

BAG_VERSION: Final = 8  # tooling-notes: version 9 metadata is reported not to load on Humble

# topic -> message type; the relative node topics are remapped to these by the graph.
TOPICS: Mapping[str, str] = {
    '/joint_states': 'sensor_msgs/msg/JointState',
    '/tf': 'tf2_msgs/msg/TFMessage',
    '/tf_static': 'tf2_msgs/msg/TFMessage',
    '/palletizer/episode_events': 'palletizer_msgs/msg/EpisodeEvent',
    '/palletizer/placements': 'palletizer_msgs/msg/Placement',
    '/palletizer/pallet_states': 'palletizer_msgs/msg/PalletState',
    '/palletizer/heightmap': 'palletizer_msgs/msg/HeightMap',
}

_ZERO = QosTime(0, 0)
_INFINITE = QosTime(0x7FFFFFFF, 0xFFFFFFFF)  # rosbag2's spelling of "no deadline/lifespan"


def _qos(reliable: bool, latched: bool) -> Qos:
    """The QoS a replayer should offer, matching palletizer.nodes.qos for each topic."""
    return Qos(
        QosHistory.KEEP_LAST,
        1 if latched else 10,
        QosReliability.RELIABLE if reliable else QosReliability.BEST_EFFORT,
        QosDurability.TRANSIENT_LOCAL if latched else QosDurability.VOLATILE,
        _INFINITE,
        _INFINITE,
        QosLiveliness.AUTOMATIC,
        _INFINITE,
        False,
    )


_QOS: Mapping[str, Qos] = {
    '/joint_states': _qos(reliable=False, latched=False),
    '/tf': _qos(reliable=True, latched=False),
    '/tf_static': _qos(reliable=True, latched=True),
    '/palletizer/heightmap': _qos(reliable=True, latched=True),
}
_EVENTS_QOS = _qos(reliable=True, latched=True)

_NUMPY = {
    'bool': np.bool_,
    'byte': np.uint8,
    'char': np.uint8,
    'int8': np.int8,
    'uint8': np.uint8,
    'int16': np.int16,
    'uint16': np.uint16,
    'int32': np.int32,
    'uint32': np.uint32,
    'int64': np.int64,
    'uint64': np.uint64,
    'float32': np.float32,
    'float64': np.float64,
}


CHUNK_BYTES: Final = 256 * 1024  # [B] uncompressed chunk bound: the most a full disk loses
CHUNK_S: Final = 2.0  # [s] wall time after which a chunk goes to disk even when not full


class _Spool:
    """Records on their way to the file; tell() counts from the offset they will be written at."""

    def __init__(self, at: int) -> None:
        self.at = at
        self.buf = BytesIO()

    def write(self, data: Any) -> int:
        return self.buf.write(data)

    def tell(self) -> int:
        return self.at + self.buf.tell()

    def close(self) -> None:
        pass


class _CheckpointMcap(McapWriter):
    """McapWriter whose file is a complete MCAP after every written chunk, also on a full disk.

    rosbags writes the summary and footer only at close, so a killed writer leaves a file no
    reader opens. Here every chunk (at most CHUNK_BYTES uncompressed or CHUNK_S old) is
    written with a summary, a footer and a fresh metadata.yaml, all fsynced; the next chunk
    overwrites that summary. Records are built in memory and written whole with pwrite, so no
    hidden buffer holds half a record. When the disk refuses a chunk, the file is cut back to
    its last whole chunk and the last summary is written again (it fitted before): the bag
    stays readable with every message up to that chunk, and the writer stops (`stopped`).
    """

    describe: Callable[[], dict[str, Any]] | None = None  # the rosbag2 metadata of now
    chunk_bytes: int = CHUNK_BYTES
    chunk_s: float = CHUNK_S
    clock: Callable[[], float] = staticmethod(time.monotonic)

    def __init__(self, path: Path, compression: CompressionMode) -> None:
        super().__init__(path, compression)
        self.bio.flush()  # the magic and the header record
        self.data_end = self.bio.tell()  # the file's end of whole records [B]
        self.bio.close()
        self.fd = os.open(self.path, os.O_WRONLY)
        self.summary = b''  # summary + footer now on disk after data_end
        self.meta = ''  # metadata.yaml now on disk
        self.kept: dict[int, int] = {}  # channel id -> messages on disk
        self.kept_chunks = 0  # chunk indexes in the summary on disk
        self.stopped = ''  # why the writer stopped ('' while it writes)
        self.chunk_opened = 0.0  # clock() at the pending chunk's first message [s]

    def write(self, connection: Any, timestamp: int, data: bytes | memoryview) -> None:
        if not self.chunk.msgs:
            self.chunk_opened = self.clock()
        McapWriter.write(self, connection, timestamp, data)  # closes a chunk at 1 MiB itself
        if self.chunk.bio.tell() >= self.chunk_bytes or (
            self.chunk.msgs and self.clock() - self.chunk_opened >= self.chunk_s
        ):
            self.close_chunk()

    def close_chunk(self) -> None:
        if self.stopped:
            self.chunk = PendingChunk(2**63 - 1, 0, BytesIO(), defaultdict(list))
            return
        spool = _Spool(self.data_end)
        self.bio = spool  # type: ignore[assignment]  # rosbags types bio as its BufferedWriter
        if self.chunk.msgs:
            McapWriter.close_chunk(self)
        else:
            # Schemas and channels only: loose records of the data section, so that recover
            # finds every topic even when no chunk reached the disk.
            spool.write(self.chunk.bio.getvalue())
            self.chunk = PendingChunk(2**63 - 1, 0, BytesIO(), defaultdict(list))
        self._commit(spool.buf.getvalue())

    def checkpoint(self) -> None:
        """Write the pending records as a chunk (if any), then summary, footer and metadata."""
        if self.chunk.bio.tell():
            self.close_chunk()
        elif not self.stopped:
            self._commit(b'')

    def _summary(self, at: int) -> tuple[bytes, str]:
        """Summary and footer for a data section ending at `at`, and metadata.yaml's text."""
        meta = self.describe() if self.describe is not None else {}
        body = _yaml(meta.get('rosbag2_bagfile_information', {})).strip()
        pending = self.chunk  # empty here: close() would otherwise write it as a chunk
        self.chunk = PendingChunk(2**63 - 1, 0, BytesIO(), defaultdict(list))
        spool = _Spool(at)
        self.bio = spool  # type: ignore[assignment]
        try:
            McapWriter.close(self, 0, body)
        finally:
            self.chunk = pending
        return spool.buf.getvalue(), _yaml(meta) if meta else ''

    def _pwrite(self, data: bytes, at: int) -> None:
        view = memoryview(data)
        while view:
            n = os.pwrite(self.fd, view, at)
            view, at = view[n:], at + n

    def _commit(self, records: bytes) -> None:
        """Append `records` at data_end with a fresh summary; on a refusal go back and stop."""
        summary, meta = self._summary(self.data_end + len(records))
        try:
            self._pwrite(records + summary, self.data_end)
            os.ftruncate(self.fd, self.data_end + len(records) + len(summary))
            os.fsync(self.fd)
            if meta and meta != self.meta:
                _replace_durably(self.path.parent / 'metadata.yaml', meta)
        except OSError as exc:
            self._stop(exc)
            return
        self.data_end += len(records)
        self.bio = _Spool(self.data_end)  # type: ignore[assignment]  # bio.tell(): the data's end
        self.summary, self.meta = summary, meta
        self.kept = dict(self.channel_stats)
        self.kept_chunks = len(self.chunks)

    def _stop(self, exc: OSError) -> None:
        """Cut the file back to its last whole chunk and summary, and stop writing."""
        del self.chunks[self.kept_chunks :]
        try:
            os.ftruncate(self.fd, self.data_end)  # frees what the refused chunk took
            self._pwrite(self.summary, self.data_end)
            os.fsync(self.fd)
        except OSError:
            # No footer then: the whole chunks stay, and recover rebuilds the summary.
            try:
                os.ftruncate(self.fd, self.data_end)
            except OSError:
                pass
        self.bio = _Spool(self.data_end)  # type: ignore[assignment]
        try:
            free = f'{shutil.disk_usage(self.path.parent).free / 1024:.0f} KiB'
        except OSError:
            free = 'unknown space'
        kept = sum(self.kept.values())
        self.stopped = (
            f'bag {self.path.parent}: {exc.strerror or exc} with {free} free on its disk; '
            f'stopped writing it: it keeps the {kept} messages of its chunks on disk and opens '
            'as it is'
        )

    def finish(self) -> None:
        """The last chunk and summary (unless stopped), then close the file."""
        try:
            if not self.stopped:
                self.checkpoint()
        finally:
            os.close(self.fd)

    def close(self, version: int, metadata: str) -> None:
        raise TelemetryError('BagWriter.close finishes the file through finish()')


class _Writer(Writer):
    STORAGE_PLUGINS = {**Writer.STORAGE_PLUGINS, StoragePlugin.MCAP: _CheckpointMcap}


def _yaml(data: Any) -> str:
    yaml = YAML(typ='safe')
    yaml.default_flow_style = False
    out = StringIO()
    yaml.dump(data, out)
    return out.getvalue()


def _replace_durably(path: Path, text: str) -> None:
    tmp = path.with_suffix('.yaml.tmp')
    try:
        with tmp.open('w', encoding='utf-8') as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
    except OSError:
        tmp.unlink(missing_ok=True)  # the old metadata.yaml stays, and so does its space
        raise
    tmp.replace(path)
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def find_msg_dir() -> Path:
    """The palletizer_msgs msg/ folder: the repository's, else the installed share/ copy."""
    here = Path(__file__).resolve()
    candidates = [p / 'msgs' / 'palletizer_msgs' / 'msg' for p in here.parents]
    root = os.environ.get('PALLETIZER_ROOT')
    if root:
        candidates.insert(0, Path(root) / 'msgs' / 'palletizer_msgs' / 'msg')
    for prefix in os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep):
        if prefix:
            candidates.append(Path(prefix) / 'share' / 'palletizer_msgs' / 'msg')
    for cand in candidates:
        if any(cand.glob('*.msg')):
            return cand
    raise TelemetryError(
        'palletizer_msgs .msg files not found in the repository (msgs/palletizer_msgs/msg) or '
        'under share/palletizer_msgs/msg on AMENT_PREFIX_PATH'
    )


def load_typestore(msg_dir: str | os.PathLike[str] | None = None) -> Typestore:
    """Jazzy's standard types plus every palletizer_msgs message read from its .msg text."""
    folder = Path(msg_dir) if msg_dir is not None else find_msg_dir()
    files = sorted(folder.glob('*.msg'))
    if not files:
        raise TelemetryError(f'no .msg files in {folder}')
    store = get_typestore(Stores.ROS2_JAZZY)
    types: dict[str, Any] = {}
    for f in files:
        types.update(
            get_types_from_msg(f.read_text(encoding='utf-8'), f'palletizer_msgs/msg/{f.stem}')
        )
    store.register(types)
    return store


class BagWriter:
    """Writes a rosbag2 bag (MCAP, version 8, zstd) with one connection per topic of `topics`.

    One approach for every caller: the bag stores CDR bytes, and write() takes them. A ROS
    node passes rclpy.serialization.serialize_message(msg) (or a raw subscription's bytes), so
    the bag holds exactly what was on the wire; ROS-free code builds the bytes from a plain
    mapping with encode(). Stamps are sim time [ns]. Every topic gets its connection at open,
    so a reader lists it even when no message came. Not thread-safe.

    The bag is readable from its opening on, not only after close(): metadata.yaml and the MCAP
    summary are written at open, after every chunk and at each checkpoint() (the node calls it
    at every episode end). A chunk goes to disk when it holds `chunk_bytes` [B] (uncompressed)
    or its first message is `chunk_s` [s] old, so a killed writer or a full disk loses at most
    one such chunk. When the disk refuses a chunk, the bag is cut back to the chunks already on
    it and stays readable, and the writer stops: `stopped` says why in one line (path, cause,
    free space, messages kept), write() raises TelemetryWriteError with it, checkpoint() and
    close() do nothing more.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        topics: Mapping[str, str] = TOPICS,
        *,
        msg_dir: str | os.PathLike[str] | None = None,
        compress: bool = True,
        chunk_bytes: int = CHUNK_BYTES,
        chunk_s: float = CHUNK_S,
    ) -> None:
        self.path = Path(path)
        if chunk_bytes <= 0 or chunk_s <= 0:
            raise TelemetryError(
                f'bag {self.path}: chunk_bytes = {chunk_bytes}, chunk_s = {chunk_s}; expected > 0'
            )
        self.typestore = load_typestore(msg_dir)
        for topic, msgtype in topics.items():
            if msgtype not in self.typestore.types:
                raise TelemetryError(f'bag topic {topic}: unknown message type {msgtype!r}')
        try:
            self._writer = _Writer(
                self.path, version=BAG_VERSION, storage_plugin=StoragePlugin.MCAP
            )
            if compress:
                # STORAGE mode on MCAP = zstd-compressed chunks, which every MCAP reader handles.
                self._writer.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
            self._writer.open()
        except WriterError as exc:  # the path exists: a bag is never appended to
            raise TelemetryError(f'bag {self.path}: {exc}') from exc
        except OSError as exc:
            raise TelemetryWriteError(f'bag {self.path}: {exc.strerror or exc}') from None
        self._types = dict(topics)
        self._conns = {
            topic: self._writer.add_connection(
                topic,
                msgtype,
                typestore=self.typestore,
                offered_qos_profiles=[_QOS.get(topic, _EVENTS_QOS)],
            )
            for topic, msgtype in topics.items()
        }
        self.counts: dict[str, int] = dict.fromkeys(topics, 0)
        self._closed = False
        self._finished: _CheckpointMcap | None = None  # the storage once closed
        st = self._storage
        st.describe = self._metadata
        st.chunk_bytes, st.chunk_s = chunk_bytes, chunk_s
        st.checkpoint()
        if st.stopped:  # a disk too full for the first summary: no bag
            os.close(st.fd)
            self._closed = True
            raise TelemetryWriteError(st.stopped)

    @property
    def stopped(self) -> str:
        """Why the writer stopped (a full disk), in one line; '' while it writes."""
        return self._storage.stopped

    @property
    def chunk_bytes(self) -> int:
        """[B] the uncompressed size at which a chunk goes to disk: what a full disk loses."""
        return self._storage.chunk_bytes

    @property
    def kept(self) -> dict[str, int]:
        """Messages per topic in the chunks on disk (counts: every message written)."""
        by_id = self._storage.kept
        return {t: by_id.get(c.id, 0) for t, c in self._conns.items()}

    @property
    def _storage(self) -> _CheckpointMcap:
        storage = self._writer.storage or self._finished
        assert isinstance(storage, _CheckpointMcap)
        return storage

    def _metadata(self) -> dict[str, Any]:
        """metadata.yaml as rosbags' Writer.close writes it, from the messages in the file."""
        st = self._storage
        stats = st.channel_stats
        count = sum(stats.values())
        start = st.message_start_time if count else 0
        duration = max(0, st.message_end_time - st.message_start_time) if count else 0
        name = st.path.name
        return {
            'rosbag2_bagfile_information': {
                'version': BAG_VERSION,
                'storage_identifier': 'mcap',
                'relative_file_paths': [name],
                'duration': {'nanoseconds': duration},
                'starting_time': {'nanoseconds_since_epoch': start},
                'message_count': count,
                'topics_with_message_count': [
                    {
                        'topic_metadata': {
                            'name': c.topic,
                            'type': c.msgtype,
                            'serialization_format': 'cdr',
                            'offered_qos_profiles': dump_qos_v8(_qos_of(c)),
                            'type_description_hash': c.digest,
                        },
                        'message_count': stats.get(c.id, 0),
                    }
                    for c in self._writer.connections
                ],
                'compression_format': '',
                'compression_mode': '',
                'files': [
                    {
                        'path': name,
                        'starting_time': {'nanoseconds_since_epoch': start},
                        'duration': {'nanoseconds': duration},
                        'message_count': count,
                    }
                ],
                'custom_data': None,
                'ros_distro': 'rosbags',
            }
        }

    def checkpoint(self) -> None:
        """Make everything written so far survive a kill: chunk, summary, metadata.yaml, fsync.

        On a full disk the bag stops (see `stopped`); that is no error here, so an episode end
        is not failed for the bag's sake.
        """
        if self._closed:
            raise TelemetryError(f'bag {self.path} is closed')
        self._storage.checkpoint()

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(self._types)

    def _topic(self, topic: str) -> str:
        if self._closed:
            raise TelemetryError(f'bag {self.path} is closed')
        if topic not in self._types:
            names = list(self._types)
            raise TelemetryError(
                f'bag topic {topic!r}; expected one of {", ".join(names)}'
                f'{close_match(topic, names)}'
            )
        return topic

    def write(self, topic: str, stamp_ns: int, cdr: bytes | memoryview) -> None:
        """Append one CDR-serialised message of `topic` at sim time `stamp_ns` [ns]."""
        self._topic(topic)
        if (
            isinstance(stamp_ns, bool)
            or not isinstance(stamp_ns, (int, np.integer))
            or stamp_ns < 0
        ):
            raise TelemetryError(f'bag {topic}: stamp_ns = {stamp_ns!r}; expected an integer >= 0')
        st = self._storage
        if not st.stopped:
            self._writer.write(self._conns[topic], int(stamp_ns), bytes(cdr))
        if st.stopped:  # a full chunk goes to disk inside write(); the disk refused it
            raise TelemetryWriteError(st.stopped)
        self.counts[topic] += 1

    def encode(self, topic: str, fields: Mapping[str, Any]) -> bytes:
        """CDR bytes of `topic`'s message type built from a plain mapping (ROS-free).

        Nested messages are mappings, arrays are sequences; omitted fields take their zero
        value; an unknown field name is an error.
        """
        msgtype = self._types[self._topic(topic)]
        msg = _build(self.typestore, msgtype, fields, topic)
        return bytes(self.typestore.serialize_cdr(msg, msgtype))

    def close(self) -> None:
        """Finish the bag (metadata.yaml, MCAP summary); safe to call more than once."""
        if not self._closed:
            self._closed = True
            # Not rosbags' Writer.close: the last checkpoint writes the same summary and
            # metadata.yaml, and on a full disk leaves the bag as it was.
            self._finished = self._storage
            self._finished.finish()
            self._writer.storage = None

    def __enter__(self) -> BagWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _zero(store: Typestore, desc: tuple[Any, Any], where: str) -> Any:
    return _value(store, desc, None, where)


def _value(store: Typestore, desc: tuple[Any, Any], value: Any, where: str) -> Any:
    node, sub = desc
    if node == Nodetype.BASE:
        name = sub[0]
        if name == 'string' or name == 'wstring':
            return '' if value is None else str(value)
        if name == 'bool':
            return bool(value) if value is not None else False
        if name in ('float32', 'float64'):
            return float(value) if value is not None else 0.0
        return int(value) if value is not None else 0
    if node == Nodetype.NAME:
        return _build(store, sub, value or {}, where)
    # ARRAY (fixed length) or SEQUENCE: sub = (element desc, length)
    elem, length = sub
    items: Sequence[Any] = [] if value is None else list(value)
    if node == Nodetype.ARRAY:
        if value is None:
            items = [None] * length
        elif len(items) != length:
            raise TelemetryError(f'{where}: {len(items)} values; expected {length}')
    if elem[0] == Nodetype.BASE and elem[1][0] in _NUMPY:
        return np.asarray([_value(store, elem, v, where) for v in items], dtype=_NUMPY[elem[1][0]])
    return [_value(store, elem, v, f'{where}[{i}]') for i, v in enumerate(items)]


def _build(store: Typestore, msgtype: str, fields: Mapping[str, Any], where: str) -> Any:
    if not isinstance(fields, Mapping):
        raise TelemetryError(f'{where}: {fields!r}; expected a mapping for {msgtype}')
    _, defs = store.fielddefs[msgtype]
    names = [n for n, _ in defs]
    for key in fields:
        if key not in names:
            raise TelemetryError(
                f'{where}: unknown field {key!r} of {msgtype}; expected one of '
                f'{", ".join(names)}{close_match(str(key), names)}'
            )
    kwargs = {
        n: _value(store, d, fields.get(n), f'{where}.{n}')
        if n in fields
        else _zero(store, d, f'{where}.{n}')
        for n, d in defs
    }
    return store.types[msgtype](**kwargs)


def _qos_of(conn: Any) -> list[Qos]:
    return list(getattr(conn.ext, 'offered_qos_profiles', []))
