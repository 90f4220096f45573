package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/calico-aio/calico-aio/cni"
)

// DefaultDockerSocket is where the Docker Engine API listens.
const DefaultDockerSocket = "/var/run/docker.sock"

// container is a workload named on the command line: a network namespace
// path, a PID or a Docker container.
type container struct {
	arg          string // as given
	desc         string // for messages: "process 1234", "Docker container web (3f2a...)"
	orchestrator string // cni.OrchestratorDocker or cni.OrchestratorNamespace
	workload     string // workload ID
	netns        string // network namespace path; "" when the workload is not running
}

// errNoDockerContainer says Docker does not know the container.
var errNoDockerContainer = errors.New("no such Docker container")

// resolveContainer works out which workload arg names. With running set the
// workload must be running (its namespace is needed); otherwise a workload
// that is gone still resolves (for removal), with netns "". dockerSocket is
// asked for the Docker API socket only when arg is no path or PID.
func resolveContainer(ctx context.Context, arg string, dockerSocket func() (string, error), running bool) (container, error) {
	switch {
	case arg == "":
		return container{}, fmt.Errorf("no container given")
	case strings.Contains(arg, "/"):
		return namespaceContainer(arg, running)
	case isPID(arg):
		return pidContainer(arg, running)
	}
	socket, err := dockerSocket()
	if err != nil {
		return container{arg: arg, desc: "Docker container " + arg, orchestrator: cni.OrchestratorDocker}, err
	}
	return dockerContainer(ctx, arg, socket, running)
}

func isPID(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n > 0 && strconv.Itoa(n) == s
}

// namespaceContainer is a network namespace by path; its workload ID is
// the path's base name.
func namespaceContainer(path string, running bool) (container, error) {
	c := container{arg: path, desc: "network namespace " + path, orchestrator: cni.OrchestratorNamespace}
	id, err := workloadIDFromName(filepath.Base(path))
	if err != nil {
		return c, fmt.Errorf("network namespace %s: %w", path, err)
	}
	c.workload = id
	if err := checkNetns(path); err != nil {
		if running {
			return c, err
		}
		return c, nil
	}
	c.netns = path
	return c, nil
}

// pidContainer is the network namespace of a process; its workload ID is
// "pid-<N>".
func pidContainer(pid string, running bool) (container, error) {
	c := container{arg: pid, desc: "process " + pid, orchestrator: cni.OrchestratorNamespace, workload: "pid-" + pid}
	path := "/proc/" + pid + "/ns/net"
	if _, err := os.Stat("/proc/" + pid); err != nil {
		if running {
			return c, fmt.Errorf("there is no process with PID %s", pid)
		}
		return c, nil
	}
	if err := checkNetns(path); err != nil {
		if running {
			return c, fmt.Errorf("process %s: %w", pid, err)
		}
		return c, nil
	}
	c.netns = path
	return c, nil
}

func checkNetns(path string) error {
	n, err := ns.GetNS(path)
	if err != nil {
		var notNS ns.NSPathNotNSErr
		if errors.As(err, &notNS) {
			return fmt.Errorf("%s is not a network namespace", path)
		}
		var notExist ns.NSPathNotExistErr
		if errors.As(err, &notExist) {
			return fmt.Errorf("network namespace %s does not exist", path)
		}
		return fmt.Errorf("network namespace %s: %w", path, err)
	}
	return n.Close()
}

// workloadIDFromName makes a workload ID of a namespace name: lower case,
// characters other than letters, digits and '-' replaced by '-'.
func workloadIDFromName(name string) (string, error) {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteRune('-')
		}
	}
	id := strings.Trim(b.String(), "-")
	if id == "" {
		return "", fmt.Errorf("cannot make a workload ID of the name %q", name)
	}
	if len(id) > 128 {
		return "", fmt.Errorf("the name %q is too long for a workload ID (at most 128 characters)", name)
	}
	return id, nil
}

