package controller

// Leader election on a coordination.k8s.io/v1 Lease, for the Kubernetes
// datastore (elect.go elects on etcd). Own code on k8s.Client's dynamic
// client rather than client-go's tools/leaderelection: its LeaseLock needs
// the typed clientset, which links every k8s.io/api group into the binary.
// Measured on bin/calico-aio run as the CNI plugin with no agent
// (CNI_COMMAND=VERSION, GODEBUG=inittrace=1, 2 shared vCPUs, load 8-9):
//
//	                        size     package inits  heap before main      init clock p50
//	dynamic client (this)   39.8 MB  354            3.9 MB, 17.5k allocs  54-65 ms
//	+ tools/leaderelection  59.7 MB  436            5.6 MB, 27.7k allocs  82-94 ms
//
// i.e. +50% size, +82 package inits (k8s.io/api's groups), +1.7 MB and
// +10k allocations before main on every in-process CNI call (the clock
// figures move with the load; the rest does not), against about 380 lines
// of code here and in k8s/lease.go.

import (
	"context"
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/calico-aio/calico-aio/k8s"
)

// The Lease the controller's instances elect their leader with. Calico's
// kube-controllers run as one replica and elect nothing, so the name is
// ours.
const (
	LeaseNamespace = "kube-system"
	LeaseName      = "calico-aio-kube-controllers"
)

// LeaseRBACRules are the rules of a Role in LeaseNamespace that let an
// elector run as its user: create (which cannot be limited to a name),
// get and update of LeaseName. Kubernetes-mode manifests grant calico-node
// these (TestLeaseElection/LeastPrivilege runs an elector with no more).
var LeaseRBACRules = []map[string]any{
	{"apiGroups": []string{"coordination.k8s.io"}, "resources": []string{"leases"}, "verbs": []string{"create"}},
	{"apiGroups": []string{"coordination.k8s.io"}, "resources": []string{"leases"}, "resourceNames": []string{LeaseName},
		"verbs": []string{"get", "update"}},
}

// Kubernetes' own defaults for its controllers' leases.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// leaseAPI is what the elector needs of the API server (k8s.Client).
type leaseAPI interface {
	GetLease(ctx context.Context, ns, name string) (*k8s.Lease, error)
	CreateLease(ctx context.Context, l *k8s.Lease) (*k8s.Lease, error)
	UpdateLease(ctx context.Context, l *k8s.Lease) (*k8s.Lease, error)
}

// LeaseElector elects one leader among the instances that run it with the
// same Lease, each under its own Identity, as Kubernetes' components do: the
// leader renews the Lease every RetryPeriod; the others take it once it has
// not changed for its leaseDurationSeconds, as they observed it on their own
// clock (so clocks need not agree); every write is a compare-and-swap on
// the Lease's resourceVersion. A leader that cannot renew for RenewDeadline
// stops its work, before anyone else may start (RenewDeadline <
// LeaseDuration). A deleted Lease is written again by its leader at its
// next renewal; if another instance creates it first, the leader stops at
// its next renewal. Instances sharing an identity would both lead: use
// the node name.
type LeaseElector struct {
	Namespace, Name string // LeaseNamespace, LeaseName by NewLeaseElector
	Identity        string // holderIdentity: this instance's node name
	// LeaseDuration is how long others wait after the last renewal they
	// saw; RenewDeadline how long a leader keeps working without a
	// successful renewal; RetryPeriod the interval of renewals and of
	// attempts to acquire (jittered up to 20% for candidates).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Logf reports leadership changes and errors (log.Printf when nil).
	Logf func(format string, args ...any)

	api leaseAPI
	// What this instance last read or wrote, and when it first saw that
	// version on its own clock.
	seen     *k8s.Lease
	seenAt   time.Time
	renewed  time.Time // when the last successful write as leader was sent
	isLeader bool
}

// NewLeaseElector returns an elector for LeaseName in LeaseNamespace with
// Kubernetes' default timings.
func NewLeaseElector(kube *k8s.Client, identity string) *LeaseElector {
	e := &LeaseElector{Namespace: LeaseNamespace, Name: LeaseName, Identity: identity,
		LeaseDuration: DefaultLeaseDuration, RenewDeadline: DefaultRenewDeadline, RetryPeriod: DefaultRetryPeriod}
	if kube != nil { // else Run refuses, rather than a nil *Client in api
		e.api = kube
	}
	return e
}

// RunLeaseElected runs c while this instance (node name id) holds the
// controller's Lease in the Kubernetes API behind kube; it is RunElected
// for the Kubernetes datastore, with the same lifecycle.
func RunLeaseElected(ctx context.Context, kube *k8s.Client, id string, c *Controller) error {
	e := NewLeaseElector(kube, id)
	e.Logf = c.logf
	return e.Run(ctx, c.Run)
}

