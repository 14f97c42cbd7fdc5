#!/usr/bin/env bash
# Issue 51's device checks, as one script for a lent GPU machine (its own python3, torch and transformers):
#   bash benchmarks/gpu_cluster_check.sh [OUT_DIR] [OPBENCH.py]
# 1. what the machine is; 2. the team's op grid (opbench.py) -> OUT/<gpu>_ops.json, for
#    `python benchmarks/calibrate.py --preset <gpu> --fit`; 3. real one-GPU bf16 training steps and decodes
#    (benchmarks/gpu_step.py) -> OUT/gpu_step.jsonl; 4. `graphprof calibrate --device cuda`.
# Stages run in order of value while the time left (BUDGET seconds, default 540) allows their limit.
set -u
OUT=${1:-${OUT:-/tmp/gpu_cluster_check}}
OPBENCH=${2:-.gpu/opbench.py}
BUDGET=${BUDGET:-540}
mkdir -p "$OUT"
export PYTHONPATH=$PWD:$PWD/cli PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
stage() {  # stage LIMIT_S NAME COMMAND...
  local limit=$1 name=$2; shift 2
  if (( SECONDS + limit > BUDGET )); then echo "== $name: skipped ($SECONDS s used of $BUDGET)"; return; fi
  echo "== $name (limit $limit s, at $SECONDS s)"
  local t0=$SECONDS
  timeout "$limit" "$@" 2>&1 | grep -v "Warning\|warn(" | tail -6
  echo "   $name: rc ${PIPESTATUS[0]}, $((SECONDS - t0)) s"
}
python3 -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(), 'transformers', transformers.__version__)"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.sm,power.limit,driver_version --format=csv
stage 150 opbench bash -c "mkdir -p /tmp/ops && python3 $OPBENCH /tmp/ops && cp /tmp/ops/h100_ops.json $OUT/gpu_ops.json"
stage 70 "train 1b eager b4 s2048" python3 benchmarks/gpu_step.py train --shape 1b --batch 4 --seq 2048
stage 60 "decode 8b eager" python3 benchmarks/gpu_step.py decode --shape 8b
stage 170 "decode 8b compiled" python3 benchmarks/gpu_step.py decode --shape 8b --compile
stage 170 "decode 8b compiled, trees off" python3 benchmarks/gpu_step.py decode --shape 8b --compile --compile-how no-trees
stage 120 "train 1b compiled b4 s2048" python3 benchmarks/gpu_step.py train --shape 1b --batch 4 --seq 2048 --compile
stage 60 "train 3b eager b2 s4096" python3 benchmarks/gpu_step.py train --shape 3b --batch 2 --seq 4096
stage 45 "train 1b full checkpoint b4 s2048" python3 benchmarks/gpu_step.py train --shape 1b --batch 4 --seq 2048 --checkpoint full
stage 60 "graphprof calibrate --device cuda" python3 -m graphprof_cli.main calibrate --device cuda -o "$OUT/local_cuda.json"
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
echo "== done at $SECONDS s"; ls -la "$OUT"
