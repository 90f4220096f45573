package iptables

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Set types and families the ipset driver supports.
const (
	SetTypeIP     = "hash:ip"
	SetTypeNet    = "hash:net"
	SetTypeIPPort = "hash:ip,port"
	FamilyInet    = "inet"
	FamilyInet6   = "inet6"
)

// canonMember returns m in the form `ipset save` prints it back, so that
// desired and kernel members compare as strings: addresses as netip prints
// them, hash:net prefixes masked and full-length ones as bare addresses,
// hash:ip,port members as "addr,proto:port" (the default protocol is tcp).
func canonMember(setType, family, m string) (string, error) {
	switch setType {
	case SetTypeIP:
		a, err := parseFamilyAddr(family, m, true)
		if err != nil {
			return "", err
		}
		return a.String(), nil
	case SetTypeNet:
		if !strings.Contains(m, "/") {
			a, err := parseFamilyAddr(family, m, false)
			return a.String(), err
		}
		p, err := netip.ParsePrefix(m)
		if err != nil {
			return "", fmt.Errorf("member %q: %w", m, err)
		}
		a, err := parseFamilyAddr(family, p.Addr().String(), false)
		if err != nil {
			return "", err
		}
		if p.Bits() == 0 {
			return "", fmt.Errorf("member %q: hash:net cannot hold a /0 (split it into two halves)", m)
		}
		if p.Bits() == a.BitLen() {
			return a.String(), nil
		}
		return netip.PrefixFrom(a, p.Bits()).Masked().String(), nil
	case SetTypeIPPort:
		addr, port, ok := strings.Cut(m, ",")
		if !ok {
			return "", fmt.Errorf("member %q: want addr,[proto:]port", m)
		}
		a, err := parseFamilyAddr(family, addr, false)
		if err != nil {
			return "", err
		}
		proto := "tcp"
		if p, n, ok := strings.Cut(port, ":"); ok {
			proto, port = strings.ToLower(p), n
		}
		switch proto {
		case "tcp", "udp", "sctp", "udplite":
		default:
			return "", fmt.Errorf("member %q: protocol %q, want tcp, udp, sctp or udplite", m, proto)
		}
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return "", fmt.Errorf("member %q: port: %w", m, err)
		}
		return a.String() + "," + proto + ":" + strconv.FormatUint(n, 10), nil
	}
	return "", fmt.Errorf("set type %q, want %s, %s or %s", setType, SetTypeIP, SetTypeNet, SetTypeIPPort)
}

// parseFamilyAddr parses an address of family; with allowHostPrefix a
// full-length prefix ("10.0.0.1/32") is taken as its address.
func parseFamilyAddr(family, s string, allowHostPrefix bool) (netip.Addr, error) {
	if allowHostPrefix && strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil || p.Bits() != p.Addr().BitLen() {
			return netip.Addr{}, fmt.Errorf("member %q: want a single address", s)
		}
		s = p.Addr().String()
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("member %q: %w", s, err)
	}
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("member %q: zones are not allowed", s)
	}
	a = a.Unmap()
	if (family == FamilyInet) != a.Is4() {
		return netip.Addr{}, fmt.Errorf("member %q is not of family %s", s, family)
	}
	return a, nil
}

// savedSet is one set as `ipset save` printed it.
type savedSet struct {
	setType, family string
	maxElem         int
	members         map[string]struct{}
}

// parseIPSetSave parses `ipset save` output, keeping the sets for which
// ours(name) holds. Members are canonicalised; one that does not parse is
// kept verbatim (it is then not desired, and gets deleted as printed).
func parseIPSetSave(out []byte, ours func(string) bool) (map[string]*savedSet, error) {
	sets := map[string]*savedSet{}
	for i, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !ours(f[1]) {
			continue
		}
		switch {
		case f[0] == "create" && len(f) >= 3:
			s := &savedSet{setType: f[2], family: FamilyInet, members: map[string]struct{}{}}
			for j := 3; j+1 < len(f); j++ {
				switch f[j] {
				case "family":
					s.family = f[j+1]
				case "maxelem":
					s.maxElem, _ = strconv.Atoi(f[j+1])
				}
			}
			sets[f[1]] = s
		case f[0] == "add" && len(f) >= 3:
			s, ok := sets[f[1]]
			if !ok {
				return nil, fmt.Errorf("ipset save line %d: member of undeclared set %s", i+1, f[1])
			}
			m, err := canonMember(s.setType, s.family, f[2])
			if err != nil {
				m = f[2]
			}
			s.members[m] = struct{}{}
		default:
			return nil, fmt.Errorf("ipset save line %d: unexpected %q", i+1, line)
		}
	}
	return sets, nil
}
