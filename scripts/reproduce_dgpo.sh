#!/usr/bin/env bash
# Reproduce the DGPO experiments of MathForge (arXiv 2601.20614) with Qwen2.5-Math-7B: Table 1 (base model, GRPO,
# DGPO), Table 3 (component ablation, DQW temperatures) and Table 4 (GPG / DAPO / GSPO, each -/+ DGPO), in that
# order; each training is followed by the paper's final evaluation (val_only pass, all six benchmarks).
# Then: verl-hadw results $VERL_HADW_OUTPUT/dgpo/*
# usage: scripts/reproduce_dgpo.sh [--dry-run] [--only GLOB] [--slurm] [--nodes N] [-- hydra overrides...]  (resumable)
exec "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/reproduce_paper.sh" dgpo "$@"
