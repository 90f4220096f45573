#!/usr/bin/env bash
# The main job: a 3-node Calico cluster on this machine, each node a network
# namespace on a shared bridge, each running the real binary as calico-node
# (node1 also serves the embedded etcd), pods made by the real CNI plugin.
#
#   build/demo.sh          start it, show it working, leave it running
#   build/demo.sh clean    stop everything and remove its namespaces
#   DEMO_KEEP=0 build/demo.sh   show it and clean up at the end
#   DEMO_ENCAP=vxlan build/demo.sh   nodes in two subnets joined by a router
#       namespace that knows only those subnets, BGP off, pods' traffic
#       across nodes in VXLAN (docs/OVERLAY.md)
#   DEMO_DATASTORE=kubernetes build/demo.sh   the same cluster on the
#       Kubernetes datastore: a real kube-apiserver with Calico's CRDs, no
#       etcd of ours (build/demo-kube.sh); combines with DEMO_ENCAP
set -Eeuo pipefail # -E: a failure inside a function cleans up too
cd "$(dirname "$0")/.."
BIN=$PWD/bin
STATE=${DEMO_STATE:-/tmp/calico-aio-demo}
P=calico-demo           # namespace prefix
NET=10.250.99           # node segment
ETCD=http://$NET.1:2379
NODES=(1 2 3)
ENCAP=${DEMO_ENCAP:-}
case "$ENCAP" in
"" | none) ENCAP="" ;;
vxlan) ;;
*) echo "DEMO_ENCAP=$ENCAP: want vxlan (or unset)" >&2; exit 2 ;;
esac
DS=${DEMO_DATASTORE:-etcdv3}
case "$DS" in
etcdv3 | kubernetes) ;;
*) echo "DEMO_DATASTORE=$DS: want etcdv3 (the default) or kubernetes" >&2; exit 2 ;;
esac
NET2=10.250.98          # the second node subnet (DEMO_ENCAP=vxlan: node3)
declare -A NODE_IP SUBNET
for i in "${NODES[@]}"; do SUBNET[$i]=$NET; done
[ -n "$ENCAP" ] && SUBNET[3]=$NET2
for i in "${NODES[@]}"; do NODE_IP[$i]=${SUBNET[$i]}.$i; done

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
in_ns() { local n=$1; shift; ip netns exec "$P-$n" "$@"; }
ctl() {
	echo "\$ calicoctl $*"
	if [ "$DS" = kubernetes ]; then
		in_ns n1 env DATASTORE_TYPE=kubernetes KUBECONFIG="$KUBECONFIG_DEMO" "$BIN/calicoctl" "$@"
	else
		in_ns n1 "$BIN/calicoctl" "$@" --etcd-endpoints "$ETCD"
	fi
}
# shellcheck source=build/demo-kube.sh
[ "$DS" = kubernetes ] && . build/demo-kube.sh

