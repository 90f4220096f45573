package rules

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"

	"github.com/calico-aio/calico-aio/iptables"
	"github.com/calico-aio/calico-aio/store/api"
)

// QoS controls in the endpoint chains (Calico 3.32's placement): packet
// rate limits run first, on every packet, before the conntrack rules;
// connection limits run after them, so only a flow's first packet counts.
// Bandwidth is shaped by tbf qdiscs (felix/dataplane/qos*.go): on the host
// veth for ingress, on an ifb device for egress. Where the kernel cannot
// feed the ifb (Config.PoliceEgressBandwidth), the egress bandwidth is
// policed here instead (docs/QOS.md): a hashlimit byte-mode match drops
// what exceeds the rate (and the peakrate).

// The byte rates (bytes/s) hashlimit takes: iptables 1.8 rejects or
// crashes on others. Faster limits police at the maximum, 32 Gbit/s; the
// minimum is Calico's smallest bandwidth, 1 kbit/s.
const (
	hashlimitMinBytes = 125
	hashlimitMaxBytes = 4_000_000_000
)

// qosPacketRate marks the packets within rate/burst and drops the rest.
func (r *renderer) qosPacketRate(dir string, rate, burst int64) []iptables.Rule {
	if rate == 0 {
		return nil
	}
	s := r.cfg.MarkScratch
	return []iptables.Rule{
		rule("", clearMark(s), "Clear "+dir+" packet rate limit mark"),
		rule(fmt.Sprintf("-m limit --limit %d/sec --limit-burst %d", rate, burst), setMark(s), "Mark packets within "+dir+" packet rate limit"),
		rule(markClear(s), "-j DROP", "Drop packets over "+dir+" packet rate limit"),
		rule("", clearMark(s), "Clear "+dir+" packet rate limit mark"),
	}
}

// qosConnections refuses a new connection while the endpoint has max in
// this direction: a TCP one with a reset, any other by dropping it. One
// connlimit match counts them all.
func (r *renderer) qosConnections(dir string, max int64) []iptables.Rule {
	if max == 0 {
		return nil
	}
	s := r.cfg.MarkScratch
	return []iptables.Rule{
		rule("", clearMark(s), ""),
		rule(fmt.Sprintf("-m connlimit --connlimit-above %d --connlimit-mask 0", max), setMark(s), "Mark connections over "+dir+" connection limit"),
		rule("-p tcp "+markSet(s), "-j REJECT --reject-with tcp-reset", "Reject connections over "+dir+" connection limit"),
		rule(markSet(s), "-j DROP", "Drop connections over "+dir+" connection limit"),
	}
}

// qosEgressBandwidth polices the workload's sending rate (bits/s) with a
// burst (bits), and its peakrate (bits/s) with a minburst (bytes).
// hashlimit wants a byte burst of at least about one second at the rate
// (and rounds both); a smaller burst is raised to that.
func (r *renderer) qosEgressBandwidth(iface string, q *api.QoSControls) []iptables.Rule {
	if q.EgressBandwidth == 0 || !r.cfg.PoliceEgressBandwidth {
		return nil
	}
	out := []iptables.Rule{hashlimitDrop(hashlimitName("cqb", iface), q.EgressBandwidth/8, q.EgressBurst/8, "Drop packets over egress bandwidth limit")}
	if q.EgressPeakrate != 0 {
		out = append(out, hashlimitDrop(hashlimitName("cqp", iface), q.EgressPeakrate/8, q.EgressMinburst, "Drop packets over egress peakrate limit"))
	}
	return out
}

func hashlimitDrop(name string, rateBytes, burstBytes int64, comment string) iptables.Rule {
	rateBytes = min(max(rateBytes, hashlimitMinBytes), hashlimitMaxBytes)
	burstBytes = max(burstBytes, rateBytes+rateBytes/32+1500)
	return rule(fmt.Sprintf("-m hashlimit --hashlimit-above %db/s --hashlimit-burst %db --hashlimit-name %s", rateBytes, burstBytes, name), "-j DROP", comment)
}

// hashlimitName names a hashlimit table: prefix and a hash of the
// interface, 15 characters (the kernel's limit); one table per rule.
func hashlimitName(prefix, iface string) string {
	h := sha1.Sum([]byte(iface))
	return prefix + hex.EncodeToString(h[:])[:15-len(prefix)]
}