// dockerInfo is the part of GET /containers/{id}/json we use.
type dockerInfo struct {
	ID    string `json:"Id"`
	Name  string `json:"Name"`
	State struct {
		Status  string `json:"Status"`
		Running bool   `json:"Running"`
		Pid     int    `json:"Pid"`
	} `json:"State"`
	HostConfig struct {
		NetworkMode string `json:"NetworkMode"`
	} `json:"HostConfig"`
}

// dockerContainer looks the container up in the Docker Engine API.
func dockerContainer(ctx context.Context, name, socket string, running bool) (container, error) {
	c := container{arg: name, desc: "Docker container " + name, orchestrator: cni.OrchestratorDocker}
	if _, err := os.Stat(socket); err != nil {
		return c, fmt.Errorf("%q is not a network namespace path or a PID, and there is no Docker Engine API at %s to look it up as a container (%v)", name, socket, err)
	}
	info, err := inspectDocker(ctx, socket, name)
	if err != nil {
		return c, err
	}
	c.workload = info.ID
	c.desc = fmt.Sprintf("Docker container %s (%s)", strings.TrimPrefix(info.Name, "/"), shortID(info.ID))
	mode := info.HostConfig.NetworkMode
	switch {
	case mode == "host":
		return c, fmt.Errorf("%s uses the host's network (NetworkMode=host): Calico cannot attach it; start it with --net=none", c.desc)
	case strings.HasPrefix(mode, "container:"):
		return c, fmt.Errorf("%s shares the network of %s (NetworkMode=%s): attach that container instead", c.desc, strings.TrimPrefix(mode, "container:"), mode)
	}
	if !info.State.Running || info.State.Pid <= 0 {
		if running {
			return c, fmt.Errorf("%s is not running (state %q)", c.desc, info.State.Status)
		}
		return c, nil
	}
	path := fmt.Sprintf("/proc/%d/ns/net", info.State.Pid)
	if err := checkNetns(path); err != nil {
		if running {
			return c, fmt.Errorf("%s (PID %d): %w", c.desc, info.State.Pid, err)
		}
		return c, nil
	}
	c.netns = path
	return c, nil
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// inspectDocker is GET /containers/{name}/json over the unix socket.
func inspectDocker(ctx context.Context, socket, name string) (*dockerInfo, error) {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker/containers/"+url.PathEscape(name)+"/json", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("asking Docker at %s about %q: %w", socket, name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("reading Docker's answer about %q: %w", name, err)
	}
	if resp.StatusCode == http.StatusNotFound {
		return nil, fmt.Errorf("%q: %w (and it is not a network namespace path or a PID)", name, errNoDockerContainer)
	}
	if resp.StatusCode != http.StatusOK {
		var msg struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(body, &msg)
		if msg.Message == "" {
			msg.Message = strings.TrimSpace(string(body))
		}
		return nil, fmt.Errorf("Docker at %s answered %s about %q: %s", socket, resp.Status, name, msg.Message)
	}
	var info dockerInfo
	if err := json.Unmarshal(body, &info); err != nil {
		return nil, fmt.Errorf("Docker's answer about %q: %w", name, err)
	}
	if info.ID == "" {
		return nil, fmt.Errorf("Docker's answer about %q has no container ID", name)
	}
	return &info, nil
}

// dockerSocket is --docker-socket, else DOCKER_HOST (unix:// only), else
// the default socket.
func dockerSocket(flag string, getenv func(string) string) (string, error) {
	if flag != "" {
		return strings.TrimPrefix(flag, "unix://"), nil
	}
	if h := getenv("DOCKER_HOST"); h != "" {
		if !strings.HasPrefix(h, "unix://") {
			return "", fmt.Errorf("DOCKER_HOST=%s: only unix:// sockets are supported; use --docker-socket", h)
		}
		return strings.TrimPrefix(h, "unix://"), nil
	}
	return DefaultDockerSocket, nil
}
