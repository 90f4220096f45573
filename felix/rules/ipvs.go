package rules

import (
	"hash/fnv"
	"math/bits"
	"slices"
	"strconv"

	"github.com/calico-aio/calico-aio/iptables"
	"github.com/calico-aio/calico-aio/store/api"
)

// kube-proxy IPVS mode, as Calico's iptables dataplane renders it.
//
// Packets IPVS forwards (to a service IP, or to a node port at one of the
// host's addresses) pass the filter INPUT and OUTPUT chains instead of
// FORWARD, and OUTPUT cannot match the interface they came in by. So, on
// INPUT, cali-forward-check picks out the packets that will be forwarded
// and cali-set-endpoint-mark records their incoming endpoint in a field
// of the packet mark (one value per workload and host endpoint interface,
// a reserved one for any other interface); on OUTPUT,
// cali-forward-endpoint-mark dispatches on that value to the source
// endpoint's egress policy (cali-from-endpoint-mark), then applies the
// destination's ingress policy as cali-FORWARD would:
//
//	cali-INPUT                 clear the field; -> cali-forward-check; RETURN if the field is set
//	cali-forward-check         RELATED,ESTABLISHED RETURN; TCP and UDP to the node ports at a
//	                           host address (IP set this-host) goto cali-set-endpoint-mark;
//	                           not to a host address -> cali-set-endpoint-mark
//	cali-set-endpoint-mark     per endpoint interface goto cali-sm-<iface>; unknown workload
//	                           interfaces denied; anything else gets the non-Calico value
//	cali-sm-<iface>            set the interface's value
//	cali-OUTPUT                field set: goto cali-forward-endpoint-mark
//	cali-forward-endpoint-mark unless non-Calico: -> cali-from-endpoint-mark; -o cali+ ->
//	                           cali-to-wl-dispatch; -> cali-to-hep-forward; clear the field;
//	                           accept what policy accepted
//	cali-from-endpoint-mark    per value goto cali-fw-<iface> (workload) or cali-fhfw-<iface>
//	                           (host endpoint); anything else denied
//
// The mode is on while an interface named kube-ipvs0 exists (Calico's
// detection); Config.KubeIPVS says so.

// KubeIPVSInterface is the interface kube-proxy in IPVS mode creates to
// hold the service addresses; while it exists the IPVS rules are rendered.
const KubeIPVSInterface = "kube-ipvs0"

// Chains of IPVS mode, as Calico names them.
const (
	ChainForwardCheck        = "cali-forward-check"
	ChainSetEndpointMark     = "cali-set-endpoint-mark"
	ChainFromEndpointMark    = "cali-from-endpoint-mark"
	ChainForwardEndpointMark = "cali-forward-endpoint-mark"
	setEndpointMarkPrefix    = "cali-sm-"
	ipsetThisHostSuffix      = "this-host"
)

// DefaultMarkMask is Calico's default iptablesMarkMask.
const DefaultMarkMask uint32 = 0xffff0000

// NodePortRanges are kubeNodePortRanges: ports and port ranges (names are
// refused at write).
type NodePortRanges = []api.Port

// DefaultKubeNodePortRanges is Calico's default kubeNodePortRanges,
// Kubernetes' default node port range.
var DefaultKubeNodePortRanges = []api.Port{api.PortRange(30000, 32767)}

// calicoSingleBitMarks is how many single-bit marks Calico v3.32's Felix
// takes from the mask (accept, pass, drop, scratch0, scratch1; WireGuard's,
// which this agent refuses, would be one more) before the endpoint field.
// The agent uses the lowest three of them; the field starts at the same bit
// as Calico's so that a mask gives the same endpoint values as in Calico.
const calicoSingleBitMarks = 5

// EndpointMarkField is the endpoint-mark field of mask (iptablesMarkMask;
// 0 is the default): every bit of the mask above its lowest five, as
// Calico's Felix takes "the rest" after its single-bit marks. 0 when the
// mask has no bit left (Calico's Felix then refuses to start in IPVS mode).
func EndpointMarkField(mask uint32) uint32 {
	if mask == 0 {
		mask = DefaultMarkMask
	}
	for i := 0; i < calicoSingleBitMarks && mask != 0; i++ {
		mask &= mask - 1 // drop the lowest set bit
	}
	return mask
}

