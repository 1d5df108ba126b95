#!/usr/bin/env bash
# A two-node Slurm cluster on this one machine, for the tests that submit the real job scripts
# with sbatch: munged, slurmctld and two slurmd processes (nodes n1 and n2, each with its own
# port and spool directory), as root, on loopback, without systemd; everything in DIR.
#   cluster.sh start DIR    writes DIR/slurm.conf, starts the daemons, waits until both nodes
#                           are idle; then use it with SLURM_CONF=DIR/slurm.conf
#   cluster.sh stop DIR     stops what start started
# Needs Debian's slurmctld, slurmd, slurm-client and munge (scripts/install-deps.sh --slurm).
set -euo pipefail
action=$1 dir=$(realpath -m "$2")
cpus=${GRIDLM_SLURM_CPUS:-2} # per node: the tests run 2 tasks on each
port=${GRIDLM_SLURM_PORT:-16817} # slurmctld's; the nodes' are the next two (another value lets two
                                 # test runs share a machine)

stop() {
  for pid in "$dir"/*.pid; do
    [[ -f $pid ]] && kill "$(cat "$pid")" 2>/dev/null || true
  done
  sleep 1
  for pid in "$dir"/*.pid; do
    [[ -f $pid ]] && kill -9 "$(cat "$pid")" 2>/dev/null || true
    rm -f "$pid"
  done
}

if [[ $action == stop ]]; then
  stop
  exit 0
fi
[[ $action == start ]] || { echo "usage: cluster.sh start|stop DIR" >&2; exit 2; }
for tool in munged slurmctld slurmd sbatch; do
  command -v "$tool" >/dev/null || { echo "cluster.sh: no $tool; run scripts/install-deps.sh --slurm" >&2; exit 1; }
done
stop
rm -rf "$dir/state" "$dir/spool" "$dir/munge"
mkdir -p "$dir/state" "$dir/spool/n1" "$dir/spool/n2" "$dir/munge"
# munge: its own key and socket here, so that nothing of the machine's is used or changed.
key=$dir/munge/munge.key
dd if=/dev/urandom of="$key" bs=1024 count=1 status=none
chmod 400 "$key"
socket=$dir/munge/munge.socket
munged --force --key-file="$key" --socket="$socket" --pid-file="$dir/munged.pid" \
  --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed"
cat >"$dir/slurm.conf" <<CONF
ClusterName=gridlm-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=pmi2
ReturnToService=2
MinJobAge=2
KillWait=5
MessageTimeout=20
JobRequeue=1
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((port + 1)) CPUs=$cpus State=UNKNOWN
NodeName=n2 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((port + 2)) CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$dir/slurm.conf
slurmctld -c -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF" -N n1
slurmd -f "$SLURM_CONF" -N n2
for _ in $(seq 60); do
  if [[ $(sinfo -h -o %t 2>/dev/null | sort -u | tr -d '\n') == idle ]]; then
    echo "cluster.sh: nodes n1 and n2 idle; SLURM_CONF=$SLURM_CONF"
    exit 0
  fi
  sleep 1
done
echo "cluster.sh: the nodes did not come up; see $dir/*.log" >&2
sinfo >&2 || true
exit 1