stop() {
	# The agents first, then the kube-apiserver (the Kubernetes datastore
	# demo's), which an agent that stops still talks to.
	kill_in "$(ip netns list | awk '{print $1}' | grep "^$P-" | grep -vx "$P-api" || true)"
	kill_in "$(ip netns list | awk '{print $1}' | grep -x "$P-api" || true)"
	for n in $(ip netns list | awk '{print $1}' | grep "^$P-" || true); do ip netns del "$n"; done
	rm -rf "$STATE"
}
kill_in() { # everything running inside the namespaces $1
	local nss=$1
	for n in $nss; do ip netns pids "$n" 2>/dev/null | xargs -r kill 2>/dev/null || true; done
	for _ in $(seq 50); do
		local left=""
		for n in $nss; do left="$left$(ip netns pids "$n" 2>/dev/null)"; done
		[ -z "$left" ] && break
		sleep 0.1
	done
	for n in $nss; do ip netns pids "$n" 2>/dev/null | xargs -r kill -9 2>/dev/null || true; done
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

if [ -z "$ENCAP" ]; then
	say "building the network: a bridge namespace and 3 node namespaces on $NET.0/24"
else
	say "building the network: node1, node2 on $NET.0/24, node3 on $NET2.0/24, joined by a router namespace that knows only these two subnets (no pod routes, no BGP)"
fi
ip netns add "$P-br"
in_ns br ip link set lo up
in_ns br ip link add br0 type bridge
in_ns br ip link set br0 up
if [ -n "$ENCAP" ]; then
	in_ns br ip link add br1 type bridge
	in_ns br ip link set br1 up
	in_ns br ip addr add "$NET.254/24" dev br0
	in_ns br ip addr add "$NET2.254/24" dev br1
	in_ns br sysctl -qw net.ipv4.ip_forward=1 # it is a router
fi
for i in "${NODES[@]}"; do
	ip netns add "$P-n$i"
	in_ns br ip link add "n$i" type veth peer name eth0 netns "$P-n$i"
	if [ "${SUBNET[$i]}" = "$NET" ]; then in_ns br ip link set "n$i" master br0 up; else in_ns br ip link set "n$i" master br1 up; fi
	in_ns "n$i" ip link set lo up
	in_ns "n$i" ip addr add "${NODE_IP[$i]}/24" dev eth0
	in_ns "n$i" ip link set eth0 up
	in_ns "n$i" ip route add default via "${SUBNET[$i]}.254" dev eth0 onlink
	# Forwarding off, as on a fresh host: calico-node turns it on.
	in_ns "n$i" sysctl -qw net.ipv4.ip_forward=0 net.ipv6.conf.all.forwarding=0
	mkdir -p "$STATE/n$i"
done
[ "$DS" = kubernetes ] && mkdir -p "$KUBE" && kube_up

# Encapsulated: BGP off, and the default pool encapsulates (docs/OVERLAY.md).
ENCAP_ENV=()
[ -n "$ENCAP" ] && ENCAP_ENV=(CALICO_NETWORKING_BACKEND=vxlan CALICO_IPV4POOL_VXLAN=Always)
[ "$DS" = kubernetes ] && ENCAP_ENV+=(DATASTORE_TYPE=kubernetes "KUBECONFIG=$KUBECONFIG_NODE")
start_node() {
	local i=$1; shift
	# The first node creates the pods' pool (default-ipv4-ippool, NAT outgoing
	# on) from CALICO_IPV4POOL_CIDR, as calico-node does (docs/BOOTSTRAP.md).
	in_ns "n$i" env CALICO_IPV4POOL_CIDR=10.244.0.0/16 "${ENCAP_ENV[@]}" "$BIN/calico-node" --nodename "node$i" --ip "${NODE_IP[$i]}/24" \
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

if [ "$DS" = kubernetes ]; then
	say "starting calico-node on node1, then node2 and node3, with DATASTORE_TYPE=kubernetes (each registers on its Kubernetes Node)"
	start_node 1
	wait_ready 1
	for i in 2 3; do start_node "$i"; done
else
	say "starting calico-node on node1 with the embedded etcd ($ETCD), then node2 and node3"
	start_node 1 --etcd-data-dir "$STATE/n1/etcd" --etcd-client-url "$ETCD" --etcd-peer-url "http://$NET.1:2380"
	wait_ready 1
	for i in 2 3; do start_node "$i" --etcd-endpoints "$ETCD"; done
fi
for i in 2 3; do wait_ready "$i"; done

if [ -z "$ENCAP" ]; then
	say "the IP pool node1 created on first start from CALICO_IPV4POOL_CIDR"
	ctl get ippools
else
	say "the IP pool node1 created on first start from CALICO_IPV4POOL_CIDR and CALICO_IPV4POOL_VXLAN=Always"
	ctl get ippools -o wide
fi

if [ "$DS" = kubernetes ]; then
	say "one Kubernetes pod per node (namespace $KNS), networked by the CNI plugin (datastore_type kubernetes)"
else
	say "one pod per node through the CNI plugin"
fi
declare -A POD_IP
for i in "${NODES[@]}"; do
	ip netns add "$P-pod$i"
	if [ "$DS" = kubernetes ]; then
		out=$(kube_pod "$i")
		POD_IP[$i]=$(echo "$out" | grep -o '"address": "[0-9.]*' | head -1 | cut -d'"' -f4)
		echo "pod$i (role=${ROLE[$i]}) on node$i: ${POD_IP[$i]}"
		continue
	fi
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
converged() { # until every pod reaches every other (at most ~20 s)
	local i j ok
	for _ in $(seq 100); do
		ok=1
		for i in "${NODES[@]}"; do for j in "${NODES[@]}"; do
			[ "$i" = "$j" ] || in_ns "pod$i" ping -c1 -W1 "${POD_IP[$j]}" >/dev/null 2>&1 || ok=0
		done; done
		[ "$ok" = 1 ] && return 0
		sleep 0.2
	done
	return 0
}

# observe_vxlan counts, in the router, UDP 4789 between every ordered pair of
# nodes: bridged inside a subnet and routed between them.
observe_vxlan() {
	local fam i j
	for fam in bridge ip; do
		in_ns br nft add table "$fam" demo
		in_ns br nft add chain "$fam" demo vxlan '{ type filter hook forward priority 0; }'
		for i in "${NODES[@]}"; do for j in "${NODES[@]}"; do
			[ "$i" = "$j" ] || in_ns br nft add rule "$fam" demo vxlan ip saddr "${NODE_IP[$i]}" ip daddr "${NODE_IP[$j]}" udp dport 4789 counter
		done; done
	done
}
vxlan_packets() { # packets the router saw from node $1 to node $2
	in_ns br nft list ruleset | awk -v s="${NODE_IP[$1]}" -v d="${NODE_IP[$2]}" \
		'$0 ~ "ip saddr " s " ip daddr " d " udp dport 4789 counter" { for (k = 1; k < NF; k++) if ($k == "packets") n += $(k + 1) } END { print n + 0 }'
}

if [ -z "$ENCAP" ]; then
	say "pods ping across nodes (routes learned over BGP)"
else
	observe_vxlan
	say "pods ping across nodes (VXLAN, BGP off: routes from the IPAM blocks in the datastore)"
fi
converged
ping_all
for i in "${NODES[@]}"; do
	echo "node$i: net.ipv4.ip_forward=$(in_ns "n$i" sysctl -n net.ipv4.ip_forward) (0 at start; calico-node turned it on)"
done
if [ -z "$ENCAP" ]; then
	echo "routes node1 learned by BGP:"; in_ns n1 ip route show proto 81 | sed 's/^/  /'
else
	echo "node1's routes to the other nodes' blocks, through the tunnel (none learned by BGP: $(in_ns n1 ip route show proto 81 | wc -l)):"
	in_ns n1 ip route show dev vxlan.calico | sed 's/^/  /'
	echo "node1's VXLAN device and pod MTU (host 1500 less 50):"
	dev=$(in_ns n1 ip -d -o link show vxlan.calico)
	echo "  vxlan.calico: $(echo "$dev" | grep -o 'mtu [0-9]*' | head -1), $(echo "$dev" | grep -o 'vxlan id [0-9]* local [0-9.]* dev [^ ]*'), $(echo "$dev" | grep -o 'dstport [0-9]*')"
	echo "  pod1's eth0: $(in_ns pod1 ip -o link show eth0 | grep -o 'mtu [0-9]*')"
	echo "the router saw the pods' traffic encapsulated (UDP 4789 between node addresses):"
	bad=0
	for i in "${NODES[@]}"; do for j in "${NODES[@]}"; do
		[ "$i" = "$j" ] && continue
		n=$(vxlan_packets "$i" "$j")
		[ "${SUBNET[$i]}" = "${SUBNET[$j]}" ] && how="same subnet, bridged" || how="across subnets, routed"
		printf '  node%s %-13s -> node%s %-13s %4s packets  (%s)\n' "$i" "${NODE_IP[$i]}" "$j" "${NODE_IP[$j]}" "$n" "$how"
		[ "$n" -gt 0 ] || bad=1
	done; done
	[ "$bad" = 0 ] || { echo "some node pair carried no VXLAN: the pods' traffic was not encapsulated" >&2; false; }
fi

if [ "$DS" = kubernetes ]; then kube_policies; else
say "a deny policy for pod3 (its network's profile would allow it)"
printf 'apiVersion: projectcalico.org/v3\nkind: GlobalNetworkPolicy\nmetadata: {name: deny-pod3}\nspec:\n  selector: projectcalico.org/orchestrator == "cni"\n  ingress:\n  - action: Deny\n    destination: {nets: [%s/32]}\n  - action: Pass\n' "${POD_IP[3]}" |
	ctl apply -f -
sleep 1
ping_all

say "removing it"
ctl delete globalnetworkpolicy deny-pod3
sleep 1
ping_all
fi

say "node status and IPAM"
echo "\$ calicoctl node status   (on node1)"
in_ns n1 "$BIN/calicoctl" node status --run-dir "$STATE/n1/run"
ctl ipam show --show-blocks
ctl get nodes -o wide
ctl get workloadendpoints -A -o wide
[ "$DS" = kubernetes ] && kube_summary

trap - ERR
if [ "${DEMO_KEEP:-1}" = 0 ]; then
	stop
	say "demo finished and cleaned up"
else
	if [ "$DS" = kubernetes ]; then how="env DATASTORE_TYPE=kubernetes KUBECONFIG=$KUBECONFIG_DEMO $BIN/calicoctl get wep -A"; else how="$BIN/calicoctl get wep -A --etcd-endpoints $ETCD"; fi
	say "the cluster keeps running: try 'ip netns exec $P-pod1 ping ${POD_IP[2]}' or 'ip netns exec $P-n1 $how'; stop it with: make demo-clean"
fi
