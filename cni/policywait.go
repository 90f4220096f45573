package cni

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/calico-aio/calico-aio/internal/epstatus"
	"github.com/calico-aio/calico-aio/store/api"
)

// statusPoll is how often ADD looks for the endpoint's status file: a
// stat, cheap enough to keep the wait close to the agent's apply.
const statusPoll = 20 * time.Millisecond

// waitForPolicy implements policy_setup_timeout_seconds: ADD returns only
// once the agent has written the endpoint's status file (its policy is in
// the kernel: felix/status/files.go), or, as in Calico, after the timeout with
// a warning (the pod starts anyway).
func (c *NetConf) waitForPolicy(wep *api.WorkloadEndpoint) {
	if c.PolicySetupTimeoutSeconds <= 0 {
		return
	}
	file := filepath.Join(c.statusDir(), epstatus.FileName(wep))
	timeout := time.Duration(c.PolicySetupTimeoutSeconds) * time.Second
	if err := waitForFile(file, timeout); err != nil {
		slog.Warn("policy not programmed in time; unblocking pod creation", "endpoint", wep.Metadata.Name, "err", err)
	}
}

// waitForFile polls until file exists or timeout passes.
func waitForFile(file string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		_, err := os.Stat(file)
		if err == nil {
			return nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			slog.Debug("endpoint status file check failed; retrying", "file", file, "err", err)
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("timed out waiting for endpoint status file '%s': file not found", file)
		}
		time.Sleep(min(statusPoll, time.Until(deadline)))
	}
}

// Readiness gates, as Calico polls them: every 5 s for up to 30 s, each
// request bounded by the interval; a 2xx or 3xx answer is ready.
var (
	gateInterval = 5 * time.Second
	gateTimeout  = 30 * time.Second
)

// maxServedWait is the longest wait an ADD served by the agent may make:
// well inside the fast path's reply timeout (cni/fastpath), so a waiting
// call is not taken for a hung agent and run again in-process.
const maxServedWait = 45 * time.Second

// maxWait is the longest an ADD may wait for gates and policy.
func (c *NetConf) maxWait() time.Duration {
	return time.Duration(c.PolicySetupTimeoutSeconds)*time.Second + time.Duration(len(c.ReadinessGates))*gateTimeout
}

// waitForGates blocks until every readiness_gates URL answers ready, in
// order, before anything is allocated; one that never does fails the ADD.
func (c *NetConf) waitForGates() error {
	for _, url := range c.ReadinessGates {
		if err := pollGate(url); err != nil {
			return types.NewError(types.ErrTryAgainLater, "readiness gate "+url+" not ready", err.Error())
		}
	}
	return nil
}

func pollGate(url string) error {
	deadline := time.Now().Add(gateTimeout)
	for {
		err := gateReady(url)
		if err == nil {
			return nil
		}
		slog.Warn("readiness gate not ready", "url", url, "err", err)
		if time.Until(deadline) < gateInterval {
			return fmt.Errorf("not ready after %s: %w", gateTimeout, err)
		}
		time.Sleep(gateInterval)
	}
}

func gateReady(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), gateInterval)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("endpoint is not ready, response code returned:%d", resp.StatusCode)
	}
	return nil
}
