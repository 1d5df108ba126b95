#!/usr/bin/env bash
# docs/errors.md must list the catalogue of bad inputs exactly as tests/cli/bad_inputs.tsv holds
# it (bad_inputs.sh --markdown), between its markers.
set -euo pipefail
root=$1
expected=$(bash "$root/tests/cli/bad_inputs.sh" --markdown)
actual=$(sed -n '/<!-- BEGIN bad_inputs.sh --markdown -->/,/<!-- END bad_inputs.sh --markdown -->/p' \
  "$root/docs/errors.md" | sed '1d;$d')
if [[ "$expected" != "$actual" ]]; then
  echo "docs/errors.md's catalogue is out of date; regenerate it with:"
  echo "  bash tests/cli/bad_inputs.sh --markdown"
  diff <(echo "$expected") <(echo "$actual") || true
  exit 1
fi
echo "docs/errors.md lists the $(grep -vc '^#' "$root/tests/cli/bad_inputs.tsv") bad inputs of the catalogue"
