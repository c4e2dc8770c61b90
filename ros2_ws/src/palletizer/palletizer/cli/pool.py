"""Independent jobs on Ray: the one executor of `scripts/train` and of the reference and
generalise benchmarks.

Local by default: `ray.init(address='local')` starts a Ray instance of its own on this machine's
cores, node address 127.0.0.1, no dashboard, usage statistics off, even where a `ray start` head
is running here. With RAY_ADDRESS set (`head:6379`, run on a node of the
cluster) the jobs go to that cluster instead; every node needs this checkout at the same path
with `source scripts/env.sh` done before `ray start` (docs/training.md "Scaling out on Ray").

A job runs as a Ray task. A worker process that dies (killed, out of memory, a node lost) has its
task retried, up to `retries` times, on another worker; an exception the job raises is not
retried, it reaches the caller. Results are keyed by the job's index, so whatever the order they
finish in, and however many workers run them, the caller can put them back in job order.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ['RETRIES', 'as_completed', 'earlier_rows', 'ray_session', 'run_all', 'worker_count']

# A task whose worker died is resubmitted this many times before the run fails.
RETRIES = 3

# Per worker process: the initialisers already run there, so each runs once per process.
_INITIALISED: set[tuple[str, str, tuple[Any, ...]]] = set()


def _quiet_env() -> None:
    """No usage statistics, no dashboard sources; set before Ray is imported or started."""
    os.environ['RAY_USAGE_STATS_ENABLED'] = '0'
    os.environ.setdefault('RAY_DISABLE_DOCKER_CPU_WARNING', '1')


def worker_count(workers: int | None) -> int:
    """Jobs in flight at once: `workers`, else the cluster's CPUs (this machine's when local)."""
    if workers is not None:
        return max(1, int(workers))
    import ray

    if ray.is_initialized():
        return max(1, int(ray.cluster_resources().get('CPU', 1)))
    return max(1, os.cpu_count() or 1)


@contextmanager
def ray_session(workers: int | None = None) -> Iterator[None]:
    """Ray for the length of the block: the one already started in this process (left running),
    the cluster at RAY_ADDRESS, or a local one with `workers` CPUs (default: all cores)."""
    _quiet_env()
    import ray

    if ray.is_initialized():
        yield
        return
    common: dict[str, Any] = {'include_dashboard': False, 'log_to_driver': False}
    if os.environ.get('RAY_ADDRESS'):
        ray.init(address=os.environ['RAY_ADDRESS'], **common)
    else:
        # address='local': a new instance of our own. Without it, ray.init looks for a
        # `ray start` head left running on this machine, joins it, and then refuses num_cpus.
        ray.init(
            address='local',
            num_cpus=max(1, workers or os.cpu_count() or 1),
            _node_ip_address='127.0.0.1',
            **common,
        )
    try:
        yield
    finally:
        ray.shutdown()


def _call(
    fn: Callable[[Any], Any],
    init: Callable[..., None] | None,
    init_args: tuple[Any, ...],
    job: Any,
) -> Any:
    """In the worker: run `init(*init_args)` once per process, then `fn(job)`."""
    if init is not None:
        key = (init.__module__, init.__qualname__, init_args)
        if key not in _INITIALISED:
            init(*init_args)
            _INITIALISED.add(key)
    return fn(job)


def as_completed(
    fn: Callable[[Any], Any],
    jobs: Sequence[Any],
    *,
    workers: int | None = None,
    init: Callable[..., None] | None = None,
    init_args: tuple[Any, ...] = (),
    retries: int = RETRIES,
) -> Iterator[tuple[int, Any]]:
    """(index, fn(jobs[index])) as each job finishes, at most `workers` in flight.

    `fn` and `init` must be importable module-level functions (the workers import them). Runs
    inside `ray_session` (starts one around itself when none is running).
    """
    _quiet_env()
    import ray

    with ray_session(workers):
        limit = worker_count(workers)
        task = ray.remote(num_cpus=1, max_retries=retries, retry_exceptions=False)(_call)
        pending: dict[Any, int] = {}
        queue = list(enumerate(jobs))
        queue.reverse()
        while queue or pending:
            while queue and len(pending) < limit:
                i, job = queue.pop()
                pending[task.remote(fn, init, init_args, job)] = i
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                i = pending.pop(ref)
                yield i, ray.get(ref)


def run_all(
    fn: Callable[[Any], Any],
    jobs: Sequence[Any],
    *,
    workers: int | None = None,
    init: Callable[..., None] | None = None,
    init_args: tuple[Any, ...] = (),
    on_result: Callable[[int, Any], None] | None = None,
) -> list[Any]:
    """fn(job) for every job, in job order; on_result(index, result) as each one finishes."""
    out: list[Any] = [None] * len(jobs)
    for i, r in as_completed(fn, jobs, workers=workers, init=init, init_args=init_args):
        out[i] = r
        if on_result is not None:
            on_result(i, r)
    return out


def absolute(path: str | os.PathLike[str]) -> str:
    """A path a worker on another node (same checkout, any working directory) can open."""
    return str(Path(path).resolve())


def earlier_rows(log: Path, resume: bool, keep: Callable[[dict[str, Any]], bool]) -> list[dict]:
    """A benchmark's episode log (one JSON row a line, appended as episodes finish): with
    `resume`, the rows `keep` accepts (a torn last line is skipped); without, none, and the
    log is removed so that the run starts it anew."""
    if not resume:
        log.unlink(missing_ok=True)
        return []
    if not log.exists():
        return []
    rows = []
    for line in log.read_text().splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue  # a torn last line
        if keep(r):
            rows.append(r)
    return rows
