#!/usr/bin/env bash
# Every run of one paper's tables, in table order, each once (runs shared by several tables run once).
# Used by scripts/reproduce_hadw.sh and scripts/reproduce_dgpo.sh; see `verl-hadw configs --plan <paper>`.
#
# usage: scripts/reproduce_paper.sh hadw|dgpo [--dry-run] [--only GLOB] [--slurm] [--nodes N]
#          [--sbatch-args 'ARGS'] [-- overrides...]
#   --dry-run  print what would run (and what is already done), launch nothing
#   --only     only the runs matching a shell pattern, e.g. --only 'dgpo_t4_*' (Table 4)
#   --slurm    submit one sbatch job per pending step (scripts/slurm/train.sbatch) instead of running here;
#              training jobs run in parallel, each evaluation waits for its training job (afterok); a step whose
#              job (named after the run) is pending or running is not submitted again (squeue). Works from
#              any directory: the jobs get this checkout, the absolute data/output paths and the interpreter
#              through sbatch --export.
#   --nodes N  nodes per Slurm job (default 1; the papers used one 8-GPU node)
#   --sbatch-args  extra sbatch options for every job, e.g. '--partition=gpu --account=x --time=1-00:00:00'
#              (pass --time: a job requeues itself only after a new checkpoint, see scripts/slurm/train.sbatch)
#   overrides  passed to every run, e.g. -- trainer.logger=[console,tensorboard,file,wandb]
# What the plan costs (steps, samples, checkpoint disk, GPU-hours): verl-hadw configs --plan PAPER --costs
#
# Resumable: a step whose <run_dir>/DONE (train) or <run_dir>/eval/DONE (eval) exists is skipped, and an
# interrupted run resumes from its last verl checkpoint. Just run the script again. Environment: see
# scripts/train.sh (VERL_HADW_DATA, VERL_HADW_OUTPUT, VERL_HADW_PYTHON, VERL_HADW_KEEP).
set -euo pipefail

usage() { sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
[[ $# -ge 1 ]] || usage 2
paper=$1
shift
case $paper in
  hadw|dgpo) ;;
  -h|--help) usage 0 ;;
  *) echo "reproduce: unknown paper '$paper' (hadw|dgpo)" >&2; usage 2 ;;
esac
dry=0
slurm=0
nodes=1
only=
sbatch_args=()
overrides=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --dry-run) dry=1 ;;
    --slurm) slurm=1 ;;
    --only) only=$2; shift ;;
    --only=*) only=${1#--only=} ;;
    --nodes) nodes=$2; shift ;;
    --nodes=*) nodes=${1#--nodes=} ;;
    --sbatch-args) read -r -a sbatch_args <<<"$2"; shift ;;
    --sbatch-args=*) read -r -a sbatch_args <<<"${1#--sbatch-args=}" ;;
    -h|--help) usage 0 ;;
    --) shift; overrides+=("$@"); break ;;
    *) echo "reproduce: unknown argument '$1' (hydra overrides go after --)" >&2; usage 2 ;;
  esac
  shift
done

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
home=$(cd "$here/.." && pwd)
PY=${VERL_HADW_PYTHON:-python3}
if ! PY=$(command -v "$PY"); then  # absolute: a Slurm job's PATH may not have the same python3
  echo "reproduce: interpreter '${VERL_HADW_PYTHON:-python3}' not found; set VERL_HADW_PYTHON" >&2
  exit 2
fi
keep=${VERL_HADW_KEEP:-final}
if [[ ! $keep =~ ^(final|all|[1-9][0-9]*)$ ]]; then
  echo "reproduce: VERL_HADW_KEEP=$keep: use final, all or a positive number of checkpoints" >&2
  exit 2
fi
abspath() { case $1 in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$PWD/$1" ;; esac; }
export VERL_HADW_DATA VERL_HADW_OUTPUT VERL_HADW_PYTHON=$PY VERL_HADW_KEEP=$keep
VERL_HADW_DATA=$(abspath "${VERL_HADW_DATA:-data}")
VERL_HADW_OUTPUT=$(abspath "${VERL_HADW_OUTPUT:-runs}")
# what every Slurm job needs, whatever the site's default for exporting the submitting shell's environment
job_env=(VERL_HADW_HOME="$home" VERL_HADW_DATA="$VERL_HADW_DATA" VERL_HADW_OUTPUT="$VERL_HADW_OUTPUT"
  VERL_HADW_PYTHON="$PY" VERL_HADW_KEEP="$keep")
for pair in ${job_env[@]+"${job_env[@]}"}; do
  if [[ $pair == *,* ]]; then
    echo "reproduce: --slurm cannot pass '$pair' (sbatch --export splits on commas); use a path without commas" >&2
    exit 2
  fi
done
export_arg=$(IFS=,; echo "--export=ALL,${job_env[*]}")

plan=$("$PY" -m verl_hadw.cli configs --plan "$paper" --with-dirs ${only:+--only "$only"} \
  "paths.data=$VERL_HADW_DATA" "paths.output=$VERL_HADW_OUTPUT" ${overrides[@]+"${overrides[@]}"})
total=$(wc -l <<<"$plan")
echo "[reproduce $paper] $total steps (outputs under $VERL_HADW_OUTPUT/$paper)"
declare -A train_job=()
slurm_user=${USER:-$(id -un)}
i=0
while read -r action run run_dir; do
  i=$((i + 1))
  flag=()
  marker=$run_dir/DONE
  if [[ $action == eval ]]; then
    flag=(--eval)
    marker=$run_dir/eval/DONE
  fi
  if [[ -f $marker ]]; then
    echo "[$i/$total] done     $action $run"
    continue
  fi
  if [[ $dry == 1 ]]; then
    echo "[$i/$total] pending  $action $run"
    continue
  fi
  if [[ $slurm == 1 ]]; then
    # a run whose job is still pending or running is not submitted again: two jobs would train one run
    # directory, and one's checkpoint pruning would delete the other's checkpoints
    if ! queued=$(squeue --noheader --user="$slurm_user" --name="$run${flag:+-eval}" --format=%i); then
      echo "reproduce: squeue failed, so jobs already queued cannot be told apart; nothing more submitted" >&2
      exit 1
    fi
    queued=${queued%%$'\n'*}
    if [[ -n $queued ]]; then
      echo "[$i/$total] queued   $action $run: job $queued is pending or running; not submitted again"
      [[ $action == train ]] && train_job[$run]=$queued
      continue
    fi
    dep=()
    [[ $action == eval && -n ${train_job[$run]:-} ]] && dep=("--dependency=afterok:${train_job[$run]}")
    job=$(sbatch --parsable --nodes="$nodes" --job-name="$run${flag:+-eval}" "$export_arg" \
      ${sbatch_args[@]+"${sbatch_args[@]}"} ${dep[@]+"${dep[@]}"} "$here/slurm/train.sbatch" "$run" \
      ${flag[@]+"${flag[@]}"} ${overrides[@]+"${overrides[@]}"} </dev/null)
    job=${job%%;*}
    [[ $action == train ]] && train_job[$run]=$job
    echo "[$i/$total] submitted $action $run: job $job"
  else
    echo "[$i/$total] running  $action $run"
    if ! "$here/train.sh" "$run" ${flag[@]+"${flag[@]}"} ${overrides[@]+"${overrides[@]}"} </dev/null; then
      echo "[reproduce $paper] $action $run failed; fix the cause and run this script again (it resumes)" >&2
      exit 1
    fi
  fi
done <<<"$plan"
