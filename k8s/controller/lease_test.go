package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/calico-aio/calico-aio/e2e/kubeapi"
	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// leaseWait bounds every wait of these tests: far longer than any handover
// they provoke, far shorter than the hour-long leases that make a handover
// possible only by the path under test.
const leaseWait = 60 * time.Second

// timeline records when each contender's work starts and stops, in order,
// and whether two ever ran at once.
type timeline struct {
	mu      sync.Mutex
	active  map[string]bool
	events  []string // "+id" started, "-id" stopped
	overlap []string
}

// work is a contender's controller: it runs until its context ends.
func (tl *timeline) work(id string) func(context.Context) error {
	return func(ctx context.Context) error {
		tl.mu.Lock()
		for other := range tl.active {
			tl.overlap = append(tl.overlap, other+" and "+id)
		}
		tl.active[id] = true
		tl.events = append(tl.events, "+"+id)
		tl.mu.Unlock()
		<-ctx.Done()
		tl.mu.Lock()
		delete(tl.active, id)
		tl.events = append(tl.events, "-"+id)
		tl.mu.Unlock()
		return nil
	}
}

// leader is the one contender running, "" when none is.
func (tl *timeline) leader() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for id := range tl.active {
		return id
	}
	return ""
}

func (tl *timeline) history() []string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return slices.Clone(tl.events)
}

// blockable is the real client, whose Lease updates hang until their
// context ends while blocked is set (a leader cut off from the API), and
// whose next update's reply is lost (the update applied, then onLost
// called) once loseReply is set.
type blockable struct {
	*k8s.Client
	blocked, loseReply atomic.Bool
	onLost             func()
}

func (b *blockable) UpdateLease(ctx context.Context, l *k8s.Lease) (*k8s.Lease, error) {
	if b.blocked.Load() {
		<-ctx.Done()
		return nil, fmt.Errorf("update blocked by the test: %w", ctx.Err())
	}
	got, err := b.Client.UpdateLease(ctx, l)
	if err == nil && b.loseReply.CompareAndSwap(true, false) {
		b.onLost()
		return nil, errors.New("reply lost by the test")
	}
	return got, err
}

type contender struct {
	api    *blockable
	cancel context.CancelFunc
	done   chan error // Run's result
}

// election is one Lease contended for by several electors on a real
// kube-apiserver.
type election struct {
	t          *testing.T
	kapi       *kubeapi.Server
	kubeconfig string // the contenders'
	name       string
	tl         *timeline
	cands      map[string]*contender
}

func newElection(t *testing.T, kapi *kubeapi.Server, name string) *election {
	return &election{t: t, kapi: kapi, kubeconfig: kapi.KubeconfigPath, name: name, tl: &timeline{active: map[string]bool{}}, cands: map[string]*contender{}}
}

// start runs an elector for id with the given timings until the test ends.
func (el *election) start(id string, duration, deadline, retry time.Duration) {
	kc, err := k8s.NewClient(el.kubeconfig)
	if err != nil {
		el.t.Fatal(err)
	}
	c := &contender{api: &blockable{Client: kc}, done: make(chan error, 1)}
	e := &LeaseElector{Namespace: LeaseNamespace, Name: el.name, Identity: id,
		LeaseDuration: duration, RenewDeadline: deadline, RetryPeriod: retry, Logf: el.t.Logf, api: c.api}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() { c.done <- e.Run(ctx, el.tl.work(id)) }()
	el.t.Cleanup(func() {
		c.api.blocked.Store(false)
		cancel()
		<-c.done
	})
	el.cands[id] = c
}

// lease reads the Lease straight from the API server.
func (el *election) lease() k8s.Lease {
	el.t.Helper()
	code, body := el.kapi.Do(el.t, http.MethodGet, el.path(), nil)
	if code != http.StatusOK {
		el.t.Fatalf("GET lease %s: %d %s", el.name, code, body)
	}
	var l k8s.Lease
	if err := json.Unmarshal(body, &l); err != nil {
		el.t.Fatal(err)
	}
	return l
}

func (el *election) path() string {
	return "/apis/coordination.k8s.io/v1/namespaces/" + LeaseNamespace + "/leases/" + el.name
}

// waitLeader waits until one contender other than not runs, and returns it.
func (el *election) waitLeader(not string) string {
	el.t.Helper()
	var id string
	waitFor(el.t, "a leader other than "+not, func() bool {
		id = el.tl.leader()
		return id != "" && id != not
	})
	return id
}

