package iptables

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/calico-aio/calico-aio/internal/nstest"
)

// listMembers returns the members of set name as `ipset list` shows them
// inside namespace n, canonicalised like the driver's.
func listMembers(t *testing.T, n ns.NetNS, name, setType, family string) []string {
	t.Helper()
	out := sh(t, n, "ipset", "list", name)
	_, body, ok := strings.Cut(out, "Members:\n")
	if !ok {
		t.Fatalf("no Members in `ipset list %s`:\n%s", name, out)
	}
	var members []string
	for _, m := range strings.Fields(body) {
		if c, err := canonMember(setType, family, m); err == nil {
			m = c
		}
		members = append(members, m)
	}
	slices.Sort(members)
	return members
}

// failConn fails every request for set with errInjected, passing the
// others on to the real socket.
type failConn struct {
	memberConn
	set string
}

var errInjected = errors.New("injected netlink failure")

func (c failConn) IpsetAdd(set string, e *netlink.IPSetEntry) error {
	if set == c.set {
		return errInjected
	}
	return c.memberConn.IpsetAdd(set, e)
}

func (c failConn) IpsetDel(set string, e *netlink.IPSetEntry) error {
	if set == c.set {
		return errInjected
	}
	return c.memberConn.IpsetDel(set, e)
}