// NonCaliEndpointMark is the field's value for traffic from an interface
// that is neither a workload nor a host endpoint: the field's lowest bit
// (position 1), as Calico reserves it.
func NonCaliEndpointMark(field uint32) uint32 { return field & -field }

// markAt spreads the bits of position n over the bits of field, lowest
// first (position 1 is the field's lowest bit); ok is false when n does
// not fit.
func markAt(field uint32, n uint64) (uint32, bool) {
	var mark uint32
	for f := field; f != 0 && n != 0; f &= f - 1 {
		if n&1 != 0 {
			mark |= f & -f
		}
		n >>= 1
	}
	return mark, n == 0
}

// EndpointMarks gives each interface its value in field as Calico does:
// the FNV-1 32-bit hash of the name modulo the number of values the field
// holds, the next free one on a collision (values wrap; 0 and the
// non-Calico value are never given). Workload interfaces are placed first,
// then host endpoint interfaces, each in name order, so an interface keeps
// its value unless one that collides with it and sorts before it appears
// (Calico's Felix keeps a value while the interface lives and gives the
// next free one to whichever came later). An interface that finds no free
// value (a field of one bit) gets none.
func EndpointMarks(field uint32, workloads, hosts []string) map[string]uint32 {
	out := map[string]uint32{}
	n := bits.OnesCount32(field)
	if n == 0 {
		return out
	}
	size := uint64(1) << n
	taken := map[uint64]bool{0: true, 1: true} // 1: the non-Calico value
	for _, names := range [][]string{workloads, hosts} {
		names = slices.Clone(names)
		slices.Sort(names)
		for _, name := range slices.Compact(names) {
			if _, ok := out[name]; ok || name == "" {
				continue
			}
			h := fnv.New32()
			h.Write([]byte(name))
			sum := uint64(h.Sum32())
			for i := uint64(0); i < size; i++ {
				pos := (sum + i) % size
				if taken[pos] {
					continue
				}
				taken[pos] = true
				out[name], _ = markAt(field, pos)
				break
			}
		}
	}
	return out
}

// nodePortRanges is the configured node port ranges or the default.
func (c Config) nodePortRanges() []api.Port {
	if len(c.KubeNodePortRanges) == 0 {
		return DefaultKubeNodePortRanges
	}
	return c.KubeNodePortRanges
}

// markMatch matches packets whose bits of mask equal value.
func markMatch(value, mask uint32) string {
	return "-m mark --mark " + hexMark(value) + "/" + hexMark(mask)
}

// markNotMatch matches packets whose bits of mask differ from value.
func markNotMatch(value, mask uint32) string {
	return "-m mark ! --mark " + hexMark(value) + "/" + hexMark(mask)
}

// setMaskedMark sets the bits of mask to value.
func setMaskedMark(value, mask uint32) string {
	return "-j MARK --set-xmark " + hexMark(value) + "/" + hexMark(mask)
}

