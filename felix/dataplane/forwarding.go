package dataplane

import (
	"errors"
	"fmt"
	"log/slog"
)

// FelixConfiguration spec.ipForwarding values, as in Calico. The empty
// string means the default, Enabled.
const (
	IPForwardingEnabled  = "Enabled"
	IPForwardingDisabled = "Disabled"
)

// Forwarding is the host-wide IP forwarding the node needs: pods on other
// nodes are reached through this host, so it must route between its uplink
// and the workload interfaces. A fresh Linux host starts with forwarding
// off; Calico's Felix turns it on unless told not to, and so do we.
type Forwarding struct {
	// Mode is FelixConfiguration spec.ipForwarding: Enabled (or empty)
	// sets net.ipv4.ip_forward=1 (and net.ipv6.conf.all.forwarding=1 with
	// IPv6); Disabled leaves both as they are. Any other value is reported
	// once, naming the field, and the default applies.
	Mode string
	// IPv6 says the IPv6 dataplane is on.
	IPv6 bool
}

// forwardingManager keeps the host-wide forwarding sysctls. It is
// re-asserted on every resync, so a change made by someone else is
// repaired.
type forwardingManager struct {
	desired  Forwarding
	dirty    bool
	reported string // the bad mode last reported (logged once per value)
	procSys  string // "/proc/sys"
}

func newForwardingManager() *forwardingManager {
	return &forwardingManager{procSys: "/proc/sys", dirty: true}
}

// SetDesired records what is wanted (no kernel I/O).
func (m *forwardingManager) SetDesired(f Forwarding) {
	if f != m.desired {
		m.desired, m.dirty = f, true
	}
}

// resync makes the next Apply read the sysctls again.
func (m *forwardingManager) resync() { m.dirty = true }

// enabled resolves the mode, reporting an unknown one once.
func (m *forwardingManager) enabled() bool {
	switch m.desired.Mode {
	case "", IPForwardingEnabled:
		m.reported = ""
		return true
	case IPForwardingDisabled:
		m.reported = ""
		return false
	}
	if m.reported != m.desired.Mode {
		m.reported = m.desired.Mode
		slog.Error("ignoring FelixConfiguration spec.ipForwarding; using the default, Enabled",
			"err", fmt.Errorf("FelixConfiguration spec.ipForwarding: %q must be %s or %s", m.desired.Mode, IPForwardingEnabled, IPForwardingDisabled))
	}
	return true
}

// Apply writes the sysctls that differ from what is wanted.
func (m *forwardingManager) Apply() error {
	if !m.dirty {
		return nil
	}
	if !m.enabled() {
		m.dirty = false
		return nil
	}
	want := []string{"net/ipv4/ip_forward"}
	if m.desired.IPv6 {
		want = append(want, "net/ipv6/conf/all/forwarding")
	}
	var errs []error
	for _, p := range want {
		if err := setSysctl(m.procSys, p, "1"); err != nil {
			errs = append(errs, err)
		}
	}
	m.dirty = len(errs) > 0
	return errors.Join(errs...)
}
