"""The cell_bridge node behind the UR driver's interfaces, across processes, from its executable."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.graph.isolation import run_isolated

HERE = Path(__file__).parent


def test_cell_bridge_executes_aborts_cancels_switches_vacuum_and_serves_the_cell():
    proc = run_isolated(
        [sys.executable, str(HERE / 'bridge_run.py'), 'level:=21', 'speed:=1'], timeout=60
    )
    lines = [ln for ln in proc.stdout.splitlines() if 'BRIDGE ' in ln]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    got = json.loads(lines[0].split('BRIDGE ', 1)[1])
    # Cell services: reset, an unknown level names the valid ones, present, ground truth.
    assert got['reset'] == {'code': 0, 'n': 4, 'source': 'conveyor'}
    assert got['bad_level']['code'] == 201 and '21, 22, 23' in got['bad_level']['msg']
    pres = got['present']
    assert pres['code'] == 0 and pres['id'] and pres['pending'] >= 1 and not pres['exhausted']
    assert pres['id'] in got['truth_ids'] and got['truth_mass'][pres['id']] > 0
    # FJT success: SUCCESSFUL, feedback each 20 ms tick, final joints within the goal tolerance.
    ok = got['success']
    assert ok['status'] == 4 and ok['code'] == 0  # STATUS_SUCCEEDED
    # The bridge publishes one feedback per tick (75 here; counted exactly in
    # tests/bridge/test_fjt.py). Across processes the feedback topic is keep-last, and a burst
    # faster than real time can outrun the reader on a loaded machine: require a steady stream.
    assert ok['feedback'] >= 30 and ok['final_err'] < 0.01
    # A 1e-5 rad path tolerance aborts with PATH_TOLERANCE_VIOLATED.
    assert got['path']['status'] == 6 and got['path']['code'] == -4  # STATUS_ABORTED
    assert 'shoulder_pan_joint' in got['path']['msg']
    assert got['invalid']['code'] == -2 and 'gripper_joint' in got['invalid']['msg']
    # Canceled mid-way: the goal ends canceled and the arm stops far short of its target.
    c = got['cancel']
    assert c['canceled'] and c['feedback'] >= 20 and 0 < c['moved'] < 0.5 * c['target']
    assert got['set_io'] == {'on': True, 'off': True, 'other_pin': False}


def test_cell_bridge_captures_settles_runs_trials_and_repeats_itself():
    proc = run_isolated([sys.executable, str(HERE / 'bridge_services.py')], timeout=60)
    lines = [ln for ln in proc.stdout.splitlines() if 'SERVICES ' in ln]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    got = json.loads(lines[0].split('SERVICES ', 1)[1])
    cap = got['capture']
    assert cap['code'] == 0 and len(cap['got']) == 6
    # The top camera is 2.40 m up, looking down at the deck top (z 0.144): planar depth 2.256 m.
    assert abs(cap['depth_centre_m'] - 2.256) < 0.01
    assert cap['frame_id'] == 'top_optical' and cap['encoding'] == ['32FC1', 'rgb8']
    assert abs(cap['k0'] - 480 / (2 * 0.41421356)) < 0.01  # fy of a 45 deg fovy at 480 px
    assert cap['bad'][0] == 206 and 'station' in cap['bad'][1]
    assert got['settle']['code'] == 0 and got['deterministic']
    assert (
        got['settle_neg'][0] == 207 and 'expected 0 to 600' in got['settle_neg'][1]
    )  # INVALID_REQUEST
    assert got['stability_none'] == [207, 'no trial selected: set jolts, beam or eumos']
    assert got['stability']['code'] == 0 and got['stability']['trials'] == 1


def test_tf2_ros_buffer_finds_tool0_and_every_camera_optical_frame():
    """cell_bridge and state_publisher publish through tf2_ros broadcasters; a tf2_ros Buffer
    fed by a TransformListener in another process looks up world->tool0 (the URDF chain from
    /joint_states) and world-><camera>_optical (/tf_static) for every camera of the cell."""
    import numpy as np
    from palletizer.core.config import load_config
    from palletizer.core.description import JOINTS
    from palletizer.core.motion import UR10eKinematics
    from palletizer.core.motion.kinematics import fk_dh

    # The cameras the bridge renders (cell_bridge.py: roles pallet, pick and photo).
    cams = {
        n: c
        for n, c in load_config().cell.cameras.items()
        if c.role in ('pallet', 'pick', 'photo')
    }
    proc = run_isolated([sys.executable, str(HERE / 'tf_probe.py'), ','.join(cams)], timeout=120)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('TF ')]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    got = json.loads(lines[0][3:])
    missing = [f for f in ['tool0', 'base_link', *(f'{n}_optical' for n in cams)] if f not in got]
    assert missing == [], got['_frames']
    # world->tool0 is the forward kinematics of the published joint state.
    q = np.array([got['_joints'][j] for j in JOINTS])
    T = UR10eKinematics().T_world_base @ fk_dh(q)
    assert np.allclose(got['tool0'][0], T[:3, 3], atol=1e-4), (got['tool0'], T[:3, 3])
    # Each optical frame sits where the cell's config puts the camera.
    for n, c in cams.items():
        assert np.allclose(got[f'{n}_optical'][0], c.pos, atol=1e-3), n
        assert abs(np.linalg.norm(got[f'{n}_optical'][1]) - 1.0) < 1e-6
    # Both nodes stop on SIGINT with exit code 0 and no traceback.
    assert got['_exit'] == [0, 0], got['_stderr']
    assert not any('Traceback' in e for e in got['_stderr']), got['_stderr']


def test_the_cell_serves_the_ur_drivers_status_io_dashboard_and_zero_ftsensor():
    """The rest of ur_robot_driver's interfaces (docs/real-cell.md): latched robot mode, safety
    mode and program state; I/O states with the vacuum's output; speed scaling; the dashboard's
    queries, stop and play; a trajectory goal refused while the program is stopped; the F/T
    sensor zeroed."""
    proc = run_isolated(
        [sys.executable, str(HERE / 'bridge_run.py'), 'driver_client.py', 'level:=11', 'speed:=1'],
        timeout=90,
    )
    lines = [ln for ln in proc.stdout.splitlines() if 'DRIVER ' in ln]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    got = json.loads(lines[0].split('DRIVER ', 1)[1])
    start = got['start']
    assert (start['robot_mode'], start['safety_mode'], start['running']) == (7, 1, True)
    assert start['scaling'] == 100.0 and start['n_digital'] == 18
    assert start['robot_mode_srv'] == [7, 'Robotmode: RUNNING']
    assert start['safety_mode_srv'] == 'Safetymode: NORMAL'
    assert start['program_running_srv'] is True and start['program_state_srv'] == 'PLAYING'
    assert start['accepted'] is True
    # Stopped from the dashboard: the program state says so, and no goal runs until play.
    stopped = got['stopped']
    assert stopped['stop'] == [True, 'Stopped'] and stopped['running'] is False
    assert stopped['program_state_srv'] == 'STOPPED' and stopped['accepted'] is False
    played = got['played']
    assert played['unlock'] == [False, 'Robot is not in protective stop']
    assert played['play'] == [True, 'Starting program'] and played['running'] is True
    assert played['accepted'] is True
    assert got['vacuum_out_on'] is True and got['vacuum_out_off'] is False
    assert got['vacuum_v'] == 0.0  # nothing sealed: the cups vent to air
    z = got['zero']
    assert z['success'] and z['n_after'] > 10
    assert abs(z['fz_before']) > 10.0 and abs(z['fz_after']) < 2.0, z


def test_the_hardware_profile_runs_on_streams_cameras_hands_over_cartons_and_refuses_sim_calls(
    tmp_path,
):
    """profile:=hardware (docs/real-cell.md "The hardware profile"): with no call at all the
    world and its clock run on; joint states come at 500 Hz of sim time; the cameras stream
    16UC1 depth in millimetres under the topic names the parameters give, at camera_rate_hz;
    the line brings a carton only on the request output and says so on the photo-eye input;
    and the simulated cell's own services answer NOT_OFFERED and are counted."""
    params = tmp_path / 'hardware.yaml'
    params.write_text(
        'cell_bridge:\n'
        '  ros__parameters:\n'
        '    profile: hardware\n'
        '    real_time_factor: 2.0\n'
        '    camera_rate_hz: 4.0\n'
        "    depth_topic: '/cam/{camera}/aligned_depth_to_color/image_raw'\n"
        "    info_topic: '/cam/{camera}/color/camera_info'\n"
    )
    proc = run_isolated(
        [
            sys.executable,
            str(HERE / 'bridge_run.py'),
            'hardware_client.py',
            'level:=11',
            'speed:=1',
            f'params_file:={params}',
        ],
        timeout=150,
    )
    lines = [ln for ln in proc.stdout.splitlines() if 'HARDWARE ' in ln]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    # The world thread stops with the node: no publish into a context that went down.
    assert 'Traceback' not in proc.stdout + proc.stderr, proc.stdout[-3000:]
    got = json.loads(lines[0].split('HARDWARE ', 1)[1])
    assert got['sim_s'] > 0.5, got  # 3 s of wall time with no call: the world ran on
    assert abs(got['js_dt_median'] - 0.002) < 1e-6  # 500 Hz of sim time
    d = got['depth']
    assert (
        d['encoding'] == '16UC1' and d['step'] == 2 * d['width'] and d['frame_id'] == 'top_optical'
    )
    assert 1000 < d['median_mm'] < 3500, d  # the top camera sees the pallet and floor, in mm
    assert abs(d['frame_dt'] - 0.25) < 1e-6 and d['info_frame_id'] == 'top_optical'
    assert got['old_depth'] == 0  # renamed: nothing on the default topic
    assert got['arrived_before'] is False and got['arrived_unasked'] is False
    assert got['request'] is True and got['arrived'] is True and got['request_out_shown'] is True
    assert got['bad_pin'] is False
    code, msg, not_offered = got['reset']
    assert not_offered and code == 210 and '/cell_bridge/reset is not offered' in msg
    assert got['truth'] == [210, 0]  # no simulator truth for anyone in the graph
    assert got['count'] == 2