// check refuses timings that would let two leaders overlap.
func (e *LeaseElector) check() error {
	switch {
	case e.api == nil:
		return errors.New("lease election: no Kubernetes client")
	case e.Namespace == "" || e.Name == "":
		return errors.New("lease election: Namespace and Name must be set")
	case e.Identity == "":
		return errors.New("lease election: Identity must be set (the node name)")
	case e.RetryPeriod <= 0:
		return fmt.Errorf("lease election: RetryPeriod %v must be positive", e.RetryPeriod)
	case e.RenewDeadline <= e.RetryPeriod:
		return fmt.Errorf("lease election: RenewDeadline %v must be longer than RetryPeriod %v", e.RenewDeadline, e.RetryPeriod)
	case e.LeaseDuration <= e.RenewDeadline:
		return fmt.Errorf("lease election: LeaseDuration %v must be longer than RenewDeadline %v", e.LeaseDuration, e.RenewDeadline)
	case e.LeaseDuration%time.Second != 0:
		return fmt.Errorf("lease election: LeaseDuration %v must be whole seconds (leaseDurationSeconds)", e.LeaseDuration)
	}
	return nil
}

// Run runs run while this instance holds the Lease: it campaigns until it
// acquires the Lease, runs run with a context that ends when it loses it
// (a renewal failed for RenewDeadline, or another holder wrote the Lease),
// waits for run to return, and campaigns again. When ctx ends it stops
// run and releases the Lease so that another instance takes over at its
// next attempt, and returns nil. It returns an error only for a bad
// configuration. One Run at a time per LeaseElector.
func (e *LeaseElector) Run(ctx context.Context, run func(context.Context) error) error {
	if err := e.check(); err != nil {
		return err
	}
	for ctx.Err() == nil {
		if !e.acquire(ctx) {
			break
		}
		e.logf("kube-controllers %s: elected leader (lease %s/%s)", e.Identity, e.Namespace, e.Name)
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- run(runCtx) }()
		returned, err := e.renew(runCtx, done)
		cancel()
		if !returned {
			if runErr := <-done; err == nil {
				err = runErr
			}
		}
		if err != nil && ctx.Err() == nil {
			e.logf("kube-controllers %s: %v", e.Identity, err)
		}
		e.release()
		if returned {
			sleep(ctx, e.RetryPeriod) // run failed by itself: not in a hot loop
		}
	}
	return nil
}

// acquire tries every RetryPeriod (jittered) until this instance holds the
// Lease; false when ctx ended first.
func (e *LeaseElector) acquire(ctx context.Context) bool {
	for {
		actx, cancel := context.WithTimeout(ctx, e.RenewDeadline)
		ok, err := e.tryAcquireOrRenew(actx)
		cancel()
		if ok {
			return true
		}
		if err != nil && ctx.Err() == nil {
			e.logf("kube-controllers %s: acquiring lease: %v", e.Identity, err)
		}
		if !sleepCtx(ctx, e.RetryPeriod+rand.N(e.RetryPeriod/5+1)) {
			return false
		}
	}
}

// renew renews the Lease every RetryPeriod until ctx ends (nil), run
// returns (its result, returned true), or the lease is lost (an error
// saying why).
func (e *LeaseElector) renew(ctx context.Context, done <-chan error) (returned bool, err error) {
	t := time.NewTicker(e.RetryPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false, nil
		case err := <-done:
			if err == nil {
				err = errors.New("controller stopped")
			}
			return true, err
		case <-t.C:
		}
		deadline := e.renewed.Add(e.RenewDeadline)
		rctx, cancel := context.WithDeadline(ctx, deadline)
		ok, err := e.tryAcquireOrRenew(rctx)
		cancel()
		switch {
		case ok:
		case e.seen != nil && holder(e.seen) != e.Identity:
			e.isLeader = false
			return false, fmt.Errorf("lost lease %s/%s: now held by %q", e.Namespace, e.Name, holder(e.seen))
		case !time.Now().Before(deadline):
			e.isLeader = false
			return false, fmt.Errorf("lost lease %s/%s: not renewed for %v: %w", e.Namespace, e.Name, e.RenewDeadline, err)
		}
	}
}

