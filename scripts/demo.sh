#!/usr/bin/env bash
# The main job, on a fresh Debian machine: installs what gridlm needs, builds it, shows the grid
# 4 MPI ranks form, makes the embedded default dataset (gridlm prepare-data --synthetic: a
# templated English-like corpus, tokenized with a 512-piece SentencePiece BPE model learned from
# it, written collectively by 4 ranks into one HDF5 file), trains the tiny GPT
# (configs/tiny.toml) on it with 4 data-parallel ranks, validation loss every 50 steps, and
# samples text from the trained weights. Everything lands in gridlm-out/.
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
mkdir -p gridlm-out
mpiexec -n 4 "$gridlm" prepare-data --synthetic --vocab-size 512 -o gridlm-out/synthetic.h5
echo
mpiexec -n 4 "$gridlm" train --config configs/tiny.toml --set data.source=gridlm-out/synthetic.h5 \
  --set train.micro_batch=2 --set train.eval_every=50
echo
"$gridlm" sample --weights gridlm-out/model.h5 --tokens 80
