#!/usr/bin/env bash
# docs/config.md must contain exactly what `gridlm config --markdown` prints between its markers.
set -euo pipefail
gridlm=$1
doc=$2
expected=$("$gridlm" config --markdown)
actual=$(sed -n '/<!-- BEGIN gridlm config --markdown -->/,/<!-- END gridlm config --markdown -->/p' "$doc" | sed '1d;$d')
if [[ "$expected" != "$actual" ]]; then
  echo "docs/config.md is out of date; regenerate its table with: gridlm config --markdown"
  diff <(echo "$expected") <(echo "$actual") || true
  exit 1
fi
echo "docs/config.md matches the configuration table"
