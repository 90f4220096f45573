package cni

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	cniversion "github.com/containernetworking/cni/pkg/version"

	"github.com/calico-aio/calico-aio/build/version"
	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/apiconfig"
)

// Versions are the CNI spec versions both plugins speak.
var Versions = cniversion.PluginSupports("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")

// errPluginNotAvailable is the CNI STATUS code for "cannot serve ADD now".
const errPluginNotAvailable = 50

// IPAMMain runs calico-ipam under skel and returns the exit code.
func IPAMMain() int {
	p := &ipamPlugin{backend{out: os.Stdout}}
	funcs := skel.CNIFuncs{Add: p.add, Del: p.del, Check: p.check, GC: p.gc, Status: p.status}
	if err := skel.PluginMainFuncsWithError(funcs, Versions, "calico-ipam "+version.Version); err != nil {
		if perr := err.Print(); perr != nil {
			slog.Error("printing CNI error", "err", perr)
		}
		return 1
	}
	return 0
}

type ipamPlugin struct{ backend }

// session is what every invocation sets up: config, node, datastore.
type session struct {
	conf *NetConf
	ds   *apiconfig.Config // the datastore chosen (datastore.go)
	args Args
	node string
	cl   *store.Client
	al   *ipam.Allocator
	// shared: cl is the agent's warm client, not this session's to close.
	shared bool
}

func (s *session) close() {
	if s.cl != nil && !s.shared {
		_ = s.cl.Close()
	}
}

func (b backend) newSession(a *skel.CmdArgs) (*session, error) {
	conf, err := LoadNetConf(a.StdinData)
	if err != nil {
		return nil, err
	}
	ds, err := conf.datastore(b.env())
	if err != nil {
		return nil, err
	}
	args, err := ParseArgs(a.Args)
	if err != nil {
		return nil, err
	}
	node, err := conf.NodeName()
	if err != nil {
		return nil, err
	}
	s := &session{conf: conf, ds: ds, args: args, node: node, cl: b.shared, shared: b.shared != nil}
	if s.cl == nil {
		conf.configureLogging()
		if s.cl, err = storeClient(ds); err != nil {
			return nil, err
		}
	}
	s.al = ipam.New(s.cl).WithHints(b.hints)
	return s, nil
}

// lockPath is the IPAM lock file: ipam_lock_file, else <run>/ipam.lock
// (Calico's default is /var/run/calico/ipam.lock); the agent runs calls
// with the same lock path, so both paths share the lock.
func (s *session) lockPath() string { return s.conf.lockPath() }

func (c *NetConf) lockPath() string {
	if c.IPAMLockFile != "" {
		return c.IPAMLockFile
	}
	return filepath.Join(c.runDir(), "ipam.lock")
}

func (p *ipamPlugin) add(a *skel.CmdArgs) error {
	s, err := p.newSession(a)
	if err != nil {
		return err
	}
	defer s.close()
	ctx := context.Background()
	lock, err := lockFile(s.lockPath())
	if err != nil {
		return types.NewError(types.ErrIOFailure, "IPAM lock", err.Error())
	}
	defer lock.unlock()
	s.replayJournal(ctx)
	attrs := map[string]string{}
	if s.args.PodName != "" {
		attrs[ipam.AttrNamespace], attrs[ipam.AttrPod] = s.args.PodNamespace, s.args.PodName
	}
	got, err := allocate(ctx, s.al, s.conf, s.args, s.node, handleID(s.conf.Name, a.ContainerID), attrs)
	if err != nil {
		return err
	}
	s.logConflicts()
	return p.print(ipamResult(got), s.conf.CNIVersion)
}

func ipamResult(got ipam.Assigned) *current.Result {
	r := &current.Result{CNIVersion: current.ImplementedSpecVersion}
	for _, p := range resultIPs(got) {
		r.IPs = append(r.IPs, &current.IPConfig{Address: ipNet(p)})
	}
	return r
}

// replayJournal releases what earlier DELs could not; failures wait for the
// next call.
func (s *session) replayJournal(ctx context.Context) {
	if n, err := ReplayJournal(ctx, s.cl, s.al, s.conf.journalDir()); err != nil {
		slog.Warn("journal replay incomplete", "err", err)
	} else if n > 0 {
		slog.Info("replayed journaled releases", "count", n)
	}
}

