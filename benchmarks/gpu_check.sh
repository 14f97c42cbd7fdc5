#!/usr/bin/env bash
# The device checks, as one script for a lent GPU machine (its own python3 and torch; graphprof from this tree):
#   bash benchmarks/gpu_check.sh [OUT_DIR]
# 1. what the machine is; 2. the CUDA paths of the test suite; 3. one --measure report on the GPU;
# 4. benchmarks/bench_measure.py on a few models: measured forward beside graphprof's lower bound and
#    predicted time for the preset the GPU matches, and the allocator peak beside the estimate.
set -u
OUT=${1:-${OUT:-/tmp/gpu_check}}
mkdir -p "$OUT"
export PYTHONPATH=$PWD:$PWD/cli PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 YOLO_OFFLINE=1
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_measure.py -m "not slow" 2>&1 | tail -12
timeout 90 python3 -m graphprof_cli.main --model resnet50 --batch-size 32 --dtype bf16 --measure --device cuda \
  --iters 20 --warmup 5 --width 150 --output "$OUT/resnet50_b32_cuda.json" 2>&1 | tail -45
timeout 330 python3 benchmarks/bench_measure.py --iters 20 --out "$OUT" \
  --models resnet18 resnet50 efficientnet_b0 vit_b_16 convnext_tiny llama 2>&1 | tail -20
