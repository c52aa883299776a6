#!/usr/bin/env bash
# Reproduce the HA-DW paper (arXiv 2601.08521): Table 1 (18 runs: {Qwen3-4B-Base, Qwen3-8B-Base,
# LLaMA-3.2-3B-Instruct} x {GRPO, GSPO, DAPO} x {-, +HA-DW}), Table 2 (fixed anchors 0.4/0.5/0.6), Table 3 (GRPO,
# G = 16) and Table 7 (lambda_scale), in that order; 28 trainings, each validated in-training with the paper's
# protocol. Then: verl-hadw results $VERL_HADW_OUTPUT/hadw/*
# usage: scripts/reproduce_hadw.sh [--dry-run] [--only GLOB] [--slurm] [--nodes N] [-- hydra overrides...]  (resumable)
exec "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/reproduce_paper.sh" hadw "$@"
