#!/usr/bin/env bash
# Runs a 2-rank job across two "hosts" on this machine: two network namespaces joined by a veth pair,
# 10.77.0.1 (host 0, the master) and 10.77.0.2 (host 1). Rank 0 runs on host 0 and rank 1 on host 1,
# each with the variables torchrun sets on a node of a 2-node job with one process per node, and
# GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME naming its end of the veth, as users pin the interface on
# real clusters. So rank 1 reaches rank 0's store over a network, not loopback. Needs root and
# iproute2; not run in CI.
#
#   usage: tools/netns_two_hosts.sh <program> [args...]
#   e.g.   tools/netns_two_hosts.sh bash -c 'env | grep -E "RANK|MASTER"; ping -c1 -W2 10.77.0.1'
#
# Each rank is bounded by NETNS_TIMEOUT seconds (default 120); when one fails the other is ended.
# Prints each rank's exit status; exits non-zero when either failed. The namespaces (and with them
# the veth pair) are deleted on exit, whatever happens.
set -euo pipefail

TIMEOUT_S="${NETNS_TIMEOUT:-120}"
ADDRS=(10.77.0.1 10.77.0.2)
IFACES=(veth-h0 veth-h1)     # names inside each namespace: they never appear on this machine's own
NS=("ember-h0-$$" "ember-h1-$$")
# A fresh namespace has nothing listening, so fixed ports are free there (torchrun's default 29500).
MASTER_PORT="${MASTER_PORT:-29500}"
EMBER_STORE_PORT="${EMBER_STORE_PORT:-29501}"

die() { printf 'netns_two_hosts: %s\n' "$*" >&2; exit 2; }

(($#)) || die "usage: $0 <program> [args...]"
[[ "$(id -u)" -eq 0 ]] || die "needs root (ip netns); run it with sudo"
command -v ip >/dev/null 2>&1 || die "needs iproute2's ip (Debian: apt-get install iproute2)"
command -v "$1" >/dev/null 2>&1 || die "program '$1' is not found"
[[ "$TIMEOUT_S" =~ ^[1-9][0-9]*$ ]] || die "NETNS_TIMEOUT must be a positive number of seconds, got '$TIMEOUT_S'"

cleanup() {
  local ns
  for ns in "${NS[@]}"; do
    # Whatever still runs inside is ours: end it, then the namespace (which takes its veth end along).
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for h in 0 1; do
  ip netns add "${NS[h]}"
  ip -n "${NS[h]}" link set lo up
done
# Both ends are created inside their namespaces, so the names cannot clash with this machine's.
ip link add "${IFACES[0]}" netns "${NS[0]}" type veth peer name "${IFACES[1]}" netns "${NS[1]}"
for h in 0 1; do
  ip -n "${NS[h]}" addr add "${ADDRS[h]}/24" dev "${IFACES[h]}"
  ip -n "${NS[h]}" link set "${IFACES[h]}" up
done
for h in 0 1; do  # a veth end comes up a moment after `link set up`: start the ranks once both have
  for _ in {1..50}; do
    ip -n "${NS[h]}" link show dev "${IFACES[h]}" | grep -q 'state UP' && continue 2
    sleep 0.1
  done
  die "${IFACES[h]} in ${NS[h]} is not up after 5 s"
done
printf 'netns_two_hosts: host 0 %s (%s, %s, master), host 1 %s (%s, %s); MASTER_PORT=%s EMBER_STORE_PORT=%s\n' \
  "${NS[0]}" "${ADDRS[0]}" "${IFACES[0]}" "${NS[1]}" "${ADDRS[1]}" "${IFACES[1]}" \
  "$MASTER_PORT" "$EMBER_STORE_PORT" >&2

run_rank() {  # run_rank R: the program as rank R on host R, its lines behind [rankR@10.77.0.x]
  local r="$1"
  shift
  set +e  # a background subshell: its status is the program's
  ip netns exec "${NS[r]}" env RANK="$r" LOCAL_RANK=0 GROUP_RANK="$r" WORLD_SIZE=2 LOCAL_WORLD_SIZE=1 \
    MASTER_ADDR="${ADDRS[0]}" MASTER_PORT="$MASTER_PORT" EMBER_STORE_PORT="$EMBER_STORE_PORT" \
    GLOO_SOCKET_IFNAME="${IFACES[r]}" NCCL_SOCKET_IFNAME="${IFACES[r]}" \
    timeout --kill-after=5 "$TIMEOUT_S" "$@" 2>&1 | sed -u "s/^/[rank$r@${ADDRS[r]}] /"
  return "${PIPESTATUS[0]}"
}

declare -A rank_of status
for r in 0 1; do
  run_rank "$r" "$@" &
  rank_of[$!]="$r"
done
# As each rank ends: record its status; on a failure, end the other (everything in its namespace).
for _ in 0 1; do
  code=0
  wait -n -p done_pid "${!rank_of[@]}" || code=$?
  r="${rank_of[$done_pid]}"
  unset "rank_of[$done_pid]"
  status[$r]="$code"
  if ((code != 0)) && ((${#rank_of[@]})); then
    other=$((1 - r))
    printf 'netns_two_hosts: rank %s failed (exit status %s): ending rank %s\n' "$r" "$code" "$other" >&2
    ip netns pids "${NS[other]}" | xargs -r kill -TERM 2>/dev/null || true
  fi
done

for r in 0 1; do
  note=""
  [[ "${status[$r]}" -eq 124 ]] && note=" (ran past NETNS_TIMEOUT=${TIMEOUT_S} s)"
  printf 'netns_two_hosts: rank %s on %s (%s): exit status %s%s\n' \
    "$r" "${NS[r]}" "${ADDRS[r]}" "${status[$r]}" "$note" >&2
done
((status[0] == 0 && status[1] == 0))
