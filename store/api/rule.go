package api

import (
	"strconv"
	"strings"
)

// Action is what a rule (or a tier's default) does with a matching packet.
type Action string

const (
	ActionAllow Action = "Allow"
	ActionDeny  Action = "Deny"
	ActionLog   Action = "Log"
	ActionPass  Action = "Pass"
)

// Rule is one ingress or egress rule of a policy or profile.
type Rule struct {
	Action      Action        `json:"action"`
	IPVersion   *int          `json:"ipVersion,omitempty"`
	Protocol    *Protocol     `json:"protocol,omitempty"`
	ICMP        *ICMPFields   `json:"icmp,omitempty"`
	NotProtocol *Protocol     `json:"notProtocol,omitempty"`
	NotICMP     *ICMPFields   `json:"notICMP,omitempty"`
	Source      EntityRule    `json:"source,omitempty"`
	Destination EntityRule    `json:"destination,omitempty"`
	HTTP        *HTTPMatch    `json:"http,omitempty"`
	Metadata    *RuleMetadata `json:"metadata,omitempty"`
}

// ICMPFields matches an ICMP type and (only with a type) code.
type ICMPFields struct {
	Type *int `json:"type,omitempty"`
	Code *int `json:"code,omitempty"`
}

// EntityRule matches the source or destination of a packet. Source and
// destination are always written, as {} when empty, like Calico.
type EntityRule struct {
	Nets              []string             `json:"nets,omitempty"`
	Selector          string               `json:"selector,omitempty"`
	NamespaceSelector string               `json:"namespaceSelector,omitempty"`
	Services          *ServiceMatch        `json:"services,omitempty"`
	Ports             []Port               `json:"ports,omitempty"`
	NotNets           []string             `json:"notNets,omitempty"`
	NotSelector       string               `json:"notSelector,omitempty"`
	NotPorts          []Port               `json:"notPorts,omitempty"`
	ServiceAccounts   *ServiceAccountMatch `json:"serviceAccounts,omitempty"`
}

