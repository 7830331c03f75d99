#!/usr/bin/env bash
# The device check (jaxrel/extension/device_check.py): on a machine with an NVIDIA GPU and jax with its CUDA
# plugin installed (`pip install "jax[cuda13]"`), install the extension's wheels built elsewhere and run the
# installed release's CUDA cell, jax's own device tests and the kernel timings, for every CUDA wheel given;
# one report.
#
#   scripts/device_check.sh WHEELS_DIR [--report DIR] [--jax-tests DIR] [--size N]
#
# WHEELS_DIR holds the jaxrel_rmsnorm wheel and at least one CUDA wheel, jaxrel_rmsnorm_cuda13 and/or
# jaxrel_rmsnorm_cuda12 (`jaxrel build --wheels all --python 3.N`), and for a CUDA major the machine's jax
# lacks, that major's runtime wheel if it should run there (nvidia_cuda_runtime_cu12 on a jax[cuda13]
# machine). The ones for this Python are installed with --no-deps --no-index into the environment of
# $PYTHON (default python3), the CUDA wheels one at a time: use a throwaway environment.
# Nothing is built or downloaded. Exit status: 0 passed, 1 a step failed, 2 bad arguments, 3 no GPU.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-python3}"
if [[ $# -lt 1 || ! -d "$1" ]]; then
  echo "device_check.sh: give the directory of the extension's wheels first (got '${1:-}'). Fix: scripts/device_check.sh WHEELS_DIR" >&2
  exit 2
fi
wheels="$1"; shift
# stand-ins (not zips, no RECORD, a native module that is not ELF or carries no GPU code) are refused here, exit 2
PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" "$python" -m jaxrel.extension.device_check --check-wheels "$wheels"
"$python" -m pip install --quiet --no-index --no-deps --force-reinstall --find-links "$wheels" jaxrel-rmsnorm
exec env PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" "$python" -m jaxrel.extension.device_check \
  --wheels "$wheels" "$@"
