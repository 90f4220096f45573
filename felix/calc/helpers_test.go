package calc_test

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/felix/rules"
	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/iptables"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/etcdv3"
)

const thisNode = "node1"

// datastore is stored values by key, as the syncer lists and watches them.
type datastore map[string][]byte

func newObj(kind string) api.Resource {
	k, ok := api.LookupKind(kind)
	if !ok {
		panic("unknown kind " + kind)
	}
	return k.NewObject()
}

// put stores r the way a client writes it: defaulted, validated, encoded.
func (ds datastore) put(t testing.TB, r api.Resource) {
	t.Helper()
	r.Default()
	if err := r.Validate(); err != nil {
		t.Fatalf("test resource %s/%s is invalid: %v", r.GetTypeMeta().Kind, r.GetObjectMeta().Name, err)
	}
	k, _ := api.LookupKind(r.GetTypeMeta().Kind)
	v, err := store.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	ds[etcdv3.ResourceKey(k, r.GetObjectMeta().Namespace, r.GetObjectMeta().Name)] = v
}

func (ds datastore) remove(kind, ns, name string) {
	k, _ := api.LookupKind(kind)
	delete(ds, etcdv3.ResourceKey(k, ns, name))
}

// block stores an IPAM block affine to node ("" for none).
func (ds datastore) block(t testing.TB, cidr, node string) {
	t.Helper()
	p := netip.MustParsePrefix(cidr)
	b := ipam.Block{CIDR: p.String(), Allocations: []*int{}, Unallocated: []int{}, Attributes: []ipam.AllocationAttributes{}}
	if node != "" {
		a := "host:" + node
		b.Affinity = &a
	}
	v, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	ds[etcdv3.BlockKey(p)] = v
}

func (ds datastore) clone() datastore {
	out := make(datastore, len(ds))
	for k, v := range ds {
		out[k] = v
	}
	return out
}

// decode turns one stored value (nil: deleted) into an update, as
// felix/syncer/syncer.go decodeEvent does. Every call decodes anew, so states
// never share objects.
func decode(t testing.TB, key string, value []byte) calc.Update {
	t.Helper()
	u := calc.Update{Key: key, Deleted: value == nil}
	if strings.HasPrefix(key, etcdv3.BlockPrefix) {
		u.Kind = calc.KindBlock
		if !u.Deleted {
			b, err := ipam.ParseBlock(value)
			if err != nil {
				t.Fatal(err)
			}
			u.Block = b
		}
		return u
	}
	if strings.HasPrefix(key, etcdv3.ServicePrefix) {
		u.Kind = calc.KindService
		if !u.Deleted {
			se, err := store.ParseServiceEndpoints(key, value)
			if err != nil {
				t.Fatal(err)
			}
			u.Service = se
		}
		return u
	}
	u.Kind, _, _ = strings.Cut(strings.TrimPrefix(key, etcdv3.ResourcePrefix), "/")
	if !u.Deleted {
		r, err := store.DecodeObject(store.Object{Value: value, Revision: "1"})
		if err != nil {
			t.Fatal(err)
		}
		u.Resource = r
	}
	return u
}

// diff is what the syncer sends to move from one datastore content to
// another: changed and new keys, then deletes, each in key order.
func diff(t testing.TB, from, to datastore) []calc.Update {
	t.Helper()
	var out []calc.Update
	for _, k := range sortedKeys(to) {
		if string(from[k]) != string(to[k]) || from[k] == nil {
			out = append(out, decode(t, k, to[k]))
		}
	}
	for _, k := range sortedKeys(from) {
		if _, ok := to[k]; !ok {
			out = append(out, decode(t, k, nil))
		}
	}
	return out
}

