# Sourced by the scripts that run the venv's Python (demo_cpu.sh, test_cpu.sh), after install_cpu.sh: bytecode
# is written on first import, into "$venv/pycache" (PYTHONPYCACHEPREFIX), never beside the sources. install_cpu.sh
# skips pip's compile of every module (~75 core-s for ~20,000 of them); a run imports ~4,500, compiled once and
# reused by every later process (each Ray worker imports verl, torch and transformers: ~8 core-s from bytecode,
# ~3x that from source). Unsets PYTHONDONTWRITEBYTECODE, which would make every process compile from source again.
case $venv in /*) bytecode_venv=$venv ;; *) bytecode_venv=$PWD/$venv ;; esac
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX="$bytecode_venv/pycache"
