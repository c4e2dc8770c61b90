"""Start the installed telemetry node, feed it three episodes, SIGTERM it, and report the files.

Also starts one node whose runs folder cannot be made and one on a 1 MiB tmpfs that the script
fills, then SIGKILLs. Prints one line `RESULT {json}` with the service answers, the
episodes.jsonl lines and the bags' per-topic counts. Runs inside a network namespace
(tests/graph/isolation.py) and a mount namespace of its own (unshare -m: the tmpfs).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import rclpy
from mcap.reader import make_reader
from palletizer.launcher.graph import describe, parse_launch_args
from palletizer.launcher.process import node_argv
from palletizer.nodes.qos import EVENTS, LATCHED, SENSORS
from palletizer_msgs.msg import EpisodeEvent, HeightMap, PalletState, Placement
from palletizer_msgs.srv import BeginEpisode, EndEpisode
from rosbags.highlevel import AnyReader
from sensor_msgs.msg import JointState
from tf2_msgs.msg import TFMessage

STAMP = '20260509-120000'
OTHER = '20260509-120001'  # a second director on the same domain
FULL = '20260509-120002'  # the run of the node on the disk that fills


def _info(oracle: bool = False, n_objects: int | None = None) -> str:
    info = {'level': 11, 'task': 'table', 'oracle': oracle, 'git_sha': 'abc1234'}
    return json.dumps(info if n_objects is None else {**info, 'n_objects': n_objects})


def _spec(name: str, mode: str, runs_dir: Path, **extra):
    spec = next(
        n for n in describe(parse_launch_args([f'telemetry:={mode}'])) if n.name == 'telemetry'
    )
    remaps = dict(spec.remappings)
    # graph.py does not remap heightmap for telemetry yet; the depth fusion node publishes there.
    remaps.setdefault('heightmap', '/palletizer/heightmap')
    params = {**spec.parameters, 'use_sim_time': False, 'runs_dir': str(runs_dir),
              'run_stamp': STAMP, 'tag': 'graph', **extra}  # fmt: skip
    return replace(spec, name=name, parameters=params, remappings=tuple(remaps.items()))


def _events(seed: int, n: int, run_id: str = STAMP) -> list[EpisodeEvent]:
    kinds = [
        ('perceive', '', {'seen': 1, 'confidence': 0.9}),
        ('pick', 'p0', {'mass_kg': 5.0, 'type': 'A', 'cog_offset_m': [0.001, 0.0, 0.0]}),
        ('plan', 'p0', {'layer': 1, 'slot': 's0', 'score': 0.7, 'breakdown': {'a': 0.7}}),
        ('place', 'p0', {'error_xy_m': 0.003, 'error_yaw_rad': 0.02, 'overhang_m': 0.0}),
        ('settle', 'p0', {'layer': 1, 'drift_m': 0.0005}),
    ]
    out = []
    for seq in range(n):
        kind, pid, payload = kinds[seq % len(kinds)]
        out.append(EpisodeEvent(run_id=run_id, seed=seed, seq=seq, ts=0.25 * seq, kind=kind,
                                package_id=pid, payload_json=json.dumps(payload)))  # fmt: skip
    return out


def _result(seed: int, n_objects: int, n_placed: int) -> str:
    return json.dumps({
        'seed': seed, 'level': 11, 'n_objects': n_objects, 'n_placed': n_placed,
        'n_misrouted': 0, 'success': n_placed == n_objects, 'duration_s': 12.5,
        'failure': None if n_placed == n_objects else 'timeout', 'oracle': False,
        'git_sha': 'abc1234', 'task': 'table', 'metrics': {'score': n_placed / n_objects},
    })  # fmt: skip


def _wait(proc: subprocess.Popen) -> int | str:
    """The exit code, or 'hung' after dumping the node's threads (faulthandler) and killing it."""
    try:
        return proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        time.sleep(1.0)
        proc.kill()
        proc.wait()
        return 'hung'


def _bag(path: Path) -> dict:
    with AnyReader([path]) as reader:
        return {
            'counts': {c.topic: c.msgcount for c in reader.connections},
            'events': [
                (m.seed, m.seq)
                for c, _, raw in reader.messages()
                if c.topic == '/palletizer/episode_events'
                for m in [reader.deserialize(raw, c.msgtype)]
            ],
        }


