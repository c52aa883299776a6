#!/usr/bin/env bash
# Install verl-hadw for the GPU reproductions on a CUDA machine: verl 0.9.1's GPU pins (torch 2.11.0,
# vllm 0.24.0, transformers 5.9.0, flash-attn 2.8.3) + verl-hadw[gpu,repro], into a virtualenv (default: .venv in
# the checkout; override with VERL_HADW_VENV).
#
# usage: scripts/install_gpu.sh [--resolve-only]
#   --resolve-only  install nothing: check in a throwaway virtualenv that pip's resolver accepts the whole pinned
#                   set (step 1 + step 3 below, with flash-attn 2.8.3 standing as installed, as after step 2) and
#                   print the versions it picks. Needs no GPU, no CUDA and no build.
#
# The order is flash-attn's: its only PyPI release is a source package whose build imports torch, so pip's one-shot
# `pip install -e ".[gpu,repro]"` stops at "No module named 'torch'" on a fresh machine.
#   1. torch, torchvision, torchaudio at verl's pins (CUDA 13.0 wheels from PyPI);
#   2. flash-attn 2.8.3 with --no-build-isolation (it builds against the torch of step 1), or the prebuilt wheel
#      FLASH_ATTN_WHEEL=<URL or path> (from flash-attn's GitHub releases, matching torch 2.11 / CUDA / Python:
#      seconds instead of a build). The build compiles CUDA kernels for about half an hour with ninja and many
#      cores, several hours without ninja or with few cores; MAX_JOBS (default 4) bounds its parallel compilers,
#      each of which can take several GB of RAM;
#   3. verl[vllm,fsdp]==0.9.1 and this checkout with [gpu,repro] (editable): flash-attn is already there.
# Environment: VERL_HADW_VENV, FLASH_ATTN_WHEEL, MAX_JOBS.
set -euo pipefail
cd "$(dirname "$0")/.."

# verl 0.9.1's pins (its [vllm] and [fsdp] extras; tests/project/test_packaging.py checks them against verl's metadata)
TORCH=(torch==2.11.0 torchvision==0.26.0 torchaudio==2.11.0)
FLASH_ATTN=flash-attn==2.8.3
PROJECT=(-e ".[gpu,repro]")

resolve_only=0
case ${1:-} in
  "") ;;
  --resolve-only) resolve_only=1 ;;
  -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "install_gpu.sh: unknown argument $1" >&2; exit 2 ;;
esac

if [[ $resolve_only == 1 ]]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m venv "$tmp/venv"
  py=$tmp/venv/bin/python
  "$py" -m pip install -q -U pip
  # What step 2 leaves behind, as pip sees it: the flash-attn 2.8.3 distribution (its requirements: torch, einops).
  site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  meta=$site/flash_attn-2.8.3.dist-info
  mkdir -p "$meta"
  printf 'Metadata-Version: 2.1\nName: flash_attn\nVersion: 2.8.3\nRequires-Dist: torch\nRequires-Dist: einops\n' \
    >"$meta/METADATA"
  echo pip >"$meta/INSTALLER"
  : >"$meta/RECORD"
  echo "[install_gpu] pip install --dry-run: ${TORCH[*]} ${PROJECT[*]} (flash-attn 2.8.3 installed by step 2)"
  start=$SECONDS
  "$py" -m pip install -q --dry-run --report "$tmp/report.json" "${TORCH[@]}" "${PROJECT[@]}"
  "$py" - "$tmp/report.json" "$((SECONDS - start))" <<'EOF'
import json, sys
from importlib.metadata import version
report = json.load(open(sys.argv[1]))
picked = {item["metadata"]["name"].lower().replace("_", "-"): item["metadata"]["version"] for item in report["install"]}
picked["flash-attn"] = version("flash_attn") + " (step 2, already installed: pip accepted it)"
print(f"[install_gpu] resolved {len(report['install'])} packages in {sys.argv[2]} s, no conflict:")
for name in ("torch", "vllm", "transformers", "flash-attn", "verl", "verl-hadw", "ray", "math-verify"):
    print(f"  {name:13s} {picked.get(name, 'MISSING')}")
EOF
  exit 0
fi

venv=${VERL_HADW_VENV:-.venv}
[[ -x $venv/bin/python ]] || python3 -m venv "$venv"
pip=("$venv/bin/python" -m pip)
echo "[install_gpu] into $venv: 1/3 ${TORCH[*]}"
"${pip[@]}" install -U pip
"${pip[@]}" install "${TORCH[@]}"
if [[ -n ${FLASH_ATTN_WHEEL:-} ]]; then
  echo "[install_gpu] 2/3 flash-attn from the prebuilt wheel $FLASH_ATTN_WHEEL"
  "${pip[@]}" install "${TORCH[@]}" "$FLASH_ATTN_WHEEL"  # torch stays at the pin
else
  echo "[install_gpu] 2/3 $FLASH_ATTN, built against that torch (--no-build-isolation; MAX_JOBS=${MAX_JOBS:-4})"
  echo "[install_gpu]     about 30 min with ninja and many cores, hours without; FLASH_ATTN_WHEEL=<url> skips it"
  "${pip[@]}" install packaging ninja psutil wheel setuptools einops
  MAX_JOBS=${MAX_JOBS:-4} "${pip[@]}" install --no-build-isolation "$FLASH_ATTN"
fi
echo "[install_gpu] 3/3 verl[vllm,fsdp]==0.9.1 + verl-hadw[gpu,repro] (editable)"
"${pip[@]}" install "${TORCH[@]}" "${PROJECT[@]}"
"$venv/bin/python" -c 'import flash_attn, torch, verl, verl_hadw, vllm
print(f"[install_gpu] done: torch {torch.__version__} (CUDA {torch.version.cuda}), vllm {vllm.__version__}, "
      f"flash-attn {flash_attn.__version__}, verl {verl.__version__}; next: {__import__("sys").prefix}/bin/verl-hadw data")'
