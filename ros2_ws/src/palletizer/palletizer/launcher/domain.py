"""Each run gets its own DDS domain: claim a free ROS_DOMAIN_ID and hold it while the run lives.

Why a domain and not a ROS namespace: the UR driver's names are absolute
(`/scaled_joint_trajectory_controller/follow_joint_trajectory`, `/io_and_status_controller/set_io`,
`/force_torque_sensor_broadcaster/wrench`) and must stay as the driver has them, as must `/tf`
and `/clock`. Nodes on different domains do not even discover each other, so two runs cannot
cross-talk whatever their names.

The claim is an advisory lock (flock) on `<LOCK_DIR>/net<inode>/<id>.lock`. The kernel drops a
lock when its holder dies, so a run that is killed (even by SIGKILL) frees its domain; a run that
ends removes its file. Locks are kept per network namespace because DDS discovery never leaves
one: runs in two namespaces (the graph tests) may use the same id without meeting.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from palletizer.core.errors import GraphError

__all__ = [
    'DOMAIN_ENV',
    'DOMAIN_ID_MAX',
    'FREE_DOMAINS',
    'LOCK_DIR',
    'ROS_DEFAULT_DOMAIN',
    'DomainClaim',
    'claim_domain',
]

DOMAIN_ENV = 'ROS_DOMAIN_ID'
# "To skip that background and just choose a safe number, simply choose a domain ID between 0 and
# 101, inclusive": higher ids map DDS ports into Linux's ephemeral range (ROS 2 Jazzy docs,
# Concepts > Intermediate > About Domain ID,
# https://docs.ros.org/en/jazzy/Concepts/Intermediate/About-Domain-ID.html). 0 is the default
# domain of all other ROS software, so a run never picks it by itself.
FREE_DOMAINS = range(1, 102)
# The highest id whose DDS ports fit in 16 bits (same page): the most an id the user sets may be.
DOMAIN_ID_MAX = 232
LOCK_DIR = Path('/tmp/palletizer-domains')
ROS_DEFAULT_DOMAIN = 0  # rcl's domain when ROS_DOMAIN_ID is unset or empty

# RTPS well-known ports (DDSI-RTPS 2.x, 9.6.1.1; Fast DDS defaults): participant p of domain d
# takes unicast discovery port PB + DG*d + d1 + PG*p (measured: the first two nodes on domain 5
# bound 8660 and 8662). A bound one means DDS on that domain in this network namespace.
_PB, _DG, _PG, _D1 = 7400, 250, 2, 10
_PROBED_PARTICIPANTS = 4
_RETRIES = 20


@dataclass
class DomainClaim:
    """A held ROS_DOMAIN_ID: release() (or leaving the `with` block, or dying) frees it."""

    domain_id: int
    path: Path
    _fd: int | None

    @property
    def env(self) -> dict[str, str]:
        """What every child of the run gets, so all its nodes share this one domain."""
        return {DOMAIN_ENV: str(self.domain_id)}

    def banner(self) -> str:
        """The launcher's first line: the domain and how to join the run's graph."""
        d = self.domain_id
        how = f'export {DOMAIN_ENV}={d}, then rviz2 or ros2 topic list'
        return f'{DOMAIN_ENV} {d} (join this run: {how})'

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        # Remove the file while still holding it (a claim that opened it meanwhile sees it gone
        # and retries), then the namespace's folder once no claim is left in it.
        for tidy in (self.path.unlink, self.path.parent.rmdir):
            try:
                tidy()
            except OSError:
                pass  # another user's file, or the folder is in use: it stays, harmlessly
        os.close(fd)  # closing the descriptor drops the lock

    def __enter__(self) -> DomainClaim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _lock_dir(root: Path) -> Path:
    try:
        net = os.stat('/proc/self/ns/net').st_ino
    except OSError:  # no /proc: one folder for the machine
        return root
    return root / f'net{net}'


def _holder(path: Path) -> str:
    try:
        pid = path.read_text(encoding='ascii').strip()
    except (OSError, UnicodeDecodeError):
        return ''
    return f' (pid {pid})' if pid.isdigit() else ''


def _prepare(root: Path, folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for made in (root, folder):  # every user's runs lock in the same folders, as in /tmp
            if made.stat().st_uid == os.geteuid():
                made.chmod(0o1777)
    except OSError as exc:
        raise GraphError(
            f'cannot use the domain lock folder {folder}: {exc.strerror or exc}'
        ) from None


def _try_lock(root: Path, folder: Path, domain_id: int) -> DomainClaim | None:
    """Lock `folder/<id>.lock` without waiting; None when another process holds it."""
    path = folder / f'{domain_id}.lock'
    flags = os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(_RETRIES):
        _prepare(root, folder)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | flags, 0o666)
        except PermissionError:  # another user's file: a read-only descriptor can lock it too
            try:
                fd = os.open(path, os.O_RDONLY | flags)
            except FileNotFoundError:
                continue
        except FileNotFoundError:  # a run that just ended removed the folder: make it again
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return None
            raise
        try:
            now = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            now = None
        held = os.fstat(fd)
        if now is None or (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino):
            os.close(fd)  # its holder removed this file as it ended: lock the current one
            continue
        try:  # name the holder for whoever is refused
            os.ftruncate(fd, 0)
            os.write(fd, f'{os.getpid()}\n'.encode())
        except OSError:
            pass
        return DomainClaim(domain_id, path, fd)
    raise GraphError(f'cannot lock {path}: it was removed {_RETRIES} times in a row')


def _in_use_by_dds(domain_id: int) -> bool:
    """Whether a DDS participant of this network namespace listens on the domain's ports."""
    for p in range(_PROBED_PARTICIPANTS):
        port = _PB + _DG * domain_id + _D1 + _PG * p
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.bind(('0.0.0.0', port))  # only binds: nothing is sent
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    return True
                return False  # no IPv4 here, say: the lock alone decides
    return False


