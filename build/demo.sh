#!/usr/bin/env bash
# The main job: a 3-node Calico cluster on this machine, each node a network
# namespace on a shared bridge, each running the real binary as calico-node
# (node1 also serves the embedded etcd), pods made by the real CNI plugin.
#
#   build/demo.sh          start it, show it working, leave it running
#   build/demo.sh clean    stop everything and remove its namespaces
#   DEMO_KEEP=0 build/demo.sh   show it and clean up at the end
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$PWD/bin
STATE=${DEMO_STATE:-/tmp/calico-aio-demo}
P=calico-demo           # namespace prefix
NET=10.250.99           # node segment
ETCD=http://$NET.1:2379
NODES=(1 2 3)

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
in_ns() { local n=$1; shift; ip netns exec "$P-$n" "$@"; }
ctl() { echo "\$ calicoctl $*"; in_ns n1 "$BIN/calicoctl" "$@" --etcd-endpoints "$ETCD"; }

stop() {
	local nss
	nss=$(ip netns list | awk '{print $1}' | grep "^$P-" || true)
	# Everything running inside the demo's namespaces (agents, anything else).
	for n in $nss; do ip netns pids "$n" 2>/dev/null | xargs -r kill 2>/dev/null || true; done
	for _ in $(seq 50); do
		local left=""
		for n in $nss; do left="$left$(ip netns pids "$n" 2>/dev/null)"; done
		[ -z "$left" ] && break
		sleep 0.1
	done
	for n in $nss; do ip netns pids "$n" 2>/dev/null | xargs -r kill -9 2>/dev/null || true; done
	for n in $nss; do ip netns del "$n"; done
	rm -rf "$STATE"
}

if [ "${1:-}" = clean ]; then
	stop
	echo "demo cluster stopped and cleaned up"
	exit 0
fi
[ "$(id -u)" = 0 ] || { echo "the demo needs root (network namespaces)" >&2; exit 1; }
stop
trap 'echo "demo failed; cleaning up" >&2; stop' ERR
mkdir -p "$STATE"

say "building the network: a bridge namespace and 3 node namespaces on $NET.0/24"
ip netns add "$P-br"
in_ns br ip link add br0 type bridge
in_ns br ip link set br0 up
in_ns br ip link set lo up
for i in "${NODES[@]}"; do
	ip netns add "$P-n$i"
	in_ns br ip link add "n$i" type veth peer name eth0 netns "$P-n$i"
	in_ns br ip link set "n$i" master br0 up
	in_ns "n$i" ip link set lo up
	in_ns "n$i" ip addr add "$NET.$i/24" dev eth0
	in_ns "n$i" ip link set eth0 up
	in_ns "n$i" ip route add default via "$NET.254" dev eth0 onlink
	# Forwarding off, as on a fresh host: calico-node turns it on.
	in_ns "n$i" sysctl -qw net.ipv4.ip_forward=0 net.ipv6.conf.all.forwarding=0
	mkdir -p "$STATE/n$i"
done

start_node() {
	local i=$1; shift
	# The first node creates the pods' pool (default-ipv4-ippool, NAT outgoing
	# on) from CALICO_IPV4POOL_CIDR, as calico-node does (docs/BOOTSTRAP.md).
	in_ns "n$i" env CALICO_IPV4POOL_CIDR=10.244.0.0/16 "$BIN/calico-node" --nodename "node$i" --ip "$NET.$i/24" \
		--lib-dir "$STATE/n$i/lib" --run-dir "$STATE/n$i/run" --health-addr 127.0.0.1:9099 \
		--metrics-addr 127.0.0.1:9091 "$@" >"$STATE/n$i/agent.log" 2>&1 &
	echo $! >"$STATE/n$i/agent.pid"
}
wait_ready() {
	local i=$1
	for _ in $(seq 200); do
		if in_ns "n$i" "$BIN/calicoctl" node status --run-dir "$STATE/n$i/run" >/dev/null 2>&1 &&
			[ -f "$STATE/n$i/lib/nodename" ]; then return 0; fi
		kill -0 "$(cat "$STATE/n$i/agent.pid")" 2>/dev/null || { cat "$STATE/n$i/agent.log"; return 1; }
		sleep 0.1
	done
	cat "$STATE/n$i/agent.log"; return 1
}