// tryAcquireOrRenew makes one attempt to write this instance as the
// holder; true when it holds the Lease now.
func (e *LeaseElector) tryAcquireOrRenew(ctx context.Context) (bool, error) {
	sent := time.Now()
	if e.isLeader && e.seen != nil {
		// Renewal: write over what we wrote last, without reading first;
		// a conflict means someone else wrote it (or deleted it), so read
		// it below.
		l, err := e.api.UpdateLease(ctx, e.record(e.seen, sent))
		if err == nil {
			e.observe(l, sent)
			e.renewed = sent
			return true, nil
		}
		if !errors.Is(err, k8s.ErrLeaseConflict) && !errors.Is(err, k8s.ErrNotFound) {
			return false, err
		}
	}
	cur, err := e.api.GetLease(ctx, e.Namespace, e.Name)
	if errors.Is(err, k8s.ErrNotFound) {
		return e.write(ctx, e.api.CreateLease, e.record(nil, sent), sent)
	}
	if err != nil {
		return false, err
	}
	e.observe(cur, time.Now())
	if h := holder(cur); h != "" && h != e.Identity && e.seenAt.Add(duration(cur)).After(time.Now()) {
		return false, nil // held by another, not expired
	}
	return e.write(ctx, e.api.UpdateLease, e.record(cur, sent), sent)
}

// write creates or updates the Lease with rec; a lost race is no error.
func (e *LeaseElector) write(ctx context.Context, op func(context.Context, *k8s.Lease) (*k8s.Lease, error), rec *k8s.Lease, sent time.Time) (bool, error) {
	l, err := op(ctx, rec)
	if errors.Is(err, k8s.ErrLeaseConflict) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	e.observe(l, sent)
	e.renewed, e.isLeader = sent, true
	return true, nil
}

// observe records l; seenAt moves only when the Lease changed.
func (e *LeaseElector) observe(l *k8s.Lease, at time.Time) {
	if e.seen == nil || e.seen.Metadata.ResourceVersion != l.Metadata.ResourceVersion {
		e.seenAt = at
	}
	e.seen = l
}

// record is the Lease naming this instance the holder at now, over cur
// (nil: a new Lease); acquiring from another holder counts a transition.
func (e *LeaseElector) record(cur *k8s.Lease, now time.Time) *k8s.Lease {
	l := &k8s.Lease{Metadata: k8s.ObjectMeta{Namespace: e.Namespace, Name: e.Name}}
	if cur != nil {
		l = cur.Clone()
	}
	t := metav1.NewMicroTime(now)
	secs := int32(e.LeaseDuration / time.Second)
	transitions := int32(0)
	if l.Spec.LeaseTransitions != nil {
		transitions = *l.Spec.LeaseTransitions
	}
	if cur != nil && holder(cur) != e.Identity {
		transitions++
		l.Spec.AcquireTime = &t
	}
	if l.Spec.AcquireTime == nil {
		l.Spec.AcquireTime = &t
	}
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = &e.Identity, &secs
	l.Spec.RenewTime, l.Spec.LeaseTransitions = &t, &transitions
	return l
}

// release gives the Lease up, if this instance still holds it, so that
// the others need not wait for it to expire: no holder, a one-second
// duration (what Kubernetes' components write).
func (e *LeaseElector) release() {
	if !e.isLeader || e.seen == nil {
		return
	}
	e.isLeader = false
	// ctx may be done: release with a fresh one so the Lease goes now.
	ctx, cancel := context.WithTimeout(context.Background(), k8s.RequestTimeout)
	defer cancel()
	cur := e.seen
	for attempt := 1; ; attempt++ {
		got, err := e.api.UpdateLease(ctx, released(cur))
		if err == nil {
			e.observe(got, time.Now())
			e.logf("kube-controllers %s: released lease %s/%s", e.Identity, e.Namespace, e.Name)
			return
		}
		if errors.Is(err, k8s.ErrLeaseConflict) && attempt < 3 {
			// A renewal cut off by the end of ctx may have been applied
			// all the same: release what is there if it still names us.
			if cur, err = e.api.GetLease(ctx, e.Namespace, e.Name); err == nil {
				e.observe(cur, time.Now())
				if holder(cur) != e.Identity {
					return
				}
				continue
			}
		}
		e.logf("kube-controllers %s: releasing lease %s/%s: %v", e.Identity, e.Namespace, e.Name, err)
		return
	}
}

// released is l with no holder and a one-second duration.
func released(l *k8s.Lease) *k8s.Lease {
	r := l.Clone()
	now := metav1.NewMicroTime(time.Now())
	empty, one := "", int32(1)
	r.Spec.HolderIdentity, r.Spec.LeaseDurationSeconds = &empty, &one
	r.Spec.RenewTime, r.Spec.AcquireTime = &now, &now
	return r
}

func (e *LeaseElector) logf(format string, args ...any) {
	if e.Logf != nil {
		e.Logf(format, args...)
		return
	}
	log.Printf(format, args...)
}

func holder(l *k8s.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// duration is the Lease's leaseDurationSeconds (0 when unset: expired).
func duration(l *k8s.Lease) time.Duration {
	if l.Spec.LeaseDurationSeconds == nil {
		return 0
	}
	return time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
}

// sleepCtx waits d; false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	sleep(ctx, d)
	return ctx.Err() == nil
}
