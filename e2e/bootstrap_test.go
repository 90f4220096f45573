package e2e

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store/api"
)

// TestAgentBootstrap starts the real calico-node with the default-pool and
// MTU variables: it creates default-ipv4-ippool from CALICO_IPV4POOL_*, a
// pod gets its address from it and the MTU detected from the host's uplink
// (FELIX_MTUIFACEPATTERN); a restart with other values changes no pool; a
// bad value stops start-up with an error naming the variable.
func TestAgentBootstrap(t *testing.T) {
	e := newCNIEnv(t, 71)
	ctx := context.Background()
	mustNS(t, e.host.ns, "ip", "link", "set", "uplink", "mtu", "1400") // this host's network
	env := []string{"CALICO_IPV4POOL_CIDR=10.181.0.0/16", "CALICO_IPV4POOL_BLOCK_SIZE=28", "FELIX_MTUIFACEPATTERN=^uplink$"}
	a := startAgentEnv(t, e.host.ns, "node1", e.etcd.Endpoints()[0], e.state, env, "--bgp=false")

	k, _ := api.LookupKind("IPPool")
	pools := func() string {
		t.Helper()
		objs, _, err := e.cl.ListResources(ctx, k, "")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range objs {
			p := o.(*api.IPPool)
			out = append(out, p.Metadata.Name+" "+p.Spec.CIDR+" "+string(p.Spec.VXLANMode)+" "+string(p.Spec.IPIPMode)+
				" "+map[bool]string{true: "nat", false: "no-nat"}[p.Spec.NATOutgoing]+" "+p.Spec.NodeSelector)
			if p.Spec.BlockSize != 28 {
				out = append(out, "blockSize "+strconv.Itoa(p.Spec.BlockSize))
			}
		}
		return strings.Join(out, "; ")
	}
	const want = "default-ipv4-ippool 10.181.0.0/16 Never Never nat all()"
	if got := pools(); got != want {
		t.Fatalf("pools after first start: %q, want %q", got, want)
	}
	if b, err := os.ReadFile(e.state + "/lib/mtu"); err != nil || string(b) != "1400" {
		t.Errorf("mtu file: %q, %v; want 1400 (the uplink's)", b, err)
	}

	p := e.newPod(e.conflist("1.0.0", "net", e.calicoPlugin("node1", "")), "boot1")
	if ip, err := netip.ParseAddr(p.ip); err != nil || !netip.MustParsePrefix("10.181.0.0/16").Contains(ip) {
		t.Errorf("pod address %q is not from the default pool", p.ip)
	}
	if out := mustNS(t, p.ns, "ip", "-o", "link", "show", "eth0"); !strings.Contains(out, "mtu 1400 ") {
		t.Errorf("pod eth0: %s, want mtu 1400", out)
	}

	// A restart with other values leaves the existing pool as it is.
	a.stop()
	startAgentEnv(t, e.host.ns, "node1", e.etcd.Endpoints()[0], e.state,
		[]string{"CALICO_IPV4POOL_CIDR=10.182.0.0/16", "CALICO_IPV4POOL_NAT_OUTGOING=false", "FELIX_MTUIFACEPATTERN=^uplink$"}, "--bgp=false")
	if got := pools(); got != want {
		t.Errorf("pools after a restart with other variables: %q, want %q", got, want)
	}

	// Bad values stop start-up (exit 2), naming the variable, and so does
	// a value the datastore refuses (store/api/unsupported.go).
	for v, msg := range map[string]string{
		"CALICO_IPV4POOL_BLOCK_SIZE=40":           `CALICO_IPV4POOL_BLOCK_SIZE="40": must be between 20 and 32`,
		"CALICO_IPV4POOL_VXLAN=sometimes":         `CALICO_IPV4POOL_VXLAN="sometimes": must be Always, CrossSubnet or Never`,
		"CALICO_IPV4POOL_DISABLE_BGP_EXPORT=true": `CALICO_IPV4POOL_DISABLE_BGP_EXPORT="true": spec.disableBGPExport is not supported`,
		"FELIX_MTUIFACEPATTERN=(":                 `FELIX_MTUIFACEPATTERN="("`,
	} {
		cmd := exec.Command(binary, "node", "--nodename", "node2", "--etcd-endpoints", e.etcd.Endpoints()[0],
			"--lib-dir", t.TempDir(), "--run-dir", t.TempDir(), "--health-addr", "", "--metrics-addr", "", "--bgp=false")
		cmd.Env = append(os.Environ(), v)
		var out []byte
		err := e.inHost(func() error {
			var err error
			out, err = cmd.CombinedOutput()
			return err
		})
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), msg) {
			t.Errorf("%s: exit %v, output %s; want exit 2 naming it", v, err, out)
		}
	}
}
