package ctl_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/calico-aio/calico-aio/bgp"
	"github.com/calico-aio/calico-aio/ctl"
	"github.com/calico-aio/calico-aio/felix/peering"
	"github.com/calico-aio/calico-aio/internal/golden"
	"github.com/calico-aio/calico-aio/internal/nstest"
	"github.com/calico-aio/calico-aio/ipam"
)

// inNS runs a command inside the test's namespace.
func inNS(t *testing.T, n ns.NetNS, argv ...string) {
	t.Helper()
	err := n.Do(func(ns.NetNS) error {
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		if err != nil {
			t.Errorf("%v: %v\n%s", argv, err, out)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// fakeStatusSocket answers like calico-node's status socket.
func fakeStatusSocket(t *testing.T, dir string, st peering.NodeStatus) {
	t.Helper()
	l, err := net.Listen("unix", filepath.Join(dir, peering.StatusSocketName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = json.NewEncoder(c).Encode(st)
			_ = c.Close()
		}
	}()
}

func readTarball(t *testing.T, file string) map[string]string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = string(b)
	}
}

// node diags of a node that is a network namespace made here: the bundle
// holds that namespace's routes, iptables and ipsets (not the host's), the
// agent's status and logs, and only this node's datastore objects.
func TestNodeDiags(t *testing.T) {
	nstest.NeedKernel(t, "ip", "iptables-save", "ip6tables-save", "ipset")
	n := nstest.NewNS(t)
	inNS(t, n, "ip", "link", "add", "diagdummy0", "type", "veth", "peer", "name", "diagpeer0")
	inNS(t, n, "ip", "link", "set", "diagdummy0", "up")
	inNS(t, n, "ip", "link", "set", "diagpeer0", "up")
	inNS(t, n, "ip", "addr", "add", "198.51.100.1/24", "dev", "diagdummy0")
	inNS(t, n, "ip", "route", "add", "203.0.113.0/24", "via", "198.51.100.254")
	inNS(t, n, "iptables", "-N", "cali-diag-test")
	inNS(t, n, "ipset", "create", "cali40diagtest", "hash:ip")
	inNS(t, n, "ipset", "add", "cali40diagtest", "198.51.100.7")
	// ipsets are not per namespace on every kernel; remove ours in any case.
	t.Cleanup(func() { inNS(t, n, "ipset", "destroy", "cali40diagtest") })

	h := newHarness(t)
	h.mustRun(nodeYAML("diag-node", "other-node"), "apply", "-f", "-")
	h.mustRun(`apiVersion: projectcalico.org/v3
kind: WorkloadEndpoint
metadata: {name: diag--node-cni-aaa-eth0, namespace: default}
spec: {node: diag-node, orchestrator: cni, workload: aaa, endpoint: eth0, interfaceName: caliaaa, ipNetworks: [10.48.0.1/32]}
---
apiVersion: projectcalico.org/v3
kind: WorkloadEndpoint
metadata: {name: other--node-cni-bbb-eth0, namespace: default}
spec: {node: other-node, orchestrator: cni, workload: bbb, endpoint: eth0, interfaceName: calibbb, ipNetworks: [10.48.1.1/32]}
---
`+poolYAML("diag-pool", "10.48.0.0/16"), "apply", "-f", "-")
	al := ipam.New(h.cli)
	assignIP(t, al, "10.48.0.1", "h-diag", "diag-node")
	assignIP(t, al, "10.48.100.1", "h-other", "other-node")

	runDir, logDir, outDir := t.TempDir(), t.TempDir(), t.TempDir()
	fakeStatusSocket(t, runDir, peering.NodeStatus{Running: true, BGPEnabled: true,
		Peers: []bgp.PeerStatus{{Address: netip.MustParseAddr("192.0.2.2"), Type: "node-to-node mesh", State: "Established"}}})
	if err := os.WriteFile(filepath.Join(logDir, "calico-node.log"), []byte("agent started\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	out := h.mustRun("", "node", "diags", "--nodename", "diag-node", "--netns", n.Path(), "--run-dir", runDir,
		"--log-dir", logDir, "--output-dir", outDir)
	m := regexp.MustCompile(`Diags saved to (\S+)\n`).FindStringSubmatch(out)
	if m == nil || filepath.Dir(m[1]) != outDir {
		t.Fatalf("no tarball path in the output:\n%s", out)
	}
	scrubbed := strings.ReplaceAll(out, outDir, "OUTDIR")
	scrubbed = regexp.MustCompile(`diags-\d{8}_\d{6}\.tar\.gz`).ReplaceAllString(scrubbed, "diags-TIME.tar.gz")
	golden.Check(t, "node-diags", scrubbed)

	files := readTarball(t, m[1])
	var names []string
	for name := range files {
		names = append(names, name)
	}
	for _, want := range []string{"routes-ipv4.txt", "routes-ipv6.txt", "rules.txt", "addresses.txt", "links.txt", "neighbours.txt",
		"iptables-save.txt", "ip6tables-save.txt", "ipset-list.txt", "node-status.json", "logs/calico-node.log",
		"datastore/node.yaml", "datastore/workloadendpoints.yaml", "datastore/hostendpoints.yaml", "datastore/bgppeers.yaml",
		"datastore/felixconfiguration.yaml", "datastore/ipam-affinities.yaml", "datastore/ipam-blocks.yaml"} {
		if _, ok := files["diagnostics/"+want]; !ok {
			t.Errorf("no %s in the bundle (has %v)", want, names)
		}
	}
	contains := func(member string, yes []string, no []string) {
		t.Helper()
		got := files["diagnostics/"+member]
		for _, s := range yes {
			if !strings.Contains(got, s) {
				t.Errorf("%s lacks %q:\n%s", member, s, got)
			}
		}
		for _, s := range no {
			if strings.Contains(got, s) {
				t.Errorf("%s has %q:\n%s", member, s, got)
			}
		}
	}
	// The namespace's state, not the host's (whose interface is eth0).
	contains("routes-ipv4.txt", []string{"203.0.113.0/24 via 198.51.100.254 dev diagdummy0"}, []string{"eth0"})
	contains("addresses.txt", []string{"198.51.100.1/24"}, []string{"eth0"})
	contains("links.txt", []string{"diagdummy0"}, nil)
	contains("iptables-save.txt", []string{":cali-diag-test"}, nil)
	contains("ipset-list.txt", []string{"Name: cali40diagtest", "198.51.100.7"}, nil)
	contains("node-status.json", []string{`"bgpEnabled": true`, "192.0.2.2"}, nil)
	contains("logs/calico-node.log", []string{"agent started"}, nil)
	contains("datastore/node.yaml", []string{"name: diag-node"}, []string{"other-node"})
	contains("datastore/workloadendpoints.yaml", []string{"diag--node-cni-aaa-eth0"}, []string{"other--node"})
	contains("datastore/ipam-affinities.yaml", []string{"/calico/ipam/v2/host/diag-node/ipv4/block/10.48.0.0-26"}, []string{"other-node"})
	contains("datastore/ipam-blocks.yaml", []string{"/calico/ipam/v2/assignment/ipv4/block/10.48.0.0-26", "host:diag-node"}, []string{"other-node"})
}

// Without an agent, logs or datastore the bundle is still written, saying
// what was missing.
func TestNodeDiagsWithNothingRunning(t *testing.T) {
	nstest.NeedKernel(t, "ip", "iptables-save", "ipset")
	n := nstest.NewNS(t)
	h := &harness{t: t, ep: "http://127.0.0.1:1"}
	outDir, logDir := t.TempDir(), filepath.Join(t.TempDir(), "none")
	out, errs, code := h.run("", "node", "diags", "--nodename", "lonely", "--netns", n.Path(), "--run-dir", t.TempDir(),
		"--log-dir", logDir, "--output-dir", outDir, "--timeout", "1s")
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	if !strings.Contains(out, "No logs found in "+logDir+"; skipping log copying") || !strings.Contains(out, "Could not read the datastore") {
		t.Errorf("output:\n%s", out)
	}
	m := regexp.MustCompile(`Diags saved to (\S+)\n`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no tarball:\n%s", out)
	}
	files := readTarball(t, m[1])
	if !strings.Contains(files["diagnostics/node-status.txt"], "Calico process is not running") || files["diagnostics/datastore/error.txt"] == "" {
		t.Errorf("bundle does not say what was missing: %v", files)
	}
}

// With no BGP speaker (backend none or vxlan), node status says what real
// calicoctl says.
func TestNodeStatusWithoutBGP(t *testing.T) {
	runDir := t.TempDir()
	fakeStatusSocket(t, runDir, peering.NodeStatus{Running: true})
	var out, errb bytes.Buffer
	code := ctl.Main([]string{"node", "status", "--run-dir", runDir},
		ctl.IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }})
	if code != 0 {
		t.Fatalf("node status: exit %d, stderr %s", code, errb.String())
	}
	if want := "Calico process is running.\n\nNone of the BGP backend processes (BIRD or GoBGP) are running.\n\n"; out.String() != want {
		t.Errorf("node status:\n%q\nwant\n%q", out.String(), want)
	}
}
