#!/usr/bin/env bash
# The main job, on a fresh Debian machine: installs what gridlm needs, builds it, shows the grid
# 4 MPI ranks form, and trains the tiny GPT (configs/tiny.toml) on the built-in learnable
# synthetic language with 4 data-parallel ranks: the loss falls from ln(512) = 6.2 towards the
# language's entropy rate (about 1.1). Metrics and weights land in gridlm-out/; then it samples
# 40 tokens from the trained weights.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh cpu >/dev/null
gridlm=build/bin/gridlm
# One BLAS thread per rank: the ranks already fill the cores.
export OPENBLAS_NUM_THREADS=1
"$gridlm" --version
echo
mpiexec -n 4 "$gridlm" grid --dp auto --pp 2 --tp 2
echo
mpiexec -n 4 "$gridlm" train --config configs/tiny.toml --set train.micro_batch=2
echo
"$gridlm" sample --weights gridlm-out/model.h5 --prompt-ids 0 --tokens 40
