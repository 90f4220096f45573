#!/usr/bin/env bash
# The main job at this stage: a local calico-node with its embedded etcd,
# driven by calicoctl. `demo.sh clean` stops it and removes its state.
# Set DEMO_KEEP=0 to stop and clean up at the end instead of leaving it running.
set -euo pipefail
cd "$(dirname "$0")/.."
STATE=${DEMO_STATE:-/tmp/calico-aio-demo}
ENDPOINT=${DEMO_ETCD:-http://127.0.0.1:2379}
PEER=${DEMO_ETCD_PEER:-http://127.0.0.1:2380}
BIN=$PWD/bin

stop() {
	if [ -f "$STATE/node.pid" ]; then
		kill "$(cat "$STATE/node.pid")" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$(cat "$STATE/node.pid")" 2>/dev/null || break; sleep 0.1; done
	fi
	rm -rf "$STATE"
}

if [ "${1:-}" = clean ]; then
	stop
	echo "demo stopped and cleaned up"
	exit 0
fi

stop
mkdir -p "$STATE"
trap 'echo "demo failed; cleaning up" >&2; stop' ERR
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
ctl() { echo "\$ calicoctl $*"; "$BIN/calicoctl" --etcd-endpoints "$ENDPOINT" "$@"; }

say "starting calico-node with its embedded etcd ($ENDPOINT, data in $STATE/etcd)"
"$BIN/calico-node" --nodename demo-node --etcd-data-dir "$STATE/etcd" \
	--etcd-client-url "$ENDPOINT" --etcd-peer-url "$PEER" >"$STATE/node.log" 2>&1 &
echo $! >"$STATE/node.pid"
for i in $(seq 100); do
	if "$BIN/calicoctl" get clusterinformation default --etcd-endpoints "$ENDPOINT" --timeout 1s >/dev/null 2>&1; then break; fi
	if ! kill -0 "$(cat "$STATE/node.pid")" 2>/dev/null; then cat "$STATE/node.log"; exit 1; fi
	sleep 0.1
done

say "creating resources"
ctl apply -f - <<'YAML'
apiVersion: projectcalico.org/v3
kind: IPPool
metadata:
  name: default-ipv4-ippool
spec:
  cidr: 10.48.0.0/16
  natOutgoing: true
---
apiVersion: projectcalico.org/v3
kind: IPPool
metadata:
  name: default-ipv6-ippool
spec:
  cidr: fd00:48::/48
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: deny-smtp
spec:
  selector: all()
  egress:
  - action: Deny
    protocol: TCP
    destination:
      ports: [25]
  - action: Allow
YAML
say "reading them back"
ctl get ippools -o wide
ctl get globalnetworkpolicies -o wide
ctl get clusterinformation default -o yaml
say "an invalid pool is refused and nothing is written"
printf 'apiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata: {name: bad}\nspec: {cidr: 10.48.1.0/24}\n' |
	ctl create -f - || true

trap - ERR
if [ "${DEMO_KEEP:-1}" = 0 ]; then
	stop
	say "demo finished and cleaned up"
else
	say "calico-node keeps running (log: $STATE/node.log); try: bin/calicoctl get ippools; stop it with: make demo-clean"
fi