func (s *session) logConflicts() {
	if st := s.al.Stats(); st.Conflicts > 0 {
		slog.Info("ipam conflicts retried", "conflicts", st.Conflicts, "roundTrips", st.RoundTrips)
	}
}

func (p *ipamPlugin) del(a *skel.CmdArgs) error {
	s, err := p.newSession(a)
	if err != nil {
		return err
	}
	defer s.close()
	return s.release(context.Background(), handleID(s.conf.Name, a.ContainerID))
}

// release frees a handle's addresses; when the datastore cannot be reached
// it journals the release and succeeds.
func (s *session) release(ctx context.Context, handle string) error {
	lock, err := lockFile(s.lockPath())
	if err != nil {
		return types.NewError(types.ErrIOFailure, "IPAM lock", err.Error())
	}
	defer lock.unlock()
	if _, err := s.al.ReleaseByHandle(ctx, handle); err != nil {
		slog.Warn("datastore unavailable during DEL; journaling the release", "handle", handle, "err", err)
		if jerr := s.conf.journal(pendingDelete{Handle: handle}); jerr != nil {
			return types.NewError(types.ErrIOFailure, "could not release addresses nor journal the release", fmt.Sprintf("%v; %v", err, jerr))
		}
		return nil
	}
	s.replayJournal(ctx)
	s.logConflicts()
	return nil
}

func (p *ipamPlugin) check(a *skel.CmdArgs) error {
	s, err := p.newSession(a)
	if err != nil {
		return err
	}
	defer s.close()
	ips, err := s.al.IPsByHandle(context.Background(), handleID(s.conf.Name, a.ContainerID))
	if err != nil {
		return types.NewError(types.ErrTryAgainLater, "datastore error", err.Error())
	}
	if len(ips) == 0 {
		return types.NewError(types.ErrUnknownContainer, fmt.Sprintf("no addresses are allocated to container %s on network %s", a.ContainerID, s.conf.Name), "")
	}
	return nil
}

func (p *ipamPlugin) status(a *skel.CmdArgs) error {
	s, err := p.newSession(a)
	if err != nil {
		return err
	}
	defer s.close()
	return s.checkServable(context.Background())
}

// checkServable is STATUS: error 50 when the datastore is unreachable or no
// pool can serve this node.
func (s *session) checkServable(ctx context.Context) error {
	ok, err := s.al.CanServe(ctx, s.node, s.conf.IPAM.AssignIPv4.or(true), s.conf.IPAM.AssignIPv6.or(false), s.conf.IPAM.IPv4Pools, s.conf.IPAM.IPv6Pools)
	if err != nil {
		return types.NewError(errPluginNotAvailable, "datastore unreachable", err.Error())
	}
	if !ok {
		return types.NewError(errPluginNotAvailable, fmt.Sprintf("no IP pool can serve node %s", s.node), "")
	}
	return nil
}

func (p *ipamPlugin) gc(a *skel.CmdArgs) error {
	s, err := p.newSession(a)
	if err != nil {
		return err
	}
	defer s.close()
	_, err = s.gcAllocations(context.Background())
	return err
}

// gcAllocations releases this node's handles of this network whose
// attachment is not in the valid list; it returns the released handles.
func (s *session) gcAllocations(ctx context.Context) ([]string, error) {
	valid := map[string]bool{}
	list := s.conf.ValidAttachments
	if list == nil {
		list = s.conf.Attachments
	}
	for _, at := range list {
		valid[handleID(s.conf.Name, at.ContainerID)] = true
	}
	stale, err := s.al.HandlesOnNode(ctx, s.node, s.conf.Name+".")
	if err != nil {
		return nil, types.NewError(types.ErrTryAgainLater, "datastore error during GC", err.Error())
	}
	var released []string
	for _, h := range stale {
		if valid[h] {
			continue
		}
		if err := s.release(ctx, h); err != nil {
			return released, err
		}
		released = append(released, h)
	}
	return released, nil
}
