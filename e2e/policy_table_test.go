package e2e

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The truth table of TCP connections shared by the conformance tests
// (TestK8sNetworkPolicyConformance, TestPolicyConformance): every ordered
// pair of distinct peers (pods, and nodes' host namespaces) on every port,
// evaluated from a rule, probed all at once, and drawn as a table when it
// does not match.

// kpPod is a peer of a truth table: a pod wired by the CNI plugin or, with
// host set, a node's host namespace listening on the node's address.
type kpPod struct {
	namespace, name string
	http            int // the number its container port "http" names
	host            bool
	net             pod
}

// String is "namespace/name" for a pod, the node's name for a host.
func (p *kpPod) String() string {
	if p.host {
		return p.name
	}
	return p.namespace + "/" + p.name
}

// kpHost is node nd's host namespace as a peer: it listens on the node's
// address on every one of ports, and its probes start in the node's
// namespace (so they leave with the node's address).
func kpHost(t testing.TB, nd *clusterNode, ports []int) *kpPod {
	t.Helper()
	for _, port := range ports {
		listenPeer(t, nd.ns, hostPort(nd.ip, port))
	}
	return &kpPod{name: nd.name, host: true, net: pod{ns: nd.ns, ip: nd.ip}}
}

// kpTable is the truth table of TCP connections between every ordered pair
// of distinct peers on every one of ports.
type kpTable struct {
	pods  []*kpPod
	ports []int
}

type kpCell struct {
	from, to *kpPod
	port     int
}

func (c kpCell) String() string { return fmt.Sprintf("%s -> %s:%d", c.from, c.to, c.port) }

func (tab *kpTable) cells() []kpCell {
	var out []kpCell
	for _, from := range tab.pods {
		for _, to := range tab.pods {
			if from == to {
				continue
			}
			for _, port := range tab.ports {
				out = append(out, kpCell{from, to, port})
			}
		}
	}
	return out
}

// want evaluates the expected outcome of every cell.
func (tab *kpTable) want(allowed func(from, to *kpPod, port int) bool) []bool {
	cells := tab.cells()
	out := make([]bool, len(cells))
	for i, c := range cells {
		out[i] = allowed(c.from, c.to, c.port)
	}
	return out
}

// observe tries every cell at once; true is a connection that got through
// (and was answered).
func (tab *kpTable) observe() ([]bool, []error) {
	cells := tab.cells()
	got, errs := make([]bool, len(cells)), make([]error, len(cells))
	var wg sync.WaitGroup
	for i, c := range cells {
		wg.Go(func() {
			errs[i] = tcpProbe(c.from.net.ns, hostPort(c.to.net.ip, c.port))()
			got[i] = errs[i] == nil
		})
	}
	wg.Wait()
	return got, errs
}

// expect probes until the traffic matches want in one round, and fails
// with the table when it does not within timeout. It returns how long it
// took.
func (tab *kpTable) expect(t testing.TB, what string, want []bool, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		got, errs := tab.observe()
		if slices.Equal(got, want) {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			var wrong []string
			for i, c := range tab.cells() {
				if got[i] != want[i] {
					wrong = append(wrong, fmt.Sprintf("  %s: want %s, got %s (%v)", c, kpWord(want[i]), kpWord(got[i]), errs[i]))
				}
			}
			t.Fatalf("%s: traffic does not match after %s (rows: from; columns: to, port; . allowed, X denied, ! not as wanted)\nwant:\n%s\ngot:\n%s\n%d wrong:\n%s",
				what, timeout, tab.render(want, want), tab.render(got, want), len(wrong), strings.Join(wrong, "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func kpWord(allowed bool) string {
	if allowed {
		return "allowed"
	}
	return "denied"
}

// render draws cells as a table, marking those that differ from want.
func (tab *kpTable) render(cells, want []bool) string {
	var b strings.Builder
	rowW, portW := 8, 3
	for _, p := range tab.pods {
		rowW = max(rowW, len(p.String()))
	}
	for _, p := range tab.ports {
		portW = max(portW, len(fmt.Sprint(p))+1)
	}
	colW := len(tab.ports) * portW
	fmt.Fprintf(&b, "%-*s", rowW, "")
	for _, to := range tab.pods {
		fmt.Fprintf(&b, " %-*s", colW, to.String())
	}
	fmt.Fprintf(&b, "\n%-*s", rowW, "")
	for range tab.pods {
		b.WriteString(" ")
		for _, p := range tab.ports {
			fmt.Fprintf(&b, "%-*d", portW, p)
		}
	}
	b.WriteString("\n")
	i := 0
	for _, from := range tab.pods {
		fmt.Fprintf(&b, "%-*s", rowW, from.String())
		for _, to := range tab.pods {
			b.WriteString(" ")
			for range tab.ports {
				if from == to {
					fmt.Fprintf(&b, "%-*s", portW, "-")
					continue
				}
				s := "X"
				if cells[i] {
					s = "."
				}
				if cells[i] != want[i] {
					s += "!"
				}
				fmt.Fprintf(&b, "%-*s", portW, s)
				i++
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}