func sortedKeys(ds datastore) []string {
	keys := make([]string, 0, len(ds))
	for k := range ds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// fresh builds a state from ds alone, listing its keys in an order
// shuffled by seed (0: key order), then in sync.
func fresh(t testing.TB, ds datastore, seed int64) *calc.State {
	t.Helper()
	keys := sortedKeys(ds)
	if seed != 0 {
		rand.New(rand.NewSource(seed)).Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	}
	s := calc.NewState(thisNode)
	for _, k := range keys {
		s.Apply(decode(t, k, ds[k]))
	}
	s.Apply(calc.Update{InSync: true})
	return s
}

// dump renders a desired state as text, to compare and to show diffs.
func dump(d calc.Desired) string {
	var b strings.Builder
	for _, ver := range []int{4, 6} {
		tb, ok := d.Tables[ver]
		if !ok {
			continue
		}
		for _, part := range []struct {
			name   string
			chains []iptablesChain
		}{{"filter", chains(tb.Filter)}, {"nat", chains(tb.NAT)}, {"mangle", chains(tb.Mangle)}, {"raw", chains(tb.Raw)}} {
			fmt.Fprintf(&b, "*v%d %s\n", ver, part.name)
			for _, c := range part.chains {
				fmt.Fprintf(&b, ":%s\n", c.name)
				for _, r := range c.rules {
					fmt.Fprintf(&b, "-A %s %s\n", c.name, r)
				}
			}
		}
	}
	names := make([]string, 0, len(d.IPSets))
	for n := range d.IPSets {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s := d.IPSets[n]
		fmt.Fprintf(&b, "ipset %s %s %s [%s]\n", n, s.Type, s.Family, strings.Join(s.Members, " "))
	}
	for _, ep := range d.Endpoints {
		fmt.Fprintf(&b, "endpoint %s %v %s %s/%s/%s\n", ep.Iface, ep.Addrs, ep.MAC, ep.Orchestrator, ep.Workload, ep.Endpoint)
	}
	fmt.Fprintf(&b, "blackholes %v\nlocal policies %d\n", d.Blackholes, d.LocalPolicies)
	return b.String()
}

type iptablesChain struct {
	name  string
	rules []string
}

func chains(cs []iptables.Chain) []iptablesChain {
	out := make([]iptablesChain, 0, len(cs))
	for _, c := range cs {
		ch := iptablesChain{name: c.Name}
		for _, r := range c.Rules {
			ch.rules = append(ch.rules, fmt.Sprintf("%s %s # %s", r.Match, r.Action, r.Comment))
		}
		out = append(out, ch)
	}
	return out
}

// textDiff shows the lines only one side has.
func textDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	var b strings.Builder
	for _, l := range g {
		if !slices.Contains(w, l) {
			b.WriteString("+ " + l + "\n")
		}
	}
	for _, l := range w {
		if !slices.Contains(g, l) {
			b.WriteString("- " + l + "\n")
		}
	}
	if b.Len() == 0 {
		return "(same lines, different order)"
	}
	return b.String()
}

// checkFresh compares the incremental state's result with states built
// from scratch from the same datastore, in several orders.
func checkFresh(t *testing.T, step string, inc *calc.State, ds datastore) calc.Desired {
	t.Helper()
	d := inc.Desired(true)
	got := dump(d)
	for _, seed := range []int64{0, 1, 2} {
		want := dump(fresh(t, ds, seed).Desired(true))
		if got != want {
			t.Errorf("%s: incremental result differs from a state built from scratch (seed %d); + incremental only, - scratch only:\n%s",
				step, seed, textDiff(got, want))
		}
	}
	return d
}

// applyAll sends updates to the state.
// advance makes a copy of *ds, lets change edit it, hands the
// differences to apply and makes the copy current.
func advance(t *testing.T, ds *datastore, change func(next datastore), apply func(calc.Update)) {
	t.Helper()
	next := ds.clone()
	change(next)
	for _, u := range diff(t, *ds, next) {
		apply(u)
	}
	*ds = next
}

// putFelix returns a change that writes FelixConfiguration name with
// set applied to its spec.
func putFelix(t *testing.T, name string, set func(*api.FelixConfigurationSpec)) func(datastore) {
	return func(next datastore) {
		f := felixDefault(set)
		f.Metadata.Name = name
		next.put(t, f)
	}
}

// chainRules is "match action" of each rule of chain name in chains that
// keep accepts (nil: every rule), one per line.
func chainRules(chains []iptables.Chain, name string, keep func(iptables.Rule) bool) string {
	var out []string
	for _, c := range chains {
		if c.Name != name {
			continue
		}
		for _, r := range c.Rules {
			if keep == nil || keep(r) {
				out = append(out, r.Match+" "+r.Action)
			}
		}
	}
	return strings.Join(out, "\n")
}

func applyAll(s *calc.State, us []calc.Update) {
	for _, u := range us {
		s.Apply(u)
	}
}

// set is the members of a selector IP set ("" namespace selector: none).
func set(t *testing.T, d calc.Desired, ver int, sel, nsSel string) []string {
	t.Helper()
	name := rules.IPSetName(ver, rules.IPSetSpec{Kind: rules.IPSetSelector, Selector: sel, NamespaceSelector: nsSel})
	s, ok := d.IPSets[name]
	if !ok {
		t.Fatalf("no IP set %s for selector %q namespaceSelector %q", name, sel, nsSel)
	}
	return s.Members
}

