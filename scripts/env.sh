# Source this file to use the standalone workspace (real rclpy from the pinned wheels in .venv and
# the colcon install space in ros2_ws/install):  source scripts/env.sh
# scripts/setup must have run once. Safe to source more than once.
_pz_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PALLETIZER_ROOT="$_pz_root"
export VIRTUAL_ENV="$_pz_root/.venv"
case ":$PATH:" in *":$VIRTUAL_ENV/bin:"*) ;; *) export PATH="$VIRTUAL_ENV/bin:$PATH" ;; esac
_pz_site="$("$VIRTUAL_ENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
# The wheels re-exec every Python to set LD_LIBRARY_PATH unless told the bootstrap is done;
# setting both here saves ~0.02 s per process and keeps subprocess tests predictable.
export _ROS_WHEELS_BOOTSTRAP_COMPLETE=1
_pz_libs="$(printf '%s:' "$_pz_site"/ros_*.libs)$VIRTUAL_ENV/lib"
_pz_install="$_pz_root/ros2_ws/install"
if [ -d "$_pz_install" ]; then
  for _pz_pkg in "$_pz_install"/*/; do
    _pz_pkg="${_pz_pkg%/}"
    [ -d "$_pz_pkg/lib" ] && _pz_libs="$_pz_pkg/lib:$_pz_libs"
    _pz_ament="$_pz_pkg:${_pz_ament:-}"
    for _pz_py in "$_pz_pkg"/lib/python3*/site-packages; do
      [ -d "$_pz_py" ] || continue
      _pz_pypath="$_pz_py:${_pz_pypath:-}"
      # colcon --symlink-install leaves ament_python packages as egg-links to the build folder.
      for _pz_link in "$_pz_py"/*.egg-link; do
        [ -f "$_pz_link" ] && _pz_pypath="$(head -n 1 "$_pz_link"):$_pz_pypath"
      done
    done
  done
fi
export LD_LIBRARY_PATH="$_pz_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# A ROS install sourced before (/opt/ros/jazzy) stays after this workspace's prefixes:
# scripts/setup builds no upstream package such an install provides, so the nodes need it.
_pz_outer=""
IFS=: read -ra _pz_parts <<< "${AMENT_PREFIX_PATH:-}"
for _pz_p in "${_pz_parts[@]}"; do
  case "$_pz_p" in ""|"$_pz_root"|"$_pz_root"/*) ;; *) _pz_outer="${_pz_outer:+$_pz_outer:}$_pz_p" ;; esac
done
export AMENT_PREFIX_PATH="${_pz_ament:-}$VIRTUAL_ENV${_pz_outer:+:$_pz_outer}"
export CMAKE_PREFIX_PATH="${_pz_ament:-}$VIRTUAL_ENV${_pz_outer:+:$_pz_outer}"
export PYTHONPATH="${_pz_pypath:-}${PYTHONPATH:-}"
export PYTHONPATH="${PYTHONPATH%:}"
export RMW_IMPLEMENTATION="${RMW_IMPLEMENTATION:-rmw_fastrtps_cpp}"
export MUJOCO_GL="${MUJOCO_GL:-egl}"
export PALLETIZER_CONFIG_DIR="${PALLETIZER_CONFIG_DIR:-$_pz_root/configs}"
unset _pz_root _pz_site _pz_libs _pz_install _pz_pkg _pz_ament _pz_py _pz_pypath _pz_link _pz_outer _pz_parts _pz_p
