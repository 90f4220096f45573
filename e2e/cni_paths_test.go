package e2e

import (
	"strings"
	"testing"
)

// cniPath is how a test's CNI calls are served: by the plugin in-process,
// or handed over by the plugin's early client to a running calico-node
// (cni/fastpath, felix/cniserver/).
type cniPath string

const (
	inProcess cniPath = "in-process"
	viaAgent  cniPath = "agent"
)

// forEachCNIPath runs f once per path, as subtests.
func forEachCNIPath(t *testing.T, f func(t *testing.T, path cniPath)) {
	for _, p := range []cniPath{inProcess, viaAgent} {
		t.Run(string(p), func(t *testing.T) { f(t, p) })
	}
}

// servePath, on the agent path, starts calico-node for node in e's host
// namespace (state and run dir as the netconf's, so it serves the socket
// the plugin looks for) and asserts at the end that it served calls.
func (e *cniEnv) servePath(path cniPath, node string) *agentProc {
	if path != viaAgent {
		return nil
	}
	t := e.t
	t.Helper()
	a := e.startAgent(node)
	a.mustServe(t, node)
	return a
}

// mustServe fails t at its end unless the agent served a CNI call.
func (a *agentProc) mustServe(t testing.TB, node string) {
	t.Cleanup(func() {
		if a.servedCalls() == 0 {
			t.Errorf("calico-node %s served no CNI call: the agent path was not exercised", node)
		}
	})
}

// servedCalls counts the CNI calls the agent served.
func (a *agentProc) servedCalls() int {
	return strings.Count(a.logs.String(), "CNI call served")
}