// policyJumps lists, in order, the policies an endpoint chain jumps to.
func policyJumps(d calc.Desired, ver int, dir, iface string, known []rules.PolicyKey) []string {
	chain := rules.EndpointChainName("tw", iface)
	if dir == rules.DirEgress {
		chain = rules.EndpointChainName("fw", iface)
	}
	names := map[string]string{}
	for _, k := range known {
		label := k.Name
		if k.Namespace != "" {
			label = k.Namespace + "/" + k.Name
		}
		names[rules.PolicyChainName(dir, k)] = label
	}
	var out []string
	for _, c := range d.Tables[ver].Filter {
		if c.Name != chain {
			continue
		}
		for _, r := range c.Rules {
			target, ok := strings.CutPrefix(r.Action, "-j ")
			if !ok || !(strings.HasPrefix(target, "cali-pi-") || strings.HasPrefix(target, "cali-po-")) {
				continue
			}
			if n, ok := names[target]; ok {
				out = append(out, n)
			} else {
				out = append(out, "?"+target)
			}
		}
	}
	return out
}

// Resource constructors.

func wep(ns, pod, node, iface string, labels map[string]string, ips []string, profiles ...string) *api.WorkloadEndpoint {
	w := newObj("WorkloadEndpoint").(*api.WorkloadEndpoint)
	w.Metadata.Namespace, w.Metadata.Name = ns, node+"-k8s-"+pod+"-eth0"
	w.Metadata.Labels = map[string]string{}
	for k, v := range labels {
		w.Metadata.Labels[k] = v
	}
	w.Spec = api.WorkloadEndpointSpec{Orchestrator: "k8s", Node: node, Pod: pod, Endpoint: "eth0",
		InterfaceName: iface, IPNetworks: ips, Profiles: profiles, MAC: "ee:ee:ee:00:00:01"}
	return w
}

func profile(name string, labels map[string]string) *api.Profile {
	p := newObj("Profile").(*api.Profile)
	p.Metadata.Name = name
	p.Spec.LabelsToApply = labels
	p.Spec.Ingress = []api.Rule{{Action: api.ActionAllow}}
	p.Spec.Egress = []api.Rule{{Action: api.ActionAllow}}
	return p
}

func order(o float64) *float64 { return &o }

func gnp(name string, ord *float64, sel, nsSel string, ingress, egress []api.Rule, types ...api.PolicyType) *api.GlobalNetworkPolicy {
	p := newObj("GlobalNetworkPolicy").(*api.GlobalNetworkPolicy)
	p.Metadata.Name = name
	p.Spec = api.GlobalNetworkPolicySpec{Order: ord, Selector: sel, NamespaceSelector: nsSel, Ingress: ingress, Egress: egress, Types: types}
	return p
}

func np(ns, name string, ord *float64, sel string, ingress, egress []api.Rule, types ...api.PolicyType) *api.NetworkPolicy {
	p := newObj("NetworkPolicy").(*api.NetworkPolicy)
	p.Metadata.Namespace, p.Metadata.Name = ns, name
	p.Spec = api.NetworkPolicySpec{Order: ord, Selector: sel, Ingress: ingress, Egress: egress, Types: types}
	return p
}

func netset(ns, name string, labels map[string]string, nets ...string) api.Resource {
	if ns == "" {
		s := newObj("GlobalNetworkSet").(*api.GlobalNetworkSet)
		s.Metadata.Name, s.Metadata.Labels, s.Spec.Nets = name, labels, nets
		return s
	}
	s := newObj("NetworkSet").(*api.NetworkSet)
	s.Metadata.Namespace, s.Metadata.Name, s.Metadata.Labels, s.Spec.Nets = ns, name, labels, nets
	return s
}

func pool(name, cidr string, natOutgoing bool) *api.IPPool {
	p := newObj("IPPool").(*api.IPPool)
	p.Metadata.Name = name
	p.Spec.CIDR, p.Spec.NATOutgoing = cidr, natOutgoing
	return p
}

func allow() []api.Rule { return []api.Rule{{Action: api.ActionAllow}} }

func allowFrom(sel, nsSel string) []api.Rule {
	return []api.Rule{{Action: api.ActionAllow, Source: api.EntityRule{Selector: sel, NamespaceSelector: nsSel}}}
}

func allowTo(sel string) []api.Rule {
	return []api.Rule{{Action: api.ActionAllow, Destination: api.EntityRule{Selector: sel}}}
}
