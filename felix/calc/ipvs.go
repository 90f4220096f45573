package calc

import (
	"net/netip"
	"slices"

	"github.com/calico-aio/calico-aio/felix/rules"
)

// kube-proxy IPVS mode (felix/rules/ipvs.go): the agent tells the state
// whether a kube-ipvs0 interface exists (SetKubeIPVS) and, while it does,
// this host's interfaces and addresses (SetHostInterfaces); the rules read
// kubeNodePortRanges and iptablesMarkMask, and the this-host IP sets hold
// the host's own addresses.

// SetKubeIPVS records whether kube-proxy's kube-ipvs0 interface exists:
// IPVS mode is on while it does, as Calico's Felix detects it. It is an
// input like a datastore update.
func (s *State) SetKubeIPVS(on bool) { s.kubeIPVS = on }

// KubeIPVS reports what SetKubeIPVS last recorded.
func (s *State) KubeIPVS() bool { return s.kubeIPVS }

// ipvsConfig sets the IPVS part of cfg from FelixConfiguration "default"
// overlaid by "node.<name>".
func (s *State) ipvsConfig(cfg *rules.Config) {
	cfg.KubeIPVS = s.kubeIPVS
	for _, name := range []string{"default", "node." + s.node} {
		f, ok := s.felixCfgs[name]
		if !ok {
			continue
		}
		if m := f.Spec.IptablesMarkMask; m != nil {
			cfg.MarkMask = *m
		}
		if p := f.Spec.KubeNodePortRanges; p != nil {
			// An empty list is unset, as Calico's Felix reads an empty value.
			cfg.KubeNodePortRanges = slices.Clone(*p)
		}
	}
}

// thisHostMembers is a this-host set's members: the addresses of the
// host's interfaces (workload interfaces are never among them) but the
// excluded ones (interfaceExclude, kube-ipvs0 by default, whose service
// addresses are not the host's own), as Calico's interface monitor
// reports them.
func (s *State) thisHostMembers(st *ipsetState) []string {
	exclude := s.interfaceExclude()
	seen := map[netip.Addr]bool{}
	var out []string
	for iface, addrs := range s.hostIfaces {
		if exclude.match(iface) {
			continue
		}
		for _, a := range addrs {
			a = a.Unmap()
			if !a.IsValid() || !st.want(a) || seen[a] {
				continue
			}
			seen[a] = true
			out = append(out, a.String())
		}
	}
	return out
}
