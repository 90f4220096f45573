package storetest

import (
	"context"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/etcdv3"
)

// CalicoObject is a resource as Calico v3.32 stores it, with fields our
// types do not model.
type CalicoObject struct {
	Key   string
	Value string
	// Unmodelled are the paths of the members our types do not model:
	// dot-separated, array elements by index ("spec.ingress.0.x").
	Unmodelled []string
}

const v3 = etcdv3.ResourcePrefix

// CalicoObjectsWithUnmodelledFields are objects in Calico's JSON carrying
// fields that real Calico 3.32 writes and we do not model (BGPPeer
// localASNumber and reversePeering, BGPConfiguration route priorities,
// WorkloadEndpoint qosControls.futureQoSField, IPPool status, ClusterInformation
// cnxVersion, metadata.generation), and, standing for fields a later Calico
// adds, "future*" members nested in spec.bgp, status, a port and a policy
// rule. Their names and namespaces are what the writers in tests use:
// node "node1", endpoint default/node1-k8s-pod1-eth0 of pod default/pod1.
func CalicoObjectsWithUnmodelledFields() []CalicoObject {
	return []CalicoObject{
		{v3 + "bgppeers/peer-a",
			`{"kind":"BGPPeer","apiVersion":"projectcalico.org/v3","metadata":{"name":"peer-a","uid":"6c0e2a53-8d1e-4c55-9f57-1f3c7c2d6a01","creationTimestamp":"2026-11-21T08:30:00Z","generation":2},"spec":{"peerIP":"192.0.2.10","asNumber":64513,"localASNumber":64600,"reversePeering":"Manual"}}`,
			[]string{"spec.localASNumber", "spec.reversePeering", "metadata.generation"}},
		{v3 + "bgpconfigurations/default",
			`{"kind":"BGPConfiguration","apiVersion":"projectcalico.org/v3","metadata":{"name":"default","uid":"0e0b7b8e-5d7c-4c1e-a3c4-6b3f6c7b2f11","creationTimestamp":"2026-11-21T08:30:00Z"},"spec":{"nodeToNodeMeshEnabled":true,"asNumber":64512,"ipv4NormalRoutePriority":1024,"ipv6NormalRoutePriority":1024}}`,
			[]string{"spec.ipv4NormalRoutePriority", "spec.ipv6NormalRoutePriority"}},
		{v3 + "workloadendpoints/default/node1-k8s-pod1-eth0",
			`{"kind":"WorkloadEndpoint","apiVersion":"projectcalico.org/v3","metadata":{"name":"node1-k8s-pod1-eth0","namespace":"default","uid":"9a7d5c43-1f2e-4b8a-8c1d-2e3f4a5b6c7d","creationTimestamp":"2026-11-21T08:30:00Z","labels":{"app":"web","projectcalico.org/namespace":"default","projectcalico.org/orchestrator":"k8s","projectcalico.org/serviceaccount":"default"}},"spec":{"orchestrator":"k8s","node":"node1","containerID":"c0ffee0000000000000000000000000000000000000000000000000000000001","pod":"pod1","endpoint":"eth0","serviceAccountName":"default","ipNetworks":["10.48.166.140/32"],"profiles":["kns.default","ksa.default.default"],"interfaceName":"cali1234567890a","mac":"8e:4d:a3:cf:26:66","ports":[{"name":"http","protocol":"TCP","port":80,"hostPort":0,"hostIP":"","futurePortField":"kept"}],"qosControls":{"ingressBandwidth":10000000,"futureQoSField":"kept"}}}`,
			[]string{"spec.qosControls.futureQoSField", "spec.ports.0.futurePortField"}},
		{v3 + "ippools/default-ipv4-ippool",
			`{"kind":"IPPool","apiVersion":"projectcalico.org/v3","metadata":{"name":"default-ipv4-ippool","uid":"ffb648f4-c012-4ebb-8d35-3dbcba519052","creationTimestamp":"2026-11-21T08:25:23Z"},"spec":{"cidr":"10.48.0.0/16","vxlanMode":"Never","ipipMode":"Never","natOutgoing":true,"blockSize":26,"nodeSelector":"all()","allowedUses":["Workload","Tunnel"],"assignmentMode":"Automatic"},"status":{"conditions":[{"type":"Allocatable","status":"True","reason":"PoolAllocatable","lastTransitionTime":"2026-11-21T08:25:24Z"}]}}`,
			[]string{"status"}},
		{v3 + "nodes/node1",
			`{"kind":"Node","apiVersion":"projectcalico.org/v3","metadata":{"name":"node1","uid":"fc190124-119e-4777-b7a8-20b4c2cc12c9","creationTimestamp":"2026-11-21T08:25:23Z"},"spec":{"bgp":{"ipv4Address":"10.0.0.1/24","futureBGPField":"kept"},"futureSpecField":{"a":[1,2]}},"status":{"podCIDRs":["10.48.0.0/24"],"futureStatusField":{"since":"2026-11-21T08:25:23Z"}}}`,
			[]string{"spec.bgp.futureBGPField", "spec.futureSpecField", "status.futureStatusField"}},
		{v3 + "clusterinformations/default",
			`{"kind":"ClusterInformation","apiVersion":"projectcalico.org/v3","metadata":{"name":"default","uid":"a35da14f-52f1-409b-afa2-150cbad179f5","creationTimestamp":"2026-11-21T08:25:23Z"},"spec":{"clusterGUID":"f9c6e713d2624feea375baeb70702d2d","calicoVersion":"v3.32.1","clusterType":"bgp","datastoreReady":true,"cnxVersion":"v3.21.0"}}`,
			[]string{"spec.cnxVersion"}},
		{v3 + "globalnetworkpolicies/allow-web",
			`{"kind":"GlobalNetworkPolicy","apiVersion":"projectcalico.org/v3","metadata":{"name":"allow-web","uid":"2f193db5-95a3-4e3b-a651-2b876c4a1680","creationTimestamp":"2026-11-21T08:30:00Z"},"spec":{"tier":"default","order":100,"selector":"app == 'web'","types":["Ingress"],"ingress":[{"action":"Allow","protocol":"TCP","source":{},"destination":{"ports":[80],"futureEntityField":true},"futureRuleField":"kept"}]}}`,
			[]string{"spec.ingress.0.futureRuleField", "spec.ingress.0.destination.futureEntityField"}},
		{v3 + "felixconfigurations/default",
			`{"kind":"FelixConfiguration","apiVersion":"projectcalico.org/v3","metadata":{"name":"default","uid":"3d1c2b4a-5e6f-4a7b-8c9d-0e1f2a3b4c5d","creationTimestamp":"2026-11-21T08:30:00Z"},"spec":{"logSeverityScreen":"Info","reportingInterval":"0s","bpfConnectTimeLoadBalancing":"TCP"}}`,
			[]string{"spec.bpfConnectTimeLoadBalancing"}},
	}
}

