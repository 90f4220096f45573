package ctl

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
)

// minKernel is the oldest kernel the agent supports (Calico's stated
// minimum for a node).
var minKernel = [2]int{3, 10}

// need says how much the agent depends on a check: a missing "required"
// item fails the check, a missing "optional" one only warns.
type need int

const (
	required need = iota
	optional
)

// moduleCheck is a kernel feature the agent uses, with the ways to see it:
// the module name (loaded, loadable or built in), kernel config symbols, and
// the iptables match or target it provides.
type moduleCheck struct {
	name    string
	configs []string
	match   string // in /proc/net/ip_tables_matches
	target  string // in /proc/net/ip_tables_targets
	need    need
	why     string
}

var moduleChecks = []moduleCheck{
	{name: "veth", configs: []string{"CONFIG_VETH"}, why: "pod interfaces"},
	{name: "ip_tables", configs: []string{"CONFIG_IP_NF_IPTABLES"}, why: "policy and NAT rules"},
	{name: "ip6_tables", configs: []string{"CONFIG_IP6_NF_IPTABLES"}, need: optional, why: "IPv6 will be unavailable without it"},
	{name: "iptable_filter", configs: []string{"CONFIG_IP_NF_FILTER"}, why: "filter table"},
	{name: "iptable_nat", configs: []string{"CONFIG_IP_NF_NAT"}, why: "nat table"},
	{name: "iptable_mangle", configs: []string{"CONFIG_IP_NF_MANGLE"}, why: "mangle table"},
	{name: "iptable_raw", configs: []string{"CONFIG_IP_NF_RAW"}, why: "raw table"},
	{name: "nf_conntrack", configs: []string{"CONFIG_NF_CONNTRACK"}, why: "connection tracking"},
	{name: "nf_conntrack_netlink", configs: []string{"CONFIG_NF_CT_NETLINK"}, why: "conntrack cleanup"},
	{name: "nf_nat", configs: []string{"CONFIG_NF_NAT"}, why: "NAT outgoing"},
	{name: "ip_set", configs: []string{"CONFIG_IP_SET"}, why: "ipsets"},
	{name: "ip_set_hash_ip", configs: []string{"CONFIG_IP_SET_HASH_IP"}, why: "hash:ip sets"},
	{name: "ip_set_hash_net", configs: []string{"CONFIG_IP_SET_HASH_NET"}, why: "hash:net sets"},
	{name: "xt_set", configs: []string{"CONFIG_NETFILTER_XT_SET"}, match: "set", why: "set match"},
	{name: "xt_conntrack", configs: []string{"CONFIG_NETFILTER_XT_MATCH_CONNTRACK"}, match: "conntrack", why: "conntrack match"},
	{name: "xt_mark", configs: []string{"CONFIG_NETFILTER_XT_MARK", "CONFIG_NETFILTER_XT_MATCH_MARK"}, match: "mark", why: "mark match"},
	{name: "xt_multiport", configs: []string{"CONFIG_NETFILTER_XT_MATCH_MULTIPORT"}, match: "multiport", why: "port lists"},
	{name: "xt_addrtype", configs: []string{"CONFIG_NETFILTER_XT_MATCH_ADDRTYPE"}, match: "addrtype", why: "addrtype match"},
	{name: "xt_comment", configs: []string{"CONFIG_NETFILTER_XT_MATCH_COMMENT"}, match: "comment", why: "rule hash comments"},
	{name: "xt_icmp", match: "icmp", why: "ICMP match"},
	{name: "xt_MASQUERADE", configs: []string{"CONFIG_NETFILTER_XT_TARGET_MASQUERADE", "CONFIG_IP_NF_TARGET_MASQUERADE"}, target: "MASQUERADE", why: "NAT outgoing"},
	{name: "ipt_REJECT", configs: []string{"CONFIG_IP_NF_TARGET_REJECT"}, target: "REJECT", need: optional, why: "needed for iptablesFilterDenyAction Reject"},
	{name: "xt_rpfilter", configs: []string{"CONFIG_IP_NF_MATCH_RPFILTER"}, match: "rpfilter", need: optional, why: "reverse-path checks in the raw table"},
	{name: "vxlan", configs: []string{"CONFIG_VXLAN"}, need: optional, why: "needed for VXLAN IP pools"},
	{name: "ipip", configs: []string{"CONFIG_NET_IPIP"}, need: optional, why: "needed for IPIP IP pools"},
}

