package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/calico-aio/calico-aio/store/api"
)

// policyWaitPlugin is a calico conflist entry with extra top-level keys,
// its state under e and its run directory runDir (the agent's, so calls
// go to the agent, or another, so they run in-process).
func (e *cniEnv) policyWaitPlugin(runDir, extra string) string {
	return fmt.Sprintf(`{"type":"calico","nodename":"node1","etcd_endpoints":%q,"calico_lib_dir":%q,"calico_run_dir":%q,
"log_level":"info"%s,"ipam":{"type":"calico-ipam"}}`, e.etcd.Endpoints()[0], e.state+"/lib", runDir, extra)
}

// TestCNIPolicySetupWait: with policy_setup_timeout_seconds, ADD returns
// only once calico-node has programmed the pod's policy (it writes the
// endpoint's status file, Calico's name and place, and the plugin waits
// for it): from the pod's very first instant an allowed port answers and
// a denied one does not, through the agent's fast path and in-process
// (endpoint_status_dir naming the agent's directory). DEL removes the
// file; FelixConfiguration endpointStatusPathPrefix moves or removes the
// files live. Without the key the race is only logged, never asserted.
func TestCNIPolicySetupWait(t *testing.T) {
	t.Parallel()
	e := newCNIEnv(t, 244)
	e.pool("v4", "10.244.0.0/24")
	e.apply(gnp("guard", 10, "all()", nil, []api.Rule{
		{Action: api.ActionDeny, Protocol: protoTCP(), Destination: api.EntityRule{Ports: apiPorts(7781)}},
		{Action: api.ActionAllow}}))
	agent := e.startAgent("node1")
	agentRun, ownRun := e.state+"/run", e.state+"/plugin-run"
	statusDir := filepath.Join(agentRun, "endpoint-status")
	viaAgent := e.conflist("1.0.0", "net1", e.policyWaitPlugin(agentRun, `,"policy_setup_timeout_seconds":20`))
	inProcess := e.conflist("1.0.0", "net1", e.policyWaitPlugin(ownRun,
		fmt.Sprintf(`,"policy_setup_timeout_seconds":20,"endpoint_status_dir":%q`, statusDir)))

	server := e.newPod(viaAgent, "server")
	listenPeer(t, server.ns, hostPort(server.ip, 7780))
	listenPeer(t, server.ns, hostPort(server.ip, 7781))

	for _, c := range []struct {
		name  string
		l     *libcni.NetworkConfigList
		agent bool
	}{{"agent", viaAgent, true}, {"in-process", inProcess, false}} {
		served := agent.servedCalls()
		client := e.newPod(c.l, "client-"+c.name)
		// The very first packets, no retry: each probe is one connection.
		if _, err := dialPeer(client.ns, hostPort(server.ip, 7780)); err != nil {
			t.Errorf("%s: first connection to an allowed port right after ADD: %v (policy not programmed when ADD returned)", c.name, err)
		}
		if _, err := dialPeer(client.ns, hostPort(server.ip, 7781)); err == nil {
			t.Errorf("%s: the denied port answered right after ADD", c.name)
		}
		if got := agent.servedCalls() > served; got != c.agent {
			t.Errorf("%s: ADD served by the agent %v, want %v", c.name, got, c.agent)
		}
		file := filepath.Join(statusDir, "cni default%2Fclient-"+c.name+" eth0")
		if _, err := os.Stat(file); err != nil {
			t.Errorf("%s: endpoint status file: %v", c.name, err)
		}
		if err := e.del(c.l, client.rt); err != nil {
			t.Fatal(err)
		}
		eventually(t, policyTimeout, c.name+": status file removed after DEL", func() error {
			if _, err := os.Stat(file); !os.IsNotExist(err) {
				return fmt.Errorf("%s still there (%v)", file, err)
			}
			return nil
		})
	}

	// FelixConfiguration endpointStatusPathPrefix, live: none removes the
	// files, another directory gets them.
	serverFile := "cni default%2Fserver eth0"
	none, other := "none", e.state+"/other"
	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.EndpointStatusPathPrefix = &none })
	eventually(t, policyTimeout, "no status files with endpointStatusPathPrefix none", func() error {
		if _, err := os.Stat(filepath.Join(statusDir, serverFile)); !os.IsNotExist(err) {
			return fmt.Errorf("server's status file still there (%v)", err)
		}
		return nil
	})
	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.EndpointStatusPathPrefix = &other })
	eventually(t, policyTimeout, "status files under the new endpointStatusPathPrefix", func() error {
		_, err := os.Stat(filepath.Join(other, "endpoint-status", serverFile))
		return err
	})

	// Without the wait the pod may start before its policy: logged only.
	noWait := e.conflist("1.0.0", "net1", e.policyWaitPlugin(agentRun, ""))
	start := time.Now()
	racer := e.newPod(noWait, "racer")
	_, err := dialPeer(racer.ns, hostPort(server.ip, 7780))
	t.Logf("without policy_setup_timeout_seconds: ADD took %v; first connection to the allowed port: %v", time.Since(start), err)
}
