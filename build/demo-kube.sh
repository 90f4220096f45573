# The demo on the Kubernetes datastore (DEMO_DATASTORE=kubernetes
# build/demo.sh), sourced by build/demo.sh: a real kube-apiserver in its own
# namespace on the node segment ($P-api, $API_IP:6443; its own etcd, for
# the apiserver's data only, on that namespace's loopback), Calico's CRDs,
# the Kubernetes Nodes, a Namespace, a ServiceAccount and a Pod per node.
# The agents, the CNI plugin and calicoctl keep everything in the API
# (DATASTORE_TYPE=kubernetes): no etcd of ours. calico-node and the CNI
# plugin run as the identities of build/k8s/calico-aio-kdd.yaml, with its
# RBAC (calicoctl and the demo's own requests as an admin).
#
# Uses build/demo.sh's P, NET, STATE, BIN, NODES, NODE_IP, say and in_ns.

API_IP=$NET.250
KUBE=$STATE/kube       # certs, token, kubeconfig, the apiserver's etcd and logs
KUBECONFIG_DEMO=$KUBE/kubeconfig                  # the admin's
KUBECONFIG_NODE=$KUBE/kubeconfig-calico-node       # service account kube-system/calico-node
KUBECONFIG_CNI=$KUBE/kubeconfig-calico-cni-plugin  # service account kube-system/calico-cni-plugin
KNS=demo               # the pods' Kubernetes namespace
# Each pod's role label: the Kubernetes NetworkPolicy lets only role=web reach role=db.
declare -A ROLE=([1]=web [2]=batch [3]=db)

# kapi METHOD PATH [JSON]: one request to the apiserver as the admin.
kapi() {
	local method=$1 path=$2 body=${3:-}
	local args=(-sS --fail-with-body --cacert "$KUBE/ca.pem" -H "Authorization: Bearer $(cat "$KUBE/token")" -X "$method")
	[ -n "$body" ] && args+=(-H 'Content-Type: application/json' --data-binary "$body")
	in_ns api curl "${args[@]}" "https://$API_IP:6443$path"
}

# kube_up starts the apiserver (building it on first use: minutes, once),
# installs the CRDs and creates the Kubernetes objects the nodes need.
kube_up() {
	local kas i
	say "starting a real kube-apiserver on $API_IP:6443 (namespace $P-api; its etcd is its own, on that namespace's loopback)"
	kas=$(./tools/kube-apiserver/build.sh)
	"${GO:-go}" build -o "$KUBE/demokube" ./build/demokube
	ip netns add "$P-api"
	in_ns br ip link add api type veth peer name eth0 netns "$P-api"
	in_ns br ip link set api master br0 up
	in_ns api ip link set lo up
	in_ns api ip addr add "$API_IP/24" dev eth0
	in_ns api ip link set eth0 up
	in_ns api ip route add default via "$NET.254" dev eth0 onlink # DEMO_ENCAP=vxlan: node3 is behind the router
	"$KUBE/demokube" certs -dir "$KUBE" -ip "$API_IP"
	in_ns api "$KUBE/demokube" etcd -dir "$KUBE" -url http://127.0.0.1:2379 >"$KUBE/etcd.log" 2>&1 &
	# No controller-manager, scheduler or kubelet: pods are bound to their
	# node when created, and the ServiceAccount admission plugin (which
	# mounts tokens no kubelet would read) is off.
	in_ns api "$kas" --etcd-servers=http://127.0.0.1:2379 --bind-address=0.0.0.0 --advertise-address="$API_IP" \
		--secure-port=6443 --cert-dir="$KUBE/certs" --tls-cert-file="$KUBE/serving.pem" \
		--tls-private-key-file="$KUBE/serving-key.pem" --client-ca-file="$KUBE/ca.pem" \
		--token-auth-file="$KUBE/tokens.csv" --service-account-key-file="$KUBE/sa-key.pem" \
		--service-account-signing-key-file="$KUBE/sa-key.pem" --service-account-issuer=https://kubernetes.default.svc \
		--service-cluster-ip-range=10.96.0.0/16 --authorization-mode=RBAC --anonymous-auth=false \
		--disable-admission-plugins=ServiceAccount --endpoint-reconciler-type=none --allow-privileged=true \
		--profiling=false --shutdown-delay-duration=0s --shutdown-send-retry-after=false >"$KUBE/kube-apiserver.log" 2>&1 &
	for _ in $(seq 300); do
		kapi GET /readyz >/dev/null 2>&1 && break
		sleep 0.2
	done
	kapi GET /readyz >/dev/null || { tail -20 "$KUBE/kube-apiserver.log"; return 1; }
	echo "kube-apiserver ready; installing Calico's CRDs (build/k8s/crds.yaml) and the RBAC of build/k8s/calico-aio-kdd.yaml"
	in_ns api "$KUBE/demokube" crds -dir "$KUBE" -ip "$API_IP" -f build/k8s/crds.yaml
	in_ns api "$KUBE/demokube" rbac -dir "$KUBE" -ip "$API_IP" -f build/k8s/calico-aio-kdd.yaml
	echo "Kubernetes objects: Nodes node1..node3, Namespace $KNS, ServiceAccount $KNS/demo"
	for i in "${NODES[@]}"; do
		kapi POST /api/v1/nodes "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"node$i\"}}" >/dev/null
	done
	kapi POST /api/v1/namespaces "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$KNS\"}}" >/dev/null
	kapi POST "/api/v1/namespaces/$KNS/serviceaccounts" '{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"demo"}}' >/dev/null
}

