// Package build_test checks the packaging in build/: the CNI install script
// run into temporary roots, the systemd unit, the Dockerfile and the
// Kubernetes manifest. Nothing here writes outside t.TempDir().
package build_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"

	"github.com/calico-aio/calico-aio/cni"
)

const (
	script   = "install-cni.sh"
	unitFile = "calico-node.service"
	manifest = "k8s/calico-aio.yaml"
)

// Paths the script installs, relative to DESTDIR.
const (
	cniBin   = "opt/cni/bin/calico-aio"
	cniLink  = "opt/cni/bin/calico"
	ipamLink = "opt/cni/bin/calico-ipam"
	conflist = "etc/cni/net.d/10-calico.conflist"
	hostBin  = "usr/local/bin/calico-aio"
	nodeLink = "usr/local/bin/calico-node"
	ctlLink  = "usr/local/bin/calicoctl"
	unitPath = "etc/systemd/system/calico-node.service"
	envPath  = "etc/calico/calico-node.env"
)

var (
	cniFiles     = []string{cniBin, cniLink, ipamLink, conflist}
	systemdFiles = []string{hostBin, nodeLink, ctlLink, unitPath, envPath}
)

// fakeBinary writes an executable stand-in for calico-aio and returns its path.
func fakeBinary(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "calico-aio-src")
	content := fmt.Sprintf("#!/bin/sh\n# fake calico-aio for %s\necho fake \"$0\" \"$@\"\n", t.Name())
	if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

type result struct {
	code           int
	stdout, stderr string
}

// install runs build/install-cni.sh with DESTDIR=root, a clean environment
// (PATH plus env) and args. The script never touches systemctl here: that
// needs DESTDIR=/. Unless env sets SERVICE_ACCOUNT_PATH, the script looks for
// a service account token in an empty directory: not in a pod, whatever the
// machine running the test is.
func install(t *testing.T, root string, env map[string]string, args ...string) result {
	t.Helper()
	cmd := scriptCommand(t, root, env, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running %s: %v", script, err)
	}
	return r
}

