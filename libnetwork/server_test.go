package libnetwork

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/store/storetest"
)

// unixClient posts to a unix socket.
func unixClient(path string) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}}}
}

func activate(t *testing.T, sock string) []string {
	t.Helper()
	resp, err := unixClient(sock).Post("http://plugin/Plugin.Activate", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a ActivateResponse
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatal(err)
	}
	return a.Implements
}

// Docker finds the driver by its sockets: calico.sock serves both drivers,
// calico-ipam.sock the IPAM driver; a stale socket is replaced, a live one
// refused, and both go when the driver stops.
func TestListenSockets(t *testing.T) {
	cl := storetest.StartEtcd(t).Client(t)
	dir := filepath.Join(t.TempDir(), "plugins")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	stale, err := net.Listen("unix", filepath.Join(dir, "calico.sock"))
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close() // the file stays, nobody answers: a dead driver's socket

	cfg := Config{Node: "node1", Store: cl, SocketDir: dir}
	srv, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	net, ipamSock := filepath.Join(dir, "calico.sock"), filepath.Join(dir, "calico-ipam.sock")
	if got := strings.Join(activate(t, net), ","); got != "NetworkDriver,IpamDriver" {
		t.Errorf("calico.sock implements %s", got)
	}
	if got := strings.Join(activate(t, ipamSock), ","); got != "IpamDriver" {
		t.Errorf("calico-ipam.sock implements %s", got)
	}
	if _, err := Listen(cfg); err == nil || !strings.Contains(err.Error(), "another driver") {
		t.Errorf("second driver on the same sockets: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
	for _, p := range []string{net, ipamSock} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s left behind: %v", p, err)
		}
	}
	if _, err := Listen(Config{Store: cl}); err == nil {
		t.Error("Listen without a node name succeeded")
	}
}

// fakeDocker serves GET /networks/<id> on a unix socket, as dockerd does.
func fakeDocker(t *testing.T, names map[string]string) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := names[strings.TrimPrefix(r.URL.Path, "/networks/")]
		if r.Method != http.MethodGet || !ok {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"message":"network not found"}`)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"Name": name, "Id": r.URL.Path, "Driver": "calico"})
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "unix://" + sock
}

func TestDockerNetworkNames(t *testing.T) {
	n := &dockerNames{host: fakeDocker(t, map[string]string{netID: "frontend"})}
	ctx := context.Background()
	if name, err := n.lookup(ctx, netID); err != nil || name != "frontend" {
		t.Errorf("lookup = %q, %v", name, err)
	}
	if _, err := n.lookup(ctx, "gone"); err == nil || !strings.Contains(err.Error(), "network not found") {
		t.Errorf("lookup of a missing network: %v", err)
	}
	if _, err := (&dockerNames{host: "tcp://127.0.0.1:2375"}).lookup(ctx, netID); err == nil {
		t.Error("tcp docker host accepted")
	}
	if _, err := (&dockerNames{host: "unix:///nonexistent/docker.sock"}).lookup(ctx, netID); err == nil {
		t.Error("lookup without Docker succeeded")
	}
}