say "starting calico-node on node1 with the embedded etcd ($ETCD), then node2 and node3"
start_node 1 --etcd-data-dir "$STATE/n1/etcd" --etcd-client-url "$ETCD" --etcd-peer-url "http://$NET.1:2380"
wait_ready 1
for i in 2 3; do start_node "$i" --etcd-endpoints "$ETCD"; done
for i in 2 3; do wait_ready "$i"; done

say "the IP pool node1 created on first start from CALICO_IPV4POOL_CIDR"
ctl get ippools

say "one pod per node through the CNI plugin"
declare -A POD_IP
for i in "${NODES[@]}"; do
	ip netns add "$P-pod$i"
	conf=$(printf '{"cniVersion":"1.0.0","name":"demo","type":"calico","nodename":"node%s","etcd_endpoints":"%s","calico_lib_dir":"%s","calico_run_dir":"%s","ipam":{"type":"calico-ipam"}}' \
		"$i" "$ETCD" "$STATE/n$i/lib" "$STATE/n$i/run")
	out=$(echo "$conf" | in_ns "n$i" env CNI_COMMAND=ADD CNI_CONTAINERID="demo-pod$i" CNI_NETNS="/var/run/netns/$P-pod$i" \
		CNI_IFNAME=eth0 CNI_PATH="$BIN" "$BIN/calico")
	POD_IP[$i]=$(echo "$out" | grep -o '"address": "[0-9.]*' | head -1 | cut -d'"' -f4)
	echo "pod$i on node$i: ${POD_IP[$i]}"
done

ping_all() {
	for i in "${NODES[@]}"; do for j in "${NODES[@]}"; do
		[ "$i" = "$j" ] && continue
		if in_ns "pod$i" ping -c1 -W1 "${POD_IP[$j]}" >/dev/null 2>&1; then r=ok; else r=FAILED; fi
		printf '  pod%s (node%s) -> pod%s (node%s) %-15s %s\n' "$i" "$i" "$j" "$j" "${POD_IP[$j]}" "$r"
	done; done
}
converged() {
	for _ in $(seq 100); do
		in_ns pod1 ping -c1 -W1 "${POD_IP[3]}" >/dev/null 2>&1 && in_ns pod3 ping -c1 -W1 "${POD_IP[2]}" >/dev/null 2>&1 && return 0
		sleep 0.2
	done
	return 0
}

say "pods ping across nodes (routes learned over BGP)"
converged
ping_all
for i in "${NODES[@]}"; do
	echo "node$i: net.ipv4.ip_forward=$(in_ns "n$i" sysctl -n net.ipv4.ip_forward) (0 at start; calico-node turned it on)"
done
echo "routes node1 learned by BGP:"; in_ns n1 ip route show proto 81 | sed 's/^/  /'

say "a deny policy for pod3 (its network's profile would allow it)"
printf 'apiVersion: projectcalico.org/v3\nkind: GlobalNetworkPolicy\nmetadata: {name: deny-pod3}\nspec:\n  selector: projectcalico.org/orchestrator == "cni"\n  ingress:\n  - action: Deny\n    destination: {nets: [%s/32]}\n  - action: Pass\n' "${POD_IP[3]}" |
	ctl apply -f -
sleep 1
ping_all

say "removing it"
ctl delete globalnetworkpolicy deny-pod3
sleep 1
ping_all

say "node status and IPAM"
echo "\$ calicoctl node status   (on node1)"
in_ns n1 "$BIN/calicoctl" node status --run-dir "$STATE/n1/run"
ctl ipam show --show-blocks
ctl get nodes -o wide
ctl get workloadendpoints -A -o wide

trap - ERR
if [ "${DEMO_KEEP:-1}" = 0 ]; then
	stop
	say "demo finished and cleaned up"
else
	say "the cluster keeps running: try 'ip netns exec $P-pod1 ping ${POD_IP[2]}' or 'ip netns exec $P-n1 $BIN/calicoctl get wep -A --etcd-endpoints $ETCD'; stop it with: make demo-clean"
fi
