"""Replicator: a thread that ships outboxes to a backend, in order, through outages.

Rows leave an outbox in the order they were queued, in batches of one transaction each. When
the backend cannot be reached the thread says so once, backs off (doubling from backoff_s[0]
to backoff_s[1]) and keeps the rows queued; when it is back, it says so and drains. A backend
that can never work (bad DSN or credentials, a schema of another version) is reported in one
line and the thread stops: the run goes on, to disk and its outbox, which `scripts/replicate`
can drain later. A row the database refuses for good is marked rejected in the outbox with the
reason (the disk still has it) and does not hold up the rows behind it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from palletizer.telemetry.replica.base import Backend
from palletizer.telemetry.replica.outbox import REJECTED, SHIPPED, Outbox
from palletizer.telemetry.replica.rows import ReplicaDown, ReplicaFatal, ReplicaRefused

__all__ = ['Replicator']

Log = Callable[[str, str], None]  # (level: info | warning | error, line)


class Replicator:
    """Drains the outboxes of the run folders given to add(), on its own thread."""

    def __init__(
        self,
        backend: Backend,
        log: Log,
        *,
        batch: int = 500,
        backoff_s: tuple[float, float] = (0.25, 4.0),
        idle_s: float = 0.2,
    ) -> None:
        self.backend = backend
        self.log = log
        self.batch = int(batch)
        self.backoff_s = backoff_s
        self.idle_s = float(idle_s)
        self.state = 'connecting'  # connecting | up | down | disabled
        self.error = ''
        self.shipped = 0
        self.rejected = 0
        self.outages: list[float] = []  # [s] length of each outage that ended
        self.episode_lag_s: list[float] = []  # [s] queue-to-database time of each episode end
        self._dirs: list[Path] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False  # drain what is queued, then end
        self._abandon = False  # end now
        self._idle = threading.Event()  # set when every outbox was found empty
        self._thread = threading.Thread(target=self._run, name='replicator', daemon=True)

    def add(self, run_dir: Path) -> None:
        with self._lock:
            if Path(run_dir) not in self._dirs:
                self._dirs.append(Path(run_dir))
        self.wake()

    def start(self) -> Replicator:
        self._thread.start()
        return self

    def wake(self) -> None:
        self._idle.clear()
        self._wake.set()

    def drain(self, timeout_s: float) -> bool:
        """Wait until every outbox is empty (True) or timeout_s passes or it is disabled."""
        self.wake()
        end = time.monotonic() + float(timeout_s)
        while time.monotonic() < end and self.state != 'disabled':
            if self._idle.wait(min(0.1, max(0.0, end - time.monotonic()))):
                return True
        return False

    def stop(self, timeout_s: float) -> bool:
        """Drain for up to timeout_s, then end the thread; True when nothing was left."""
        self._stopping = True
        self.wake()
        self._thread.join(max(0.0, float(timeout_s)))
        done = not self._thread.is_alive() and self.state != 'disabled' and self._idle.is_set()
        self._abandon = True
        self._wake.set()
        self._thread.join(5.0)
        return done

    # -- the thread ---------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._loop()
        except Exception as exc:  # noqa: BLE001 - the thread must say why it ends, not vanish
            self.state, self.error = 'disabled', f'replicator stopped: {exc!r}'
            try:
                self.log('error', f'{self.error}; the run goes on to disk and its outbox')
            except Exception:  # noqa: BLE001, S110 - nothing else can report it
                pass

    def _loop(self) -> None:
        boxes: dict[Path, Outbox] = {}
        backoff = self.backoff_s[0]
        down_since = 0.0
        try:
            while not self._abandon:
                try:
                    self.backend.connect()
                    if self.state == 'down':
                        gone = time.monotonic() - down_since
                        self.outages.append(gone)
                        self.log('info', f'replica back after {gone:.1f} s: draining the outbox')
                    self.state = 'up'
                    worked = self._pass(boxes)
                    backoff = self.backoff_s[0]
                except ReplicaDown as exc:
                    if self.state != 'down':
                        down_since = time.monotonic()
                        self.log(
                            'warning',
                            f'replica unreachable: {exc}; rows wait in the outbox, retrying',
                        )
                    self.state = 'down'
                    self.backend.close()
                    self._wake.wait(backoff)
                    self._wake.clear()
                    backoff = min(2.0 * backoff, self.backoff_s[1])
                    continue
                except ReplicaFatal as exc:
                    self.state, self.error = 'disabled', str(exc)
                    self.log('error', f'replica off: {exc}; the run goes on to disk')
                    return
                if worked:
                    continue
                self._idle.set()
                if self._stopping:
                    return
                self._wake.wait(self.idle_s)
                self._wake.clear()
        finally:
            for ob in boxes.values():
                ob.close()
            self.backend.close()

    def _pass(self, boxes: dict[Path, Outbox]) -> bool:
        """Ship one batch of every outbox with rows; True when anything was shipped."""
        with self._lock:
            dirs = list(self._dirs)
        worked = False
        for d in dirs:
            ob = boxes.get(d)
            if ob is None:
                ob = boxes[d] = Outbox(d, create=False)
            batch = ob.pending(self.batch)
            if not batch:
                continue
            worked = True
            self._ship(ob, batch)
        return worked

    def _ship(self, ob: Outbox, batch: list) -> None:
        try:
            self.backend.ship([row for _, row, _ in batch], ob.run_dir)
        except ReplicaRefused as exc:
            if len(batch) > 1:  # find the refused row: one transaction per row
                for one in batch:
                    self._ship(ob, [one])
                return
            n, row, _ = batch[0]
            ob.mark([n], REJECTED, str(exc))
            self.rejected += 1
            self.log('error', f'replica refused a {row.table} row (kept on disk): {exc}')
            return
        ob.mark([n for n, _, _ in batch], SHIPPED)
        self.shipped += len(batch)
        now = time.time()
        for _, row, queued in batch:
            if row.table == 'episodes' and row.data.get('status') not in (None, 'running'):
                self.episode_lag_s.append(now - queued)
