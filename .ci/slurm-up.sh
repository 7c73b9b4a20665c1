#!/usr/bin/env bash
# CI: install SLURM and munge (Debian packages) and bring up a local cluster: slurmctld and slurmd
# without cgroups or accounting. tests/test_slurm.py submits real cells to it.
# Two nodes where the kernel lets us (SLURM_NODES=2, the default): the second slurmd runs in its own
# network namespace (a veth pair, 10.77.0.2) and UTS namespace (hostname node2), so it is a host
# of its own to SLURM and to the collector (its rows say node2) while sharing this machine's CPUs
# and filesystem (the run folder is "shared storage", as NFS is on a cluster). Where namespaces
# cannot be made, one node (SLURM_NODES=1 asks for that).
set -euo pipefail
if ! command -v slurmctld >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null
fi
HOST=$(hostname -s)
CPUS=$(nproc)
MEM=$(( ($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024) / 2 ))
NODES=${SLURM_NODES:-2}
CTLD_ADDR=127.0.0.1
if [ "$NODES" = 2 ]; then  # the second node's namespace and the veth pair to it
  if ip netns list 2>/dev/null | grep -qw tcbn2 \
     || { ip netns add tcbn2 && ip link add tcbv0 type veth peer name tcbv1 && ip link set tcbv1 netns tcbn2 \
          && ip addr add 10.77.0.1/24 dev tcbv0 && ip link set tcbv0 up \
          && ip netns exec tcbn2 ip addr add 10.77.0.2/24 dev tcbv1 && ip netns exec tcbn2 ip link set tcbv1 up \
          && ip netns exec tcbn2 ip link set lo up; } 2>/dev/null; then
    CTLD_ADDR=10.77.0.1  # reachable from both nodes
  else
    echo "no network namespace here: one node"; ip netns del tcbn2 2>/dev/null || true; NODES=1
  fi
fi
NODE_LIST=${HOST}; [ "$NODES" = 2 ] && NODE_LIST="${HOST},node2"
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd/${HOST} /var/spool/slurmd/node2 /var/log/slurm /run/munge /var/lib/munge /var/log/munge /etc/munge
[ -s /etc/munge/munge.key ] || { dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null; }
chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
chmod 0700 /etc/munge; chmod 0400 /etc/munge/munge.key
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=tcb
SlurmctldHost=${HOST}(${CTLD_ADDR})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd/%n
SlurmdPidFile=/run/slurmd-%n.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
PreemptType=preempt/partition_prio
PreemptMode=CANCEL
ReturnToService=2
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd-%n.log
NodeName=${HOST} NodeAddr=127.0.0.1 CPUs=${CPUS} RealMemory=${MEM} State=UNKNOWN
CONF
[ "$NODES" = 2 ] && echo "NodeName=node2 NodeAddr=10.77.0.2 NodeHostname=node2 CPUs=${CPUS} RealMemory=${MEM} State=UNKNOWN" >> /etc/slurm/slurm.conf
echo "PartitionName=debug Nodes=${NODE_LIST} Default=YES MaxTime=INFINITE State=UP PriorityTier=1" >> /etc/slurm/slurm.conf
# a job in `urgent` preempts (cancels) jobs of `debug` on the nodes it needs: the preemption test
echo "PartitionName=urgent Nodes=${NODE_LIST} MaxTime=INFINITE State=UP PriorityTier=10 GraceTime=5" >> /etc/slurm/slurm.conf
pgrep -x munged >/dev/null || runuser -u munge -- /usr/sbin/munged 2>/dev/null || /usr/sbin/munged --force
if pgrep -x slurmctld >/dev/null; then scontrol reconfigure >/dev/null 2>&1 || true; else /usr/sbin/slurmctld; fi
pgrep -f "slurmd -N ${HOST}" >/dev/null || /usr/sbin/slurmd -N "${HOST}"
if [ "$NODES" = 2 ] && ! pgrep -f "slurmd -N node2" >/dev/null; then
  # nsenter, not ip netns exec: that remounts /sys, and slurmd wants the host's /sys/fs/cgroup
  nsenter --net=/run/netns/tcbn2 unshare -u sh -c 'hostname node2 && exec /usr/sbin/slurmd -N node2'
fi
for i in $(seq 1 100); do
  up=$(sinfo -h -N -p debug -o "%N %T" 2>/dev/null | grep -cE " (idle|mix|alloc)" || true)
  if [ "$up" -ge "$NODES" ]; then echo "slurm up: ${NODES} node(s) ($(sinfo -h -N -p debug -o '%N %T' | tr '\n' ' '))"; exit 0; fi
  sleep 0.2
done
echo "slurm did not come up"; sinfo -N || true; tail -20 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd-*.log; exit 1
