package rules_test

import (
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/felix/rules"
	"github.com/calico-aio/calico-aio/store/api"
)

// TestLogActionRateLimitKernel: with logActionRateLimit 1/day and a burst
// of 2, a Log rule on a pod's ingress logs the first two of six new
// connections only (the LOG rule's packet counter), the next policy rule
// still allows all six; with no limit (the default) it logs every one. The
// dataplane moves between the renderings as the agent does on a live
// change.
func TestLogActionRateLimitKernel(t *testing.T) {
	h := newKernelHost(t)
	a, b := h.pod("calilra", 67), h.pod("calilrb", 68)
	b.listenTCP(8080)
	logged := map[string]rules.Profile{"open": openProfile["open"], "logged": {
		Ingress: []api.Rule{{Action: api.ActionLog}, {Action: api.ActionAllow}},
		Egress:  []api.Rule{{Action: api.ActionAllow}},
	}}
	in := rules.Input{Endpoints: []rules.Endpoint{
		{Iface: a.Iface, Addrs: []netip.Addr{a.Addr}, Profiles: []string{"open"}},
		{Iface: b.Iface, Addrs: []netip.Addr{b.Addr}, Profiles: []string{"logged"}},
	}, Profiles: logged}
	logLine := regexp.MustCompile(`(?m)^\[(\d+):\d+\] (.*-j LOG .*)$`)
	logCount := func() (int, string) {
		t.Helper()
		m := logLine.FindAllStringSubmatch(h.run("iptables-save", "-c", "-t", "filter"), -1)
		if len(m) != 1 {
			t.Fatalf("%d LOG rules in the kernel, want 1", len(m))
		}
		n, _ := strconv.Atoi(m[0][1])
		return n, m[0][2]
	}
	for _, step := range []struct {
		limit     string
		burst     int
		wantLimit string // in iptables-save's words ("": no limit match)
		want      int
	}{
		{"1/day", 2, "-m limit --limit 1/day --limit-burst 2", 2},
		{"", 5, "", 6},
		{"9999/second", 9999, "--limit-burst 9999", 6}, // the kernel reads 9999/s back as 10000/sec
	} {
		h.apply(rules.Config{DefaultEndpointToHostAction: "Accept", LogRateLimit: step.limit, LogRateLimitBurst: step.burst}, in)
		before, rule := logCount()
		if has := strings.Contains(rule, "-m limit"); has != (step.wantLimit != "") || !strings.Contains(rule, step.wantLimit) {
			t.Errorf("limit %q burst %d: LOG rule %q, want %q", step.limit, step.burst, rule, step.wantLimit)
		}
		for i := range 6 {
			if err := a.dial(netip.AddrPortFrom(b.Addr, 8080), 5*time.Second); err != nil {
				t.Fatalf("limit %q: connection %d: %v (the Allow after the Log rule must allow it)", step.limit, i, err)
			}
		}
		if after, _ := logCount(); after-before != step.want {
			t.Errorf("limit %q burst %d: %d of 6 connections logged, want %d", step.limit, step.burst, after-before, step.want)
		}
	}
}