// check fails the test if two contenders ever ran at once, or the Lease
// does not name who runs now with the given number of transitions.
func (el *election) check(holder string, transitions int32) {
	el.t.Helper()
	if el.tl.overlap != nil {
		el.t.Fatalf("two leaders at once: %v (history %v)", el.tl.overlap, el.tl.history())
	}
	l := el.lease()
	if got := holderOf(l); got != holder || l.Spec.LeaseTransitions == nil || *l.Spec.LeaseTransitions != transitions {
		el.t.Fatalf("lease holder %q, transitions %v; want %q, %d", got, l.Spec.LeaseTransitions, holder, transitions)
	}
	if l.Spec.AcquireTime == nil || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		el.t.Fatalf("lease %s lacks acquireTime, renewTime or leaseDurationSeconds: %+v", el.name, l.Spec)
	}
}

func holderOf(l k8s.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(leaseWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", leaseWait, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLeaseElection runs contenders for a coordination.k8s.io Lease on a
// real kube-apiserver.
func TestLeaseElection(t *testing.T) {
	kapi := kubeapi.Start(t, storetest.StartEtcd(t).Endpoints()[0])

	// One leader among three; when its context ends it stops its work and
	// releases the Lease, and another takes over. The hour-long lease
	// means nobody could take it over otherwise within the test.
	t.Run("OneLeaderAndHandoverOnCancel", func(t *testing.T) {
		el := newElection(t, kapi, "handover")
		for _, id := range []string{"node-a", "node-b", "node-c"} {
			el.start(id, time.Hour, 30*time.Second, 100*time.Millisecond)
		}
		first := el.waitLeader("")
		time.Sleep(time.Second) // ten attempts of each candidate
		el.check(first, 0)
		if h := el.tl.history(); len(h) != 1 {
			t.Fatalf("more than one leader elected: %v", h)
		}
		c := el.cands[first]
		c.cancel()
		if err := <-c.done; err != nil {
			t.Fatalf("Run of the cancelled leader: %v", err)
		}
		c.done <- nil // for the cleanup
		second := el.waitLeader(first)
		el.check(second, 1)
		if h := el.tl.history(); !slices.Equal(h, []string{"+" + first, "-" + first, "+" + second}) {
			t.Fatalf("history %v", h)
		}
	})

	// A leader whose renewals hang stops its work after RenewDeadline;
	// the others take over once the Lease has not changed for its
	// duration, never while the old leader still works.
	t.Run("LeaderThatCannotRenewStops", func(t *testing.T) {
		el := newElection(t, kapi, "blocked")
		for _, id := range []string{"node-a", "node-b", "node-c"} {
			el.start(id, 4*time.Second, 2*time.Second, 200*time.Millisecond)
		}
		first := el.waitLeader("")
		acquired := el.lease().Spec.AcquireTime
		el.cands[first].api.blocked.Store(true)
		second := el.waitLeader(first)
		el.check(second, 1)
		if h := el.tl.history(); !slices.Equal(h, []string{"+" + first, "-" + first, "+" + second}) {
			t.Fatalf("history %v", h)
		}
		if now := el.lease().Spec.AcquireTime; !acquired.Before(now) {
			t.Fatalf("acquireTime %v not after the first leader's %v", now, acquired)
		}
		select {
		case err := <-el.cands[first].done:
			t.Fatalf("the cut-off leader's Run returned (%v); it should campaign again", err)
		default:
		}
	})

	// The permissions the elector needs (LeaseRBACRules) are enough: as
	// a user with only those it creates, renews and releases the Lease.
	t.Run("LeastPrivilege", func(t *testing.T) {
		el := newElection(t, kapi, LeaseName)
		el.kubeconfig = kapi.KubeconfigFor(t, "lease-tester")
		grant(t, kapi, "lease-tester")
		el.start("node-a", 3*time.Second, 2*time.Second, 100*time.Millisecond)
		el.waitLeader("")
		time.Sleep(500 * time.Millisecond) // renewals
		el.check("node-a", 0)
		c := el.cands["node-a"]
		c.cancel()
		if err := <-c.done; err != nil {
			t.Fatal(err)
		}
		c.done <- nil // for the cleanup
		if l := el.lease(); holderOf(l) != "" {
			t.Fatalf("lease still held by %q after release", holderOf(l))
		}
		if h := el.tl.history(); !slices.Equal(h, []string{"+node-a", "-node-a"}) {
			t.Fatalf("history %v", h)
		}
	})

	// A renewal applied whose reply was lost (as when ctx ends mid-call)
	// leaves the leader with an old resourceVersion: it still releases.
	t.Run("ReleaseAfterALostReply", func(t *testing.T) {
		el := newElection(t, kapi, "lost-reply")
		el.start("node-a", time.Hour, 30*time.Second, 100*time.Millisecond)
		el.waitLeader("")
		c := el.cands["node-a"]
		c.api.onLost = c.cancel // the reply is lost as ctx ends
		c.api.loseReply.Store(true)
		if err := <-c.done; err != nil {
			t.Fatal(err)
		}
		c.done <- nil // for the cleanup
		if l := el.lease(); holderOf(l) != "" {
			t.Fatalf("lease still held by %q after release", holderOf(l))
		}
	})

	// A leader whose Lease is deleted writes it again at its next renewal
	// and keeps working (its RenewDeadline is far away).
	t.Run("DeletedLeaseIsRecreated", func(t *testing.T) {
		el := newElection(t, kapi, "deleted")
		el.start("node-a", time.Hour, 50*time.Second, 100*time.Millisecond)
		el.waitLeader("")
		if code, body := kapi.Do(t, http.MethodDelete, el.path(), nil); code != http.StatusOK {
			t.Fatalf("DELETE lease: %d %s", code, body)
		}
		waitFor(t, "the lease written again", func() bool {
			code, _ := kapi.Do(t, http.MethodGet, el.path(), nil)
			return code == http.StatusOK
		})
		el.check("node-a", 0)
		if h := el.tl.history(); !slices.Equal(h, []string{"+node-a"}) {
			t.Fatalf("history %v; want the leader's work uninterrupted", h)
		}
	})

	// Another holder writing the Lease is noticed at the leader's next
	// renewal (long before its RenewDeadline); once that holder's lease
	// expires, a contender takes it back.
	t.Run("StolenLeaseIsNoticed", func(t *testing.T) {
		el := newElection(t, kapi, "stolen")
		for _, id := range []string{"node-a", "node-b", "node-c"} {
			el.start(id, 5*time.Minute, 4*time.Minute, 100*time.Millisecond)
		}
		first := el.waitLeader("")
		el.steal("intruder", 2)
		waitFor(t, "the leader to stop", func() bool { return el.tl.leader() == "" })
		second := el.waitLeader("")
		el.check(second, 1)
		if h := el.tl.history(); !slices.Equal(h, []string{"+" + first, "-" + first, "+" + second}) {
			t.Fatalf("history %v", h)
		}
	})
}

// steal writes the Lease as another holder's for secs seconds, reading it
// again when a renewal got in between.
func (el *election) steal(holder string, secs int32) {
	el.t.Helper()
	for {
		l := el.lease()
		now := metav1.NewMicroTime(time.Now())
		l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = &holder, &secs
		l.Spec.RenewTime, l.Spec.AcquireTime = &now, &now
		code, body := el.kapi.Do(el.t, http.MethodPut, el.path(), l)
		if code == http.StatusOK {
			return
		}
		if code != http.StatusConflict {
			el.t.Fatalf("PUT lease as %s: %d %s", holder, code, body)
		}
	}
}

// TestLeaseElectorRefusesBadTimings: timings that would let two leaders
// overlap are refused, naming the setting.
func TestLeaseElectorRefusesBadTimings(t *testing.T) {
	for _, tc := range []struct {
		change func(e *LeaseElector)
		want   string
	}{
		{func(e *LeaseElector) { e.Identity = "" }, "Identity"},
		{func(e *LeaseElector) { e.RenewDeadline = e.LeaseDuration }, "LeaseDuration"},
		{func(e *LeaseElector) { e.RetryPeriod = e.RenewDeadline }, "RenewDeadline"},
		{func(e *LeaseElector) { e.RetryPeriod = 0 }, "RetryPeriod"},
		{func(e *LeaseElector) { e.LeaseDuration = 15500 * time.Millisecond }, "whole seconds"},
		{func(e *LeaseElector) { e.api = nil }, "no Kubernetes client"},
	} {
		e := NewLeaseElector(nil, "node-a")
		e.api = &blockable{} // never called
		tc.change(e)
		err := e.Run(context.Background(), func(context.Context) error { t.Fatal("ran"); return nil })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want one naming %s", err, tc.want)
		}
	}
}

// TestLeaseElectorKeepsWhatItDoesNotModel: an elector writing a Lease that
// someone else made keeps the fields it does not model (here the owner
// reference and a label), counts taking it from no holder as a transition,
// and on release leaves no holder and a one-second duration.
func TestLeaseElectorKeepsWhatItDoesNotModel(t *testing.T) {
	kapi := kubeapi.Start(t, storetest.StartEtcd(t).Endpoints()[0])
	el := newElection(t, kapi, "premade")
	owner := map[string]any{"apiVersion": "v1", "kind": "Namespace", "name": "kube-system", "uid": "0a5e1d2c-5c3b-4d5e-9f00-000000000001"}
	lease := map[string]any{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
		"metadata": map[string]any{"name": el.name, "labels": map[string]string{"team": "net"}, "ownerReferences": []any{owner}},
		"spec":     map[string]any{"leaseTransitions": 3}}
	if code, body := kapi.Do(t, http.MethodPost, "/apis/coordination.k8s.io/v1/namespaces/"+LeaseNamespace+"/leases", lease); code != http.StatusCreated {
		t.Fatalf("creating the lease: %d %s", code, body)
	}
	el.start("node-a", time.Hour, 30*time.Second, 100*time.Millisecond)
	el.waitLeader("")
	el.check("node-a", 4)
	c := el.cands["node-a"]
	c.cancel()
	if err := <-c.done; err != nil {
		t.Fatal(err)
	}
	c.done <- nil // for the cleanup
	var got struct {
		Metadata struct {
			Labels          map[string]string
			OwnerReferences []map[string]any
		}
		Spec k8s.LeaseSpec
	}
	_, body := kapi.Do(t, http.MethodGet, el.path(), nil)
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Metadata.Labels["team"] != "net" || len(got.Metadata.OwnerReferences) != 1 || got.Metadata.OwnerReferences[0]["uid"] != owner["uid"] {
		t.Fatalf("fields the elector does not model were lost: %s", body)
	}
	if s := got.Spec; s.HolderIdentity == nil || *s.HolderIdentity != "" || *s.LeaseDurationSeconds != 1 || *s.LeaseTransitions != 4 {
		t.Fatalf("released lease %s; want no holder, 1 s, 4 transitions", body)
	}
}

// TestRunLeaseElected runs the controller itself under the default Lease
// on two nodes: only the leader's controller works, and when its context
// ends the other node's controller takes over (it writes the profile of
// a namespace created after the handover).
func TestRunLeaseElected(t *testing.T) {
	etcd := storetest.StartEtcd(t)
	kapi := kubeapi.Start(t, etcd.Endpoints()[0])
	cl := etcd.Client(t)
	el := newElection(t, kapi, LeaseName)
	for _, id := range []string{"node-a", "node-b"} {
		c, err := New(cl, kapi.KubeconfigPath)
		if err != nil {
			t.Fatal(err)
		}
		c.Resync, c.Logf = time.Hour, t.Logf
		kc, err := k8s.NewClient(kapi.KubeconfigPath)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cand := &contender{cancel: cancel, done: make(chan error, 1)}
		go func() { cand.done <- RunLeaseElected(ctx, kc, id, c) }()
		t.Cleanup(func() { cancel(); <-cand.done })
		el.cands[id] = cand
	}
	holderIs := func(not string) func() bool {
		return func() bool {
			code, body := kapi.Do(t, http.MethodGet, el.path(), nil)
			var l k8s.Lease
			return code == http.StatusOK && json.Unmarshal(body, &l) == nil && holderOf(l) != "" && holderOf(l) != not
		}
	}
	profile := func(name string) func() bool {
		return func() bool {
			_, err := cl.GetResource(context.Background(), profileKind, "", name)
			return err == nil
		}
	}
	waitFor(t, "a leader", holderIs(""))
	first := holderOf(el.lease())
	waitFor(t, "the leader's controller to write kns.default", profile("kns.default"))

	c := el.cands[first]
	c.cancel()
	if err := <-c.done; err != nil {
		t.Fatalf("RunLeaseElected of the cancelled leader: %v", err)
	}
	c.done <- nil // for the cleanup
	waitFor(t, "the other node to take over", holderIs(first))
	if code, body := kapi.Do(t, http.MethodPost, "/api/v1/namespaces", map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": "shop"}}); code != http.StatusCreated {
		t.Fatalf("creating namespace shop: %d %s", code, body)
	}
	waitFor(t, "the new leader's controller to write kns.shop", profile("kns.shop"))
}

// grant gives user, in LeaseNamespace, only the rules of LeaseRBACRules.
func grant(t *testing.T, kapi *kubeapi.Server, user string) {
	t.Helper()
	const rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/" + LeaseNamespace
	role := map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
		"metadata": map[string]any{"name": "lease-election"}, "rules": LeaseRBACRules}
	binding := map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
		"metadata": map[string]any{"name": "lease-election"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "lease-election"},
		"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}}}
	for path, o := range map[string]any{rbac + "/roles": role, rbac + "/rolebindings": binding} {
		if code, body := kapi.Do(t, http.MethodPost, path, o); code != http.StatusCreated {
			t.Fatalf("POST %s: %d %s", path, code, body)
		}
	}
}
