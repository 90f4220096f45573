// Package libnetwork is the Docker network and IPAM driver: it serves
// Docker's remote driver protocol on unix sockets under /run/docker/plugins
// and gives containers the same endpoints, profiles and IP addresses as
// the CNI plugin gives pods. "docker network create --driver calico
// --ipam-driver calico-ipam net1" makes a network whose containers get a
// Calico address, a WorkloadEndpoint and the profile "net1".
//
// Read top to bottom: server.go (config, sockets, routing), ipam.go
// (IpamDriver), network.go (NetworkDriver), endpoint.go (datastore
// objects), veth.go (the kernel side), docker.go (network names).
package libnetwork

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store"
)

// Config is how the driver runs.
type Config struct {
	Node  string        // this node's name (WorkloadEndpoint spec.node, IPAM affinity)
	Store *store.Client // the datastore
	// SocketDir is where Docker looks for plugin sockets; default
	// /run/docker/plugins.
	SocketDir string
	// Name is the network driver's name, default "calico": the socket
	// <Name>.sock implements both drivers, <Name>-ipam.sock the IPAM driver
	// alone (Calico's "--ipam-driver calico-ipam").
	Name string
	// IfPrefix names the interface inside the container (<IfPrefix>0);
	// default "cali", as Calico's plugin (CALICO_LIBNETWORK_IFPREFIX).
	IfPrefix string
	MTU      int // veth MTU; 0 leaves the kernel default
	// NoProfiles stops the driver giving endpoints the profile named after
	// their Docker network (CALICO_LIBNETWORK_CREATE_PROFILES=false).
	NoProfiles bool
	// NetworkName resolves a Docker network ID to the network's name, which
	// names its profile. Default: ask Docker's API at DockerHost.
	NetworkName func(ctx context.Context, networkID string) (string, error)
	// DockerHost is Docker's API socket, default unix:///var/run/docker.sock.
	DockerHost string
	// Do runs kernel work (netlink, sysctls); tests use it to run the work
	// inside a network namespace. Default: run it directly.
	Do func(func() error) error
}

func (c *Config) defaults() error {
	if c.Node == "" || c.Store == nil {
		return errors.New("libnetwork: Config needs Node and Store")
	}
	if c.SocketDir == "" {
		c.SocketDir = "/run/docker/plugins"
	}
	if c.Name == "" {
		c.Name = "calico"
	}
	if c.IfPrefix == "" {
		c.IfPrefix = "cali"
	}
	if c.DockerHost == "" {
		c.DockerHost = "unix:///var/run/docker.sock"
	}
	if c.NetworkName == nil {
		c.NetworkName = (&dockerNames{host: c.DockerHost}).lookup
	}
	if c.Do == nil {
		c.Do = func(f func() error) error { return f() }
	}
	return nil
}

// driver holds what every call needs; it keeps no per-network or
// per-endpoint state: the datastore and the kernel are the state.
type driver struct {
	cfg   Config
	store *store.Client
	ipam  *ipam.Allocator
	kern  kernel

	mu    sync.Mutex
	names map[string]string // network ID -> name, once resolved
}

func newDriver(cfg Config) (*driver, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	return &driver{cfg: cfg, store: cfg.Store, ipam: ipam.New(cfg.Store),
		kern: netlinkKernel{do: cfg.Do}, names: map[string]string{}}, nil
}

// Handler serves the protocol for both drivers over any listener.
func Handler(cfg Config) (http.Handler, error) {
	d, err := newDriver(cfg)
	if err != nil {
		return nil, err
	}
	return d.mux("NetworkDriver", "IpamDriver"), nil
}

// Server is the driver listening on its sockets.
type Server struct {
	srv     []*http.Server
	lns     []net.Listener
	sockets []string
}