// scriptCommand is the command install runs.
func scriptCommand(t *testing.T, root string, env map[string]string, args ...string) *exec.Cmd {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("bash is needed to run %s: %v", script, err)
	}
	cmd := exec.Command(bash, append([]string{script}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LC_ALL=C", "DESTDIR=" + root}
	if _, ok := env["SERVICE_ACCOUNT_PATH"]; !ok {
		cmd.Env = append(cmd.Env, "SERVICE_ACCOUNT_PATH="+filepath.Join(t.TempDir(), "no-serviceaccount"))
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd
}

func mustInstall(t *testing.T, root string, env map[string]string, args ...string) {
	t.Helper()
	if r := install(t, root, env, args...); r.code != 0 {
		t.Fatalf("%s %v: exit %d\nstdout:\n%s\nstderr:\n%s", script, args, r.code, r.stdout, r.stderr)
	}
}

// tree describes every entry under root: type, permission bits, symlink
// target or content hash, and modification time (so a rerun that rewrites
// an identical file also shows).
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "link -> " + target
		case fi.IsDir():
			out[rel] = fmt.Sprintf("dir %v", fi.Mode().Perm())
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			out[rel] = fmt.Sprintf("file %v %s %d", fi.Mode().Perm(), hex.EncodeToString(sum[:8]), fi.ModTime().UnixNano())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// files lists the non-directory entries of a tree, sorted.
func files(tr map[string]string) []string {
	var out []string
	for p, d := range tr {
		if !strings.HasPrefix(d, "dir ") {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

func sorted(lists ...[]string) []string {
	out := slices.Concat(lists...)
	sort.Strings(out)
	return out
}

func checkBinary(t *testing.T, root, rel, src string) {
	t.Helper()
	p := filepath.Join(root, rel)
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatalf("binary not installed: %v", err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o755 {
		t.Errorf("%s: mode %v, want a regular file with 0755", rel, fi.Mode())
	}
	got, _ := os.ReadFile(p)
	want, _ := os.ReadFile(src)
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the source binary %s", rel, src)
	}
}

func checkLink(t *testing.T, root, rel, target string) {
	t.Helper()
	p := filepath.Join(root, rel)
	got, err := os.Readlink(p)
	if err != nil {
		t.Errorf("%s is not a symlink: %v", rel, err)
		return
	}
	if got != target {
		t.Errorf("%s -> %s, want -> %s", rel, got, target)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm()&0o111 == 0 {
		t.Errorf("%s does not resolve to an executable: %v", rel, err)
	}
}

// readConflist checks the conflist file's mode, that it is valid JSON that
// libcni loads, and that every plugin's config - as libcni hands it to the
// plugin, with name and cniVersion injected - passes our own CNI plugin's
// netconf validation. It returns the document as generic JSON.
func readConflist(t *testing.T, root string) map[string]any {
	t.Helper()
	return loadConflist(t, root, func(error) bool { return false })
}

// loadConflist is readConflist, with the netconf errors that tolerate
// returns true for logged instead of failing the test.
func loadConflist(t *testing.T, root string, tolerate func(error) bool) map[string]any {
	t.Helper()
	p := filepath.Join(root, conflist)
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatalf("conflist not installed: %v", err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("conflist mode %v, want 0644", fi.Mode().Perm())
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("conflist is not valid JSON: %v\n%s", err, b)
	}
	list, err := libcni.ConfListFromBytes(b)
	if err != nil {
		t.Fatalf("libcni rejects the conflist: %v", err)
	}
	for _, pl := range list.Plugins {
		if pl.Network.Type != "calico" {
			continue
		}
		inj, err := libcni.InjectConf(pl, map[string]any{"name": list.Name, "cniVersion": list.CNIVersion})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cni.LoadNetConf(inj.Bytes); err != nil && tolerate(err) {
			t.Logf("the calico plugin rejects its config (tolerated): %v", err)
		} else if err != nil {
			t.Errorf("the calico plugin rejects its config: %v\n%s", err, inj.Bytes)
		}
	}
	return doc
}

// plugin returns the conflist's plugin of the given type.
func plugin(t *testing.T, doc map[string]any, typ string) map[string]any {
	t.Helper()
	plugins, _ := doc["plugins"].([]any)
	for _, p := range plugins {
		if m, ok := p.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	t.Fatalf("conflist has no %q plugin: %v", typ, doc["plugins"])
	return nil
}

func TestInstallCNI(t *testing.T) {
	src := fakeBinary(t)
	root := t.TempDir()
	env := map[string]string{"ETCD_ENDPOINTS": "http://10.0.0.1:2379,https://[fd00::1]:2379"}
	mustInstall(t, root, env, "--source", src)

	checkBinary(t, root, cniBin, src)
	checkLink(t, root, cniLink, "calico-aio")
	checkLink(t, root, ipamLink, "calico-aio")
	if got, want := files(tree(t, root)), sorted(cniFiles); !reflect.DeepEqual(got, want) {
		t.Errorf("installed files %v, want exactly %v", got, want)
	}

	doc := readConflist(t, root)
	if doc["name"] != "k8s-pod-network" || doc["cniVersion"] != "1.0.0" {
		t.Errorf("conflist name/cniVersion = %v/%v, want k8s-pod-network/1.0.0", doc["name"], doc["cniVersion"])
	}
	if plugins, _ := doc["plugins"].([]any); len(plugins) != 2 {
		t.Errorf("conflist has %d plugins, want calico and portmap", len(plugins))
	}
	c := plugin(t, doc, "calico")
	want := map[string]any{
		"log_level":      "info",
		"datastore_type": "etcdv3",
		"etcd_endpoints": env["ETCD_ENDPOINTS"],
		"mtu":            float64(0),
		"ipam":           map[string]any{"type": "calico-ipam"},
	}
	for k, v := range want {
		if !reflect.DeepEqual(c[k], v) {
			t.Errorf("calico plugin %s = %#v, want %#v", k, c[k], v)
		}
	}
	// The node name is left to the nodename file calico-node writes. Not in
	// a pod and without KUBECONFIG there is no way to the API: no
	// kubernetes section, no Kubernetes policy.
	for _, k := range []string{"nodename", "nodename_file", "kubernetes", "policy", "etcd_ca_cert_file"} {
		if _, ok := c[k]; ok {
			t.Errorf("calico plugin has %s = %v, want it absent by default", k, c[k])
		}
	}
	pm := plugin(t, doc, "portmap")
	if pm["snat"] != true || !reflect.DeepEqual(pm["capabilities"], map[string]any{"portMappings": true}) {
		t.Errorf("portmap plugin = %v, want snat and the portMappings capability", pm)
	}
}

func TestInstallCNIDefaultsAndOptions(t *testing.T) {
	src := fakeBinary(t)
	root := t.TempDir()
	mustInstall(t, root, map[string]string{
		"CALICO_AIO_BINARY": src,
		"KUBECONFIG":        "/etc/cni/net.d/calico-kubeconfig",
		"ETCD_CA_CERT_FILE": "/etc/calico/ca.pem",
		"CNI_MTU":           "1440",
		"LOG_LEVEL":         "debug",
	})
	checkBinary(t, root, cniBin, src)
	c := plugin(t, readConflist(t, root), "calico")
	want := map[string]any{
		"etcd_endpoints":    "http://127.0.0.1:2379", // the embedded etcd's URL
		"kubernetes":        map[string]any{"kubeconfig": "/etc/cni/net.d/calico-kubeconfig"},
		"policy":            map[string]any{"type": "k8s"},
		"etcd_ca_cert_file": "/etc/calico/ca.pem",
		"mtu":               float64(1440),
		"log_level":         "debug",
	}
	for k, v := range want {
		if !reflect.DeepEqual(c[k], v) {
			t.Errorf("calico plugin %s = %#v, want %#v", k, c[k], v)
		}
	}
}

// Values land in JSON strings: quotes and backslashes must be escaped.
func TestInstallCNIEscapesValues(t *testing.T) {
	root := t.TempDir()
	kc := `/etc/odd "dir"\with & chars/kubeconfig`
	mustInstall(t, root, map[string]string{"KUBECONFIG": kc}, "--source", fakeBinary(t))
	c := plugin(t, readConflist(t, root), "calico")
	if got := c["kubernetes"].(map[string]any)["kubeconfig"]; got != kc {
		t.Errorf("kubeconfig = %q, want %q", got, kc)
	}
}

// CNI_NETWORK_CONFIG replaces the default, with Calico's placeholders filled in.
func TestInstallCNICustomConfig(t *testing.T) {
	root := t.TempDir()
	custom := `{"name":"custom","cniVersion":"0.4.0","plugins":[{"type":"calico",` +
		`"etcd_endpoints":"__ETCD_ENDPOINTS__","mtu":__CNI_MTU__,"datastore_type":"__DATASTORE_TYPE__",` +
		`"log_level":"__LOG_LEVEL__","kubernetes":{"kubeconfig":"__KUBECONFIG_FILEPATH__","node_name":"__KUBERNETES_NODE_NAME__"},` +
		`"ipam":{"type":"calico-ipam"}}]}`
	mustInstall(t, root, map[string]string{
		"CNI_NETWORK_CONFIG":   custom,
		"ETCD_ENDPOINTS":       "http://etcd.example:2379",
		"CNI_MTU":              "1400",
		"KUBECONFIG":           "/etc/kube.conf",
		"KUBERNETES_NODE_NAME": "node-7",
	}, "--source", fakeBinary(t))
	doc := readConflist(t, root)
	if doc["name"] != "custom" {
		t.Fatalf("conflist name %v: the custom config was not used", doc["name"])
	}
	c := plugin(t, doc, "calico")
	want := map[string]any{
		"etcd_endpoints": "http://etcd.example:2379",
		"mtu":            float64(1400),
		"datastore_type": "etcdv3",
		"log_level":      "info",
		"kubernetes":     map[string]any{"kubeconfig": "/etc/kube.conf", "node_name": "node-7"},
	}
	for k, v := range want {
		if !reflect.DeepEqual(c[k], v) {
			t.Errorf("calico plugin %s = %#v, want %#v", k, c[k], v)
		}
	}
}

func TestInstallSystemd(t *testing.T) {
	src := fakeBinary(t)
	root := t.TempDir()
	mustInstall(t, root, map[string]string{"ETCD_ENDPOINTS": "http://10.0.0.1:2379"}, "--source", src, "--systemd")

	checkBinary(t, root, cniBin, src)
	checkBinary(t, root, hostBin, src)
	checkLink(t, root, cniLink, "calico-aio")
	checkLink(t, root, ipamLink, "calico-aio")
	checkLink(t, root, nodeLink, "calico-aio")
	checkLink(t, root, ctlLink, "calico-aio")
	readConflist(t, root)
	if got, want := files(tree(t, root)), sorted(cniFiles, systemdFiles); !reflect.DeepEqual(got, want) {
		t.Errorf("installed files %v, want exactly %v", got, want)
	}

	unit, err := os.ReadFile(filepath.Join(root, unitPath))
	if err != nil {
		t.Fatal(err)
	}
	orig, _ := os.ReadFile(unitFile)
	if !bytes.Equal(unit, orig) {
		t.Errorf("installed unit differs from build/%s", unitFile)
	}
	if fi, _ := os.Stat(filepath.Join(root, unitPath)); fi.Mode().Perm() != 0o644 {
		t.Errorf("unit mode %v, want 0644", fi.Mode().Perm())
	}
	envFile, _ := os.ReadFile(filepath.Join(root, envPath))
	if !regexp.MustCompile(`(?m)^ETCD_ENDPOINTS=http://10\.0\.0\.1:2379$`).Match(envFile) {
		t.Errorf("env file does not set ETCD_ENDPOINTS:\n%s", envFile)
	}

	// The operator's edits to the env file survive a reinstall.
	edited := append(envFile, "IP=10.0.0.5/24\n"...)
	if err := os.WriteFile(filepath.Join(root, envPath), edited, 0o644); err != nil {
		t.Fatal(err)
	}
	mustInstall(t, root, map[string]string{"ETCD_ENDPOINTS": "http://10.9.9.9:2379"}, "--source", src, "--systemd")
	if got, _ := os.ReadFile(filepath.Join(root, envPath)); !bytes.Equal(got, edited) {
		t.Errorf("reinstall rewrote the env file:\n%s", got)
	}
}

// Running the script twice gives the same tree: same files, modes, links,
// contents, and not even a rewrite of an unchanged file. No temporary
// files are left behind.
func TestInstallIdempotent(t *testing.T) {
	for _, args := range [][]string{nil, {"--systemd"}} {
		t.Run(fmt.Sprint(args), func(t *testing.T) {
			src := fakeBinary(t)
			root := t.TempDir()
			env := map[string]string{"ETCD_ENDPOINTS": "http://10.0.0.1:2379"}
			args := append([]string{"--source", src}, args...)
			mustInstall(t, root, env, args...)
			first := tree(t, root)
			mustInstall(t, root, env, args...)
			second := tree(t, root)
			if !reflect.DeepEqual(first, second) {
				t.Errorf("second run changed the tree:\nfirst:  %v\nsecond: %v", first, second)
			}
			for p := range second {
				if strings.HasPrefix(filepath.Base(p), ".") {
					t.Errorf("temporary file left behind: %s", p)
				}
			}
		})
	}
}

// An upgrade replaces the binary and turns a plain calico binary (as an
// upstream Calico install leaves it) into our symlink.
func TestInstallUpgrades(t *testing.T) {
	root := t.TempDir()
	mustInstall(t, root, nil, "--source", fakeBinary(t))
	upstream := filepath.Join(root, cniLink)
	if err := os.Remove(upstream); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(upstream, []byte("upstream calico"), 0o755); err != nil {
		t.Fatal(err)
	}
	newer := filepath.Join(t.TempDir(), "calico-aio-v2")
	if err := os.WriteFile(newer, []byte("#!/bin/sh\necho v2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustInstall(t, root, nil, "--source", newer)
	checkBinary(t, root, cniBin, newer)
	checkLink(t, root, cniLink, "calico-aio")
	checkLink(t, root, ipamLink, "calico-aio")
}

func TestUninstall(t *testing.T) {
	src := fakeBinary(t)
	root := t.TempDir()
	mustInstall(t, root, nil, "--source", src, "--systemd")
	// Other plugins and configs in the shared directories are not ours.
	foreign := []string{"opt/cni/bin/portmap", "etc/cni/net.d/99-loopback.conf"}
	for _, f := range foreign {
		if err := os.WriteFile(filepath.Join(root, f), []byte("not ours"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Without --systemd only the CNI part goes; the service stays.
	mustInstall(t, root, nil, "--uninstall")
	if got, want := files(tree(t, root)), sorted(systemdFiles, foreign); !reflect.DeepEqual(got, want) {
		t.Errorf("after --uninstall: files %v, want %v", got, want)
	}
	mustInstall(t, root, nil, "--uninstall", "--systemd")
	if got, want := files(tree(t, root)), sorted(foreign); !reflect.DeepEqual(got, want) {
		t.Errorf("after --uninstall --systemd: files %v, want %v", got, want)
	}
	// Uninstalling again is a no-op, not an error.
	mustInstall(t, root, nil, "--uninstall", "--systemd")

	// A calico binary that is not our symlink is left alone.
	if err := os.WriteFile(filepath.Join(root, cniLink), []byte("upstream"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustInstall(t, root, nil, "--uninstall")
	if _, err := os.Stat(filepath.Join(root, cniLink)); err != nil {
		t.Errorf("uninstall removed a calico binary that was not ours: %v", err)
	}
}

func TestInstallErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-calico-aio")
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want string // in stderr
	}{
		{"missing source binary", nil, []string{"--source", missing}, missing},
		{"missing source binary from env", map[string]string{"CALICO_AIO_BINARY": missing}, nil, missing},
		{"unknown option", nil, []string{"--bogus"}, "--bogus"},
		{"placeholder endpoints", map[string]string{"ETCD_ENDPOINTS": "http://<ETCD_IP>:<ETCD_PORT>"}, []string{"--source", fakeBinary(t)}, "ETCD_ENDPOINTS"},
		{"bad mtu", map[string]string{"CNI_MTU": "big"}, []string{"--source", fakeBinary(t)}, "CNI_MTU"},
		{"relative dir", map[string]string{"CNI_BIN_DIR": "opt/cni/bin"}, []string{"--source", fakeBinary(t)}, "CNI_BIN_DIR"},
		{"enable into a root", nil, []string{"--source", fakeBinary(t), "--systemd", "--enable"}, "--enable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { installFails(t, tc.env, tc.want, tc.args...) })
	}
}

// installFails expects an install into a fresh root to fail with an error
// naming want and to leave nothing there.
func installFails(t *testing.T, env map[string]string, want string, args ...string) {
	t.Helper()
	root := t.TempDir()
	r := install(t, root, env, args...)
	if r.code == 0 {
		t.Fatalf("exit 0, want an error\nstdout:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "error") {
		t.Errorf("stderr %q does not name %q", r.stderr, want)
	}
	if got := files(tree(t, root)); len(got) != 0 {
		t.Errorf("a failed install left files behind: %v", got)
	}
}

// With the real binary (after `make build`), the installed symlinks run the
// right roles: the CNI and IPAM plugins answer a CNI VERSION request, the
// CLI prints its version.
func TestInstalledBinaryRuns(t *testing.T) {
	built, err := filepath.Abs("../bin/calico-aio")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(built); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no built binary (make test builds it first): %v", err)
		}
		t.Skipf("no built binary (run make build): %v", err)
	}
	// Copy it first: a concurrent `make build` may be replacing it.
	src := filepath.Join(t.TempDir(), "calico-aio")
	b, err := os.ReadFile(built)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src, b, 0o755); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	mustInstall(t, root, nil, "--source", src, "--systemd")
	for _, rel := range []string{cniLink, ipamLink} {
		cmd := exec.Command(filepath.Join(root, rel))
		cmd.Env = []string{"CNI_COMMAND=VERSION"}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s with CNI_COMMAND=VERSION: %v", rel, err)
		}
		var v struct {
			SupportedVersions []string `json:"supportedVersions"`
		}
		if err := json.Unmarshal(out, &v); err != nil || !slices.Contains(v.SupportedVersions, "1.0.0") {
			t.Errorf("%s VERSION = %s (%v), want supportedVersions with 1.0.0", rel, out, err)
		}
	}
	out, err := exec.Command(filepath.Join(root, ctlLink), "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Client Version") {
		t.Errorf("calicoctl version: %v\n%s", err, out)
	}
}

// unitDirectives parses a systemd unit into section.key -> values.
func unitDirectives(t *testing.T, text string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	section := ""
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.Trim(line, "[]")
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s line %d is not a directive: %q", unitFile, i+1, line)
			}
			out[section+"."+k] = append(out[section+"."+k], v)
		}
	}
	return out
}

func TestSystemdUnit(t *testing.T) {
	b, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	d := unitDirectives(t, string(b))
	want := map[string]string{
		"Unit.After":                 "network-online.target",
		"Unit.Wants":                 "network-online.target",
		"Service.ExecStart":          "/usr/local/bin/calico-node",
		"Service.EnvironmentFile":    "-/etc/calico/calico-node.env",
		"Service.Restart":            "always",
		"Service.RestartSec":         "5",
		"Service.KillSignal":         "SIGTERM",
		"Service.LimitNOFILE":        "1048576",
		"Install.WantedBy":           "multi-user.target",
		"Unit.StartLimitIntervalSec": "0",
	}
	for k, v := range want {
		if !slices.Contains(d[k], v) {
			t.Errorf("%s: %s = %v, want %q", unitFile, k, d[k], v)
		}
	}
}

// The Dockerfile builds the way `make build` does and ships what the
// DaemonSet runs. It cannot be built here (no docker engine); check its text.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	pkg := regexp.MustCompile(`(?m)^PKG\s*:=\s*(\S+)`).FindSubmatch(mk)
	if pkg == nil {
		t.Fatal("no PKG in the Makefile")
	}
	for _, want := range []string{
		"FROM golang:${GO_VERSION} AS build",
		"ARG GO_VERSION=1.26",
		"FROM debian:bookworm-slim",
		"CGO_ENABLED=0 go build -trimpath",
		"-X " + string(pkg[1]) + "/build/version.Version=${VERSION}",
		"--no-install-recommends",
		"rm -rf /var/lib/apt/lists/*",
		"COPY --from=build /out/calico-aio /usr/local/bin/calico-aio",
		"/usr/local/bin/install-cni.sh",
		"/usr/local/share/calico-aio/calico-node.service",
		`ENTRYPOINT ["/usr/local/bin/calico-node"]`,
	} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	for _, pkg := range []string{"iptables", "ipset", "iproute2", "conntrack"} {
		if !regexp.MustCompile(`(?m)^\s+.*\b` + pkg + `\b`).MatchString(df) {
			t.Errorf("Dockerfile does not install %s", pkg)
		}
	}
	for _, role := range []string{"calico-node", "calicoctl", "calico", "calico-ipam"} {
		if !regexp.MustCompile(`for r in [^;]*\b` + role + `( |;)`).MatchString(df) {
			t.Errorf("Dockerfile does not link %s", role)
		}
	}
}
