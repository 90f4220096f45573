package cni

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"

	"github.com/calico-aio/calico-aio/store/api"
)

// On Kubernetes the endpoint an ADD stores does not depend on the veth:
// the pod keeps no MAC (storedEndpoint), and the host interface's name is
// derived from the pod's, so a different one could not be stored anyway.
// Its write, the pod status patch, therefore goes out as soon as the
// addresses are known and runs while the veth is set up, instead of
// after it: one API round trip off the ADD. A failed ADD takes the patch
// back (undo), and a repeated ADD that finds the endpoint checks that the
// veth exists before it trusts it (ready in plugin.go), since an endpoint
// no longer implies a wired pod when the ADD was cut short.

// earlyWrite is an endpoint write started before the wiring; the zero
// value (etcd, or not a Kubernetes pod) started nothing.
type earlyWrite struct {
	sent *api.WorkloadEndpoint // what was sent
	wait func() (struct{}, error)
}

// startEndpointWrite starts the early write when the datastore is
// Kubernetes and the workload is a pod.
func (s *session) startEndpointWrite(ctx context.Context, id identity, kp *kubePod, addrs []netip.Addr) (earlyWrite, error) {
	if !s.kdd() || kp == nil {
		return earlyWrite{}, nil
	}
	wep, err := s.endpointFor(ctx, id, kp, addrs, "")
	if err != nil {
		return earlyWrite{}, err
	}
	sent := s.storedEndpoint(wep)
	return earlyWrite{sent: sent, wait: inBackground(func() (struct{}, error) {
		return struct{}{}, s.writeEndpoint(ctx, sent)
	})}, nil
}

// finish writes wep, or waits for the early write when it sent the same
// endpoint (else the early write is waited for and wep written after it).
func (e earlyWrite) finish(ctx context.Context, s *session, wep *api.WorkloadEndpoint) error {
	if e.wait == nil {
		return s.writeEndpoint(ctx, wep)
	}
	_, err := e.wait()
	if err != nil || sameStored(e.sent, wep) {
		return err
	}
	return s.writeEndpoint(ctx, wep)
}

// undo takes back a started early write: the endpoint (the pod's
// annotations) is cleared if it is still this container's.
func (e earlyWrite) undo(ctx context.Context, s *session, id identity) {
	if e.wait == nil {
		return
	}
	if _, err := e.wait(); err != nil {
		return // nothing was written
	}
	if err := deleteEndpoint(ctx, s.cl, id.namespace, id.endpoint, id.containerID); err != nil {
		slog.Warn("failed ADD: clearing the pod's endpoint annotations", "endpoint", id.endpoint, "err", err)
	}
}

// sameStored: a and b store the same endpoint.
func sameStored(a, b *api.WorkloadEndpoint) bool {
	return a.Spec.InterfaceName == b.Spec.InterfaceName && a.Spec.ContainerID == b.Spec.ContainerID &&
		slices.Equal(a.Spec.IPNetworks, b.Spec.IPNetworks) && a.Spec.MAC == b.Spec.MAC
}