// sysctlCheck is a /proc/sys entry the agent reads or sets.
type sysctlCheck struct {
	path string // under /proc/sys
	need need
	why  string
}

var sysctlChecks = []sysctlCheck{
	{path: "net/ipv4/ip_forward", why: "set to 1 by the agent"},
	{path: "net/ipv4/conf/all/rp_filter", why: "reverse-path filtering"},
	{path: "net/ipv4/conf/all/proxy_arp", why: "set per pod interface"},
	{path: "net/netfilter/nf_conntrack_max", why: "conntrack table size"},
	{path: "net/ipv6/conf/all/forwarding", need: optional, why: "IPv6 forwarding"},
}

// toolChecks are the programs the agent runs.
var toolChecks = []struct {
	name string
	need need
}{
	{"iptables-restore", required}, {"iptables-save", required}, {"ipset", required},
	{"ip6tables-restore", optional}, {"ip6tables-save", optional},
}

// checkRow is one line of the report.
type checkRow struct {
	kind, name, found, status string
}

// hostProbe reads the host below root ("/" normally, or where the host's
// filesystem is mounted).
type hostProbe struct {
	root         string
	kernelConfig string // -f; "" searches the usual places
	path         string // PATH to look for tools in
}

func (h hostProbe) file(p string) string { return filepath.Join(h.root, p) }

func (h hostProbe) read(p string) (string, bool) {
	b, err := os.ReadFile(h.file(p))
	return strings.TrimSpace(string(b)), err == nil
}

func runCheckSystem(o IO, args []string) error {
	fs := newFlagSet("node checksystem", o)
	cfg := fs.StringP("kernel-config", "f", "", "kernel config file (default: /proc/config.gz, /boot/config-<release>, ...)")
	root := fs.String("host-root", "/", "where the host's filesystem is (when run in a container with the host mounted)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	path := o.Getenv("PATH")
	if path == "" {
		path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	rows, ok := hostProbe{root: *root, kernelConfig: *cfg, path: path}.check()
	if err := printCheckRows(o.Stdout, rows); err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("system doesn't meet one or more minimum systems requirements to run Calico")
	}
	fmt.Fprintln(o.Stdout, "System meets minimum system requirements to run Calico!")
	return nil
}

func printCheckRows(w io.Writer, rows []checkRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tNAME\tFOUND\tSTATUS")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.kind, r.name, r.found, r.status)
	}
	return tw.Flush()
}

// check runs every check; ok is false when a required item is missing.
func (h hostProbe) check() ([]checkRow, bool) {
	ok := true
	status := func(found bool, n need) string {
		switch {
		case found:
			return "OK"
		case n == optional:
			return "WARN"
		}
		ok = false
		return "FAIL"
	}
	var rows []checkRow
	rel, haveRel := h.read("proc/sys/kernel/osrelease")
	if !haveRel {
		rows = append(rows, checkRow{"kernel", "version", "cannot read /proc/sys/kernel/osrelease", status(false, required)})
	} else {
		rows = append(rows, checkRow{"kernel", rel, fmt.Sprintf("minimum %d.%d", minKernel[0], minKernel[1]), status(kernelAtLeast(rel, minKernel), required)})
	}
	ev := h.moduleEvidence(rel)
	for _, m := range moduleChecks {
		how := ev.find(m)
		found := how
		if how == "" {
			found = "not found (" + m.why + ")"
		}
		rows = append(rows, checkRow{"module", m.name, found, status(how != "", m.need)})
	}
	for _, s := range sysctlChecks {
		v, have := h.read(filepath.Join("proc/sys", s.path))
		found := v
		if !have {
			found = "missing (" + s.why + ")"
		}
		rows = append(rows, checkRow{"sysctl", strings.ReplaceAll(s.path, "/", "."), found, status(have, s.need)})
	}
	for _, t := range toolChecks {
		where := h.lookTool(t.name)
		found := where
		if where == "" {
			found = "not in PATH"
		}
		rows = append(rows, checkRow{"tool", t.name, found, status(where != "", t.need)})
	}
	return rows, ok
}

