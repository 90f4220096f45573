package cni

import (
	"testing"

	"github.com/calico-aio/calico-aio/cni/fastpath"
)

// The early client finds the socket where the agent serves it: the same
// default run dir, and the netconf's calico_run_dir when set.
func TestFastPathSocketPath(t *testing.T) {
	if fastpath.DefaultRunDir != DefaultRunDir {
		t.Fatalf("fastpath.DefaultRunDir %q != cni.DefaultRunDir %q", fastpath.DefaultRunDir, DefaultRunDir)
	}
	for conf, want := range map[string]string{
		`{"name":"n"}`:                         DefaultRunDir + "/cni.sock",
		`{"name":"n","calico_run_dir":"/x/y"}`: "/x/y/cni.sock",
		`not json`:                             DefaultRunDir + "/cni.sock",
	} {
		if got := fastpath.SocketPath([]byte(conf)); got != want {
			t.Errorf("SocketPath(%s) = %s, want %s", conf, got, want)
		}
	}
}

func TestSameEndpoints(t *testing.T) {
	for _, c := range []struct {
		conf, agent []string
		want        bool
	}{
		{nil, []string{"http://127.0.0.1:2379"}, true}, // the plugin's default is the embedded etcd
		{[]string{"http://a:2379/", "http://b:2379"}, []string{"http://b:2379", "http://a:2379"}, true},
		{[]string{"http://a:2379"}, []string{"http://a:2379", "http://b:2379"}, false},
		{[]string{"https://a:2379"}, []string{"http://a:2379"}, false},
	} {
		if got := sameEndpoints(c.conf, c.agent); got != c.want {
			t.Errorf("sameEndpoints(%v, %v) = %v, want %v", c.conf, c.agent, got, c.want)
		}
	}
}

// A call whose waits may outlast the fast path's reply timeout is left to
// the in-process plugin; a short wait is served.
func TestAgentLeavesLongWaits(t *testing.T) {
	ag := &Agent{Node: "node1"}
	env := []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_NETNS=/proc/self/ns/net", "CNI_IFNAME=eth0", "CNI_PATH=/opt/cni/bin"}
	conf := func(extra string) []byte {
		return []byte(`{"cniVersion":"1.0.0","name":"n","type":"calico","nodename":"node1"` + extra + `,"ipam":{"type":"calico-ipam"}}`)
	}
	for extra, served := range map[string]bool{
		`,"policy_setup_timeout_seconds":10`:                                      true,
		`,"policy_setup_timeout_seconds":50`:                                      false,
		`,"readiness_gates":["http://127.0.0.1:1/a","http://127.0.0.1:1/b"]`:      false,
		`,"policy_setup_timeout_seconds":10,"readiness_gates":["http://x/ready"]`: true,
	} {
		_, _, reason := ag.admit("calico", envLookup(env), conf(extra))
		if (reason == "") != served {
			t.Errorf("%s: served %v (reason %q), want %v", extra, reason == "", reason, served)
		}
	}
}
