#!/usr/bin/env bash
# Smoke test to run first, before a run costs GPU-days: a few steps of RUN on this node with a tiny batch, a save,
# a resume to more steps, then a verdict (`verl-hadw smoke-check`) on what silently wastes GPU-days: responses
# that never stop (share cut at max_response_length; stop tokens vs the chat template), a reward that is zero
# everywhere, missing hadw/dgpo metrics, an anchor file missing from a checkpoint, a resume that restarts the anchor.
#
# usage: scripts/gpu_smoke.sh RUN [--cpu] [--dry-run] [hydra overrides...]
#   RUN        a run config (`verl-hadw configs --list`); with --cpu: demo (configs/cpu/demo.yaml, the toy task)
#   --cpu      the same test on CPU with the toy task and tiny model (what the test suite runs)
#   --dry-run  compose RUN with the smoke overrides, run verl's config checks on it, print the commands; no training
#   overrides  any Hydra override, e.g. actor_rollout_ref.model.path=/models/Qwen3-4B-Base
#
# Environment:
#   VERL_HADW_PYTHON     interpreter with verl + verl-hadw installed (default: python3)
#   VERL_HADW_DATA       prepared parquet root (`verl-hadw data --out ...`; default ./data)
#   VERL_HADW_SMOKE_DIR  logs, config, checkpoints and verdict (default ./runs/smoke/RUN; its checkpoints are wiped)
#   VERL_HADW_SMOKE_CPU=1  same as --cpu
#   SMOKE_STEPS=4 SMOKE_RESUME_STEPS=6  the first phase trains and saves steps 1..4, the resume continues to 6
#   SMOKE_BATCH=8 SMOKE_N=4  prompts per step and responses per prompt
#   SMOKE_MAX_TRUNCATED=0.25  fail when more responses than this end at max_response_length
# Exit status: 0 the verdict passes, 1 a check or a training phase failed, 2 bad usage or a config that fails to compose.
set -euo pipefail

usage() { sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
[[ $# -ge 1 ]] || usage 2
case $1 in -h|--help) usage 0 ;; esac
run=$1
shift
cpu=${VERL_HADW_SMOKE_CPU:-0}
dry=0
user=()
for arg in "$@"; do
  case $arg in
    --cpu) cpu=1 ;;
    --dry-run) dry=1 ;;
    -h|--help) usage 0 ;;
    --*) echo "gpu_smoke.sh: unknown option $arg" >&2; usage 2 ;;
    *) user+=("$arg") ;;
  esac
done