// PutRaw stores o's value under its key as etcdctl put would: no store
// logic, just the bytes.
func PutRaw(t testing.TB, c *store.Client, o CalicoObject) {
	t.Helper()
	if _, err := Raw(t, c).Etcd().Put(context.Background(), o.Key, o.Value); err != nil {
		t.Fatalf("put %s: %v", o.Key, err)
	}
}

// Raw is the etcd backend behind c, for tests that check Calico's etcd
// layout byte for byte.
func Raw(t testing.TB, c *store.Client) *etcdv3.Backend {
	t.Helper()
	e, ok := etcdv3.Of(c.Backend)
	if !ok {
		t.Fatalf("the client's backend is not etcd")
	}
	return e
}

// StoredJSON reads the raw etcd key's value as generic JSON.
func StoredJSON(t testing.TB, c *store.Client, key string) map[string]any {
	t.Helper()
	kv, err := Raw(t, c).GetKey(context.Background(), key)
	if err != nil {
		t.Fatalf("reading %s: %v", key, err)
	}
	var m map[string]any
	if err := json.Unmarshal(kv.Value, &m); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return m
}

// JSONAt is the value at a dot-separated path in generic JSON.
func JSONAt(v any, path string) (any, bool) {
	for _, seg := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[seg]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// CheckUnmodelledKept fails the test unless every unmodelled member of o
// is stored under o's key with the value o had, value for value; writer
// names what wrote it.
func CheckUnmodelledKept(t testing.TB, c *store.Client, o CalicoObject, writer string) {
	t.Helper()
	var orig any
	if err := json.Unmarshal([]byte(o.Value), &orig); err != nil {
		t.Fatalf("%s: %v", o.Key, err)
	}
	now := StoredJSON(t, c, o.Key)
	for _, p := range o.Unmodelled {
		want, _ := JSONAt(orig, p)
		got, ok := JSONAt(now, p)
		if !ok {
			t.Errorf("after %s, %s lost %s (was %v)", writer, o.Key, p, want)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("after %s, %s %s = %v, want %v", writer, o.Key, p, got, want)
		}
	}
}
