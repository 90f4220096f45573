// Package controller keeps the Calico datastore's copies of Kubernetes
// objects up to date, as Calico's kube-controllers do: namespace and service
// account profiles ("kns.<ns>", "ksa.<ns>.<sa>"), Kubernetes NetworkPolicies
// ("knp.default.<name>") and the labels of pods' workload endpoints; and it
// publishes Services' endpoints (from EndpointSlices) for rule services
// matches under a key of our own (store.ServicePrefix). It also
// collects garbage: the endpoints and addresses of deleted pods and the
// Calico Nodes of deleted Kubernetes nodes, each only after a grace period
// and a second look at the API.
//
// It watches the API server and reconciles the affected group of objects
// within tens of milliseconds of a change, and reconciles everything every
// Resync interval as a safety net. RunElected runs it under an etcd leader
// election so that only one instance writes at a time.
//
// Files: controller.go (loop), watch.go (watches to wake-ups),
// resources.go (profiles and policies), podlabels.go, services.go (service
// endpoints), nodelabels.go (Kubernetes node labels onto Calico Nodes),
// gc.go (deleted pods),
// gcnodes.go (deleted nodes), elect.go (leader election on etcd), lease.go
// (leader election on a coordination.k8s.io Lease, Kubernetes datastore).
package controller

import (
	"context"
	"errors"
	"log"
	"sync"
	"time"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store"
)

// DefaultResync is how often Run reconciles everything when Resync is zero.
// Watches carry the changes; the resync is the safety net (and the clock
// of the garbage collection's observations), and each one lists every
// namespace, service account, policy, pod, node and endpoint slice, so it
// is not frequent.
const DefaultResync = time.Minute

// DefaultLeakGracePeriod is how long an address, endpoint or node must
// stay orphaned before it is released (Calico's leakGracePeriod).
const DefaultLeakGracePeriod = 15 * time.Minute

// Debounce is how long Run waits after a watch event before reconciling,
// so that a burst of events costs one reconciliation.
const Debounce = 20 * time.Millisecond

// DefaultPodSyncInterval is the least time between two reconciliations of
// pod labels after pod events (Controller.PodSyncInterval when 0): each
// lists every pod and endpoint, and pods churn far more than policies, so
// a stream of pod events costs at most one such pass per interval
// (policies and profiles are not held back).
const DefaultPodSyncInterval = 250 * time.Millisecond

// Controller reconciles the datastore with the Kubernetes API. Run it from
// one goroutine at a time.
type Controller struct {
	// Resync is the interval between full reconciliations (DefaultResync
	// when 0).
	Resync time.Duration
	// PodSyncInterval is the least time between pod-label passes after pod
	// events (DefaultPodSyncInterval when 0).
	PodSyncInterval time.Duration
	// LeakGracePeriod is how long a deleted pod's endpoints and addresses,
	// or a deleted node's Calico Node, must stay orphaned before they are
	// released; 0 disables that garbage collection. New sets it to
	// DefaultLeakGracePeriod.
	LeakGracePeriod time.Duration
	// Logf reports errors and changes (log.Printf when nil).
	Logf func(format string, args ...any)
	// KDD: the datastore is Kubernetes itself, where only garbage is
	// collected (kdd.go): no copies, no node labels, no watches.
	KDD bool

	store *store.Client
	ipam  *ipam.Allocator
	kube  lister
	now   func() time.Time // time.Now when nil; tests move it

	// Garbage candidates: when each was first seen orphaned.
	podGarbage, nodeGarbage candidates
}

// lister is what the controller reads from Kubernetes (k8s.Client). A
// lister that is also a watcher wakes the controller up on changes.
type lister interface {
	ListNamespaces(ctx context.Context) ([]k8s.Namespace, error)
	ListServiceAccounts(ctx context.Context) ([]k8s.ServiceAccount, error)
	ListNetworkPolicies(ctx context.Context) ([]k8s.NetworkPolicy, error)
	ListPods(ctx context.Context) ([]k8s.Pod, error)
	ListNodes(ctx context.Context) ([]k8s.Node, error)
	GetPod(ctx context.Context, ns, name string) (*k8s.Pod, error)
	GetNode(ctx context.Context, name string) (*k8s.Node, error)
	ListEndpointSlices(ctx context.Context) ([]k8s.EndpointSlice, error)
}

