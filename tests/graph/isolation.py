"""Run a command inside its own network namespace (loopback only) with its own ROS_DOMAIN_ID."""

from __future__ import annotations

import itertools
import os
import subprocess
from collections.abc import Sequence

from palletizer.cli.bench_graph import can_isolate

__all__ = ['can_isolate', 'next_domain', 'popen_isolated', 'run_isolated']

# Inside the new namespace: loopback up (with multicast, for DDS discovery), then the command.
_NETNS = 'ip link set lo up && ip link set lo multicast on && exec "$@"'

_domains = itertools.count(
    int(os.environ.get('PALLETIZER_TEST_DOMAIN_BASE', '40')) + os.getpid() % 50
)


def run_isolated(
    argv: Sequence[str],
    timeout: float,
    env: dict[str, str] | None = None,
    domain_id: int | None = None,
    cwd: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run argv in a fresh network namespace with loopback up; nothing leaves the namespace."""
    dom = domain_id if domain_id is not None else next_domain()
    full_env = {
        **os.environ,
        **(env or {}),
        'ROS_DOMAIN_ID': str(dom),
        'ROS_AUTOMATIC_DISCOVERY_RANGE': 'LOCALHOST',
        'PYTHONUNBUFFERED': '1',
    }
    return subprocess.run(
        ['unshare', '-n', 'sh', '-c', _NETNS, 'sh', *argv],
        env=full_env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def next_domain() -> int:
    """A ROS_DOMAIN_ID for the next isolated run of this test process."""
    return next(_domains) % 101


def popen_isolated(argv: Sequence[str], env: dict[str, str], **kwargs) -> subprocess.Popen:
    """Start argv in a fresh network namespace with loopback up, and return at once.

    The process is the namespace's first: /proc/<pid>/ns/net lets another program join it.
    """
    return subprocess.Popen(['unshare', '-n', 'sh', '-c', _NETNS, 'sh', *argv], env=env, **kwargs)
