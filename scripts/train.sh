#!/usr/bin/env bash
# Train (or evaluate) one paper-reproduction run on this node with verl's own entry point:
#   python -m verl.trainer.main_ppo --config-path=$(verl-hadw configs) --config-name=<paper>/experiments/<run> ...
#
# usage: scripts/train.sh RUN [--dry-run] [--eval] [hydra overrides...]
#   RUN        a run name: `verl-hadw configs --list` (e.g. hadw_t1_qwen3_4b_grpo_hadw, dgpo_t1_dgpo)
#   --dry-run  print the composed config and the command, launch nothing
#   --eval     a val_only pass on the run's latest checkpoint (configs/eval/<paper>.yaml; DGPO's final
#              evaluation), logged under <run_dir>/eval/
#   overrides  any Hydra override, e.g. trainer.total_epochs=1 actor_rollout_ref.model.path=/models/x
#
# Environment:
#   VERL_HADW_DATA    prepared parquet root (`verl-hadw data --out ...`; default ./data)
#   VERL_HADW_OUTPUT  run output root (default ./runs): <root>/<project>/<run>/{checkpoints,tensorboard,metrics,logs}
#   VERL_HADW_PYTHON  interpreter with verl + verl-hadw installed (default: python3)
#   VERL_HADW_LAUNCH_PREFIX  command prefix for main_ppo (scripts/slurm/train.sbatch sets `srun --overlap ...`)
#   VERL_HADW_KEEP    checkpoints kept once the run is DONE: final (default: the last step's weights, no
#                     optimizer state), all (verl's checkpoints as they are) or N (the newest N, whole)
#
# Resumable: verl resumes from the newest checkpoint in <run_dir>/checkpoints (trainer.resume_mode=auto) and the
# HA-DW anchor comes back with it (HadwCheckpointCallback). A resume skips verl's pre-training validation
# (trainer.val_before_train=false) unless that checkpoint's validation is missing from the logs, and drops the
# checkpoints it supersedes. <run_dir>/DONE (or eval/DONE) marks a finished run; the reproduce scripts and the
# Slurm job skip runs that have it.
set -euo pipefail
export PYTHONUNBUFFERED=1  # the log below is tee'd: without it Python's output arrives in 8 KB blocks

usage() { sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
[[ $# -ge 1 ]] || usage 2
case $1 in -h|--help) usage 0 ;; esac
run=$1
shift
dry=0
mode=train
overrides=()
for arg in "$@"; do
  case $arg in
    --dry-run) dry=1 ;;
    --eval) mode=eval ;;
    -h|--help) usage 0 ;;
    --*) echo "train.sh: unknown option $arg" >&2; usage 2 ;;
    *) overrides+=("$arg") ;;
  esac
done

PY=${VERL_HADW_PYTHON:-python3}
keep=${VERL_HADW_KEEP:-final}
if [[ ! $keep =~ ^(final|all|[1-9][0-9]*)$ ]]; then  # checked now, not after days of training
  echo "train.sh: VERL_HADW_KEEP=$keep: use final, all or a positive number of checkpoints" >&2
  exit 2
fi
abspath() { case $1 in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$PWD/$1" ;; esac; }
export VERL_HADW_DATA VERL_HADW_OUTPUT
VERL_HADW_DATA=$(abspath "${VERL_HADW_DATA:-data}")
VERL_HADW_OUTPUT=$(abspath "${VERL_HADW_OUTPUT:-runs}")

paper=${run%%_*}
if [[ $mode == eval ]]; then
  case $paper in hadw|dgpo) ;; *) echo "train.sh: --eval needs a hadw_* or dgpo_* run, got $run" >&2; exit 2 ;; esac
  overrides=("eval=$paper" ${overrides[@]+"${overrides[@]}"})  # each run file has the default /eval: null
fi
# Absolute paths on the command line: verl resolves ${paths.*} in its TaskRunner, whose working directory and
# environment may differ from this shell's (e.g. on a Ray cluster started earlier).
overrides=("paths.data=$VERL_HADW_DATA" "paths.output=$VERL_HADW_OUTPUT" ${overrides[@]+"${overrides[@]}"})

