package dataplane

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"
)

// Route metrics. The kernel keys a route by prefix and metric, so a
// route whose metric changes (ipv4NormalRoutePriority written, or the CNI
// plugin's route to a new pod, written with the kernel's default) is a
// second route: the new one is added, then the old one deleted. Read back,
// a prefix with several of our routes keeps the one with the desired
// metric; the others are extras, deleted once the desired one is there.

// kernelMetric is the metric the kernel gives a route to p programmed
// with metric: IPv6 routes with 0 get 1024.
func kernelMetric(p netip.Prefix, metric int) int {
	if metric == 0 && p.Addr().Is6() {
		return 1024
	}
	return metric
}

// keepOne records kr for p in out; when out has a route for p already,
// the one with the desired metric stays and the other is an extra.
func (m *routeManager) keepOne(out map[netip.Prefix]kernelRoute, p netip.Prefix, kr kernelRoute) {
	prev, dup := out[p]
	if !dup {
		out[p] = kr
		return
	}
	want, desired := m.desired[p]
	if desired && kr.target.Metric == kernelMetric(p, want.Metric) {
		prev, kr = kr, prev
	}
	out[p] = prev
	m.extras = append(m.extras, kr)
}

// reprogram makes p's route want: in place, or, when the kernel's has
// another metric, added beside it and the old one then deleted.
func (m *routeManager) reprogram(p netip.Prefix, want RouteTarget, have kernelRoute, exists bool) error {
	if !exists || have.target.Metric == kernelMetric(p, want.Metric) {
		return m.program(p, want, exists)
	}
	if err := m.program(p, want, true); err != nil {
		return err
	}
	if err := m.nl.h.RouteDel(&have.route); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("deleting route %s (metric %d, replaced): %w", p, have.target.Metric, err)
	}
	return nil
}

// dropExtras deletes our extra routes of desired prefixes once the
// datastore view is in sync (the desired route itself is in place by now);
// others' are left alone.
func (m *routeManager) dropExtras() []error {
	var errs []error
	for _, kr := range m.extras {
		p, _ := toPrefix(kr.route.Dst)
		if _, want := m.desired[p]; !want || !m.inSync || m.sync.frozen(kr.proto, kr.target.Blackhole) || !m.ours(kr.proto, kr.target.Iface, p) {
			continue
		}
		if err := m.nl.h.RouteDel(&kr.route); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("deleting route %s (metric %d, a duplicate): %w", p, kr.target.Metric, err))
		}
	}
	m.extras = m.extras[:0]
	return errs
}