# kube_pod i: creates Kubernetes pod pod$i bound to node$i (role label
# ROLE[i], service account demo), then has the CNI plugin network it and
# prints the CNI result.
kube_pod() {
	local i=$1 conf
	kapi POST "/api/v1/namespaces/$KNS/pods" "$(printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"pod%s","labels":{"role":"%s"}},"spec":{"nodeName":"node%s","serviceAccountName":"demo","containers":[{"name":"app","image":"registry.k8s.io/pause:3.10"}]}}' \
		"$i" "${ROLE[$i]}" "$i")" >/dev/null
	conf=$(printf '{"cniVersion":"1.0.0","name":"k8s-pod-network","type":"calico","nodename":"node%s","datastore_type":"kubernetes","kubernetes":{"kubeconfig":"%s"},"policy":{"type":"k8s"},"calico_lib_dir":"%s","calico_run_dir":"%s","ipam":{"type":"calico-ipam"}}' \
		"$i" "$KUBECONFIG_CNI" "$STATE/n$i/lib" "$STATE/n$i/run")
	echo "$conf" | in_ns "n$i" env CNI_COMMAND=ADD CNI_CONTAINERID="demo-pod$i" CNI_NETNS="/var/run/netns/$P-pod$i" \
		CNI_IFNAME=eth0 CNI_PATH="$BIN" CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=$KNS;K8S_POD_NAME=pod$i;K8S_POD_INFRA_CONTAINER_ID=demo-pod$i" \
		"$BIN/calico"
}

# wait_ping i j want: until pod i's ping of pod j is want (ok or FAILED),
# 20 tries (a policy change takes effect through the agents' watches);
# the demo fails if it never is.
wait_ping() {
	local r
	for _ in $(seq 20); do
		if in_ns "pod$1" ping -c1 -W1 "${POD_IP[$2]}" >/dev/null 2>&1; then r=ok; else r=FAILED; fi
		[ "$r" = "$3" ] && return 0
		sleep 0.3
	done
	echo "pod$1 -> pod$2: $r, want $3: the policy was not enforced as written" >&2
	return 1
}

# kube_policies: the etcd demo's Calico deny policy (through calicoctl on
# the Kubernetes datastore), then a Kubernetes NetworkPolicy, which the
# agents read straight from the API (no copy among Calico's resources).
kube_policies() {
	say "a Calico deny policy for pod3 through calicoctl (its namespace's profile would allow it)"
	printf 'apiVersion: projectcalico.org/v3\nkind: GlobalNetworkPolicy\nmetadata: {name: deny-pod3}\nspec:\n  selector: projectcalico.org/orchestrator == "k8s"\n  ingress:\n  - action: Deny\n    destination: {nets: [%s/32]}\n  - action: Pass\n' "${POD_IP[3]}" |
		ctl apply -f -
	wait_ping 1 3 FAILED
	ping_all

	say "removing it"
	ctl delete globalnetworkpolicy deny-pod3
	wait_ping 1 3 ok
	ping_all

	say "a Kubernetes NetworkPolicy: only role=web (pod1) may reach role=db (pod3)"
	echo "\$ POST /apis/networking.k8s.io/v1/namespaces/$KNS/networkpolicies  db-from-web"
	kapi POST "/apis/networking.k8s.io/v1/namespaces/$KNS/networkpolicies" \
		'{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"db-from-web"},"spec":{"podSelector":{"matchLabels":{"role":"db"}},"ingress":[{"from":[{"podSelector":{"matchLabels":{"role":"web"}}}]}]}}' >/dev/null
	wait_ping 2 3 FAILED
	wait_ping 1 3 ok
	ping_all

	say "removing it"
	kapi DELETE "/apis/networking.k8s.io/v1/namespaces/$KNS/networkpolicies/db-from-web" >/dev/null
	wait_ping 2 3 ok
	ping_all
}

# kube_summary: where the data lives.
kube_summary() {
	say "everything is in the Kubernetes API"
	echo "pod1's Calico annotations (written by the CNI plugin through pods/status):"
	kapi GET "/api/v1/namespaces/$KNS/pods/pod1" | grep -o '"cni.projectcalico.org/[^"]*": *"[^"]*"' | sed 's/^/  /'
	echo "node1's Calico annotations (written by calico-node through nodes/status):"
	kapi GET /api/v1/nodes/node1 | grep -o '"projectcalico.org/[^"]*": *"[^"]*"' | sed 's/^/  /'
	echo "Calico's custom resources (crd.projectcalico.org/v1):"
	local plural names
	for plural in clusterinformations felixconfigurations ippools tiers ipamblocks blockaffinities ipamhandles; do
		names=$(kapi GET "/apis/crd.projectcalico.org/v1/$plural" | { grep -o '"name": *"[^"]*"' || true; } | cut -d'"' -f4 | paste -sd' ')
		printf '  %-20s %s\n' "$plural" "$names"
	done
	echo "the one etcd is the kube-apiserver's own; what runs in $P-api:"
	ip netns pids "$P-api" | xargs -r ps -o pid=,args= -p | cut -c1-100 | sed 's/^/ /'
	echo "DATASTORE_TYPE=kubernetes everywhere: calico-node as kube-system/calico-node ($KUBECONFIG_NODE),"
	echo "the CNI plugin as kube-system/calico-cni-plugin ($KUBECONFIG_CNI), calicoctl as admin ($KUBECONFIG_DEMO)"
}