def _fill(folder: Path) -> Path:
    """Take every free block of the file system of `folder`; return the filler file."""
    filler = folder / 'filler'
    with filler.open('wb', buffering=0) as f:
        try:
            while True:
                f.write(b'x' * 4096)
        except OSError:
            pass
    return filler


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix='telemetry-graph-'))
    params = work / 'params'
    params.mkdir()
    (work / 'blocked').write_text('a file where telemetry_ro wants its runs folder')
    full = work / 'full'
    full.mkdir()
    subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', str(full)], check=True)
    specs = {
        'telemetry': _spec('telemetry', 'disk', work / 'telemetry'),
        'telemetry_off': _spec('telemetry_off', 'off', work / 'telemetry_off'),
        'telemetry_ro': _spec('telemetry_ro', 'disk', work / 'blocked' / 'runs'),
        'telemetry_full': _spec('telemetry_full', 'disk', full / 'runs', min_free_mb=0.1),
    }
    procs = {
        name: subprocess.Popen(
            node_argv(spec, params), env={**os.environ, 'PYTHONFAULTHANDLER': '1'}
        )
        for name, spec in specs.items()
    }
    rclpy.init()
    node = rclpy.create_node('telemetry_feeder')
    pub_ev = node.create_publisher(EpisodeEvent, '/palletizer/episode_events', EVENTS)
    pub_pl = node.create_publisher(Placement, '/palletizer/placements', EVENTS)
    pub_ps = node.create_publisher(PalletState, '/palletizer/pallet_states', EVENTS)
    pub_js = node.create_publisher(JointState, '/joint_states', SENSORS)
    pub_tf = node.create_publisher(TFMessage, '/tf', EVENTS)
    pub_hm = node.create_publisher(HeightMap, '/palletizer/heightmap', LATCHED)
    end = node.create_client(EndEpisode, '/telemetry/end_episode')
    end_off = node.create_client(EndEpisode, '/telemetry_off/end_episode')
    end_ro = node.create_client(EndEpisode, '/telemetry_ro/end_episode')
    end_full = node.create_client(EndEpisode, '/telemetry_full/end_episode')
    begins = {name: node.create_client(BeginEpisode, f'/{name}/begin_episode') for name in specs}
    out: dict = {}

    def call(client, seed: int, result: str, expected: int) -> dict:
        fut = client.call_async(
            EndEpisode.Request(seed=seed, result_json=result, expected_events=expected)
        )
        rclpy.spin_until_future_complete(node, fut, timeout_sec=20.0)
        r = fut.result()
        return {'code': r.error_code, 'msg': r.error_msg, 'written': r.events_written}

    def begin(name: str, seed: int, run_id: str = STAMP, info: str | None = None) -> dict:
        req = BeginEpisode.Request(seed=seed, run_id=run_id, info_json=info or _info())
        fut = begins[name].call_async(req)
        rclpy.spin_until_future_complete(node, fut, timeout_sec=20.0)
        r = fut.result()
        return {'code': r.error_code, 'msg': r.error_msg, 'run_dir': r.run_dir}

    try:
        for c in (end, end_off, end_ro, end_full, *begins.values()):
            if not c.wait_for_service(timeout_sec=30.0):
                raise SystemExit(f'{c.srv_name} never appeared')
        # Let the node's subscriptions match the publishers before anything is sent.
        deadline = time.monotonic() + 20.0
        while pub_ev.get_subscription_count() < 1 or pub_js.get_subscription_count() < 1:
            if time.monotonic() > deadline:
                raise SystemExit('telemetry never subscribed')
            rclpy.spin_once(node, timeout_sec=0.05)
        # Episode seed 5: two cartons, every topic, confirmed count.
        out['begin'] = begin('telemetry', 5)
        # A second run on this domain is refused, and its events are dropped.
        out['wrong_run'] = begin('telemetry', 5, OTHER)
        out['again'] = begin('telemetry', 5)
        out['full_begin'] = begin('telemetry_full', 1, FULL)
        for i, ev in enumerate(_events(5, 10)):
            pub_ev.publish(ev)
            if i == 4:
                for other in _events(9, 3, OTHER):
                    pub_ev.publish(other)
            if ev.kind == 'settle':
                pl = Placement(seq=i // 5, package_id='p0', package_type='A', mass_kg=5.0,
                               dims_m=[0.4, 0.3, 0.2], layer=1, placed=True)  # fmt: skip
                pub_pl.publish(pl)
                ps = PalletState(after_seq=i // 5, mass_kg=5.0 * (i // 5 + 1), fill_ratio=0.2)
                pub_ps.publish(ps)
        for k in range(5):
            pub_js.publish(JointState(name=['j0'], position=[0.1 * k]))
            time.sleep(0.02)
        pub_tf.publish(TFMessage())
        pub_hm.publish(
            HeightMap(ny=1, nx=2, cell_size=0.01, cells=[0.0, 0.1], observed=[True] * 2)
        )
        out['ok'] = call(end, 5, _result(5, 2, 2), 10)
        # Episode seed 6: the director claims 4 events but published 3.
        begin('telemetry', 6)
        for ev in _events(6, 3):
            pub_ev.publish(ev)
        out['mismatch'] = call(end, 6, _result(6, 1, 0), 4)
        out['wrong_seed'] = call(end, 99, _result(99, 1, 0), 0)
        out['off'] = call(end_off, 1, _result(1, 1, 1), 0)
        out['off_begin'] = begin('telemetry_off', 1)
        # The node whose runs folder cannot be made is up and says so.
        out['ro_begin'] = begin('telemetry_ro', 1)
        out['ro_end'] = call(end_ro, 1, _result(1, 1, 1), 0)
        # The disk fills during episode 1: end_episode fails, the node stays up.
        for ev in _events(1, 3, FULL):
            pub_ev.publish(ev)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 0.5:
            rclpy.spin_once(node, timeout_sec=0.05)
        filler = _fill(full)
        out['full_end'] = call(end_full, 1, _result(1, 1, 1), 3)
        out['full_begin_2'] = begin('telemetry_full', 2, FULL)
        filler.unlink()
        out['full_begin_3'] = begin('telemetry_full', 2, FULL)
        out['full_end_2'] = call(end_full, 2, _result(2, 1, 1), 0)
        # SIGKILL: the bag stays readable up to the last episode end.
        procs['telemetry_full'].kill()
        # Episode seed 7 stays open until SIGTERM; begun with its run info (oracle run).
        out['begin_7'] = begin('telemetry', 7, info=_info(oracle=True, n_objects=3))
        for ev in _events(7, 2):
            pub_ev.publish(ev)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 1.0:
            rclpy.spin_once(node, timeout_sec=0.05)
    finally:
        for p in procs.values():
            p.send_signal(signal.SIGTERM)
        out['exit'] = {name: _wait(p) for name, p in procs.items()}
        node.destroy_node()
        rclpy.try_shutdown()
    run_dir = work / 'telemetry' / f'{STAMP}-graph'
    full_dir = full / 'runs' / f'{STAMP}-graph'
    out['full_episodes'] = [
        json.loads(ln) for ln in (full_dir / 'episodes.jsonl').read_text().splitlines()
    ]
    out['full_bag'] = _bag(full_dir / 'bag')
    out['full_bag_files'] = sorted(p.name for p in (full_dir / 'bag').iterdir())
    out['episodes'] = [
        json.loads(ln) for ln in (run_dir / 'episodes.jsonl').read_text().splitlines()
    ]
    out['events'] = [json.loads(ln) for ln in (run_dir / 'events.jsonl').read_text().splitlines()]
    out['placements'] = len((run_dir / 'placements.jsonl').read_text().splitlines())
    with AnyReader([run_dir / 'bag']) as reader:
        out['bag'] = {c.topic: c.msgcount for c in reader.connections}
        out['bag_events'] = [
            json.loads(reader.deserialize(raw, c.msgtype).payload_json)
            for c, _, raw in reader.messages()
            if c.topic == '/palletizer/episode_events'
        ]
    # The same bag through Foxglove's mcap reader: ros2msg schemas, every message.
    with next((run_dir / 'bag').glob('*.mcap')).open('rb') as f:
        reader = make_reader(f)
        summary = reader.get_summary()
        chans = summary.channels.values()
        out['bag_mcap_schemas'] = sorted({summary.schemas[c.schema_id].encoding for c in chans})
        mcap_counts = dict.fromkeys((c.topic for c in chans), 0)
        for _, channel, _ in reader.iter_messages():
            mcap_counts[channel.topic] += 1
        out['bag_mcap'] = mcap_counts
    out['off_files'] = (
        sorted(str(p) for p in (work / 'telemetry_off').rglob('*'))
        if (work / 'telemetry_off').exists()
        else []
    )
    print('RESULT ' + json.dumps(out), flush=True)
    subprocess.run(['umount', str(full)], check=False)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
