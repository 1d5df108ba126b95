#!/usr/bin/env bash
# Runs a command and checks its exit status and output, for CTest:
#   expect.sh ok|fail 'regex that must appear' ['regex that must not appear'] -- command args...
# 'ok' wants exit status 0, 'fail' any other status. The output checked is stdout and stderr.
set -u
want=$1
match=$2
shift 2
nomatch=""
if [[ $1 != "--" ]]; then
  nomatch=$1
  shift
fi
shift # --
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
echo "[expect.sh] exit status $rc"
if [[ $want == ok && $rc -ne 0 ]]; then echo "[expect.sh] FAIL: wanted exit status 0"; exit 1; fi
if [[ $want == fail && $rc -eq 0 ]]; then echo "[expect.sh] FAIL: wanted a non-zero exit status"; exit 1; fi
if [[ $rc -ge 124 && $want == fail ]]; then echo "[expect.sh] FAIL: killed or timed out ($rc)"; exit 1; fi
if ! grep -Ezq -- "$match" <<<"$out"; then echo "[expect.sh] FAIL: output lacks /$match/"; exit 1; fi
if [[ -n $nomatch ]] && grep -Ezq -- "$nomatch" <<<"$out"; then
  echo "[expect.sh] FAIL: output has /$nomatch/"
  exit 1
fi
echo "[expect.sh] PASS"