repo=$(cd "$(dirname "$0")/.." && pwd)
PY=${VERL_HADW_PYTHON:-python3}
abspath() { case $1 in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$PWD/$1" ;; esac; }
smoke=$(abspath "${VERL_HADW_SMOKE_DIR:-runs/smoke/$run}")
steps=${SMOKE_STEPS:-4}
resume_steps=${SMOKE_RESUME_STEPS:-6}
if (( resume_steps <= steps )); then
  echo "gpu_smoke.sh: SMOKE_RESUME_STEPS=$resume_steps must exceed SMOKE_STEPS=$steps" >&2
  exit 2
fi

# What makes it small and resumable; everything else is RUN's own config (the user's overrides come last).
overrides=(
  "data.train_batch_size=${SMOKE_BATCH:-8}" "actor_rollout_ref.actor.ppo_mini_batch_size=${SMOKE_BATCH:-8}"
  "actor_rollout_ref.rollout.n=${SMOKE_N:-4}" "trainer.nnodes=1" "trainer.save_freq=$steps"
  "trainer.test_freq=-1" "trainer.val_before_train=false" "trainer.resume_mode=auto"
  "trainer.default_local_dir=$smoke/checkpoints" "trainer.logger=[console]"
  # its own experiment, hence its own HA-DW anchor (state_key) even on a Ray cluster shared with the real run
  "trainer.experiment_name=smoke_$run"
)
if [[ $cpu == 1 ]]; then
  [[ $run == demo ]] || { echo "gpu_smoke.sh: --cpu runs the toy config 'demo' (configs/cpu/demo.yaml), got $run" >&2; exit 2; }
  export VERL_HADW_CONFIGS=$repo/configs/cpu VERL_HADW_ASSETS=$smoke/assets
  # the toy's 4-token responses are cut by design (speed); its random model stops (<|im_end|>) after ~70 tokens
  # on average, so 192 (prompt 64 + 192 = the model's 256 positions) keeps the truncated share near 5-10 %
  overrides+=("data.max_response_length=192")
  # separate_async trains a step as the launcher's mini-batches (verl_hadw.toy.modes sets them): no step-wide one
  mode=sync
  for arg in ${user[@]+"${user[@]}"}; do  # Hydra's trainer.v1.trainer_mode=, +... or ++...
    [[ $arg =~ ^\+{0,2}trainer\.v1\.trainer_mode=(.*)$ ]] && mode=${BASH_REMATCH[1]}
  done
  if [[ ${mode//[\"\']/} == separate_async ]]; then
    kept=()
    for arg in "${overrides[@]}"; do [[ $arg == actor_rollout_ref.actor.ppo_mini_batch_size=* ]] || kept+=("$arg"); done
    overrides=("${kept[@]}")
  fi
  # (VERL_HADW_CONFIGS above points `configs --show demo` at configs/cpu; the launcher adds cpu/ itself)
  launch() { VERL_HADW_CONFIGS=$repo/configs "$PY" -m verl_hadw.toy.launch --assets "$VERL_HADW_ASSETS" --log "$1" -- "${@:2}"; }
else
  export VERL_HADW_DATA
  VERL_HADW_DATA=$(abspath "${VERL_HADW_DATA:-data}")
  overrides=("paths.data=$VERL_HADW_DATA" "paths.output=$smoke/output" "${overrides[@]}")
  # config dir and name (<paper>/experiments/RUN); the other lines (run dir, checkpoints, resume) are unused here
  { read -r cfg_dir && read -r cfg_name && read -r _ && read -r _ && read -r _; } < \
    <("$PY" -m verl_hadw.cli configs --locate "$run" "${overrides[@]}" || echo)
  [[ -n ${cfg_name:-} ]] || { echo "gpu_smoke.sh: $run does not compose" >&2; exit 2; }
  launch() {
    "$PY" -m verl.trainer.main_ppo "--config-path=$cfg_dir" "--config-name=$cfg_name" "${@:2}" 2>&1 | tee "$1"
  }
fi
overrides+=(${user[@]+"${user[@]}"})  # (bash < 4.4 calls an empty array unbound)

mkdir -p "$smoke"
cfg=$smoke/config.yaml
"$PY" -m verl_hadw.cli configs --show "$run" "${overrides[@]}" >"$cfg" || { echo "gpu_smoke.sh: $run does not compose" >&2; exit 2; }
if [[ $dry == 1 ]]; then
  [[ $cpu == 1 ]] || "$PY" -m verl_hadw.cli configs --validate "$run" "${overrides[@]}" || exit 2
  echo "# composed config: $cfg"
  printf '# phase 1:'; printf ' %q' "${overrides[@]}" "trainer.total_training_steps=$steps"; echo
  printf '# phase 2:'; printf ' %q' "${overrides[@]}" "trainer.total_training_steps=$resume_steps"; echo
  exit 0
fi

rm -rf "$smoke/checkpoints" "$smoke/output"
phase() {  # phase NAME LAST_STEP
  local log=$smoke/$1.log code=0
  echo "== smoke $1: $run up to step $2 (log: $log)"
  launch "$log" "${overrides[@]}" "trainer.total_training_steps=$2" || code=$?
  if [[ $code != 0 ]]; then
    tail -n 40 "$log" >&2
    echo "gpu_smoke.sh: $1 of $run failed (exit $code); full log: $log" >&2
    exit 1
  fi
}
phase train "$steps"
phase resume "$resume_steps"

echo "== smoke verdict ($smoke/verdict.txt)"
set +e
"$PY" -m verl_hadw.cli smoke-check --config "$cfg" --log "$smoke/train.log" --resume-log "$smoke/resume.log" \
  --max-truncated "${SMOKE_MAX_TRUNCATED:-0.25}" --fix-dir "$smoke/generation_config" | tee "$smoke/verdict.txt"
exit "${PIPESTATUS[0]}"
