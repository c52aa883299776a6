# Sourced by the scripts that run the venv's Python (demo_cpu.sh, test_cpu.sh), after install_cpu.sh: bytecode
# is written on first import, into "$venv/pycache" (PYTHONPYCACHEPREFIX), never beside the sources. install_cpu.sh
# skips pip's compile of every module (~75 core-s for ~20,000 of them); a run imports ~4,500. Unsets
# PYTHONDONTWRITEBYTECODE, which would make every process compile from source again (each Ray worker imports verl,
# torch and transformers: ~8 core-s from bytecode, ~3x that from source).
# The first time, one process imports what every run's processes import (torch, transformers, ray, verl's trainer,
# workers, agent and reward loops, TRL) and so writes their bytecode once (~25 core-s; a failure there is left to
# the doctor to name): otherwise the first processes of a run, started together (a launch's Ray workers, the test
# session's processes), each compile them.
case $venv in /*) bytecode_venv=$venv ;; *) bytecode_venv=$PWD/$venv ;; esac
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX="$bytecode_venv/pycache"
if [ ! -e "$PYTHONPYCACHEPREFIX/.warm" ]; then
  "$bytecode_venv/bin/python" -W ignore -c "import torch, transformers, ray, verl.trainer.main_ppo, \
verl.trainer.ppo.ray_trainer, verl.workers.engine_workers, verl.experimental.agent_loop, \
verl.experimental.reward_loop, trl" >/dev/null 2>&1 && touch "$PYTHONPYCACHEPREFIX/.warm"
fi