// kernelAtLeast compares "5.10.0-21-amd64" with a major.minor minimum.
func kernelAtLeast(rel string, min [2]int) bool {
	m := regexp.MustCompile(`^(\d+)\.(\d+)`).FindStringSubmatch(rel)
	if m == nil {
		return false
	}
	maj, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	return maj > min[0] || (maj == min[0] && minor >= min[1])
}

// moduleEvidence is everything the host says about its kernel features.
type moduleEvidence struct {
	loaded, loadable, builtin, sysModule map[string]bool
	config                               map[string]string // CONFIG_X -> y|m
	configFile                           string
	matches, targets                     map[string]bool
}

func (h hostProbe) moduleEvidence(rel string) moduleEvidence {
	ev := moduleEvidence{loaded: map[string]bool{}, loadable: map[string]bool{}, builtin: map[string]bool{},
		sysModule: map[string]bool{}, config: map[string]string{}, matches: map[string]bool{}, targets: map[string]bool{}}
	if s, ok := h.read("proc/modules"); ok {
		for _, l := range strings.Split(s, "\n") {
			if f := strings.Fields(l); len(f) > 0 {
				ev.loaded[f[0]] = true
			}
		}
	}
	if rel != "" {
		moduleNames(h.file(filepath.Join("lib/modules", rel, "modules.dep")), ev.loadable)
		moduleNames(h.file(filepath.Join("lib/modules", rel, "modules.builtin")), ev.builtin)
	}
	if entries, err := os.ReadDir(h.file("sys/module")); err == nil {
		for _, e := range entries {
			ev.sysModule[e.Name()] = true
		}
	}
	ev.configFile = h.readKernelConfig(rel, ev.config)
	for file, set := range map[string]map[string]bool{"proc/net/ip_tables_matches": ev.matches, "proc/net/ip_tables_targets": ev.targets} {
		if s, ok := h.read(file); ok {
			for _, l := range strings.Fields(s) {
				set[l] = true
			}
		}
	}
	return ev
}

// moduleNames reads module names from modules.dep / modules.builtin lines
// ("kernel/net/netfilter/xt_set.ko.xz: ..."); dashes and underscores are
// the same in module names.
func moduleNames(file string, into map[string]bool) {
	f, err := os.Open(file)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p, _, _ := strings.Cut(sc.Text(), ":")
		base := filepath.Base(strings.TrimSpace(p))
		if i := strings.Index(base, ".ko"); i > 0 {
			into[strings.ReplaceAll(base[:i], "-", "_")] = true
		}
	}
}

// readKernelConfig fills cfg from the kernel config and says which file
// it came from.
func (h hostProbe) readKernelConfig(rel string, cfg map[string]string) string {
	candidates := []string{h.kernelConfig}
	if h.kernelConfig == "" {
		candidates = []string{"/proc/config.gz", "/usr/src/linux/.config", "/boot/config-" + rel,
			"/usr/src/linux-" + rel + "/.config", "/usr/src/linux-headers-" + rel + "/.config", "/lib/modules/" + rel + "/build/.config"}
	}
	for _, c := range candidates {
		b, err := os.ReadFile(h.file(c))
		if err != nil {
			continue
		}
		if strings.HasSuffix(c, ".gz") {
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				continue
			}
			if b, err = io.ReadAll(zr); err != nil {
				continue
			}
		}
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok && strings.HasPrefix(k, "CONFIG_") && (v == "y" || v == "m") {
				cfg[k] = v
			}
		}
		return c
	}
	return ""
}

// find says how the feature was seen ("" when it was not).
func (ev moduleEvidence) find(m moduleCheck) string {
	switch {
	case ev.loaded[m.name]:
		return "loaded"
	case ev.builtin[m.name]:
		return "built in"
	case ev.loadable[m.name]:
		return "loadable module"
	}
	for _, c := range m.configs {
		if v := ev.config[c]; v != "" {
			return fmt.Sprintf("%s=%s in %s", c, v, ev.configFile)
		}
	}
	switch {
	case m.match != "" && ev.matches[m.match]:
		return "iptables match " + m.match
	case m.target != "" && ev.targets[m.target]:
		return "iptables target " + m.target
	case ev.sysModule[m.name]:
		return "/sys/module/" + m.name
	}
	return ""
}

// lookTool finds an executable in PATH below the root.
func (h hostProbe) lookTool(name string) string {
	for _, dir := range filepath.SplitList(h.path) {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(h.file(p)); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}
