package api

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/calico-aio/calico-aio/store/selector"
)

// FieldError is one problem with one field of an object. Validate returns
// errors.Join of every FieldError it finds, so each bad field is named.
type FieldError struct {
	Field string // path in the JSON object: "spec.ingress[0].destination.ports[1]"
	Value string // the offending value; "" when no single value applies
	Msg   string
}

// Error reads `spec.cidr: "10.0.0.0/33" is not a valid CIDR`, or
// `metadata.name: is required` when there is no value to show.
func (e *FieldError) Error() string {
	if e.Value == "" {
		return e.Field + ": " + e.Msg
	}
	return e.Field + ": " + strconv.Quote(e.Value) + " " + e.Msg
}

// fieldErrs collects FieldErrors while one object is checked.
type fieldErrs struct{ errs []error }

func (f *fieldErrs) add(field, value, msg string) {
	f.errs = append(f.errs, &FieldError{Field: field, Value: value, Msg: msg})
}

func (f *fieldErrs) join() error { return errors.Join(f.errs...) }

func idx(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// parseSelector checks a selector's syntax. It is a variable so tests can run
// before the selector package is complete.
var parseSelector = func(s string) error {
	_, err := selector.Parse(s)
	return err
}

// ValidateSelector reports whether s is a valid selector; "" (all()) is valid.
func ValidateSelector(s string) error {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	return parseSelector(s)
}

func (f *fieldErrs) selector(field, s string) {
	if err := ValidateSelector(s); err != nil {
		f.add(field, s, "is not a valid selector: "+err.Error())
	}
}

// Name formats, as Kubernetes and Calico define them.
const labelFmt = `[a-z0-9]([-a-z0-9]*[a-z0-9])?`

// Compiled on first use: every process of the binary (each CNI call)
// would otherwise compile them all at start-up.
var (
	subdomainRe    = lazyRegexp(`^` + labelFmt + `(\.` + labelFmt + `)*$`)
	dnsLabelRe     = lazyRegexp(`^` + labelFmt + `$`)
	npNameRe       = lazyRegexp(`^(` + labelFmt + `(\.` + labelFmt + `)?|(knp|ossg)\.default\.` + labelFmt + `(\.` + labelFmt + `)*)$`)
	gnpNameRe      = lazyRegexp(`^(` + labelFmt + `\.)?` + labelFmt + `$`)
	qualifiedRe    = lazyRegexp(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
	containerIDRe  = lazyRegexp(`^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?$`)
	interfaceRe    = lazyRegexp(`^[a-zA-Z0-9_.-]{1,15}$`)
	portNameRe     = lazyRegexp(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
	ignoredIfaceRe = lazyRegexp(`^[a-zA-Z0-9_.*-]{1,15}$`)
)

// lazyRegexp compiles pattern once, when first called.
func lazyRegexp(pattern string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(pattern) })
}

// nameCheck returns "" when a name is fine, else what is wrong with it.
type nameCheck func(string) string

func subdomainProblem(s string) string {
	switch {
	case s == "":
		return "is required"
	case len(s) > 253:
		return "must be no more than 253 characters"
	case !subdomainRe().MatchString(s):
		return "must consist of lower case alphanumeric characters, '-' or '.', and start and end with an alphanumeric character"
	}
	return ""
}

func dnsLabelProblem(s string) string {
	switch {
	case s == "":
		return "is required"
	case len(s) > 63:
		return "must be no more than 63 characters"
	case !dnsLabelRe().MatchString(s):
		return "must consist of lower case alphanumeric characters or '-', and start and end with an alphanumeric character"
	}
	return ""
}

// regexNameProblem is subdomainProblem narrowed by re, described by want.
func regexNameProblem(re *regexp.Regexp, want string) nameCheck {
	return func(s string) string {
		if p := subdomainProblem(s); p != "" {
			return p
		}
		if !re.MatchString(s) {
			return "must be " + want
		}
		return ""
	}
}

// ValidateName checks a resource name: a DNS-1123 subdomain (lower case
// alphanumerics, '-' and '.', at most 253 characters).
func ValidateName(name string) error {
	if p := subdomainProblem(name); p != "" {
		return &FieldError{Field: "metadata.name", Value: name, Msg: p}
	}
	return nil
}

// ValidateNamespace checks a namespace name: a DNS-1123 label.
func ValidateNamespace(ns string) error {
	if p := dnsLabelProblem(ns); p != "" {
		return &FieldError{Field: "metadata.namespace", Value: ns, Msg: p}
	}
	return nil
}

func qualifiedNameProblem(k string) string {
	name := k
	if i := strings.IndexByte(k, '/'); i >= 0 {
		prefix := k[:i]
		name = k[i+1:]
		if prefix == "" || subdomainProblem(prefix) != "" {
			return "has an invalid prefix (must be a DNS-1123 subdomain)"
		}
	}
	switch {
	case name == "":
		return "has an empty name part"
	case len(name) > 63:
		return "has a name part longer than 63 characters"
	case !qualifiedRe().MatchString(name):
		return "must consist of alphanumeric characters, '-', '_' or '.', and start and end with an alphanumeric character (with an optional DNS subdomain prefix and '/')"
	}
	return ""
}

func labelValueProblem(v string) string {
	switch {
	case len(v) > 63:
		return "must be no more than 63 characters"
	case v != "" && !qualifiedRe().MatchString(v):
		return "must be empty or consist of alphanumeric characters, '-', '_' or '.', and start and end with an alphanumeric character"
	}
	return ""
}

// ValidateLabels checks label keys (qualified names) and values (<= 63 chars).
func ValidateLabels(labels map[string]string) error {
	var f fieldErrs
	f.labels("metadata.labels", labels)
	return f.join()
}

func (f *fieldErrs) labels(path string, labels map[string]string) {
	for _, k := range sortedKeys(labels) {
		if p := qualifiedNameProblem(k); p != "" {
			f.add(path, k, "is not a valid label key: "+p)
		}
		if p := labelValueProblem(labels[k]); p != "" {
			f.add(path+"["+k+"]", labels[k], p)
		}
	}
}

func (f *fieldErrs) annotations(path string, ann map[string]string) {
	total := 0
	for _, k := range sortedKeys(ann) {
		if p := qualifiedNameProblem(strings.ToLower(k)); p != "" {
			f.add(path, k, "is not a valid annotation key: "+p)
		}
		total += len(k) + len(ann[k])
	}
	if total > 256<<10 {
		f.add(path, "", fmt.Sprintf("total size %d bytes exceeds 262144", total))
	}
}

// meta checks metadata: the name by check, the namespace against the scope,
// labels and annotations.
func (f *fieldErrs) meta(m *ObjectMeta, namespaced bool, check nameCheck) {
	if p := check(m.Name); p != "" {
		f.add("metadata.name", m.Name, p)
	}
	if namespaced {
		if p := dnsLabelProblem(m.Namespace); p != "" {
			f.add("metadata.namespace", m.Namespace, p)
		}
	} else if m.Namespace != "" {
		f.add("metadata.namespace", m.Namespace, "must be empty: the kind is not namespaced")
	}
	f.labels("metadata.labels", m.Labels)
	f.annotations("metadata.annotations", m.Annotations)
}

func (f *fieldErrs) name(field, s string) {
	if s == "" {
		return
	}
	if p := subdomainProblem(s); p != "" {
		f.add(field, s, p)
	}
}

func (f *fieldErrs) oneOf(field, s string, allowed ...string) {
	if s == "" {
		return
	}
	for _, a := range allowed {
		if s == a {
			return
		}
	}
	f.add(field, s, "must be one of "+strings.Join(allowed, ", "))
}

// ParseCIDROrIP parses "10.0.0.0/8" or a bare address, which it takes as a
// /32 (or /128). The result is not masked.
func ParseCIDROrIP(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("invalid IP address %q", s)
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("invalid CIDR %q", s)
	}
	if p.Addr().Is4In6() {
		bits := p.Bits() - 96
		if bits < 0 {
			return netip.Prefix{}, fmt.Errorf("invalid CIDR %q", s)
		}
		p = netip.PrefixFrom(p.Addr().Unmap(), bits)
	}
	return p, nil
}

