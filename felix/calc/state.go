package calc

import (
	"net/netip"
	"strings"

	"github.com/calico-aio/calico-aio/felix/rules"
	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// State is the agent's view of the datastore, plus caches of derived
// results kept up to date incrementally.
type State struct {
	node string
	// policeEgress: egress bandwidth is policed by rules, the kernel
	// cannot shape it (SetEgressPolicing).
	policeEgress bool

	weps map[string]*api.WorkloadEndpoint // by key, every node
	heps map[string]*api.HostEndpoint     // by key, every node
	// hostIfaces are this host's interfaces and their addresses (for
	// host endpoints by expectedIPs).
	hostIfaces map[string][]netip.Addr
	policies   map[rules.PolicyKey]*policy
	tiers      map[string]*tier // by name
	profiles   map[string]*api.Profile
	netsets    map[string]*netset // NetworkSets and GlobalNetworkSets by key
	pools      map[string]*api.IPPool
	blocks     map[string]*ipam.Block // by CIDR
	felixCfgs  map[string]*api.FelixConfiguration
	services   map[string]*store.ServiceEndpoints // by datastore key (services.go)
	hostAddrs  map[string]netip.Addr              // every node's IPv4 address, by node name (hosts.go)
	inSync     bool

	// Caches (see policies.go, ipsets.go).
	localPolicies map[string][]rules.PolicyKey // local endpoint key -> matching policies (unordered)
	dirtyLocal    map[string]bool              // local endpoints to re-match against every policy
	dirtyPolicies map[rules.PolicyKey]bool     // policies to re-match against every local endpoint
	members       map[string]*ipsetState       // active IP sets by name
	dirtySources  map[string]bool              // member sources (endpoint/netset keys) to re-evaluate

	// kubeIPVS: kube-proxy's kube-ipvs0 interface exists (ipvs.go).
	kubeIPVS bool

	// policyEpoch counts policy and tier updates; tierMemos keep each
	// local endpoint's tiers under it (policies.go, endpointTiers).
	policyEpoch uint64
	tierMemos   map[string]tierMemo

	// memos keep each endpoint's rendered chains between calculations,
	// by IP version (rules.Memo).
	memos map[int]*rules.Memo
	// localEndpoints keep each local endpoint's conversion (localEndpoint)
	// between calculations, by key.
	localEndpoints map[string]*localEndpointMemo
	desiredCalls   uint64           // Desired calls; each conversion records the last that used it
	epsBuf         []rules.Endpoint // Desired's endpoints, kept for the next call
}

// NewState makes an empty state for a node.
func NewState(node string) *State {
	return &State{
		node: node, weps: map[string]*api.WorkloadEndpoint{}, heps: map[string]*api.HostEndpoint{}, policies: map[rules.PolicyKey]*policy{},
		tiers:    map[string]*tier{},
		profiles: map[string]*api.Profile{}, netsets: map[string]*netset{}, pools: map[string]*api.IPPool{},
		blocks: map[string]*ipam.Block{}, felixCfgs: map[string]*api.FelixConfiguration{},
		services: map[string]*store.ServiceEndpoints{}, hostAddrs: map[string]netip.Addr{},
		localPolicies: map[string][]rules.PolicyKey{}, dirtyLocal: map[string]bool{},
		dirtyPolicies: map[rules.PolicyKey]bool{}, members: map[string]*ipsetState{}, dirtySources: map[string]bool{},
		memos: map[int]*rules.Memo{}, localEndpoints: map[string]*localEndpointMemo{}, tierMemos: map[string]tierMemo{},
	}
}

// SetEgressPolicing says whether endpoints' egress bandwidth is policed
// by iptables rules (the dataplane cannot shape it on this kernel) rather
// than shaped by the dataplane.
func (s *State) SetEgressPolicing(on bool) { s.policeEgress = on }

// InSync reports whether the initial datastore list has been seen.
func (s *State) InSync() bool { return s.inSync }

// netset is a NetworkSet or GlobalNetworkSet reduced to labels and nets.
type netset struct {
	namespace string
	labels    map[string]string
	nets      []netip.Prefix
}

func (s *State) isLocal(w *api.WorkloadEndpoint) bool { return w.Spec.Node == s.node }

// Apply records one update. It does no heavy work: it marks what must be
// recomputed by Desired.
func (s *State) Apply(u Update) {
	if u.InSync {
		s.inSync = true
		return
	}
	switch u.Kind {
	case "workloadendpoints":
		s.applyEndpoint(u)
	case "hostendpoints":
		s.applyHostEndpoint(u)
	case "networkpolicies", "globalnetworkpolicies":
		s.applyPolicy(u)
	case "tiers":
		s.applyTier(u)
	case "profiles":
		s.applyProfile(u)
	case "networksets", "globalnetworksets":
		s.applyNetset(u)
	case "ippools":
		if u.Deleted {
			delete(s.pools, u.Key)
		} else if p, ok := u.Resource.(*api.IPPool); ok {
			s.pools[u.Key] = p
		}
	case "felixconfigurations":
		if u.Deleted {
			delete(s.felixCfgs, u.Key[strings.LastIndexByte(u.Key, '/')+1:])
		} else if f, ok := u.Resource.(*api.FelixConfiguration); ok {
			s.felixCfgs[f.Metadata.Name] = f
		}
	case KindService:
		s.applyService(u)
	case "nodes":
		s.applyNode(u)
	case KindBlock:
		cidr := blockCIDR(u.Key)
		if u.Deleted {
			delete(s.blocks, cidr)
		} else {
			s.blocks[cidr] = u.Block
		}
	}
}

// blockCIDR turns .../block/10.65.0.0-26 into 10.65.0.0/26.
func blockCIDR(key string) string {
	seg := key[strings.LastIndexByte(key, '/')+1:]
	i := strings.LastIndexByte(seg, '-')
	if i < 0 {
		return seg
	}
	return seg[:i] + "/" + seg[i+1:]
}

func (s *State) applyEndpoint(u Update) {
	old := s.weps[u.Key]
	if old != nil && s.isLocal(old) {
		s.dirtyLocal[u.Key] = true
	}
	if u.Deleted {
		delete(s.weps, u.Key)
	} else if w, ok := u.Resource.(*api.WorkloadEndpoint); ok {
		s.weps[u.Key] = w
		if s.isLocal(w) {
			s.dirtyLocal[u.Key] = true
		}
	}
	s.dirtySources[u.Key] = true
}

func (s *State) applyProfile(u Update) {
	name := u.Key[strings.LastIndexByte(u.Key, '/')+1:]
	old := s.profiles[name]
	if u.Deleted {
		delete(s.profiles, name)
	} else if p, ok := u.Resource.(*api.Profile); ok {
		s.profiles[name] = p
	}
	cur := s.profiles[name]
	if labelsOf(old) == labelsOf(cur) {
		return
	}
	// Inherited or namespace labels changed: every endpoint using the
	// profile (or in the namespace) must be matched again.
	ns, isNS := strings.CutPrefix(name, "kns.")
	for k, w := range s.weps {
		uses := isNS && w.Metadata.Namespace == ns
		if sa := w.Spec.ServiceAccountName; sa != "" && name == "ksa."+w.Metadata.Namespace+"."+sa {
			uses = true // its service account's labels changed
		}
		for _, p := range w.Spec.Profiles {
			uses = uses || p == name
		}
		if uses {
			s.dirtySources[k] = true
			if s.isLocal(w) {
				s.dirtyLocal[k] = true
			}
		}
	}
	for k, h := range s.heps {
		if hostEndpointUsesProfile(h, name) {
			s.dirtySources[k] = true
		}
	}
	// Network sets of the namespace match namespaceSelectors by the same
	// labels.
	for k, n := range s.netsets {
		if isNS && n.namespace == ns {
			s.dirtySources[k] = true
		}
	}
}

func labelsOf(p *api.Profile) string {
	if p == nil {
		return ""
	}
	return canonicalLabels(p.Spec.LabelsToApply)
}

func (s *State) applyNetset(u Update) {
	if u.Deleted {
		delete(s.netsets, u.Key)
	} else {
		var ns netset
		switch r := u.Resource.(type) {
		case *api.NetworkSet:
			ns = netset{namespace: r.Metadata.Namespace, labels: r.Metadata.Labels, nets: parseNets(r.Spec.Nets)}
		case *api.GlobalNetworkSet:
			ns = netset{labels: r.Metadata.Labels, nets: parseNets(r.Spec.Nets)}
		default:
			return
		}
		s.netsets[u.Key] = &ns
	}
	s.dirtySources[u.Key] = true
}

func parseNets(nets []string) []netip.Prefix {
	var out []netip.Prefix
	for _, n := range nets {
		if p, err := netip.ParsePrefix(n); err == nil {
			out = append(out, p.Masked())
		} else if a, err := netip.ParseAddr(n); err == nil {
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return out
}

// HasIPv6Pools reports whether any IPv6 pool exists (then the IPv6
// dataplane is programmed too).
func (s *State) HasIPv6Pools() bool {
	for _, p := range s.pools {
		if pr, err := netip.ParsePrefix(p.Spec.CIDR); err == nil && pr.Addr().Is6() {
			return true
		}
	}
	return false
}