// TestIPSetsNetlinkKernel: member-only changes of existing sets go over
// netlink into the namespace Apply runs in, for hash:ip, hash:net and
// hash:ip,port, IPv4 and IPv6, without an ipset process; the Observer is
// told of them; a set destroyed by hand is repaired by the next Apply; a
// failing group leaves the driver dirty with no cache and does not stop
// the others; without a socket, or for a member netlink cannot parse, the
// change goes through `ipset restore`.
func TestIPSetsNetlinkKernel(t *testing.T) {
	nstest.NeedKernel(t, "ipset")
	t.Parallel()
	n, other := nstest.NewNS(t), nstest.NewNS(t)
	type set struct{ name, typ, fam string }
	sets := []set{
		{"cali40s:ip", SetTypeIP, FamilyInet}, {"cali60s:ip", SetTypeIP, FamilyInet6},
		{"cali40n:net", SetTypeNet, FamilyInet}, {"cali60n:net", SetTypeNet, FamilyInet6},
		{"cali40p:port", SetTypeIPPort, FamilyInet}, {"cali60p:port", SetTypeIPPort, FamilyInet6},
	}
	initial := map[string][]string{
		"cali40s:ip":   {"10.65.0.1", "10.65.0.2", "10.65.0.3", "10.65.0.4"},
		"cali60s:ip":   {"fd00::a", "fd00::b", "fd00::c", "fd00::d"},
		"cali40n:net":  {"10.1.0.0/16", "10.2.0.0/16", "10.3.0.1", "10.4.0.0/24"},
		"cali60n:net":  {"fd01::/64", "fd02::/64", "fd03::1", "fd04::/48"},
		"cali40p:port": {"10.65.0.1,tcp:80", "10.65.0.2,udp:53", "10.65.0.3,sctp:9", "10.65.0.4,tcp:443"},
		"cali60p:port": {"fd00::a,tcp:80", "fd00::b,udp:53", "fd00::c,sctp:9", "fd00::d,tcp:443"},
	}
	// A pod's addresses joining each set, and one old member leaving.
	added := map[string][]string{
		"cali40s:ip":   {"10.65.0.5"},
		"cali60s:ip":   {"fd00::1"},
		"cali40n:net":  {"10.0.0.0/24", "10.9.9.9"},
		"cali60n:net":  {"fd00::/64", "fd09::9"},
		"cali40p:port": {"10.65.0.5,tcp:8080", "10.65.0.5,udp:53", "10.65.0.5,sctp:9"},
		"cali60p:port": {"fd00::5,tcp:8080", "fd00::5,udp:53", "fd00::5,sctp:9"},
	}
	// The same names in another namespace, empty: the writes must not go there.
	for _, st := range sets {
		sh(t, other, "ipset", "create", st.name, st.typ, "family", st.fam)
	}

	s := NewIPSets(IPSetsOptions{})
	l := &cmdLog{next: runCommand}
	s.run = l.run
	var seen []Exec
	s.observer = func(e Exec) { seen = append(seen, e) }
	for _, st := range sets {
		if err := s.SetIPSet(st.name, st.typ, st.fam, initial[st.name]); err != nil {
			t.Fatal(err)
		}
	}
	mustApplySets(t, n, s)
	_, headers := ipsetSave(t, n)
	want := map[string][]string{}
	for name, m := range initial {
		want[name] = slices.Sorted(slices.Values(m))
	}
	check := func(what string) {
		t.Helper()
		for _, st := range sets {
			if got := listMembers(t, n, st.name, st.typ, st.fam); !slices.Equal(got, want[st.name]) {
				t.Errorf("%s: %s has %v, want %v", what, st.name, got, want[st.name])
			}
			if got := listMembers(t, other, st.name, st.typ, st.fam); len(got) != 0 {
				t.Errorf("%s: %s in the other namespace has %v", what, st.name, got)
			}
		}
	}
	// noProcess fails unless the last Apply ran no ipset and wrote members
	// members over netlink, told to the Observer once.
	noProcess := func(what string, members int) {
		t.Helper()
		if len(l.cmds) != 0 {
			t.Errorf("%s ran %q", what, l.cmds)
		}
		if len(seen) != 1 || seen[0].Op != OpNetlink || !seen[0].IPSet || seen[0].Lines != members || seen[0].Err != nil {
			t.Errorf("%s: observed %+v, want one OpNetlink of %d members", what, seen, members)
		}
		if _, h := ipsetSave(t, n); !maps.Equal(h, headers) {
			t.Errorf("%s: a set was re-created or swapped:\n%v\nwas\n%v", what, h, headers)
		}
	}

	l.reset()
	seen = nil
	total := 0
	for _, st := range sets {
		old := initial[st.name][0]
		if err := s.AddMembers(st.name, added[st.name]); err != nil {
			t.Fatal(err)
		}
		if err := s.RemoveMembers(st.name, []string{old}); err != nil {
			t.Fatal(err)
		}
		want[st.name] = slices.Sorted(slices.Values(append(slices.Clone(initial[st.name][1:]), added[st.name]...)))
		total += len(added[st.name]) + 1
	}
	mustApplySets(t, n, s)
	noProcess("members added", total)
	check("members added")

	l.reset()
	seen = nil
	for _, st := range sets {
		if err := s.RemoveMembers(st.name, added[st.name]); err != nil {
			t.Fatal(err)
		}
		want[st.name] = slices.Sorted(slices.Values(initial[st.name][1:]))
	}
	mustApplySets(t, n, s)
	noProcess("members removed", total-len(sets))
	check("members removed")

	// A set destroyed by hand: the netlink add fails, and Apply reads the
	// sets back and creates it through restore, in the same call.
	sh(t, n, "ipset", "destroy", "cali40s:ip")
	if err := s.AddMembers("cali40s:ip", []string{"10.65.0.7"}); err != nil {
		t.Fatal(err)
	}
	want["cali40s:ip"] = slices.Sorted(slices.Values(append(slices.Clone(want["cali40s:ip"]), "10.65.0.7")))
	l.reset()
	seen = nil
	mustApplySets(t, n, s)
	if l.count(" save") != 1 || l.count(" restore") != 1 || !strings.HasPrefix(l.last(" restore"), "create cali40s:ip ") {
		t.Errorf("repair of a destroyed set ran %q, restore input %q", l.cmds, l.last(" restore"))
	}
	if len(seen) == 0 || seen[0].Op != OpNetlink || seen[0].Err == nil {
		t.Errorf("the failed netlink write was not observed: %+v", seen)
	}
	check("destroyed set repaired")
	_, headers = ipsetSave(t, n)

	// A group that keeps failing: its error names set and member and
	// wraps the cause, the other group is written, the driver stays dirty
	// with no cache; once the cause goes, the next Apply repairs.
	s.openNL = func() (memberConn, error) {
		c, err := openNetlink()
		return failConn{c, "cali40n:net"}, err
	}
	if err := s.AddMembers("cali40n:net", []string{"10.7.0.0/16"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddMembers("cali60n:net", []string{"fd07::/64"}); err != nil {
		t.Fatal(err)
	}
	want["cali60n:net"] = slices.Sorted(slices.Values(append(slices.Clone(want["cali60n:net"]), "fd07::/64")))
	err := applySets(t, n, s)
	if !errors.Is(err, errInjected) || !strings.Contains(err.Error(), "cali40n:net") ||
		!strings.Contains(err.Error(), "10.7.0.0/16") || strings.Contains(err.Error(), "cali60n:net") {
		t.Fatalf("want the injected error naming cali40n:net and 10.7.0.0/16 only, got %v", err)
	}
	if !s.Dirty() || s.cache != nil {
		t.Fatalf("after a failed netlink write: dirty %v, cache %v", s.Dirty(), s.cache != nil)
	}
	check("one group failing") // cali40n:net not yet changed, cali60n:net written
	s.openNL = openNetlink
	want["cali40n:net"] = slices.Sorted(slices.Values(append(slices.Clone(want["cali40n:net"]), "10.7.0.0/16")))
	l.reset()
	seen = nil
	mustApplySets(t, n, s)
	if l.count(" save") != 1 || l.count(" restore") != 0 || len(seen) != 2 || seen[1].Op != OpNetlink || seen[1].Lines != 1 {
		t.Errorf("repair after the failure ran %q, observed %+v; want a save and a one-member netlink write", l.cmds, seen)
	}
	check("after the failure")

	// No netlink socket at all: nothing was written, so restore does it.
	s.openNL = func() (memberConn, error) { return nil, errInjected }
	if err := s.AddMembers("cali60s:ip", []string{"fd00::7"}); err != nil {
		t.Fatal(err)
	}
	want["cali60s:ip"] = slices.Sorted(slices.Values(append(slices.Clone(want["cali60s:ip"]), "fd00::7")))
	l.reset()
	seen = nil
	mustApplySets(t, n, s)
	if l.count(" save") != 0 || l.last(" restore") != "add cali60s:ip fd00::7\n" || len(seen) != 2 ||
		!errors.Is(seen[0].Err, errInjected) {
		t.Errorf("without a socket: ran %q, restore input %q, observed %+v", l.cmds, l.last(" restore"), seen)
	}
	check("without a netlink socket")
	s.openNL = openNetlink

	// A member as `ipset save` prints it that the netlink path does not
	// parse (kept verbatim by the read-back) goes through restore.
	sh(t, n, "ipset", "add", "cali40p:port", "10.65.0.9,icmp:echo-request")
	s.InvalidateCache()
	l.reset()
	mustApplySets(t, n, s)
	if in := l.last(" restore"); !strings.Contains(in, "del cali40p:port 10.65.0.9,icmp:") {
		t.Errorf("unparsed member: ran %q, restore input %q", l.cmds, in)
	}
	check("unparsed member deleted")
}
