#!/usr/bin/env bash
# A network on one machine: N network namespaces, one per host of a test cluster, each joined by a
# veth pair to a switch in the root namespace, every link capped by `tc`, an optional latency.
#
#   ops/netns/netns.sh check                        exit 0 when this can run here (root, `ip netns`,
#                                                   veth, bridge, tbf), else 77 with the reason
#   ops/netns/netns.sh up PREFIX N RATE DELAY_US [RELAY_BINARY]
#   ops/netns/netns.sh down PREFIX                  removes all of PREFIX's (namespaces, links,
#                                                   bridge, relay); safe to run twice
#
# Namespace i is PREFIX-i with address 10.77.0.(i+1)/24 on its `eth0` (and `lo` up). RATE caps
# every link in both directions (tbf on the namespace's side and on the switch's side), e.g. 1gbit,
# 10gbit, 25gbit, or `none`. DELAY_US = 0 and no RELAY_BINARY: the switch is a Linux bridge. With a
# RELAY_BINARY (build/bin/netns_delay_relay) the switch is that program instead: it forwards every
# frame DELAY_US microseconds after it arrived (one hop namespace -> namespace, so a round trip gets
# 2 x DELAY_US). This kernel has no netem (nor fq); the relay is how latency is added, and it costs
# CPU per frame (GSO super-frames of up to 64 KiB pass whole, see delay_relay.cpp): measure it with
# DELAY_US = 0 against the bridge.
# PREFIX: letters and digits, at most 8 (interface names are PREFIX + "v" + i, and PREFIX + "br").
# The relay's pid and output go to /run/satrap-netns/PREFIX.relay.{pid,log}.
set -euo pipefail

check() {
  [ "$(id -u)" = 0 ] || { echo "netns: not root" >&2; return 77; }
  command -v ip > /dev/null || { echo "netns: no ip command (iproute2)" >&2; return 77; }
  command -v tc > /dev/null || { echo "netns: no tc command (iproute2)" >&2; return 77; }
  local probe="satrapprobe$$"
  ip netns add "$probe" 2> /dev/null || { echo "netns: ip netns add is refused here" >&2; return 77; }
  local ok=0
  if ip link add "sp$$a" type veth peer name "sp$$b" 2> /dev/null; then
    ip link set "sp$$b" netns "$probe" 2> /dev/null \
      && ip netns exec "$probe" tc qdisc add dev "sp$$b" root tbf rate 1gbit burst 256k latency 50ms \
        2> /dev/null && ok=1
    ip link del "sp$$a" 2> /dev/null || true
  fi
  ip netns del "$probe"
  [ $ok = 1 ] || { echo "netns: veth pairs or tbf are not available" >&2; return 77; }
}

# tbf for RATE on DEV (run with the namespace's prefix command, if any). The bucket holds 4 ms of
# the rate (at least 256 KiB: a GSO super-frame must fit in it).
cap() {
  local rate=$1 dev=$2; shift 2
  [ "$rate" = none ] && return 0
  local bits num=${rate%bit}
  case "$num" in
    *g) bits=$(( ${num%g} * 1000000000 )) ;;
    *m) bits=$(( ${num%m} * 1000000 )) ;;
    *k) bits=$(( ${num%k} * 1000 )) ;;
    *) echo "netns: RATE '$rate': give whole kbit, mbit or gbit" >&2; return 2 ;;
  esac
  local burst=$(( bits / 8 / 250 ))
  [ $burst -lt 262144 ] && burst=262144
  "$@" tc qdisc add dev "$dev" root tbf rate "$rate" burst "$burst" latency 20ms
}

up() {
  local prefix=$1 n=$2 rate=$3 delay=$4 relay=${5:-}
  [[ "$prefix" =~ ^[a-z][a-z0-9]{0,7}$ ]] || { echo "netns: bad PREFIX '$prefix'" >&2; return 2; }
  if [ "$delay" != 0 ] && [ -z "$relay" ]; then
    echo "netns: DELAY_US $delay needs the relay binary" >&2
    return 2
  fi
  mkdir -p /run/satrap-netns
  local ports=()
  if [ -z "$relay" ]; then
    ip link add "${prefix}br" type bridge
    ip link set "${prefix}br" up
  fi
  for i in $(seq 0 $((n - 1))); do
    local ns="$prefix-$i" host="${prefix}v$i"
    ip netns add "$ns"
    ip link add "$host" type veth peer name "${prefix}p$i"
    ip link set "${prefix}p$i" netns "$ns"
    ip -n "$ns" link set "${prefix}p$i" name eth0
    ip -n "$ns" link set eth0 mtu 65000
    ip link set "$host" mtu 65000
    ip -n "$ns" addr add "10.77.0.$((i + 1))/24" dev eth0
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 up
    [ -z "$relay" ] && ip link set "$host" master "${prefix}br"
    ip link set "$host" up
    cap "$rate" eth0 ip netns exec "$ns"
    cap "$rate" "$host"
    ports+=("$host")
  done
  if [ -n "$relay" ]; then
    "$relay" "$delay" "${ports[@]}" > "/run/satrap-netns/$prefix.relay.log" 2>&1 &
    echo $! > "/run/satrap-netns/$prefix.relay.pid"
  fi
  # Every namespace reaches every other (ARP through the switch) before this returns.
  for i in $(seq 1 $((n - 1))); do
    local ok=0
    for _ in $(seq 1 50); do
      if ip netns exec "$prefix-0" bash -c "exec 3<>/dev/tcp/10.77.0.$((i + 1))/9" 2> /dev/null \
         || ip netns exec "$prefix-0" ip neigh show 10.77.0.$((i + 1)) | grep -q lladdr; then
        ok=1
        break
      fi
      sleep 0.1
    done
    [ $ok = 1 ] || { echo "netns: $prefix-$i unreachable from $prefix-0" >&2; return 1; }
  done
}

down() {
  local prefix=$1
  local pidfile="/run/satrap-netns/$prefix.relay.pid"
  if [ -f "$pidfile" ]; then
    local pid
    pid=$(cat "$pidfile")
    kill "$pid" 2> /dev/null && for _ in $(seq 1 50); do kill -0 "$pid" 2> /dev/null || break; sleep 0.05; done
    kill -9 "$pid" 2> /dev/null || true
    rm -f "$pidfile" "/run/satrap-netns/$prefix.relay.log"
  fi
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^$prefix-[0-9]+$" || true); do
    # Whatever still runs inside goes first (a namespace with processes outlives `ip netns del`).
    for pid in $(ip netns pids "$ns" 2> /dev/null); do kill -9 "$pid" 2> /dev/null || true; done
    ip netns del "$ns"
  done
  for dev in $(ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^${prefix}(v[0-9]+|br)$" || true); do
    ip link del "$dev" 2> /dev/null || true
  done
}

cmd=${1:-}
shift || true
case "$cmd" in
  check) check ;;
  up) up "$@" ;;
  down) down "$@" ;;
  *) echo "usage: netns.sh check | up PREFIX N RATE DELAY_US [RELAY] | down PREFIX" >&2; exit 2 ;;
esac
