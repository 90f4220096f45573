package ctl_test

import (
	"context"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/cni"
	"github.com/calico-aio/calico-aio/store/api"
)

func (h *harness) mustFail(stdin string, args ...string) string {
	h.t.Helper()
	out, errs, code := h.run(stdin, args...)
	if code == 0 {
		h.t.Fatalf("calicoctl %v succeeded, want a failure\nstdout: %s", args, out)
	}
	return errs
}

func (h *harness) profile(name string) *api.Profile {
	h.t.Helper()
	k, _ := api.LookupKind("Profile")
	r, err := h.cli.GetResource(context.Background(), k, "", name)
	if err != nil {
		h.t.Fatal(err)
	}
	return r.(*api.Profile)
}

func TestProfileAddShowRemove(t *testing.T) {
	h := newHarness(t)
	if out := h.mustRun("", "profile", "add", "web"); !strings.Contains(out, "Created profile web") {
		t.Errorf("add: %q", out)
	}
	if out := h.mustRun("", "profile", "add", "web"); !strings.Contains(out, "Profile web already exists.") {
		t.Errorf("second add: %q", out)
	}
	p := h.profile("web")
	j, _ := json.Marshal(p.Spec)
	if want := `{"ingress":[{"action":"Allow","source":{"selector":"has(web)"},"destination":{}}],"egress":[{"action":"Allow","source":{},"destination":{}}],"labelsToApply":{"web":""}}`; string(j) != want {
		t.Errorf("profile spec\n got %s\nwant %s", j, want)
	}
	h.mustRun("", "profile", "add", "db")
	out := h.mustRun("", "profile", "show")
	if !strings.Contains(out, "| Name |") || !strings.Contains(out, "| db   |") || !strings.Contains(out, "| web  |") {
		t.Errorf("show:\n%s", out)
	}
	if errs := h.mustFail("", "profile", "add", "Bad_Name"); !strings.Contains(errs, "metadata.name") {
		t.Errorf("invalid name: %q", errs)
	}

	// A profile in use is not removed without --no-check.
	h.endpoint("node1", "ws1", "10.0.0.1", "web")
	if errs := h.mustFail("", "profile", "remove", "web"); !strings.Contains(errs, "in use by 1 endpoint(s): default/node1-namespace-ws1-eth1") {
		t.Errorf("remove in use: %q", errs)
	}
	out = h.mustRun("", "profile", "show", "--detailed")
	if !hasRow(out, "web", "node1", "namespace", "ws1", "node1-namespace-ws1-eth1", "10.0.0.1/32") || !hasRow(out, "db") {
		t.Errorf("show --detailed:\n%s", out)
	}
	h.mustRun("", "profile", "remove", "web", "--no-check")
	h.mustRun("", "profile", "remove", "db")
	if errs := h.mustFail("", "profile", "remove", "db"); !strings.Contains(errs, "profile db does not exist") {
		t.Errorf("remove missing: %q", errs)
	}
}

// hasRow reports whether a box table has a row starting with these cells.
func hasRow(table string, cells ...string) bool {
	for _, l := range strings.Split(table, "\n") {
		parts := strings.Split(l, "|")
		if len(parts) < len(cells)+2 {
			continue
		}
		ok := true
		for i, c := range cells {
			ok = ok && strings.TrimSpace(parts[i+1]) == c
		}
		if ok {
			return true
		}
	}
	return false
}

// endpoint stores a WorkloadEndpoint of a namespace workload as
// "container add" writes it.
func (h *harness) endpoint(node, workload, ip string, profiles ...string) *api.WorkloadEndpoint {
	h.t.Helper()
	w := cni.Workload{Node: node, Orchestrator: cni.OrchestratorNamespace, ID: workload, IfName: "eth1"}
	wep := w.Endpoint([]netip.Addr{netip.MustParseAddr(ip)}, "ee:ee:ee:00:00:01", profiles)
	if _, err := h.cli.CreateResource(context.Background(), wep); err != nil {
		h.t.Fatal(err)
	}
	return wep
}

func TestProfileRuleRoundTrips(t *testing.T) {
	h := newHarness(t)
	h.mustRun("", "profile", "add", "web")
	rules := func() string {
		return h.mustRun("", "profile", "web", "rule", "show")
	}
	if got, want := rules(), "Inbound rules:\n   1 allow from tag web\nOutbound rules:\n   1 allow\n"; got != want {
		t.Errorf("rule show\n got %q\nwant %q", got, want)
	}
	out := h.mustRun("", "profile", "web", "rule", "add", "inbound", "allow", "tcp", "to", "ports", "80,443")
	if !strings.Contains(out, "Added inbound rule 2 to profile web: allow tcp to ports 80,443") {
		t.Errorf("add: %q", out)
	}
	h.mustRun("", "profile", "web", "rule", "add", "inbound", "--at=1", "deny", "from", "cidr", "10.9.0.0/16")
	h.mustRun("", "profile", "web", "rule", "add", "inbound", "deny", "icmp", "type", "8", "--at", "-1")
	h.mustRun("", "profile", "web", "rule", "add", "outbound", "--at=1", "deny", "udp", "to", "ports", "53", "selector", "role == 'dns'")
	want := "Inbound rules:\n" +
		"   1 deny from cidr 10.9.0.0/16\n" +
		"   2 allow from tag web\n" +
		"   3 allow tcp to ports 80,443\n" +
		"   4 deny icmp type 8\n" +
		"Outbound rules:\n" +
		"   1 deny udp to ports 53 selector 'role == '\\''dns'\\'''\n" +
		"   2 allow\n"
	if got := rules(); got != want {
		t.Errorf("after adds\n got %q\nwant %q", got, want)
	}
	// Adding a rule that is there already is reported, not duplicated.
	out = h.mustRun("", "profile", "web", "rule", "add", "inbound", "allow", "tcp", "to", "ports", "80,443")
	if !strings.Contains(out, "is already inbound rule 3 of profile web; not added") {
		t.Errorf("duplicate add: %q", out)
	}
	// rule json | rule update is a no-op round trip.
	js := h.mustRun("", "profile", "web", "rule", "json")
	var doc map[string][]map[string]any
	if err := json.Unmarshal([]byte(js), &doc); err != nil || len(doc["ingress"]) != 4 || len(doc["egress"]) != 2 {
		t.Fatalf("rule json: %v\n%s", err, js)
	}
	if out := h.mustRun(js, "profile", "web", "rule", "update"); !strings.Contains(out, "4 inbound, 2 outbound") {
		t.Errorf("update: %q", out)
	}
	if got := rules(); got != want {
		t.Errorf("after json|update\n got %q\nwant %q", got, want)
	}
	// Remove by words and by position.
	out = h.mustRun("", "profile", "web", "rule", "remove", "inbound", "allow", "tcp", "to", "ports", "80,443")
	if !strings.Contains(out, "Removed inbound rule 3 from profile web") {
		t.Errorf("remove by rule: %q", out)
	}
	h.mustRun("", "profile", "web", "rule", "remove", "inbound", "--at=1")
	h.mustRun("", "profile", "web", "rule", "remove", "outbound", "--at=-2")
	want = "Inbound rules:\n   1 allow from tag web\n   2 deny icmp type 8\nOutbound rules:\n   1 allow\n"
	if got := rules(); got != want {
		t.Errorf("after removes\n got %q\nwant %q", got, want)
	}
	// Update replaces both lists and validates.
	h.mustRun(`{"inbound_rules":[{"action":"Allow","protocol":"TCP","destination":{"ports":[22]}}]}`, "profile", "web", "rule", "update")
	if got := rules(); got != "Inbound rules:\n   1 allow tcp to ports 22\nOutbound rules:\n" {
		t.Errorf("after update %q", got)
	}
	if errs := h.mustFail(`{"ingress":[{"action":"Maybe"}]}`, "profile", "web", "rule", "update"); !strings.Contains(errs, "spec.ingress[0].action") {
		t.Errorf("invalid update: %q", errs)
	}

	refusals := []struct {
		args []string
		want string
	}{
		{[]string{"profile", "web", "rule", "remove", "inbound", "deny", "tcp"}, `profile web has no inbound rule "deny tcp"`},
		{[]string{"profile", "web", "rule", "remove", "inbound", "--at=5"}, "--at=5: want a position from 1 to 1"},
		{[]string{"profile", "web", "rule", "remove", "inbound"}, "give one of them"},
		{[]string{"profile", "web", "rule", "add", "sideways", "allow"}, "(inbound|outbound)"},
		{[]string{"profile", "web", "rule", "add", "inbound", "allow", "from", "ports", "80"}, "ports need protocol"},
		{[]string{"profile", "nope", "rule", "show"}, "profile nope does not exist"},
		{[]string{"profile", "nope", "rule", "add", "inbound", "allow"}, "profile nope does not exist"},
	}
	for _, r := range refusals {
		if errs := h.mustFail("", r.args...); !strings.Contains(errs, r.want) {
			t.Errorf("%v: %q, want %q", r.args, errs, r.want)
		}
	}
}