func famName(fam int) string {
	switch fam {
	case 4:
		return "IPv4 "
	case 6:
		return "IPv6 "
	}
	return ""
}

func famOK(a netip.Addr, fam int) bool {
	return fam == 0 || (fam == 4 && a.Is4()) || (fam == 6 && a.Is6())
}

// ip checks a bare address of family fam (0 = either).
func (f *fieldErrs) ip(field, s string, fam int) {
	if s == "" {
		return
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" || !famOK(a.Unmap(), fam) {
		f.add(field, s, "is not a valid "+famName(fam)+"address")
	}
}

// cidr checks an address or CIDR of family fam (0 = either); strict also
// requires the host bits to be zero. It returns the prefix when it parsed.
func (f *fieldErrs) cidr(field, s string, fam int, strict bool) (netip.Prefix, bool) {
	p, err := ParseCIDROrIP(s)
	if err != nil || !famOK(p.Addr(), fam) {
		f.add(field, s, "is not a valid "+famName(fam)+"CIDR")
		return netip.Prefix{}, false
	}
	if strict && p.Masked() != p {
		f.add(field, s, "is not strictly masked (the network is "+p.Masked().String()+")")
		return p, false
	}
	return p, true
}

func (f *fieldErrs) mac(field, s string) {
	if s == "" {
		return
	}
	if _, err := net.ParseMAC(s); err != nil {
		f.add(field, s, "is not a valid MAC address")
	}
}

func (f *fieldErrs) iface(field, s string, allowStar bool) {
	if s == "" || (allowStar && s == "*") {
		return
	}
	if !interfaceRe().MatchString(s) {
		f.add(field, s, "is not a valid interface name (1-15 characters: letters, digits, '_', '.', '-')")
	}
}

func portNameProblem(s string) string {
	switch {
	case s == "":
		return "is required"
	case len(s) > 15:
		return "must be no more than 15 characters"
	case !portNameRe().MatchString(s) || strings.Contains(s, "--"):
		return "must be lower case alphanumerics and single '-', starting and ending with an alphanumeric"
	case strings.IndexFunc(s, func(r rune) bool { return r >= 'a' && r <= 'z' }) < 0:
		return "must contain at least one letter"
	}
	return ""
}

// ParsePeerIP parses a BGP peer address: "IP", "IPv4:port" or "[IPv6]:port".
// port is 0 when none was given.
func ParsePeerIP(s string) (addr netip.Addr, port uint16, err error) {
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
		return a.Unmap(), 0, nil
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil || ap.Port() == 0 || ap.Addr().Zone() != "" {
		return netip.Addr{}, 0, fmt.Errorf("invalid peer address %q: want <IP>, <IPv4>:<port> or [<IPv6>]:<port>", s)
	}
	if ap.Addr().Is4In6() || (ap.Addr().Is6() && !strings.HasPrefix(s, "[")) {
		return netip.Addr{}, 0, fmt.Errorf("invalid peer address %q: IPv6 with a port must be [<IPv6>]:<port>", s)
	}
	return ap.Addr(), ap.Port(), nil
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }
