#!/usr/bin/env bash
# The main job, on a fresh Debian machine: installs what gridlm needs, builds it, and runs it on
# 4 MPI ranks. For now (before training lands) it shows the grid the ranks form: 2 data-parallel
# replicas x 2 tensor-parallel ranks, and then the same 4 ranks as a 2-stage pipeline.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh cpu >/dev/null
gridlm=build/bin/gridlm
"$gridlm" --version
echo
mpiexec -n 4 "$gridlm" grid --dp 2 --tp 2
echo
mpiexec -n 4 "$gridlm" grid --dp auto --pp 2 --tp 2
