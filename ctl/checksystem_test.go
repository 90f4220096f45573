package ctl_test

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/internal/golden"

	"github.com/calico-aio/calico-aio/ctl"
)

// fakeHost writes files (path -> content) below a new root; paths ending
// in "*" are executables.
func fakeHost(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		mode := os.FileMode(0o644)
		if strings.HasSuffix(p, "*") {
			p, mode = strings.TrimSuffix(p, "*"), 0o755
		}
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func gzipped(t *testing.T, s string) string {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func checksystem(t *testing.T, root string, extra ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	args := append([]string{"node", "checksystem", "--host-root", root}, extra...)
	code := ctl.Main(args, ctl.IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb,
		Getenv: func(k string) string {
			if k == "PATH" {
				return "/usr/sbin:/sbin"
			}
			return ""
		}})
	return out.String(), errb.String(), code
}

// Every way a kernel feature shows itself counts: loaded, loadable,
// built in, the kernel config (plain or /proc/config.gz), the iptables
// match and target lists, /sys/module.
func TestCheckSystemComplete(t *testing.T) {
	rel := "5.10.0-21-amd64"
	root := fakeHost(t, map[string]string{
		"proc/sys/kernel/osrelease": rel + "\n",
		"proc/modules": "veth 36864 0 - Live 0x0\nip_tables 32768 4 iptable_filter, Live 0x0\nip6_tables 32768 0 - Live 0x0\n" +
			"iptable_filter 16384 1 - Live 0x0\niptable_nat 16384 1 - Live 0x0\n",
		"lib/modules/" + rel + "/modules.dep": "kernel/net/ipv4/netfilter/iptable_mangle.ko.xz: kernel/net/ipv4/netfilter/ip_tables.ko.xz\n" +
			"kernel/net/ipv4/netfilter/iptable_raw.ko: \nkernel/net/netfilter/ipset/ip_set_hash_ip.ko.zst: kernel/net/netfilter/ipset/ip_set.ko.zst\n" +
			"kernel/net/netfilter/ipset/ip_set_hash_net.ko.zst: kernel/net/netfilter/ipset/ip_set.ko.zst\nkernel/net/netfilter/ipset/ip_set.ko.zst:\n" +
			"kernel/drivers/net/vxlan/vxlan.ko:\nkernel/net/ipv4/ipip.ko:\n",
		"lib/modules/" + rel + "/modules.builtin": "kernel/net/netfilter/nf_conntrack.ko\nkernel/net/netfilter/nf_nat.ko\n",
		"boot/config-" + rel: "# comment\nCONFIG_NF_CT_NETLINK=m\nCONFIG_NETFILTER_XT_SET=m\nCONFIG_NETFILTER_XT_MATCH_CONNTRACK=y\n" +
			"CONFIG_NETFILTER_XT_MARK=m\nCONFIG_NETFILTER_XT_MATCH_MULTIPORT=m\n# CONFIG_NETFILTER_XT_MATCH_ADDRTYPE is not set\n",
		"proc/net/ip_tables_matches":              "addrtype\ncomment\nicmp\nrpfilter\n",
		"proc/net/ip_tables_targets":              "MASQUERADE\n",
		"sys/module/ipt_REJECT/uevent":            "",
		"proc/sys/net/ipv4/ip_forward":            "1\n",
		"proc/sys/net/ipv4/conf/all/rp_filter":    "1\n",
		"proc/sys/net/ipv4/conf/all/proxy_arp":    "0\n",
		"proc/sys/net/netfilter/nf_conntrack_max": "262144\n",
		"proc/sys/net/ipv6/conf/all/forwarding":   "0\n",
		"usr/sbin/iptables-restore*":              "",
		"usr/sbin/iptables-save*":                 "",
		"sbin/ipset*":                             "",
		"usr/sbin/ip6tables-restore*":             "",
		"usr/sbin/ip6tables-save":                 "not executable",
	})
	out, errs, code := checksystem(t, root)
	if code != 0 || errs != "" {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
	golden.Check(t, "checksystem-complete", out)
}

// An old kernel, no ipsets, no iptables-restore: FAIL rows and exit 1;
// -f names the kernel config, and /proc/config.gz is read when present.
func TestCheckSystemMissing(t *testing.T) {
	root := fakeHost(t, map[string]string{
		"proc/sys/kernel/osrelease":    "3.2.0\n",
		"proc/config.gz":               gzipped(t, "CONFIG_VETH=y\nCONFIG_IP_NF_IPTABLES=y\nCONFIG_NF_CONNTRACK=m\n"),
		"etc/my-kernel.config":         "CONFIG_IP_SET=y\nCONFIG_VXLAN=m\n",
		"proc/sys/net/ipv4/ip_forward": "0\n",
		"usr/sbin/iptables-save*":      "",
	})
	out, errs, code := checksystem(t, root)
	if code != 1 || errs != "system doesn't meet one or more minimum systems requirements to run Calico\n" {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
	golden.Check(t, "checksystem-missing", out)
	out, _, _ = checksystem(t, root, "--kernel-config", "/etc/my-kernel.config")
	if !strings.Contains(out, "CONFIG_IP_SET=y in /etc/my-kernel.config") || strings.Contains(out, "CONFIG_VETH") {
		t.Errorf("-f did not replace the kernel config search:\n%s", out)
	}
}

// The real host this runs on: the kernel row shows its release, and the
// exit code agrees with the FAIL rows.
func TestCheckSystemRealHost(t *testing.T) {
	var out, errb bytes.Buffer
	code := ctl.Main([]string{"node", "checksystem"}, ctl.IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: os.Getenv})
	rel, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "kernel   "+strings.TrimSpace(string(rel))) {
		t.Errorf("no kernel row for %s:\n%s", rel, out.String())
	}
	failed := strings.Contains(out.String(), "   FAIL\n")
	if failed != (code != 0) {
		t.Errorf("exit %d but FAIL rows = %v:\n%s%s", code, failed, out.String(), errb.String())
	}
	for _, tool := range []string{"iptables-restore", "ipset"} {
		if !regexpMatch(`tool +`+tool+` +\S+ +OK`, out.String()) {
			t.Errorf("%s not found OK on this host (the agent's tests need it):\n%s", tool, out.String())
		}
	}
}

func regexpMatch(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }
