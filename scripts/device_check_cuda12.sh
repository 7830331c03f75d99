#!/usr/bin/env bash
# The CUDA 12 extension wheel on a GPU machine whose jax is jax[cuda13] (no jax-cuda12-plugin, no index): what
# the guard says as installed, then, with the guard skipped, what loads, the extension's tests on the GPU, the
# kernels against XLA and the GPU code (cuobjdump where installed).
#
#   scripts/device_check_cuda12.sh WHEELS_DIR
#
# WHEELS_DIR holds jaxrel_rmsnorm and jaxrel_rmsnorm_cuda12 wheels for the machine's Python and the
# nvidia_cuda_runtime_cu12 wheel (12.1 or newer); they are installed --no-deps --no-index into $PYTHON's
# environment (default python3): use a throwaway one.
set -u
python="${PYTHON:-python3}"
if [[ $# -lt 1 || ! -d "$1" ]]; then
  echo "device_check_cuda12.sh: give the directory of the wheels (got '${1:-}'). Fix: scripts/device_check_cuda12.sh WHEELS_DIR" >&2
  exit 2
fi
W="$1"
export PYTHONPATH="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)${PYTHONPATH:+:$PYTHONPATH}"
"$python" -m pip install --quiet --no-index --no-deps "$W"/nvidia_cuda_runtime_cu12-*.whl "$W"/jaxrel_rmsnorm-*.whl \
  "$W"/jaxrel_rmsnorm_cuda12-*.whl 2>&1 | tail -2
"$python" -m pip list 2>/dev/null | grep -iE "^jax|nvidia-cuda-runtime|jaxrel"
echo "== 1. import as installed: the guard"
"$python" -c "import jaxrel_rmsnorm" 2>&1 | tail -4
echo "== 2. the guard skipped: what loads"
JAXREL_SKIP_GUARD=1 "$python" -c "import jaxrel_rmsnorm, jaxrel_rmsnorm_cuda12 as c; print(jaxrel_rmsnorm.platforms(), 'runtime (built, loaded):', c._native.cuda_runtime(), 'driver:', c._guard.cuda_driver_version())"
echo "== 3. the extension's tests on the GPU"
suite="$(dirname "${BASH_SOURCE[0]}")/../jaxrel/cells/suite"
JAXREL_SKIP_GUARD=1 XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 300 "$python" -m pytest -q -p no:cacheprovider \
  -c "$suite/pytest.ini" --confcutdir "$suite" "$suite/test_extension.py" 2>&1 | tail -4
echo "== 4. kernels against XLA"
JAXREL_SKIP_GUARD=1 XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 200 "$python" -m jaxrel.extension.kernel_bench \
  --platform cuda --size 8192 2>&1 | tail -2
echo "== 5. cuobjdump"
module=$(JAXREL_SKIP_GUARD=1 "$python" -c "import jaxrel_rmsnorm_cuda12 as c; print(c._native.__file__)")
if command -v cuobjdump > /dev/null; then cuobjdump --list-elf --list-ptx "$module" 2>&1 | head -5; fi
