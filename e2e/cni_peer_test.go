package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/calico-aio/calico-aio/ipam"
)

// nobody is the uid and gid a non-root CNI caller runs as.
const nobody = 65534

// nobodyBinary is a copy of the binary that uid nobody can execute (the
// build's own directory is private to root), with the calico name.
func nobodyBinary(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cni-nobody")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(binary)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(filepath.Join(dir, "calico-aio"), os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("calico-aio", filepath.Join(dir, "calico")); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "calico")
}

// TestCNISocketRefusesNonRootPeer: the agent serves root only. A CNI call
// made by another uid is never served by the agent: with the socket's own
// mode (0600) the connection is refused by the kernel; with the mode
// opened on purpose the agent's peer-credential check refuses it. Either
// way the plugin falls back in-process, where it has only the caller's
// privileges: the call fails with a CNI error, and no address is allocated
// and no interface created for it.
func TestCNISocketRefusesNonRootPeer(t *testing.T) {
	e := newCNIEnv(t, 73)
	e.pool("v4", "10.113.0.0/24")
	a := e.startAgent("node1")
	plugin := nobodyBinary(t)
	conf := e.netconf("peer", "node1", "")
	sock := filepath.Join(e.state, "run", "cni.sock")
	if st, err := os.Stat(sock); err != nil || st.Mode().Perm() != 0o600 || st.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Fatalf("agent socket %s: %v (%v), want root's, mode 0600", sock, st.Mode(), err)
	}
	// Only the socket itself stands in the way: its directories are
	// opened to others (a test's temporary directories are private).
	for _, d := range []string{filepath.Dir(e.state), e.state, filepath.Join(e.state, "run")} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	call := func(container string) (stdout, stderr string, err error) {
		cmd := exec.Command(plugin)
		cmd.Env = append([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "CNI_PATH=" + filepath.Dir(plugin)},
			cniEnvFor("ADD", container, newNS(t).Path())...)
		cmd.Stdin = strings.NewReader(conf)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err = e.inHost(cmd.Run)
		return out.String(), errb.String(), err
	}
	refusals := func() int { return strings.Count(a.logs.String(), "refusing a peer that is not root") }
	assertNothingFor := func(container string) {
		t.Helper()
		if ips, err := ipam.New(e.cl).IPsByHandle(context.Background(), "peer."+container); err != nil || len(ips) != 0 {
			t.Errorf("handle peer.%s holds %v (%v), want nothing", container, ips, err)
		}
		if l := e.hostLinks(); len(l) != 0 {
			t.Errorf("host links %v after a refused call", l)
		}
	}
	failedInProcess := func(what, stdout, stderr string, err error) {
		t.Helper()
		var cniErr struct {
			Code uint   `json:"code"`
			Msg  string `json:"msg"`
		}
		if err == nil || json.Unmarshal([]byte(stdout), &cniErr) != nil || cniErr.Code == 0 {
			t.Fatalf("%s: exit %v, stdout %q, want a CNI error\n%s", what, err, stdout, stderr)
		}
		t.Logf("%s: CNI error %d: %s", what, cniErr.Code, cniErr.Msg)
	}

	// The socket's mode: connect(2) fails, the agent never sees the call.
	stdout, stderr, err := call("nobody1")
	failedInProcess("socket mode 0600", stdout, stderr, err)
	if a.servedCalls() != 0 || refusals() != 0 {
		t.Errorf("the agent saw the call: served %d, refused %d", a.servedCalls(), refusals())
	}
	assertNothingFor("nobody1")

	// The socket opened to all (as a mistaken mount or umask could): the
	// agent's SO_PEERCRED check refuses the peer and answers nothing.
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err = call("nobody2")
	failedInProcess("socket mode 0666", stdout, stderr, err)
	if refusals() != 1 || !strings.Contains(a.logs.String(), "uid=65534") {
		t.Errorf("want the agent to refuse uid 65534 once; log:\n%s", a.logs.String())
	}
	if a.servedCalls() != 0 {
		t.Errorf("the agent served %d calls from a non-root peer", a.servedCalls())
	}
	assertNothingFor("nobody2")

	// Root is still served over the same socket.
	if out, errOut, err := e.execPlugin("calico", cniEnvFor("ADD", "root1", newNS(t).Path()), conf); err != nil {
		t.Fatalf("root ADD: %v\n%s\n%s", err, out, errOut)
	}
	if a.servedCalls() != 1 {
		t.Errorf("the agent served %d calls, want root's ADD", a.servedCalls())
	}
	if out, errOut, err := e.execPlugin("calico", cniEnvFor("DEL", "root1", ""), conf); err != nil {
		t.Fatalf("root DEL: %v\n%s\n%s", err, out, errOut)
	}
	e.ipamCheckClean()
	e.assertClean()
}