// ServiceMatch matches the endpoints of a Kubernetes service.
type ServiceMatch struct {
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

// ServiceAccountMatch matches pods by service account name or labels.
type ServiceAccountMatch struct {
	Names    []string `json:"names,omitempty"`
	Selector string   `json:"selector,omitempty"`
}

// HTTPMatch matches HTTP methods and paths (application layer policy).
type HTTPMatch struct {
	Methods []string   `json:"methods,omitempty"`
	Paths   []HTTPPath `json:"paths,omitempty"`
}

// HTTPPath is an exact path or a prefix; exactly one is set.
type HTTPPath struct {
	Exact  string `json:"exact,omitempty"`
	Prefix string `json:"prefix,omitempty"`
}

// RuleMetadata is free-form information about a rule.
type RuleMetadata struct {
	Annotations map[string]string `json:"annotations,omitempty"`
}

func isProto(p *Protocol, name string) bool {
	if p == nil {
		return false
	}
	n, ok := p.Number()
	return ok && n == protocolNumbers[name]
}

// rules checks a list of rules at path ("spec.ingress").
func (f *fieldErrs) rules(path string, rules []Rule) {
	for i := range rules {
		f.rule(idx(path, i), &rules[i])
	}
}

func (f *fieldErrs) rule(path string, r *Rule) {
	if r.Action == "" {
		f.add(path+".action", "", "is required")
	} else {
		f.oneOf(path+".action", string(r.Action), "Allow", "Deny", "Log", "Pass")
	}
	if r.IPVersion != nil && *r.IPVersion != 4 && *r.IPVersion != 6 {
		f.add(path+".ipVersion", strconv.Itoa(*r.IPVersion), "must be 4 or 6")
	}
	for _, pp := range []struct {
		field string
		p     *Protocol
	}{{".protocol", r.Protocol}, {".notProtocol", r.NotProtocol}} {
		if pp.p == nil {
			continue
		}
		if msg := pp.p.problem(); msg != "" {
			f.add(path+pp.field, pp.p.String(), msg)
		}
		if r.IPVersion != nil && isProto(pp.p, ProtocolICMP) && *r.IPVersion != 4 {
			f.add(path+".ipVersion", strconv.Itoa(*r.IPVersion), "must be 4 with protocol ICMP")
		}
		if r.IPVersion != nil && isProto(pp.p, ProtocolICMPv6) && *r.IPVersion != 6 {
			f.add(path+".ipVersion", strconv.Itoa(*r.IPVersion), "must be 6 with protocol ICMPv6")
		}
	}
	if r.ICMP != nil && !isProto(r.Protocol, ProtocolICMP) && !isProto(r.Protocol, ProtocolICMPv6) {
		f.add(path+".icmp", "", "requires protocol ICMP or ICMPv6")
	}
	f.icmp(path+".icmp", r.ICMP)
	f.icmp(path+".notICMP", r.NotICMP)

	portsOK := r.Protocol != nil && r.Protocol.SupportsPorts()
	seen := map[int]bool{} // IP versions of nets seen so far in this rule
	for _, e := range []struct {
		field string
		e     *EntityRule
	}{{".source", &r.Source}, {".destination", &r.Destination}} {
		f.entity(path+e.field, e.e, r, portsOK, seen)
	}
	if seen[4] && seen[6] {
		f.add(path, "", "mixes IPv4 and IPv6 networks")
	}
	// A destination service brings its own ports (Calico's rule).
	if r.Destination.Services != nil && len(r.Destination.Ports) > 0 {
		f.add(path+".destination.ports", "", "cannot be combined with destination services (the service's ports apply)")
	}
	if r.Destination.Services != nil && len(r.Destination.NotPorts) > 0 {
		f.add(path+".destination.notPorts", "", "cannot be combined with destination services (the service's ports apply)")
	}
	if h := r.HTTP; h != nil {
		f.http(path+".http", h)
		if r.Action != ActionAllow {
			f.add(path+".http", "", "is only valid in Allow rules")
		}
		if r.Protocol != nil && !isProto(r.Protocol, ProtocolTCP) {
			f.add(path+".protocol", r.Protocol.String(), "must be TCP (or unset) with http match")
		}
	}
	if r.Metadata != nil {
		f.annotations(path+".metadata.annotations", r.Metadata.Annotations)
	}
}

func (f *fieldErrs) icmp(path string, c *ICMPFields) {
	if c == nil {
		return
	}
	if c.Type != nil && (*c.Type < 0 || *c.Type > 254) {
		f.add(path+".type", strconv.Itoa(*c.Type), "must be 0-254")
	}
	if c.Code != nil && (*c.Code < 0 || *c.Code > 255) {
		f.add(path+".code", strconv.Itoa(*c.Code), "must be 0-255")
	}
	if c.Code != nil && c.Type == nil {
		f.add(path+".code", strconv.Itoa(*c.Code), "requires an ICMP type")
	}
}

func (f *fieldErrs) entity(path string, e *EntityRule, r *Rule, portsOK bool, seen map[int]bool) {
	for _, nn := range []struct {
		field string
		nets  []string
	}{{".nets", e.Nets}, {".notNets", e.NotNets}} {
		for i, n := range nn.nets {
			field := idx(path+nn.field, i)
			p, ok := f.cidr(field, n, 0, true)
			if !ok {
				continue
			}
			v := 6
			if p.Addr().Is4() {
				v = 4
			}
			seen[v] = true
			if r.IPVersion != nil && *r.IPVersion != v {
				f.add(field, n, "is IPv"+strconv.Itoa(v)+" but the rule's ipVersion is "+strconv.Itoa(*r.IPVersion))
			}
		}
	}
	for _, pp := range []struct {
		field string
		ports []Port
	}{{".ports", e.Ports}, {".notPorts", e.NotPorts}} {
		if len(pp.ports) > 0 && !portsOK {
			f.add(path+pp.field, "", "requires protocol TCP, UDP, SCTP or UDPLite")
		}
		for i, p := range pp.ports {
			if msg := p.problem(); msg != "" {
				f.add(idx(path+pp.field, i), p.String(), msg)
			}
		}
	}
	f.selector(path+".selector", e.Selector)
	f.selector(path+".notSelector", e.NotSelector)
	f.selector(path+".namespaceSelector", e.NamespaceSelector)
	for _, s := range []struct{ field, sel string }{{".selector", e.Selector}, {".notSelector", e.NotSelector}} {
		if strings.Contains(s.sel, "global(") {
			f.add(path+s.field, s.sel, "cannot use global(): it is only valid alone in a namespaceSelector")
		}
	}
	if ns := strings.TrimSpace(e.NamespaceSelector); strings.Contains(ns, "global(") && !isGlobalOnly(ns) {
		f.add(path+".namespaceSelector", e.NamespaceSelector, "cannot combine global() with other expressions")
	}
	if sa := e.ServiceAccounts; sa != nil {
		f.selector(path+".serviceAccounts.selector", sa.Selector)
		for i, n := range sa.Names {
			if p := subdomainProblem(n); p != "" {
				f.add(idx(path+".serviceAccounts.names", i), n, p)
			}
		}
	}
	if sv := e.Services; sv != nil {
		if sv.Name == "" {
			f.add(path+".services.name", "", "is required")
		}
		f.name(path+".services.name", sv.Name)
		f.name(path+".services.namespace", sv.Namespace)
		if e.Selector != "" || e.NotSelector != "" || e.NamespaceSelector != "" || e.ServiceAccounts != nil ||
			len(e.Nets) > 0 || len(e.NotNets) > 0 {
			f.add(path+".services", "", "cannot be combined with selectors, service accounts or nets")
		}
	}
}

func isGlobalOnly(s string) bool {
	return strings.ReplaceAll(s, " ", "") == "global()"
}

func (f *fieldErrs) http(path string, h *HTTPMatch) {
	seen := map[string]bool{}
	for i, m := range h.Methods {
		if seen[m] {
			f.add(idx(path+".methods", i), m, "is listed twice")
		}
		seen[m] = true
	}
	for i, p := range h.Paths {
		field := idx(path+".paths", i)
		v := p.Exact + p.Prefix
		switch {
		case p.Exact != "" && p.Prefix != "":
			f.add(field, "", "must set exact or prefix, not both")
		case v == "":
			f.add(field, "", "must set exact or prefix")
		case !strings.HasPrefix(v, "/") || strings.ContainsAny(v, "? #"):
			f.add(field, v, "must start with '/' and not contain '?', '#' or spaces")
		}
	}
}