// Listen opens <SocketDir>/<Name>.sock (network and IPAM driver) and
// <SocketDir>/<Name>-ipam.sock (IPAM driver). A stale socket file left by
// a dead process is replaced; a live one is an error.
func Listen(cfg Config) (_ *Server, err error) {
	d, err := newDriver(cfg)
	if err != nil {
		return nil, err
	}
	if err = os.MkdirAll(d.cfg.SocketDir, 0o755); err != nil {
		return nil, fmt.Errorf("libnetwork: %w", err)
	}
	s := &Server{}
	defer func() {
		if err != nil {
			s.close() // the sockets opened before the failure
		}
	}()
	for _, sock := range []struct {
		name       string
		implements []string
	}{
		{d.cfg.Name, []string{"NetworkDriver", "IpamDriver"}},
		{d.cfg.Name + "-ipam", []string{"IpamDriver"}},
	} {
		path := filepath.Join(d.cfg.SocketDir, sock.name+".sock")
		ln, lerr := listenUnix(path)
		if lerr != nil {
			return nil, lerr
		}
		s.lns = append(s.lns, ln)
		s.sockets = append(s.sockets, path)
		s.srv = append(s.srv, &http.Server{Handler: d.mux(sock.implements...), ReadHeaderTimeout: 10 * time.Second})
	}
	return s, nil
}

func listenUnix(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("libnetwork: %s exists and is not a socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("libnetwork: another driver is serving %s", path)
		}
		_ = os.Remove(path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("libnetwork: %w", err)
	}
	return ln, nil
}

// Sockets are the socket paths served.
func (s *Server) Sockets() []string { return s.sockets }

// Serve answers requests until ctx ends, then removes the sockets.
func (s *Server) Serve(ctx context.Context) error {
	errc := make(chan error, len(s.srv))
	for i, srv := range s.srv {
		go func() { errc <- srv.Serve(s.lns[i]) }()
	}
	slog.Info("libnetwork driver serving", "sockets", s.sockets)
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	s.close()
	return err
}

func (s *Server) close() {
	for _, srv := range s.srv {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = srv.Shutdown(ctx)
		cancel()
	}
	for i, ln := range s.lns {
		_ = ln.Close()
		_ = os.Remove(s.sockets[i])
	}
}

// Serve runs the driver on its sockets until ctx ends.
func Serve(ctx context.Context, cfg Config) error {
	s, err := Listen(cfg)
	if err != nil {
		return err
	}
	return s.Serve(ctx)
}

// mux routes every protocol path; implements is what Activate reports.
func (d *driver) mux(implements ...string) http.Handler {
	m := http.NewServeMux()
	m.Handle("/Plugin.Activate", call(func(context.Context, *Empty) (*ActivateResponse, error) {
		return &ActivateResponse{Implements: implements}, nil
	}))
	d.networkRoutes(m)
	d.ipamRoutes(m)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusNotFound, ErrorResponse{Err: "unknown method " + r.URL.Path})
	})
	return m
}

// maxBody bounds a request body; Docker's are a few hundred bytes.
const maxBody = 1 << 20

// requestTimeout bounds one call's datastore and kernel work.
const requestTimeout = 30 * time.Second

// call adapts a typed method to HTTP: a body that is not JSON of the
// request's shape is a 400, a method's failure a 200 with {"Err"} (the
// protocol's convention: the request was understood but not carried out).
func call[Req, Resp any](f func(context.Context, *Req) (*Resp, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			reply(w, http.StatusMethodNotAllowed, ErrorResponse{Err: r.Method + " " + r.URL.Path + ": only POST is served"})
			return
		}
		req := new(Req)
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err == nil && len(body) > 0 {
			err = json.Unmarshal(body, req)
		}
		if err != nil {
			reply(w, http.StatusBadRequest, ErrorResponse{Err: fmt.Sprintf("%s: malformed request: %v", r.URL.Path, err)})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
		defer cancel()
		resp, err := f(ctx, req)
		if err != nil {
			slog.Warn("libnetwork call failed", "method", r.URL.Path, "err", err)
			reply(w, http.StatusOK, ErrorResponse{Err: err.Error()})
			return
		}
		slog.Debug("libnetwork call", "method", r.URL.Path, "request", string(body))
		reply(w, http.StatusOK, resp)
	})
}

// contentType is what Docker's plugin client expects back.
const contentType = "application/vnd.docker.plugins.v1+json"

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// empty is the answer of calls that return nothing.
func empty() (*Empty, error) { return &Empty{}, nil }
