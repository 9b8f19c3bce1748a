#!/usr/bin/env bash
# Issue 32's one lease of a GPU machine: versions, the trainer's CUDA checks, then the benchmark, all into $OUT.
#   run (device tool), carry [".gpu_site"]:  bash bench/trainer_gpu_run.sh
# .gpu_site holds what the GPU image lacks and the trainer needs (structlog, pure Python), copied from .venv:
#   echo /.gpu_site/ >> .git/info/exclude; mkdir -p .gpu_site; cp -r .venv/lib/python3.*/site-packages/structlog* .gpu_site/
# CHECKS=toy,resume,resume_medium,bf16 picks checks; BENCH_S=0 skips the benchmark. Results: $OUT/*.json, run.log.
set -uo pipefail
: "${OUT:?set OUT to the folder that comes back}"
export PYTHONUNBUFFERED=1
if [ -d .gpu_site ]; then export PYTHONPATH="$PWD/.gpu_site${PYTHONPATH:+:$PYTHONPATH}"; fi
{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda,
    "transformers", transformers.__version__, "cuda_available", torch.cuda.is_available())'
} 2>&1 | tee "$OUT/run.log"
timeout "${CHECKS_S:-200}" python3 bench/trainer_gpu_checks.py --device cuda --out "$OUT" \
  --only "${CHECKS:-toy,resume,bf16}" 2>&1 | tee -a "$OUT/run.log"
echo "checks rc=$?" | tee -a "$OUT/run.log"
if [ "${BENCH_S:-170}" != 0 ]; then
  timeout "${BENCH_S:-170}" python3 bench/trainer_gpu.py --steps 20 --out "$OUT/trainer_gpu.json" 2>&1 \
    | tee -a "$OUT/run.log"
  echo "bench rc=$?" | tee -a "$OUT/run.log"
fi
date -u +%FT%TZ | tee -a "$OUT/run.log"
