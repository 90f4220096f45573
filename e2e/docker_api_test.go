package e2e

import (
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// classicDockerAPI is the part of the Docker Engine API calicoctl uses
// (GET /containers/{name or id}/json), served on a unix socket from a map,
// since Docker itself is not installed here.
type classicDockerAPI struct {
	sock string
	mu   sync.Mutex
	byID map[string]map[string]any // by name and by ID
}

func newClassicDockerAPI(t *testing.T) *classicDockerAPI {
	t.Helper()
	d := &classicDockerAPI{sock: filepath.Join(t.TempDir(), "docker.sock"), byID: map[string]map[string]any{}}
	l, err := net.Listen("unix", d.sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(d.serve)}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return d
}

func (d *classicDockerAPI) serve(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutPrefix(r.URL.Path, "/containers/")
	name, ok2 := strings.CutSuffix(name, "/json")
	d.mu.Lock()
	c, found := d.byID[name]
	d.mu.Unlock()
	switch {
	case !ok || !ok2 || r.Method != http.MethodGet:
		http.Error(w, `{"message":"page not found"}`, http.StatusNotFound)
	case !found:
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"message":"No such container: ` + name + `"}`))
	default:
		_ = json.NewEncoder(w).Encode(c)
	}
}

// run records a container (pid 0: stopped).
func (d *classicDockerAPI) run(name, id string, pid int, mode string) {
	status := "running"
	if pid == 0 {
		status = "exited"
	}
	c := map[string]any{
		"Id": id, "Name": "/" + name,
		"State":      map[string]any{"Status": status, "Running": pid != 0, "Pid": pid},
		"HostConfig": map[string]any{"NetworkMode": mode},
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.byID[name], d.byID[id] = c, c
}

// rm forgets a container, as "docker rm" does.
func (d *classicDockerAPI) rm(name, id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.byID, name)
	delete(d.byID, id)
}

// Docker containers started with --net=none are attached by name, found
// through the Docker Engine API (by --docker-socket or DOCKER_HOST).
func TestDockerContainerAttach(t *testing.T) {
	e := newCNIEnv(t, 52)
	e.pool("p", "10.123.0.0/24")
	e.startAgent("node1")
	d := newClassicDockerAPI(t)
	n1, pid1 := sleeperNS(t)
	n2, pid2 := sleeperNS(t)
	_, pid3 := sleeperNS(t)
	id1, id2, id3, id4 := strings.Repeat("1a", 32), strings.Repeat("2b", 32), strings.Repeat("3c", 32), strings.Repeat("4d", 32)
	d.run("web1", id1, pid1, "none")
	d.run("web2", id2, pid2, "bridge")
	d.run("hostnet", id3, pid3, "host")
	d.run("stopped", id4, 0, "none")

	ip1 := e.attachWorkload("web1", "ipv4", "--docker-socket", d.sock)
	t.Setenv("DOCKER_HOST", "unix://"+d.sock)
	ip2 := e.attachWorkload("web2", "ipv4")

	// Named as Calico names Docker endpoints, the host veth after the container ID.
	out := e.mustClassicCtl("endpoint", "show", "--detailed", "--orchestrator=docker")
	for _, row := range [][]string{
		{"node1", "docker", id1, "node1-docker-" + id1 + "-eth1", ip1 + "/32"},
		{"node1", "docker", id2, "node1-docker-" + id2 + "-eth1", ip2 + "/32"},
	} {
		if !boxTableHasRow(out, row...) {
			t.Errorf("endpoint show lacks %v:\n%s", row, out)
		}
	}
	if l := e.hostLinks(); strings.Join(l, ",") != "cali"+id1[:11]+",cali"+id2[:11] {
		t.Errorf("host veths %v", l)
	}

	// Refusals.
	e.refusedContainer("uses the host's network (NetworkMode=host)", "add", "hostnet", "ipv4")
	e.refusedContainer(`is not running (state "exited")`, "add", "stopped", "ipv4")
	e.refusedContainer("no such Docker container", "add", "nosuch", "ipv4")
	e.refusedContainer("already has a Calico endpoint", "add", "web1", "ipv4")
	e.refusedContainer("no Docker Engine API at", "add", "web1", "ipv4", "--docker-socket", "/nonexistent/docker.sock")

	// Profiles let them talk.
	eventually(t, 10*time.Second, "no profile: isolated", unreachable(n1, ip2))
	e.mustClassicCtl("profile", "add", "web")
	for _, c := range []string{"web1", "web2"} {
		if out, err := e.classicContainer(c, "profile", "append", "web"); err != nil {
			t.Fatalf("profile append %s: %v %s", c, err, out)
		}
	}
	eventually(t, 10*time.Second, "web1 -> web2", reachable(n1, ip2))
	eventually(t, 10*time.Second, "web2 -> web1", reachable(n2, ip1))

	// Remove by name, and by ID after Docker forgot the container.
	if out, err := e.classicContainer("remove", "web1"); err != nil || !strings.Contains(out, "Removed Calico networking from Docker container web1") {
		t.Errorf("remove web1: %v %s", err, out)
	}
	d.rm("web2", id2)
	if out, err := e.classicContainer("remove", id2); err != nil || !strings.Contains(out, "released "+ip2) {
		t.Errorf("remove %s after docker rm: %v %s", id2, err, out)
	}
	e.assertClean()
	e.ipamCheckClean()
}

// boxTableHasRow reports whether a box table has a row starting with cells.
func boxTableHasRow(table string, cells ...string) bool {
	for _, l := range strings.Split(table, "\n") {
		parts := strings.Split(l, "|")
		if len(parts) < len(cells)+2 {
			continue
		}
		ok := true
		for i, c := range cells {
			ok = ok && strings.TrimSpace(parts[i+1]) == c
		}
		if ok {
			return true
		}
	}
	return false
}
