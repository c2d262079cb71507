#!/usr/bin/env bash
# The GPU check, run as one prepared script on a lent CUDA machine (see bench/RESULTS.md):
# CUDA tests, then the benchmarks on CUDA and on that machine's CPUs. Writes logs to $OUT.
# Needs the offline device kit (.devkit/, not in git: wheels and import stubs for verl's deps).
set -uo pipefail
OUT=${OUT:-/tmp/rlmetrics-device}
mkdir -p "$OUT"
# shellcheck disable=SC1091
[ -f .devkit/env.sh ] && . .devkit/env.sh
export PYTHONPATH="$PWD/src:$PWD/tests:${PYTHONPATH:-}"
{
  nvidia-smi -L; python3 -c "import torch, numpy, numba; print(torch.__version__, numpy.__version__, numba.__version__)"
  nproc
} > "$OUT/machine.txt" 2>&1
python3 .devkit/smoke.py > "$OUT/smoke.txt" 2>&1
timeout 240 python3 -m pytest -q -p no:cacheprovider -o addopts="" tests/test_data.py -k "cuda or parity_with_verl_torch" \
  -x > "$OUT/cuda_tests.txt" 2>&1
echo "tests rc=$?" >> "$OUT/cuda_tests.txt"
timeout 200 python3 bench/bench_data_metrics.py --device both --repeat 9 > "$OUT/bench_data.txt" 2>&1
echo "rc=$?" >> "$OUT/bench_data.txt"
timeout 120 python3 bench/bench_policy.py --skip-variance --rows 8192 --cuda --repeats 5 > "$OUT/bench_policy_cuda.txt" 2>&1
echo "rc=$?" >> "$OUT/bench_policy_cuda.txt"
timeout 120 python3 bench/bench_policy.py --skip-memory --repeats 5 > "$OUT/bench_policy_cpu.txt" 2>&1
echo "rc=$?" >> "$OUT/bench_policy_cpu.txt"
