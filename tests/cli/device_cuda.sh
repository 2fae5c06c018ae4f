#!/bin/sh
# `satrap train --device cuda`: on a machine with an NVIDIA GPU (and a CUDA build) the tiny job
# trains on it; anywhere else the job fails at once with a clear reason.
# usage: device_cuda.sh SATRAP TINY_JOB
satrap=$1
job=$2
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  exec "$satrap" train --job "$job" --device cuda --json
fi
exec "$(dirname "$0")/expect_error.sh" "training.device cuda: " "$satrap" train --job "$job" --device cuda
