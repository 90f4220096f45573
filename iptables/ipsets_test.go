package iptables

import (
	"errors"
	"fmt"
	"github.com/calico-aio/calico-aio/internal/nstest"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
)

func TestCanonMember(t *testing.T) {
	for _, tc := range []struct{ typ, fam, in, want string }{
		{SetTypeIP, FamilyInet, "10.0.0.1", "10.0.0.1"},
		{SetTypeIP, FamilyInet, "10.0.0.1/32", "10.0.0.1"},
		{SetTypeIP, FamilyInet, "::ffff:10.0.0.1", "10.0.0.1"},
		{SetTypeIP, FamilyInet6, "FD00:0::01", "fd00::1"},
		{SetTypeNet, FamilyInet, "10.1.2.3/16", "10.1.0.0/16"},
		{SetTypeNet, FamilyInet, "10.1.2.3/32", "10.1.2.3"},
		{SetTypeNet, FamilyInet6, "fd00::1/128", "fd00::1"},
		{SetTypeIPPort, FamilyInet, "10.0.0.1,80", "10.0.0.1,tcp:80"},
		{SetTypeIPPort, FamilyInet, "10.0.0.1,UDP:053", "10.0.0.1,udp:53"},
		{SetTypeIPPort, FamilyInet6, "fd00::1,sctp:9", "fd00::1,sctp:9"},
	} {
		if got, err := canonMember(tc.typ, tc.fam, tc.in); err != nil || got != tc.want {
			t.Errorf("%s %s %q: got %q, %v; want %q", tc.typ, tc.fam, tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ typ, fam, in string }{
		{SetTypeIP, FamilyInet, "fd00::1"}, {SetTypeIP, FamilyInet6, "10.0.0.1"},
		{SetTypeIP, FamilyInet, "10.0.0.0/8"}, {SetTypeNet, FamilyInet, "0.0.0.0/0"},
		{SetTypeIPPort, FamilyInet, "10.0.0.1"}, {SetTypeIPPort, FamilyInet, "10.0.0.1,icmp:8"},
		{SetTypeIPPort, FamilyInet, "10.0.0.1,tcp:70000"}, {"list:set", FamilyInet, "x"},
	} {
		if got, err := canonMember(tc.typ, tc.fam, tc.in); err == nil {
			t.Errorf("%s %s %q: got %q, want an error", tc.typ, tc.fam, tc.in, got)
		}
	}
}

func TestIPSetsValidation(t *testing.T) {
	s := NewIPSets(IPSetsOptions{IPVersion: 4})
	for _, tc := range []struct{ name, typ, fam string }{
		{"foo", SetTypeIP, FamilyInet},
		{"cali60s:a", SetTypeIP, FamilyInet6},                         // v4-only driver
		{"cali60s:a", SetTypeIP, FamilyInet},                          // prefix/family mismatch
		{"cali40s:" + strings.Repeat("x", 24), SetTypeIP, FamilyInet}, // 32 chars
		{"cali40s:a", "hash:mac", FamilyInet},
	} {
		if err := s.SetIPSet(tc.name, tc.typ, tc.fam, nil); err == nil {
			t.Errorf("%+v: no error", tc)
		}
	}
	if err := s.AddMembers("cali40s:nope", []string{"10.0.0.1"}); err == nil {
		t.Error("AddMembers to an unknown set: no error")
	}
	if err := s.SetIPSet("cali40s:a", SetTypeIP, FamilyInet, []string{"10.0.0.1", "bogus"}); err == nil || len(s.desired) != 0 {
		t.Errorf("bad member: err=%v desired=%v", err, s.desired)
	}
}

// ipsetSave returns our sets as the kernel has them, and each set's
// header line (whose initval changes when a set is re-created or swapped).
func ipsetSave(t *testing.T, n ns.NetNS) (map[string][]string, map[string]string) {
	t.Helper()
	out := sh(t, n, "ipset", "save")
	all := func(string) bool { return true }
	sets, err := parseIPSetSave([]byte(out), all)
	if err != nil {
		t.Fatal(err)
	}
	members, headers := map[string][]string{}, map[string]string{}
	for name, s := range sets {
		members[name] = slices.Sorted(maps.Keys(s.members))
	}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "create" {
			headers[f[1]] = l
		}
	}
	return members, headers
}

func applySets(t *testing.T, n ns.NetNS, s *IPSets) error {
	t.Helper()
	var err error
	_ = n.Do(func(ns.NetNS) error { err = s.Apply(); return nil })
	return err
}

func mustApplySets(t *testing.T, n ns.NetNS, s *IPSets) {
	t.Helper()
	if err := applySets(t, n, s); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

func ips(prefix string, from, count int) []string {
	var out []string
	for i := from; i < from+count; i++ {
		out = append(out, fmt.Sprintf("%s.%d.%d", prefix, i/250, i%250+1))
	}
	return out
}

func TestIPSetsKernel(t *testing.T) {
	nstest.NeedKernel(t, "ipset", "iptables")
	n := nstest.NewNS(t)
	sh(t, n, "ipset", "create", "foreign", "hash:ip")
	sh(t, n, "ipset", "add", "foreign", "192.0.2.1")
	sh(t, n, "ipset", "create", "cali4ts:a", "hash:ip") // left over by a crash

	const a, b, c, d = "cali40s:a", "cali40n:b", "cali60s:c", "cali40p:d"
	s := NewIPSets(IPSetsOptions{})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.SetIPSet(a, SetTypeIP, FamilyInet, []string{"10.0.0.1", "10.0.0.2"}))
	must(s.SetIPSet(b, SetTypeNet, FamilyInet, []string{"10.1.2.3/16", "10.2.0.1/32"}))
	must(s.SetIPSet(c, SetTypeIP, FamilyInet6, []string{"FD00::1"}))
	must(s.SetIPSet(d, SetTypeIPPort, FamilyInet, []string{"10.0.0.1,80", "10.0.0.1,udp:53"}))
	mustApplySets(t, n, s)
	want := map[string][]string{
		"foreign": {"192.0.2.1"},
		a:         {"10.0.0.1", "10.0.0.2"},
		b:         {"10.1.0.0/16", "10.2.0.1"},
		c:         {"fd00::1"},
		d:         {"10.0.0.1,tcp:80", "10.0.0.1,udp:53"},
	}
	got, headers := ipsetSave(t, n)
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("sets %v\nwant %v", got, want)
	}

	writes := s.writes
	mustApplySets(t, n, s)
	fresh := NewIPSets(IPSetsOptions{})
	must(fresh.SetIPSet(a, SetTypeIP, FamilyInet, []string{"10.0.0.2", "10.0.0.1"}))
	must(fresh.SetIPSet(b, SetTypeNet, FamilyInet, []string{"10.1.0.0/16", "10.2.0.1"}))
	must(fresh.SetIPSet(c, SetTypeIP, FamilyInet6, []string{"fd00::1"}))
	must(fresh.SetIPSet(d, SetTypeIPPort, FamilyInet, []string{"10.0.0.1,tcp:80", "10.0.0.1,udp:53"}))
	mustApplySets(t, n, fresh)
	if s.writes != writes || fresh.writes != 0 {
		t.Fatalf("unchanged state wrote: %d ipset restores, fresh driver %d", s.writes-writes, fresh.writes)
	}

	// From here on set a is in use by iptables.
	sh(t, n, "iptables", "-A", "INPUT", "-m", "set", "--match-set", a, "src", "-j", "ACCEPT")
	referenced := func() {
		t.Helper()
		if out := sh(t, n, "iptables-save", "-t", "filter"); !strings.Contains(out, "--match-set "+a+" src") {
			t.Fatalf("reference to %s lost:\n%s", a, out)
		}
	}

	t.Run("incremental", func(t *testing.T) {
		must(s.AddMembers(a, []string{"10.0.0.3"}))
		must(s.RemoveMembers(a, []string{"10.0.0.1"}))
		mustApplySets(t, n, s)
		got, h := ipsetSave(t, n)
		if !slices.Equal(got[a], []string{"10.0.0.2", "10.0.0.3"}) || h[a] != headers[a] {
			t.Fatalf("members %v; header %q -> %q (want unchanged: add/del, not swap)", got[a], headers[a], h[a])
		}
		referenced()
	})

	t.Run("big change by swap while referenced", func(t *testing.T) {
		big := ips("10.9", 0, 500)
		must(s.SetIPSet(a, SetTypeIP, FamilyInet, big))
		mustApplySets(t, n, s)
		got, h := ipsetSave(t, n)
		if !slices.Equal(got[a], slices.Sorted(slices.Values(big))) || h[a] == headers[a] {
			t.Fatalf("%d members; header %q -> %q (want a new set swapped in)", len(got[a]), headers[a], h[a])
		}
		if _, ok := got["cali4ts:a"]; ok {
			t.Fatal("temporary set left behind")
		}
		referenced()
	})

	t.Run("type change of a referenced set fails clearly", func(t *testing.T) {
		must(s.SetIPSet(a, SetTypeNet, FamilyInet, []string{"10.9.0.0/16"}))
		must(s.AddMembers(b, []string{"10.3.0.0/16"})) // planned before a
		must(s.AddMembers(c, []string{"fd00::2"}))     // planned after a
		err := applySets(t, n, s)
		if !errors.Is(err, ErrIPSetInUse) || !strings.Contains(err.Error(), a) || !s.Dirty() {
			t.Fatalf("want ErrIPSetInUse naming %s, got %v", a, err)
		}
		t.Logf("error as reported: %v", err)
		if got, _ := ipsetSave(t, n); !slices.Contains(got[b], "10.3.0.0/16") || !slices.Contains(got[c], "fd00::2") {
			t.Fatalf("other sets not applied: %v %v", got[b], got[c])
		}
		must(s.RemoveMembers(c, []string{"fd00::2"}))
		must(s.SetIPSet(a, SetTypeIP, FamilyInet, []string{"10.0.0.2"}))
		mustApplySets(t, n, s)
		referenced()
	})

	t.Run("remove", func(t *testing.T) {
		s.RemoveIPSet(a)
		s.RemoveIPSet(b)
		err := applySets(t, n, s)
		if !errors.Is(err, ErrIPSetInUse) {
			t.Fatalf("removing a referenced set: want ErrIPSetInUse, got %v", err)
		}
		got, _ := ipsetSave(t, n)
		if _, ok := got[b]; ok || got[a] == nil {
			t.Fatalf("want %s gone and %s kept: %v", b, a, got)
		}
		sh(t, n, "iptables", "-D", "INPUT", "-m", "set", "--match-set", a, "src", "-j", "ACCEPT")
		mustApplySets(t, n, s)
		got, _ = ipsetSave(t, n)
		want := map[string][]string{"foreign": {"192.0.2.1"}, c: want[c], d: want[d]}
		if !maps.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("sets %v\nwant %v", got, want)
		}
	})
}
