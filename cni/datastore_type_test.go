package cni

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/calico-aio/calico-aio/store/apiconfig"
)

func dsConf(extra string) []byte {
	return []byte(`{"cniVersion":"1.0.0","name":"n","type":"calico","nodename":"node1"` + extra + `,"ipam":{"type":"calico-ipam"}}`)
}

// The plugin resolves its datastore as Calico's does (store/apiconfig):
// netconf keys over the environment. A bad setting is error 7 naming where
// it came from; the Kubernetes datastore is opened from the kubeconfig the
// netconf or KUBECONFIG names.
func TestDatastoreNetconfAndEnv(t *testing.T) {
	t.Setenv("DATASTORE_TYPE", "")
	t.Setenv("KUBECONFIG", "")
	for extra, want := range map[string]string{
		`,"datastore_type":"etcd"`:                                           `invalid network config: datastore_type: "etcd": must be etcdv3 or kubernetes`,
		`,"datastore_type":"kubernetes"`:                                     "datastore type kubernetes (netconf datastore_type) but no Kubernetes API to reach",
		`,"etcd_endpoints":"http://a:2379","etcd_discovery_srv":"example.x"`: "netconf etcd_endpoints and netconf etcd_discovery_srv: multiple discovery or bootstrap options specified",
	} {
		_, err := backend{}.newSession(&skel.CmdArgs{StdinData: dsConf(extra)})
		var e *types.Error
		if !errors.As(err, &e) || e.Code != types.ErrInvalidNetworkConfig || !strings.Contains(e.Msg, want) {
			t.Errorf("%s: %v, want error 7 containing %q", extra, err, want)
		}
	}
	t.Setenv("DATASTORE_TYPE", "kubernetes")
	t.Setenv("KUBECONFIG", "/k")
	_, err := backend{}.newSession(&skel.CmdArgs{StdinData: dsConf("")})
	if err == nil || !strings.Contains(err.Error(), "KUBECONFIG: kubeconfig /k") {
		t.Errorf("DATASTORE_TYPE=kubernetes with a missing kubeconfig: %v", err)
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(kubeconfigText), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DATASTORE_TYPE", "")
	t.Setenv("KUBECONFIG", "")
	s, err := backend{}.newSession(&skel.CmdArgs{StdinData: dsConf(`,"datastore_type":"kubernetes","kubernetes":{"kubeconfig":"` + kc + `"}`)})
	if err != nil || !s.kdd() {
		t.Fatalf("netconf datastore_type kubernetes with a kubeconfig: %v", err)
	}
	defer s.close()
	// An endpoint there is a pod's: a plain CNI workload is refused before
	// the API is asked (this server does not exist).
	err = s.kddReady(context.Background(), newIdentity("node1", "c1", "eth0", Args{}))
	if err == nil || !strings.Contains(err.Error(), "a workload's endpoint is its Kubernetes pod") {
		t.Errorf("plain CNI workload on the Kubernetes datastore: %v", err)
	}
}

// kubeconfigText names an API server nobody serves.
const kubeconfigText = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`

// The fast path serves only calls whose datastore (netconf over the
// caller's environment) is the agent's.
func TestAgentServesOnlyItsDatastore(t *testing.T) {
	ag := &Agent{Node: "node1"}
	env := []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_NETNS=/proc/self/ns/net", "CNI_IFNAME=eth0", "CNI_PATH=/opt/cni/bin"}
	for _, c := range []struct {
		env    []string
		extra  string
		served bool
	}{
		{nil, "", true},
		{[]string{"DATASTORE_TYPE=etcdv3"}, "", true},
		{[]string{"ETCD_ENDPOINTS=http://127.0.0.1:2379/"}, "", true},
		{[]string{"DATASTORE_TYPE=kubernetes", "KUBECONFIG=/k"}, "", false},
		{nil, `,"datastore_type":"kubernetes","kubernetes":{"kubeconfig":"/k"}`, false},
		{[]string{"ETCD_ENDPOINTS=http://10.0.0.1:2379"}, "", false},
		{nil, `,"etcd_endpoints":"http://10.0.0.1:2379"`, false},
		{[]string{"ETCD_ENDPOINTS=http://10.0.0.1:2379"}, `,"etcd_endpoints":"http://127.0.0.1:2379"`, true},
		{nil, `,"etcd_ca_cert_file":"/ca"`, false},
		{nil, `,"datastore_type":"etcd"`, false},
	} {
		_, _, reason := ag.admit("calico", envLookup(append(env, c.env...)), dsConf(c.extra))
		if (reason == "") != c.served {
			t.Errorf("env %v netconf %s: served %v (%s), want %v", c.env, c.extra, reason == "", reason, c.served)
		}
	}
}

// The netconf's Kubernetes keys reach the client that reads pods:
// kubernetes.k8s_api_root over policy.k8s_api_root (its /api/v1 cut off),
// either enough to read the pod.
func TestNetconfKubernetesAPIRoot(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	for extra, want := range map[string]string{
		`,"policy":{"type":"k8s","k8s_api_root":"https://10.0.0.1:6443/api/v1/","k8s_auth_token":"tok"}`:           "https://10.0.0.1:6443",
		`,"kubernetes":{"k8s_api_root":"https://10.0.0.2:6443"},"policy":{"k8s_api_root":"https://10.0.0.1:6443"}`: "https://10.0.0.2:6443",
	} {
		s, err := backend{}.newSession(&skel.CmdArgs{StdinData: dsConf(extra)})
		if err != nil {
			t.Fatalf("%s: %v", extra, err)
		}
		defer s.close()
		if !s.usesKubernetes(identity{orchestrator: OrchestratorK8s}) {
			t.Errorf("%s: the API root does not make the plugin read the pod", extra)
		}
		kc, err := s.kubeClient()
		if err != nil || kc.Server() != want {
			t.Errorf("%s: client %v %v, want server %s", extra, kc, err, want)
		}
	}
}

// An agent on the Kubernetes datastore serves calls that reach the same
// API with the same credentials, and no others.
func TestAgentServesOnlyItsKubernetesAPI(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig") // the agent checks the netconf's is readable
	if err := os.WriteFile(kc, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ag := &Agent{Node: "node1", Datastore: &apiconfig.Config{Type: apiconfig.Kubernetes, Kube: apiconfig.Kube{Kubeconfig: kc}}}
	env := []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_NETNS=/proc/self/ns/net", "CNI_IFNAME=eth0", "CNI_PATH=/opt/cni/bin", "DATASTORE_TYPE=kubernetes"}
	for _, c := range []struct {
		env    string
		extra  string
		served bool
	}{
		{"KUBECONFIG=" + kc, "", true},
		{"", `,"kubernetes":{"kubeconfig":"` + kc + `"}`, true},
		{"KUBECONFIG=/other", "", false},
		{"KUBECONFIG=" + kc, `,"policy":{"k8s_auth_token":"t"}`, false},
		{"KUBECONFIG=" + kc, `,"datastore_type":"etcdv3"`, false},
	} {
		_, _, reason := ag.admit("calico", envLookup(append(env, c.env)), dsConf(c.extra))
		if (reason == "") != c.served {
			t.Errorf("env %s netconf %s: served %v (%s), want %v", c.env, c.extra, reason == "", reason, c.served)
		}
	}
}