def _parse(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        value = -1
    if not 0 <= value <= DOMAIN_ID_MAX:
        raise GraphError(
            f'{DOMAIN_ENV}={text!r}; expected an integer 0-{DOMAIN_ID_MAX} (1-101 are safe on '
            f'Linux), or unset it and the run picks a free one'
        )
    return value


def claim_domain(
    environ: Mapping[str, str] | None = None,
    *,
    robot: str = 'sim',
    lock_dir: Path = LOCK_DIR,
    candidates: Iterable[int] = FREE_DOMAINS,
) -> DomainClaim:
    """Claim the run's ROS_DOMAIN_ID and hold it until release() or this process ends.

    - ROS_DOMAIN_ID set (not empty) in `environ`: that id, the graph the user wants to join;
    - else, with robot 'ur', ROS's default domain 0: the run must join the UR driver's graph;
    - else the first of `candidates` that no other run holds and no DDS participant here uses.
    Raises GraphError (one line) when the named id is held by another run or none is free.
    """
    env = os.environ if environ is None else environ
    text = env.get(DOMAIN_ENV, '').strip()
    named = _parse(text) if text else (ROS_DEFAULT_DOMAIN if robot == 'ur' else None)
    folder = _lock_dir(lock_dir)
    if named is not None:
        claim = _try_lock(lock_dir, folder, named)
        if claim is None:
            how = f'{DOMAIN_ENV}={text}' if text else f'the default {DOMAIN_ENV} {named}'
            raise GraphError(
                f'{how} is held by another palletizer run{_holder(folder / f"{named}.lock")}; '
                f'stop that run, or export {DOMAIN_ENV}=<another id, 1-101> (or unset it and '
                'the run picks a free one)'
            )
        return claim
    tried = []
    for domain_id in candidates:
        tried.append(domain_id)
        claim = _try_lock(lock_dir, folder, domain_id)
        if claim is None:
            continue
        if _in_use_by_dds(domain_id):
            claim.release()
            continue
        return claim
    span = f'{tried[0]}-{tried[-1]}' if tried else 'none'
    raise GraphError(
        f'no free {DOMAIN_ENV} ({span}): each is held by a palletizer run or used by other ROS '
        f'software here; stop a run, or export {DOMAIN_ENV}=<id> to join that graph'
    )
