// Package cniserver owns the CNI socket: it answers the CNI calls the
// calico and calico-ipam binaries forward to <run-dir>/cni.sock
// (cni/fastpath) with the agent's warm datastore client.
package cniserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/calico-aio/calico-aio/cni"
	"github.com/calico-aio/calico-aio/cni/fastpath"
)

// maxCNIRequest bounds one forwarded CNI call (environment + netconf).
const maxCNIRequest = 16 << 20

// cniServer answers CNI calls forwarded by the calico / calico-ipam
// binaries (cni/fastpath) on <run-dir>/cni.sock, root only, with the
// agent's datastore client.
type cniServer struct {
	agent *cni.Agent
	ln    *net.UnixListener
	path  string
}

// Serve starts the CNI socket in runDir, answering with ag, and returns
// its stop function. A socket that cannot be served is logged, not fatal:
// the plugins then run in-process.
func Serve(ctx context.Context, runDir string, ag *cni.Agent) (stop func()) {
	path := filepath.Join(runDir, fastpath.SocketName)
	s, err := listenCNI(path, ag)
	if err != nil {
		slog.Warn("not serving CNI calls; plugins run in-process", "socket", path, "err", err)
		return func() {}
	}
	go s.run(ctx)
	slog.Info("serving CNI calls", "socket", path)
	return s.close
}

func listenCNI(path string, ag *cni.Agent) (*cniServer, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("run dir: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing stale %s: %w", path, err)
	}
	// Created 0600 from the start: no window in which others may connect.
	old := syscall.Umask(0o177)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(true)
	return &cniServer{agent: ag, ln: ln, path: path}, nil
}

func (s *cniServer) close() { _ = s.ln.Close() }

func (s *cniServer) run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		s.close()
	}()
	for {
		conn, err := s.ln.AcceptUnix()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				slog.Error("CNI socket accept failed; plugins run in-process", "err", err)
			}
			return
		}
		go s.handle(conn)
	}
}

// handle serves one call. A connection closed without a reply (peer not
// root, unreadable request) makes the client run the call in-process.
func (s *cniServer) handle(conn *net.UnixConn) {
	defer conn.Close()
	uid, err := peerUID(conn)
	if err != nil || uid != 0 {
		slog.Warn("CNI socket: refusing a peer that is not root", "uid", uid, "err", err)
		return
	}
	data, err := io.ReadAll(io.LimitReader(conn, maxCNIRequest))
	if err != nil {
		return
	}
	var req fastpath.Request
	if err := json.Unmarshal(data, &req); err != nil {
		slog.Warn("CNI socket: unreadable request", "err", err)
		return
	}
	r := s.agent.Serve(req.Plugin, req.Env, req.Stdin)
	rep := fastpath.Reply{Mine: r.NotMine == "", Reason: r.NotMine, Stdout: r.Stdout, Exit: r.Exit}
	if rep.Mine {
		slog.Info("CNI call served", "plugin", req.Plugin, "command", envValue(req.Env, "CNI_COMMAND"),
			"container", envValue(req.Env, "CNI_CONTAINERID"), "exit", r.Exit)
	} else {
		slog.Info("CNI call left to the in-process plugin", "plugin", req.Plugin, "reason", r.NotMine)
	}
	out, _ := json.Marshal(rep)
	if _, err := conn.Write(out); err != nil {
		slog.Warn("CNI socket: writing reply", "err", err)
	}
}

// peerUID is the connecting process's uid (SO_PEERCRED).
func peerUID(conn *net.UnixConn) (int, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return -1, err
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return -1, err
	}
	if cerr != nil {
		return -1, cerr
	}
	return int(cred.Uid), nil
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}
