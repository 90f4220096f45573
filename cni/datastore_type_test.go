package cni

import (
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
)

// The plugin reads the datastore as Calico's does: netconf datastore_type,
// else the DATASTORE_TYPE variable; kubernetes is refused (error 7 naming
// where it came from) until the Kubernetes datastore exists, and a call
// whose environment names it is not handed to the agent.
func TestDatastoreTypeNetconfAndEnv(t *testing.T) {
	conf := func(ds string) []byte {
		return []byte(`{"cniVersion":"1.0.0","name":"n","type":"calico","nodename":"node1"` + ds + `,"ipam":{"type":"calico-ipam"}}`)
	}
	for ds, want := range map[string]string{
		`,"datastore_type":"kubernetes"`: `datastore_type: "kubernetes": the Kubernetes datastore is not supported yet`,
		`,"datastore_type":"etcd"`:       `datastore_type: "etcd": must be etcdv3 or kubernetes`,
	} {
		if _, err := LoadNetConf(conf(ds)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", ds, err, want)
		}
	}
	if _, err := LoadNetConf(conf(`,"datastore_type":"etcdv3"`)); err != nil {
		t.Errorf("etcdv3: %v", err)
	}

	t.Setenv("DATASTORE_TYPE", "kubernetes")
	_, err := backend{}.newSession(&skel.CmdArgs{StdinData: conf("")})
	if err == nil || !strings.Contains(err.Error(), `DATASTORE_TYPE: "kubernetes": the Kubernetes datastore is not supported yet`) {
		t.Errorf("DATASTORE_TYPE=kubernetes with a silent netconf: %v", err)
	}
	ag := &Agent{Node: "node1"}
	env := []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_NETNS=/proc/self/ns/net", "CNI_IFNAME=eth0", "CNI_PATH=/opt/cni/bin"}
	if _, _, reason := ag.admit("calico", envLookup(append(env, "DATASTORE_TYPE=kubernetes")), conf("")); reason == "" {
		t.Errorf("a call with DATASTORE_TYPE=kubernetes was handed to the agent")
	}
	if _, _, reason := ag.admit("calico", envLookup(append(env, "DATASTORE_TYPE=etcdv3")), conf("")); reason != "" {
		t.Errorf("a call with DATASTORE_TYPE=etcdv3 was not served: %s", reason)
	}
}
