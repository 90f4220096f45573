package iptables

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/calico-aio/calico-aio/internal/nstest"
)

// maxelemOf is the maxelem `ipset list` shows for set name.
func maxelemOf(t *testing.T, n ns.NetNS, name string) string {
	t.Helper()
	out := sh(t, n, "ipset", "list", name)
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "Header:") {
			f := strings.Fields(l)
			if i := slices.Index(f, "maxelem"); i >= 0 && i+1 < len(f) {
				return f[i+1]
			}
		}
	}
	t.Fatalf("no maxelem in:\n%s", out)
	return ""
}

// TestIPSetsMaxElemLive changes the maxelem (Felix's maxIpsetSize) of sets
// in use: `ipset list` shows the new maxelem, members and the iptables
// reference are kept; a set with more members than the limit is left as
// the kernel has it, with an error naming it, until it fits again.
func TestIPSetsMaxElemLive(t *testing.T) {
	nstest.NeedKernel(t, "ipset", "iptables")
	n := nstest.NewNS(t)
	const a, b = "cali40s:a", "cali40s:b"
	s := NewIPSets(IPSetsOptions{})
	if err := s.SetIPSet(a, SetTypeIP, FamilyInet, ips("10.0", 0, 5)); err != nil {
		t.Fatal(err)
	}
	if err := s.SetIPSet(b, SetTypeIP, FamilyInet, ips("10.1", 0, 2)); err != nil {
		t.Fatal(err)
	}
	mustApplySets(t, n, s)
	if got := maxelemOf(t, n, a); got != "1048576" {
		t.Fatalf("maxelem %s, want the default 1048576", got)
	}
	sh(t, n, "iptables", "-A", "INPUT", "-m", "set", "--match-set", a, "src", "-j", "ACCEPT")

	s.SetMaxElem(1000)
	mustApplySets(t, n, s)
	got, _ := ipsetSave(t, n)
	for name, want := range map[string][]string{a: ips("10.0", 0, 5), b: ips("10.1", 0, 2)} {
		if m := maxelemOf(t, n, name); m != "1000" {
			t.Errorf("%s maxelem %s after SetMaxElem(1000)", name, m)
		}
		if !slices.Equal(got[name], slices.Sorted(slices.Values(want))) {
			t.Errorf("%s members %v, want %v", name, got[name], want)
		}
	}
	if out := sh(t, n, "iptables-save", "-t", "filter"); !strings.Contains(out, "--match-set "+a+" src") {
		t.Errorf("reference to %s lost:\n%s", a, out)
	}

	// Below a set's size: that set stays as it is, the other follows.
	s.SetMaxElem(3)
	err := applySets(t, n, s)
	if !errors.Is(err, ErrIPSetTooBig) || !strings.Contains(err.Error(), a) || strings.Contains(err.Error(), b) {
		t.Fatalf("Apply with a set above maxelem: %v", err)
	}
	if m, mb := maxelemOf(t, n, a), maxelemOf(t, n, b); m != "1000" || mb != "3" {
		t.Errorf("maxelem a %s (want 1000, untouched), b %s (want 3)", m, mb)
	}
	if got, _ := ipsetSave(t, n); len(got[a]) != 5 {
		t.Errorf("set a changed while too big: %v", got[a])
	}
	if !s.Dirty() {
		t.Error("driver clean with a set left too big")
	}
	// It shrinks to fit: programmed with the new maxelem.
	if err := s.SetIPSet(a, SetTypeIP, FamilyInet, ips("10.0", 0, 3)); err != nil {
		t.Fatal(err)
	}
	mustApplySets(t, n, s)
	got, _ = ipsetSave(t, n)
	if m := maxelemOf(t, n, a); m != "3" || !maps.EqualFunc(map[string][]string{a: got[a]}, map[string][]string{a: slices.Sorted(slices.Values(ips("10.0", 0, 3)))}, slices.Equal) {
		t.Errorf("set a: maxelem %s members %v", m, got[a])
	}
}
