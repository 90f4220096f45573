package e2e

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/felix/rules"
	"github.com/calico-aio/calico-aio/store/api"
)

// The agent restarts (SIGTERM, then a new process with the same state
// directories) while pods talk and the datastore changes under it:
//   - a TCP connection between two pods, exchanging a byte every 200 ms,
//     never sees an error: the kernel state stays in place while the agent
//     is down and the new agent does not disturb it;
//   - every iptables rule that the change did not touch keeps its packet
//     counter (a rule rewritten by the new agent would restart at 0): the
//     new agent reads the kernel back and writes only the difference;
//   - the change made while the agent was down (a deny policy added, a
//     policy deleted) is enforced once the new agent is ready.
func TestAgentRestartKeepsStateAndCatchesUp(t *testing.T) {
	t.Parallel()
	e := newCNIEnv(t, 41)
	e.pool("p", "10.141.0.0/24")
	l := e.conflist("1.0.0", "rsnet", e.calicoPlugin("node1", ""))
	agent := e.startAgent("node1")
	a, b, c := e.newPod(l, "rsa"), e.newPod(l, "rsb"), e.newPod(l, "rsc")
	e.apply(gnp("allow-net", 10, "has(rsnet)", []api.Rule{{Action: api.ActionAllow, Source: api.EntityRule{Selector: "has(rsnet)"}}},
		[]api.Rule{{Action: api.ActionAllow}}))
	e.apply(gnp("old-extra", 20, "has(rsnet)", []api.Rule{{Action: api.ActionAllow, Source: api.EntityRule{Nets: []string{"192.0.2.0/24"}}}}, nil))
	oldChain := rules.PolicyChainName(rules.DirIngress, rules.PolicyKey{Name: "old-extra"})
	eventually(t, 10*time.Second, "policy chains programmed", func() error {
		if s := mustNS(t, e.host.ns, "iptables-save", "-t", "filter"); !strings.Contains(s, oldChain) {
			return fmt.Errorf("no %s yet", oldChain)
		}
		return nil
	})
	eventually(t, 10*time.Second, "pod C reaches pod B before the change", reachable(c.ns, b.ip))

	echoServer(t, b.ns, b.ip+":7000")
	conn := startPinger(t, a.ns, b.ip+":7000", 200*time.Millisecond, 2*time.Second)
	// A burst of traffic through the policy chains, so that a rule the new
	// agent rewrote could not count back up to its old value in the
	// seconds after the restart.
	mustNS(t, a.ns, "ping", "-q", "-c", "300", "-i", "0.002", "-W", "1", b.ip)
	time.Sleep(500 * time.Millisecond)

	start := time.Now()
	agent.stop()
	before := ruleCounters(t, e)
	// The datastore changes while the agent is down.
	e.apply(gnp("deny-c", 5, "has(rsnet)", []api.Rule{{Action: api.ActionDeny, Source: api.EntityRule{Nets: []string{c.ip + "/32"}}}}, nil))
	e.remove("GlobalNetworkPolicy", "", "old-extra")
	time.Sleep(time.Second) // really down for a while
	e.startAgent("node1")
	ready := time.Since(start)
	after := ruleCounters(t, e)

	compared, busy := 0, 0
	var reset []string
	for key, n := range before {
		m, ok := after[key]
		if !ok {
			continue // changed or removed on purpose
		}
		compared++
		if n > 0 {
			busy++
		}
		if m < n {
			reset = append(reset, fmt.Sprintf("%s: %d packets before, %d after", key, n, m))
		}
	}
	sort.Strings(reset)
	if len(reset) > 0 {
		t.Errorf("the new agent rewrote %d unchanged rules (their counters went back):\n%s", len(reset), strings.Join(reset, "\n"))
	}
	if busy < 5 {
		t.Errorf("only %d of the %d rules kept across the restart had counted packets: the counter check proves little", busy, compared)
	}

	eventually(t, 5*time.Second, "pod C denied after the restart", unreachable(c.ns, b.ip))
	if s := mustNS(t, e.host.ns, "iptables-save", "-t", "filter"); strings.Contains(s, oldChain) {
		t.Errorf("the chain of the policy deleted while the agent was down is still there")
	}
	if err := ping(a.ns, b.ip); err != nil {
		t.Errorf("pod A -> pod B after the restart: %v", err)
	}
	time.Sleep(time.Second) // the connection keeps working past the new agent's first applies
	if err := conn.stop(); err != nil {
		t.Errorf("the long-lived TCP connection broke: %v", err)
	}
	rounds := conn.rounds // read once the pinger has stopped
	total := time.Since(start)
	if want := int(total / (400 * time.Millisecond)); rounds < want {
		t.Errorf("only %d echo rounds in %s: the connection stalled", rounds, total.Round(time.Millisecond))
	}
	t.Logf("agent down and ready again in %s; %d rules compared (%d with traffic), %d echo rounds", ready.Round(time.Millisecond),
		compared, busy, rounds)
}

// counterRE matches a rule of ours in `iptables-save -c` output.
var counterRE = regexp.MustCompile(`^\[(\d+):\d+\] -A (\S+) .*cali:([A-Za-z0-9_-]+)`)

// ruleCounters are the packet counters of our rules in the host
// namespace, by table, chain and rule hash.
func ruleCounters(t *testing.T, e *cniEnv) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	table := ""
	for _, line := range strings.Split(mustNS(t, e.host.ns, "iptables-save", "-c"), "\n") {
		if strings.HasPrefix(line, "*") {
			table = line[1:]
			continue
		}
		m := counterRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n, err := strconv.ParseUint(m[1], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		out[table+" "+m[2]+" "+m[3]] = n
	}
	if len(out) == 0 {
		t.Fatal("no rules of ours in iptables-save -c")
	}
	return out
}