// withIPVS adds IPVS mode to the filter table when Config.KubeIPVS is on
// and the mask leaves an endpoint field: rules at the head of cali-INPUT
// and cali-OUTPUT, and the IPVS chains. fhfw says which host endpoints
// have a cali-fhfw- chain (applyOnForward ingress policy). Without the
// mode the table is returned unchanged.
func (r *renderer) withIPVS(filter []iptables.Chain, eps []Endpoint, heps []HostEndpoint) []iptables.Chain {
	c := r.cfg
	field := EndpointMarkField(c.MarkMask)
	if !c.KubeIPVS || field == 0 {
		return filter
	}
	nonCali := NonCaliEndpointMark(field)
	var wls, hosts []string
	for _, ep := range eps {
		wls = append(wls, ep.Iface)
	}
	fhfw := map[string]bool{}
	for _, h := range heps {
		if h.Iface != AllInterfaces { // as in Calico, the * endpoint has no mark of its own
			hosts = append(hosts, h.Iface)
			fhfw[h.Iface] = hasPolicies(h.ForwardIngressTiers)
		}
	}
	marks := EndpointMarks(field, wls, hosts)
	thisHost := r.ipset(IPSetSpec{Kind: IPSetThisHost})

	// Every INPUT and OUTPUT packet passes these rules, so they carry no
	// text comment (see filterStatic). A packet marked on INPUT returns to
	// the host's INPUT rules; its policy is applied on OUTPUT.
	prepend := map[string][]iptables.Rule{
		ChainInput: {
			rule("", clearMark(field), ""),
			rule("", "-j "+ChainForwardCheck, ""),
			rule(markNotMatch(0, field), "-j RETURN", ""),
		},
		ChainOutput: {rule(markNotMatch(0, field), "-g "+ChainForwardEndpointMark, "")},
	}
	out := make([]iptables.Chain, 0, len(filter)+5+len(marks))
	for _, ch := range filter {
		if pre, ok := prepend[ch.Name]; ok {
			ch = iptables.Chain{Name: ch.Name, Rules: slices.Concat(pre, ch.Rules)}
		}
		out = append(out, ch)
	}

	check := iptables.Chain{Name: ChainForwardCheck, Rules: []iptables.Rule{rule("-m conntrack --ctstate RELATED,ESTABLISHED", "-j RETURN", "")}}
	chunks, _ := splitPorts(c.nodePortRanges())
	for _, ports := range chunks {
		for _, proto := range []string{"tcp", "udp"} {
			check.Rules = append(check.Rules, rule("-p "+proto+" -m multiport --dports "+ports+" -m set --match-set "+thisHost+" dst",
				"-g "+ChainSetEndpointMark, "To kubernetes NodePort service"))
		}
	}
	check.Rules = append(check.Rules, rule("-m set ! --match-set "+thisHost+" dst", "-j "+ChainSetEndpointMark, "To kubernetes service"))

	set := iptables.Chain{Name: ChainSetEndpointMark}
	from := iptables.Chain{Name: ChainFromEndpointMark}
	var sm []iptables.Chain
	for _, group := range []struct {
		names []string
		to    func(string) string
	}{
		{sortedUnique(wls), func(i string) string { return "-g " + EndpointChainName("fw", i) }},
		{sortedUnique(hosts), func(i string) string {
			if fhfw[i] {
				return "-g " + HostEndpointChainName("fhfw", i)
			}
			return "-j RETURN" // no applyOnForward policy: forwarded traffic is not policed
		}},
	} {
		for _, name := range group.names {
			m, ok := marks[name]
			if !ok {
				continue // no free value: the interface's traffic gets none (as in Calico)
			}
			chain := limitedName(setEndpointMarkPrefix, name)
			set.Rules = append(set.Rules, rule("-i "+name, "-g "+chain, ""))
			sm = append(sm, iptables.Chain{Name: chain, Rules: []iptables.Rule{rule("", setMaskedMark(m, field), "")}})
			from.Rules = append(from.Rules, rule(markMatch(m, field), group.to(name), ""))
		}
	}
	for _, m := range c.workloadMatches("-i") {
		set.Rules = append(set.Rules, rule(m, c.filterDeny(), "Unknown endpoint"))
	}
	set.Rules = append(set.Rules, rule("", setMaskedMark(nonCali, field), "Non-Cali endpoint mark"))
	from.Rules = append(from.Rules, rule("", c.filterDeny(), "Unknown interface"))

	fwd := iptables.Chain{Name: ChainForwardEndpointMark, Rules: []iptables.Rule{rule(markNotMatch(nonCali, field), "-j "+ChainFromEndpointMark, "")}}
	for _, m := range c.workloadMatches("-o") {
		fwd.Rules = append(fwd.Rules, rule(m, "-j "+ChainToWlDispatch, ""))
	}
	if len(heps) > 0 { // cali-to-hep-forward exists only with host endpoints
		fwd.Rules = append(fwd.Rules, rule("", "-j "+ChainToHostEPFwd, ""))
	}
	fwd.Rules = append(fwd.Rules,
		rule("", clearMark(field), "Clear the endpoint mark: an encapsulated copy must not look forwarded"),
		rule(markSet(c.MarkAccept), c.filterAllow(), "Policy explicitly accepted packet"))

	out = append(out, check, set, from, fwd)
	return append(out, sm...)
}

// sortedUnique is names sorted, without repeats.
func sortedUnique(names []string) []string {
	out := slices.Clone(names)
	slices.Sort(out)
	return slices.Compact(out)
}

// IPVSMarks describes the endpoint-mark field of mask for logs and
// errors: "field 0xffe00000, non-Calico 0x200000".
func IPVSMarks(mask uint32) string {
	f := EndpointMarkField(mask)
	return "field " + hexMark(f) + ", non-Calico " + hexMark(NonCaliEndpointMark(f)) + ", " + strconv.Itoa(bits.OnesCount32(f)) + " bits"
}