# config dir and name (<paper>/experiments/<run>), run dir, checkpoint dir, and the overrides of this start (a
# resume: trainer.val_before_train=false)
{ read -r cfg_dir && read -r cfg_name && read -r run_dir && read -r ckpt_dir && read -r start_overrides; } < \
  <("$PY" -m verl_hadw.cli configs --locate "$run" ${overrides[@]+"${overrides[@]}"} || echo)
if [[ -z ${ckpt_dir:-} ]]; then
  echo "train.sh: could not compose run '$run' (see the error above; runs: verl-hadw configs --list)" >&2
  exit 2
fi
resume=()
[[ -n $start_overrides ]] && read -r -a resume <<<"$start_overrides"
# before the user's overrides, so that an explicit trainer.val_before_train=... still wins
overrides=("${overrides[@]:0:2}" ${resume[@]+"${resume[@]}"} "${overrides[@]:2}")
log_dir=$run_dir
[[ $mode == eval ]] && log_dir=$run_dir/eval
stamp=$(date +%Y%m%d-%H%M%S)${SLURM_JOB_ID:+-job$SLURM_JOB_ID}${SLURM_RESTART_COUNT:+-restart$SLURM_RESTART_COUNT}

# Where verl's loggers write: tensorboard (TENSORBOARD_DIR) and the jsonl file logger (VERL_FILE_LOGGER_PATH,
# one file per attempt: verl truncates it on open). Passed through Ray's runtime_env so that every process of
# the job sees them, whichever node verl's TaskRunner lands on.
env_overrides=(
  "++ray_kwargs.ray_init.runtime_env.env_vars.TENSORBOARD_DIR=$log_dir/tensorboard"
  "++ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH=$log_dir/metrics/$stamp.jsonl"
  "hydra.run.dir=$log_dir/hydra/$stamp"
)
cmd=("$PY" -m verl.trainer.main_ppo "--config-path=$cfg_dir" "--config-name=$cfg_name"
  ${overrides[@]+"${overrides[@]}"} ${env_overrides[@]+"${env_overrides[@]}"})
prefix=()
[[ -n ${VERL_HADW_LAUNCH_PREFIX:-} ]] && read -r -a prefix <<<"$VERL_HADW_LAUNCH_PREFIX"

if [[ $dry == 1 ]]; then
  "$PY" -m verl_hadw.cli configs --show "$run" ${overrides[@]+"${overrides[@]}"}
  echo "# run dir: $run_dir"
  printf '# command:'
  printf ' %q' ${prefix[@]+"${prefix[@]}"} ${cmd[@]+"${cmd[@]}"}
  echo
  exit 0
fi

# Hydra keeps the composed config and the overrides of every attempt in $log_dir/hydra/<stamp>/.hydra/
mkdir -p "$log_dir/metrics" "$log_dir/logs"
echo "[train.sh] $mode $run -> $log_dir (log: $log_dir/logs/$stamp.log)"
if [[ $mode == train && -f $ckpt_dir/latest_checkpointed_iteration.txt ]]; then
  from=$ckpt_dir/global_step_$(<"$ckpt_dir/latest_checkpointed_iteration.txt")
  echo "[train.sh] resuming from $from${resume[*]:+ (${resume[*]})}"
  "$PY" -m verl_hadw.repro.train_job prune "$ckpt_dir" --keep "$keep" --resume ||
    echo "[train.sh] warning: could not drop superseded checkpoints in $ckpt_dir" >&2
fi
set +e
${prefix[@]+"${prefix[@]}"} ${cmd[@]+"${cmd[@]}"} 2>&1 | tee -a "$log_dir/logs/$stamp.log"
status=${PIPESTATUS[0]}
set -e
if [[ $status -ne 0 ]]; then
  echo "[train.sh] $run failed (exit $status); run the same command again to resume from the last checkpoint" >&2
  exit "$status"
fi
date -u +%FT%TZ >"$log_dir/DONE"
echo "[train.sh] $mode $run finished: $log_dir/DONE"
if [[ $mode == train ]]; then  # retention: the run is done, no resume will need its optimizer state
  "$PY" -m verl_hadw.repro.train_job prune "$ckpt_dir" --keep "$keep" ||
    echo "[train.sh] warning: pruning $ckpt_dir failed (VERL_HADW_KEEP=$keep); the run itself is complete" >&2
fi