func TestContainerProfilesAndEndpointShow(t *testing.T) {
	h := newHarness(t)
	h.mustRun("", "profile", "add", "web")
	h.mustRun("", "profile", "add", "db")
	h.endpoint("node1", "ws1", "10.0.0.1")
	h.endpoint("node1", "ws2", "10.0.0.2", "db")
	h.endpoint("node2", "ws3", "10.0.0.3")
	// The namespace is gone: profile verbs need only the datastore.
	ctr := []string{"container", "/var/run/netns/ws1", "--hostname", "node1"}
	run := func(args ...string) string { return h.mustRun("", append(append([]string{}, ctr...), args...)...) }
	profiles := func() []string {
		k, _ := api.LookupKind("WorkloadEndpoint")
		r, err := h.cli.GetResource(context.Background(), k, "default", "node1-namespace-ws1-eth1")
		if err != nil {
			t.Fatal(err)
		}
		return r.(*api.WorkloadEndpoint).Spec.Profiles
	}
	if out := run("profile", "append", "web"); !strings.Contains(out, "Profiles of network namespace /var/run/netns/ws1: web") {
		t.Errorf("append: %q", out)
	}
	if out := run("profile", "append", "web", "db"); !strings.Contains(out, "Profile web is already in the profiles of") {
		t.Errorf("duplicate append: %q", out)
	}
	if got := profiles(); strings.Join(got, ",") != "web,db" {
		t.Errorf("profiles %v", got)
	}
	if errs := h.mustFail("", append(ctr, "profile", "append", "nope")...); !strings.Contains(errs, "profile nope does not exist") {
		t.Errorf("unknown profile: %q", errs)
	}
	run("profile", "remove", "web")
	if out := run("profile", "remove", "web"); !strings.Contains(out, "Profile web is not in the profiles of") {
		t.Errorf("remove absent: %q", out)
	}
	run("profile", "set", "web", "db", "web")
	if got := profiles(); strings.Join(got, ",") != "web,db" {
		t.Errorf("after set: %v", got)
	}
	if out := run("profile", "set"); !strings.Contains(out, "has no profiles") || len(profiles()) != 0 {
		t.Errorf("set to nothing: %q %v", out, profiles())
	}
	out := run("endpoint", "show")
	veth := cni.Workload{Node: "node1", Orchestrator: cni.OrchestratorNamespace, ID: "ws1", IfName: "eth1"}.HostVeth()
	if !hasRow(out, "node1-namespace-ws1-eth1", "eth1", veth, "10.0.0.1/32", "ee:ee:ee:00:00:01", "", "") {
		t.Errorf("container endpoint show:\n%s", out)
	}
	if errs := h.mustFail("", "container", "/var/run/netns/ws9", "--hostname", "node1", "profile", "append", "web"); !strings.Contains(errs, "has no Calico endpoint on node node1") {
		t.Errorf("no endpoint: %q", errs)
	}

	// endpoint show: a summary per node and orchestrator, or one row each.
	out = h.mustRun("", "endpoint", "show")
	if !hasRow(out, "node1", "namespace", "2", "2") || !hasRow(out, "node2", "namespace", "1", "1") {
		t.Errorf("endpoint show:\n%s", out)
	}
	out = h.mustRun("", "endpoint", "show", "--detailed", "--host=node1")
	if !hasRow(out, "node1", "namespace", "ws1", "node1-namespace-ws1-eth1", "10.0.0.1/32") ||
		!hasRow(out, "node1", "namespace", "ws2", "node1-namespace-ws2-eth1", "10.0.0.2/32", "ee:ee:ee:00:00:01", "db") ||
		strings.Contains(out, "node2") {
		t.Errorf("endpoint show --detailed --host=node1:\n%s", out)
	}
	out = h.mustRun("", "endpoint", "show", "--detailed", "--workload=ws3")
	if !hasRow(out, "node2", "namespace", "ws3") || strings.Contains(out, "ws1") {
		t.Errorf("--workload=ws3:\n%s", out)
	}
	out = h.mustRun("", "endpoint", "show", "--detailed", "--orchestrator=docker")
	if strings.Contains(out, "namespace") {
		t.Errorf("--orchestrator=docker:\n%s", out)
	}
}
