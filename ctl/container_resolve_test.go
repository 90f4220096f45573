package ctl

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/cni"
)

// fakeDocker serves GET /containers/{name}/json from a map on a unix
// socket, like the Docker Engine API.
func fakeDocker(t *testing.T, containers map[string]map[string]any) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "docker.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutPrefix(r.URL.Path, "/containers/")
		name, ok2 := strings.CutSuffix(name, "/json")
		c, found := containers[name]
		if !ok || !ok2 || r.Method != http.MethodGet {
			http.Error(w, `{"message":"page not found"}`, http.StatusNotFound)
			return
		}
		if !found {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"message":"No such container: ` + name + `"}`))
			return
		}
		_ = json.NewEncoder(w).Encode(c)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return sock
}

func dockerJSON(id, name string, running bool, pid int, mode string) map[string]any {
	status := "exited"
	if running {
		status = "running"
	}
	return map[string]any{
		"Id": id, "Name": "/" + name,
		"State":      map[string]any{"Status": status, "Running": running, "Pid": pid},
		"HostConfig": map[string]any{"NetworkMode": mode},
	}
}

func TestResolveDockerContainer(t *testing.T) {
	id := strings.Repeat("ab12", 16)
	me := os.Getpid()
	sock := fakeDocker(t, map[string]map[string]any{
		"web":     dockerJSON(id, "web", true, me, "none"),
		id:        dockerJSON(id, "web", true, me, "none"),
		"hostnet": dockerJSON(strings.Repeat("cd34", 16), "hostnet", true, me, "host"),
		"shared":  dockerJSON(strings.Repeat("ef56", 16), "shared", true, me, "container:web"),
		"stopped": dockerJSON(strings.Repeat("0a0b", 16), "stopped", false, 0, "none"),
	})
	ctx := context.Background()
	socket := func() (string, error) { return sock, nil }

	for _, name := range []string{"web", id} {
		c, err := resolveContainer(ctx, name, socket, true)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if c.orchestrator != cni.OrchestratorDocker || c.workload != id || c.netns != "/proc/"+strconv.Itoa(me)+"/ns/net" {
			t.Errorf("%s resolved to %+v", name, c)
		}
		if !strings.Contains(c.desc, "web (ab12ab12ab12)") {
			t.Errorf("description %q", c.desc)
		}
	}

	refusals := map[string]string{
		"hostnet": "uses the host's network (NetworkMode=host)",
		"shared":  "shares the network of web",
		"stopped": `is not running (state "exited")`,
		"nosuch":  "no such Docker container",
	}
	for name, want := range refusals {
		_, err := resolveContainer(ctx, name, socket, true)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("resolve %s: %v, want %q", name, err, want)
		}
	}
	// A stopped container still resolves for removal, without a namespace.
	c, err := resolveContainer(ctx, "stopped", socket, false)
	if err != nil || c.workload != strings.Repeat("0a0b", 16) || c.netns != "" {
		t.Errorf("stopped container for removal: %+v, %v", c, err)
	}

	noDocker := func() (string, error) { return filepath.Join(t.TempDir(), "none.sock"), nil }
	if _, err := resolveContainer(ctx, "web", noDocker, true); err == nil || !strings.Contains(err.Error(), "no Docker Engine API at") {
		t.Errorf("without Docker: %v", err)
	}
}

func TestResolveNamespaceAndPID(t *testing.T) {
	ctx := context.Background()
	noDocker := func() (string, error) { t.Fatal("Docker asked about a path or PID"); return "", nil }
	me := strconv.Itoa(os.Getpid())
	c, err := resolveContainer(ctx, me, noDocker, true)
	if err != nil || c.workload != "pid-"+me || c.orchestrator != cni.OrchestratorNamespace || c.netns != "/proc/"+me+"/ns/net" {
		t.Errorf("own PID: %+v, %v", c, err)
	}
	c, err = resolveContainer(ctx, "/proc/"+me+"/ns/net", noDocker, true)
	if err != nil || c.workload != "net" || c.netns != "/proc/"+me+"/ns/net" {
		t.Errorf("netns path: %+v, %v", c, err)
	}
	if _, err := resolveContainer(ctx, "/var/run/netns/Does_Not.Exist", noDocker, true); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing netns: %v", err)
	}
	c, err = resolveContainer(ctx, "/var/run/netns/Does_Not.Exist", noDocker, false)
	if err != nil || c.workload != "does-not-exist" || c.netns != "" {
		t.Errorf("missing netns for removal: %+v, %v", c, err)
	}
	if _, err := resolveContainer(ctx, "/etc/hostname", noDocker, true); err == nil || !strings.Contains(err.Error(), "is not a network namespace") {
		t.Errorf("a plain file: %v", err)
	}
	if _, err := resolveContainer(ctx, "999999999", noDocker, true); err == nil || !strings.Contains(err.Error(), "no process with PID 999999999") {
		t.Errorf("missing PID: %v", err)
	}
}

func TestDockerSocket(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "DOCKER_HOST" {
				return v
			}
			return ""
		}
	}
	for _, tc := range []struct{ flag, env, want, err string }{
		{"", "", DefaultDockerSocket, ""},
		{"", "unix:///tmp/d.sock", "/tmp/d.sock", ""},
		{"/x.sock", "unix:///tmp/d.sock", "/x.sock", ""},
		{"", "tcp://10.0.0.1:2375", "", "only unix:// sockets"},
	} {
		got, err := dockerSocket(tc.flag, env(tc.env))
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("dockerSocket(%q, DOCKER_HOST=%q) = %q, %v", tc.flag, tc.env, got, err)
		}
	}
}

func TestWorkloadIDFromName(t *testing.T) {
	for in, want := range map[string]string{"cni-1234-abcd": "cni-1234-abcd", "Web_1.x": "web-1-x", "--a--": "a"} {
		if got, err := workloadIDFromName(in); err != nil || got != want {
			t.Errorf("workloadIDFromName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := workloadIDFromName("___"); err == nil {
		t.Errorf("no error for a name without letters or digits")
	}
}
