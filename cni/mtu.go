package cni

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// defaultMTU is the veth MTU with no mtu in the netconf and no MTU file
// (the kernel's default, which Calico's plugin leaves in place).
const defaultMTU = 1500

// PodMTU is the pod interface MTU, as Calico's plugin chooses it: the
// netconf's mtu when set, else what calico-node wrote in <lib>/mtu (its
// detected pod MTU: docs/BOOTSTRAP.md), else 1500. A file that exists but
// cannot be read or holds no MTU fails the ADD, as in Calico, before
// anything is allocated.
//
// With require_mtu_file, as in Calico, a missing file fails the ADD, even
// with an mtu in the netconf: calico-node has not started on this node.
func (c *NetConf) PodMTU() (int, error) {
	file := filepath.Join(c.libDir(), "mtu")
	if c.RequireMTUFile {
		if _, err := os.Stat(file); err != nil {
			return 0, fmt.Errorf("failed to read MTU file: %w (require_mtu_file: calico-node writes it at start)", err)
		}
	}
	if c.MTU > 0 {
		return c.MTU, nil
	}
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return defaultMTU, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the MTU file calico-node writes: %w", err)
	}
	m, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || m < 68 || m > 65535 {
		return 0, fmt.Errorf("MTU file %s holds %q, not an MTU (68-65535)", file, strings.TrimSpace(string(b)))
	}
	return m, nil
}

// EffectiveMTU is PodMTU, with 1500 when the MTU file is unusable (for
// callers that log rather than fail).
func (c *NetConf) EffectiveMTU() int {
	if m, err := c.PodMTU(); err == nil {
		return m
	}
	return defaultMTU
}
