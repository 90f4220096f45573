package calc

import (
	"regexp"
	"slices"
	"sort"
	"strings"
)

// FelixConfiguration interfaceExclude (Calico's default "kube-ipvs0"): the
// host interfaces the agent ignores for host endpoints, as Calico's
// interface monitor does: a host endpoint naming one does not apply, a
// "*" host endpoint leaves them unpoliced, and expectedIPs never match
// their addresses. Each comma-separated item is a name or a /regexp/.

// DefaultInterfaceExclude is Calico's default interfaceExclude.
const DefaultInterfaceExclude = "kube-ipvs0"

type ifaceExclude struct {
	names []string
	res   []*regexp.Regexp
}

// parseIfaceExclude reads interfaceExclude (validated at write); items
// that do not parse are skipped.
func parseIfaceExclude(s string) ifaceExclude {
	var x ifaceExclude
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if len(item) > 2 && strings.HasPrefix(item, "/") && strings.HasSuffix(item, "/") {
			if re, err := regexp.Compile(item[1 : len(item)-1]); err == nil {
				x.res = append(x.res, re)
			}
		} else if item != "" && !slices.Contains(x.names, item) {
			x.names = append(x.names, item)
		}
	}
	return x
}

func (x ifaceExclude) match(iface string) bool {
	if slices.Contains(x.names, iface) {
		return true
	}
	for _, re := range x.res {
		if re.MatchString(iface) {
			return true
		}
	}
	return false
}

// interfaceExclude is the effective interfaceExclude ("default" overlaid
// by "node.<name>").
func (s *State) interfaceExclude() ifaceExclude {
	v := DefaultInterfaceExclude
	for _, name := range []string{"default", "node." + s.node} {
		if f, ok := s.felixCfgs[name]; ok && f.Spec.InterfaceExclude != "" {
			v = f.Spec.InterfaceExclude
		}
	}
	return parseIfaceExclude(v)
}

// excludedIfaces are the excluded interface names a "*" host endpoint
// must skip: the names given, and the known host interfaces a /regexp/
// matches.
func (s *State) excludedIfaces() []string {
	x := s.interfaceExclude()
	out := slices.Clone(x.names)
	for iface := range s.hostIfaces {
		if !slices.Contains(out, iface) && x.match(iface) {
			out = append(out, iface)
		}
	}
	sort.Strings(out)
	return out
}