// New returns a controller writing to st and reading the API server named
// by kubeconfig ("" for the default loading rules). It contacts neither.
func New(st *store.Client, kubeconfig string) (*Controller, error) {
	kc, err := k8s.NewClient(kubeconfig)
	if err != nil {
		return nil, err
	}
	return newController(st, kc), nil
}

func newController(st *store.Client, kube lister) *Controller {
	return &Controller{LeakGracePeriod: DefaultLeakGracePeriod, store: st, ipam: ipam.New(st), kube: kube}
}

func (c *Controller) logf(format string, args ...any) {
	if c.Logf != nil {
		c.Logf(format, args...)
		return
	}
	log.Printf(format, args...)
}

func (c *Controller) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// group is a set of objects reconciled together.
type group uint32

const (
	groupProfiles group = 1 << iota // kns./ksa. profiles: namespaces, service accounts
	groupPolicies                   // knp.default. policies: NetworkPolicies
	groupPods                       // workload endpoint labels: pods
	groupServices                   // service endpoints: EndpointSlices (services.go)
)

// syncGroups reconciles the groups in gs.
func (c *Controller) syncGroups(ctx context.Context, gs group) error {
	var errs []error
	if gs&groupProfiles != 0 {
		errs = append(errs, c.syncProfiles(ctx))
	}
	if gs&groupPolicies != 0 {
		errs = append(errs, c.syncPolicies(ctx))
	}
	if gs&groupPods != 0 {
		errs = append(errs, c.syncPodLabels(ctx))
	}
	if gs&groupServices != 0 {
		errs = append(errs, c.syncServices(ctx))
	}
	if gs&groupNodeLabels != 0 {
		errs = append(errs, c.syncNodeLabels(ctx)) // nodelabels.go
	}
	return errors.Join(errs...)
}

// Sync makes one full reconciliation: profiles, policies, endpoint labels
// and service endpoints, then a garbage collection pass. A group whose Kubernetes list
// fails is left as it is; the others go ahead.
func (c *Controller) Sync(ctx context.Context) error {
	if c.KDD {
		return errors.Join(c.collectPods(ctx), c.collectKDDNodes(ctx))
	}
	return errors.Join(
		c.syncGroups(ctx, groupProfiles|groupPolicies|groupPods|groupServices|groupNodeLabels),
		c.collectPods(ctx),
		c.collectNodes(ctx),
	)
}

// Run reconciles everything at once and then every Resync interval, and
// the affected group within Debounce of each watch event, until ctx is
// done; a failed reconciliation is logged and retried at the next one.
// Garbage candidates start over with each Run (a new leader looks again).
// It returns nil when ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	every := c.Resync
	if every <= 0 {
		every = DefaultResync
	}
	c.podGarbage, c.nodeGarbage = candidates{}, candidates{}

	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wake := newWaker()
	if w, ok := c.kube.(watcher); ok && !c.KDD {
		c.startWatches(ctx, &wg, w, wake)
	}

	report := func(what string, err error) {
		if err != nil && ctx.Err() == nil {
			c.logf("kube-controllers: %s: %v", what, err)
		}
	}
	podEvery := c.PodSyncInterval
	if podEvery <= 0 {
		podEvery = DefaultPodSyncInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	lastPods := time.Now()
	report("sync", c.Sync(ctx))
	var debounce, podsLater <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			lastPods = time.Now()
			report("sync", c.Sync(ctx))
		case <-wake.c:
			if debounce == nil {
				debounce = time.After(Debounce)
			}
		case <-debounce:
			debounce = nil
			gs := wake.take()
			if gs&groupPods != 0 {
				if wait := podEvery - time.Since(lastPods); wait > 0 {
					gs &^= groupPods // too soon: once, when the interval is up
					if podsLater == nil {
						podsLater = time.After(wait)
					}
				} else {
					lastPods = time.Now()
				}
			}
			if gs != 0 {
				report("sync after change", c.syncGroups(ctx, gs))
			}
		case <-podsLater:
			podsLater = nil
			lastPods = time.Now()
			report("sync after pod changes", c.syncGroups(ctx, groupPods))
		}
	}
}
