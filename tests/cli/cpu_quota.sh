#!/usr/bin/env bash
# parallel.wait = auto under a CPU quota: 2 ranks in a cgroup whose CFS quota allows 1 CPU (their
# affinity masks still show every CPU of the machine) are oversubscribed, so they yield their
# cores, and the start-up report names the quota; the same run outside the cgroup on a machine
# with at least 2 CPUs spins. Needs root and a cgroup cpu controller it may write (v1, or v2 with
# cpu delegated), as the CI machine has.
# Usage: cpu_quota.sh MPIEXEC GRIDLM CONFIG
set -u
mpiexec=$1 gridlm=$2 config=$3
work=$(mktemp -d)
name=gridlm-quota-$$
if [[ -w /sys/fs/cgroup/cpu ]]; then
  cg=/sys/fs/cgroup/cpu/$name
  mkdir "$cg" && echo 100000 >"$cg/cpu.cfs_period_us" && echo 100000 >"$cg/cpu.cfs_quota_us"
elif [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
  cg=/sys/fs/cgroup/$name
  echo +cpu >/sys/fs/cgroup/cgroup.subtree_control && mkdir "$cg" &&
    echo "100000 100000" >"$cg/cpu.max"
else
  echo "FAIL: no cgroup cpu controller to write under /sys/fs/cgroup (needs root)"
  exit 1
fi || { echo "FAIL: cannot make a cgroup with a CPU quota at $cg (needs root)"; exit 1; }
trap 'rmdir "$cg" 2>/dev/null; rm -rf "$work"' EXIT

run() {
  timeout 120 "$mpiexec" -n 2 "$gridlm" train --config "$config" --set train.steps=2 \
    --set output.dir="$work/out" 2>&1
}
# The shell enters the cgroup, and mpiexec and the ranks it starts inherit it.
inside=$(export -f run; export mpiexec gridlm config work
         bash -c "echo \$\$ >'$cg/cgroup.procs' && run")
want="waiting ranks yield their cores \(parallel.wait = auto: 1 of 1 node\(s\) has more ranks than cores; this one 2 rank\(s\) on 1 core\(s\), CPU quota 1.0\)"
if ! grep -Eq "$want" <<<"$inside" || ! grep -q "done: loss" <<<"$inside"; then
  echo "FAIL: inside the 1-CPU cgroup, no /$want/ and a finished run in:"
  echo "$inside"
  exit 1
fi
if (($(nproc) >= 2)); then
  outside=$(run)
  if ! grep -q "waiting ranks spin (parallel.wait = auto: 0 of 1 node(s)" <<<"$outside"; then
    echo "FAIL: outside the cgroup, 2 ranks on $(nproc) CPUs should spin:"
    echo "$outside"
    exit 1
  fi
fi
echo "cpu_quota: ok: 2 ranks under a 1-CPU quota yield, outside it they spin"
