# Sourced by the benchmarks: strict mode, the repository root as the working folder, the gridlm
# they measure, a scratch folder `out` removed on exit, and `median` of numbers on stdin.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
gridlm=$PWD/build/bin/gridlm
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
