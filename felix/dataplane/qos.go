package dataplane

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"syscall"

	"github.com/vishvananda/netlink"

	"github.com/calico-aio/calico-aio/store/api"
)

// Ingress bandwidth (traffic to a workload) is shaped, as in Calico, by a
// token bucket filter (tbf) qdisc at the root of the workload's host-side
// veth. Ours carry the handle qosHandle, so a restarted agent tells them
// from qdiscs others put there; a tbf that differs from what is desired is
// replaced, one no longer desired deleted (docs/QOS.md). Egress bandwidth
// is a tbf of the same kind on an ifb device (qos_egress.go).

// qosHandle is the handle of our tbf qdiscs (ca11:).
var qosHandle = netlink.MakeHandle(0xca11, 0)

// qosLatencyUsec is how long a packet may wait in the bucket's queue, as
// in Calico (tc tbf latency 25ms).
const qosLatencyUsec = 25_000

// TokenBucket is a workload's shaping in one direction, in Calico's units: rate and
// peakrate in bits/s, burst in bits, minburst in bytes (0: the interface
// MTU plus the Ethernet header).
type TokenBucket struct {
	Rate, Burst, Peakrate uint64
	Minburst              uint32
}

// IngressShaping is the tbf a workload's qosControls ask for on traffic to
// it (with Calico's defaults filled in); nil when there is no limit.
func IngressShaping(q *api.QoSControls) *TokenBucket {
	if q == nil {
		return nil
	}
	q = q.WithDefaults()
	return bucket(q.IngressBandwidth, q.IngressBurst, q.IngressPeakrate, q.IngressMinburst)
}

// EgressShaping is the tbf for traffic from the workload, on its ifb
// device (qos_egress.go).
func EgressShaping(q *api.QoSControls) *TokenBucket {
	if q == nil {
		return nil
	}
	q = q.WithDefaults()
	return bucket(q.EgressBandwidth, q.EgressBurst, q.EgressPeakrate, q.EgressMinburst)
}

func bucket(rate, burst, peak, minburst int64) *TokenBucket {
	if rate <= 0 {
		return nil
	}
	return &TokenBucket{Rate: uint64(rate), Burst: uint64(max(burst, 0)), Peakrate: uint64(max(peak, 0)), Minburst: uint32(max(minburst, 0))}
}

// shaping is an interface's two buckets; nil: that direction is free.
type shaping struct{ in, out *TokenBucket }

func (a shaping) equal(b shaping) bool { return eqBucket(a.in, b.in) && eqBucket(a.out, b.out) }

func eqBucket(a, b *TokenBucket) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// qosManager keeps the tbf of each workload interface as desired.
type qosManager struct {
	desired map[string]shaping // interfaces with shaping
	known   map[string]bool    // every desired workload interface
	pending map[string]bool    // to read back and repair
	inSync  bool
	dirty   bool
	nl      *nlHandle
	// fed is, per interface, the ifb index its redirect program sends to.
	fed map[string]int
	// scanIfbs: on resync, look for ifb devices of ours no endpoint wants.
	scanIfbs bool
	// shaped holds the interfaces this process may have shaped; verify
	// those to read back whatever they hold (all at start-up and on
	// resync). A pending interface in neither holds nothing of ours: a
	// new unshaped endpoint costs no qdisc listing.
	shaped, verify map[string]bool
	started        bool
	// qdiscs are the node's qdiscs by interface index, listed once in an
	// apply that reads several interfaces back (nil: list per interface).
	qdiscs map[int][]netlink.Qdisc
}

func newQoSManager() *qosManager {
	return &qosManager{desired: map[string]shaping{}, fed: map[string]int{}, known: map[string]bool{}, pending: map[string]bool{}, nl: newNLHandle(),
		shaped: map[string]bool{}, verify: map[string]bool{}}
}

// SetDesired records the shaping of every local endpoint and marks those
// that changed (no kernel I/O). Interfaces that lost their shaping, or
// their endpoint, are pending so their tbf goes.
func (m *qosManager) SetDesired(eps []LocalEndpoint, inSync bool) {
	d, known := map[string]shaping{}, map[string]bool{}
	for _, e := range eps {
		known[e.Iface] = true
		if e.Shaping != nil || e.EgressShaping != nil {
			d[e.Iface] = shaping{e.Shaping, e.EgressShaping}
		}
	}
	for name, sh := range d {
		if old, ok := m.desired[name]; !ok || !old.equal(sh) {
			m.pending[name] = true
		}
	}
	for name := range m.desired {
		if _, ok := d[name]; !ok {
			m.pending[name] = true
		}
	}
	for name := range known {
		if !m.known[name] {
			m.pending[name] = true // a new endpoint may reuse an interface with a stale tbf
		}
	}
	m.desired, m.known, m.inSync = d, known, inSync
	m.dirty = m.dirty || len(m.pending) > 0
}

// resyncAll reads every endpoint's qdisc back on the next Apply.
func (m *qosManager) resyncAll() {
	for name := range m.known {
		m.pending[name], m.verify[name] = true, true
	}
	m.fed = map[string]int{} // re-attach the redirect programs
	m.scanIfbs, m.dirty = true, true
}

// Apply makes each pending interface's root qdisc match: our tbf with the
// desired parameters, or none of ours. A missing interface stays pending
// while it is desired (the CNI plugin may still be creating it).
func (m *qosManager) Apply() error {
	if !m.dirty {
		return nil
	}
	if err := m.nl.ready(); err != nil {
		return err
	}
	names := make([]string, 0, len(m.pending))
	for n := range m.pending {
		names = append(names, n)
	}
	sort.Strings(names)
	var errs []error
	if err := m.listQdiscs(names); err != nil {
		return err
	}
	if err := m.nl.linksFor(len(names)); err != nil {
		return err
	}
	defer func() { m.qdiscs = nil }()
	for _, name := range names {
		if !m.started {
			m.verify[name] = true // what was there before this process
		}
		sh, want := m.desired[name]
		if !want && !m.inSync {
			continue // removals wait for the datastore view
		}
		if sh.in == nil && sh.out == nil && !m.shaped[name] && !m.verify[name] {
			delete(m.pending, name) // nothing of ours there, nothing wanted
			continue
		}
		if err := m.applyIface(name, sh); err != nil {
			if !errors.Is(err, errNoLinkYet) {
				errs = append(errs, err)
			}
			m.shaped[name] = true // it may hold part of it
			continue
		}
		m.shaped[name] = sh.in != nil || sh.out != nil
		if !m.shaped[name] {
			delete(m.shaped, name)
		}
		delete(m.pending, name)
		delete(m.verify, name)
	}
	m.started = true
	if m.scanIfbs && m.inSync {
		if err := m.pruneIfbs(); err != nil {
			errs = append(errs, err)
		} else {
			m.scanIfbs = false
		}
	}
	m.dirty = len(m.pending) > 0 || m.scanIfbs
	return errors.Join(errs...)
}

// errNoLinkYet: the interface to shape does not exist (yet).
var errNoLinkYet = errors.New("no such interface yet")

// applyIface shapes one interface as sh says (both nil: no shaping). A
// missing interface stays pending (errNoLinkYet) while shaping is wanted;
// when it is not, its egress ifb goes.
func (m *qosManager) applyIface(name string, sh shaping) error {
	link, err := m.nl.link(name)
	if err != nil {
		if sh.in != nil || sh.out != nil {
			return errNoLinkYet
		}
		return m.unshapeEgress(name, nil) // the interface went, and its qdiscs with it
	}
	var wantTbf *netlink.Tbf
	if sh.in != nil {
		wantTbf = tbfFor(*sh.in, link)
	}
	if err := m.reconcile(link, wantTbf); err != nil {
		return err
	}
	if sh.out == nil {
		return m.unshapeEgress(name, link)
	}
	return m.shapeEgress(link, *sh.out)
}

// reconcile reads link's root qdisc and replaces or deletes it so that it
// is want (nil: not ours).
func (m *qosManager) reconcile(link netlink.Link, want *netlink.Tbf) error {
	name := link.Attrs().Name
	qs, ok := m.qdiscs[link.Attrs().Index]
	if !ok {
		var err error
		if qs, err = m.nl.h.QdiscList(link); err != nil {
			return fmt.Errorf("qdiscs of %s: %w", name, err)
		}
	}
	var ours *netlink.Tbf
	for _, q := range qs {
		if t, ok := q.(*netlink.Tbf); ok && t.Parent == netlink.HANDLE_ROOT && t.Handle == qosHandle {
			ours = t
		}
	}
	switch {
	case want == nil && ours != nil:
		if err := m.nl.h.QdiscDel(ours); err != nil && !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.EINVAL) {
			return fmt.Errorf("removing the tbf of %s: %w", name, err)
		}
	case want != nil && (ours == nil || !sameTbf(ours, want)):
		if err := m.nl.h.QdiscReplace(want); err != nil {
			return fmt.Errorf("tbf on %s (rate %d B/s): %w", name, want.Rate, err)
		}
	}
	return nil
}

// sameTbf compares what the kernel reports back (it does not report the
// minburst).
func sameTbf(a, b *netlink.Tbf) bool {
	return a.Rate == b.Rate && a.Buffer == b.Buffer && a.Limit == b.Limit && a.Peakrate == b.Peakrate
}

// maxTbfBuffer is the largest bucket the kernel keeps, in scheduler ticks
// (it holds the bucket as u32 nanoseconds; a tick is 64 ns).
const maxTbfBuffer = math.MaxUint32 >> 6

// tbfFor is the tbf qdisc for tb on link, as tc computes it: the bucket
// (buffer) is the time the burst takes at the rate, in scheduler ticks;
// the queue (limit) holds the burst plus qosLatencyUsec at the rate, or at
// the peakrate's minburst-sized bucket when that is smaller.
func tbfFor(tb TokenBucket, link netlink.Link) *netlink.Tbf {
	rate := max(tb.Rate/8, 1)
	burst := tb.Burst / 8
	limit := float64(rate)*qosLatencyUsec/1e6 + float64(burst)
	t := &netlink.Tbf{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: link.Attrs().Index, Handle: qosHandle, Parent: netlink.HANDLE_ROOT},
		Rate:       rate,
		Buffer:     ticks(burst, rate),
	}
	if tb.Peakrate != 0 {
		t.Peakrate = tb.Peakrate / 8
		t.Minburst = max(tb.Minburst, uint32(link.Attrs().MTU)+14)
		limit = min(limit, float64(t.Peakrate)*qosLatencyUsec/1e6+float64(t.Minburst))
	}
	t.Limit = uint32(min(limit, math.MaxUint32))
	return t
}

// ticks is the time size bytes take at rate bytes/s, in scheduler ticks.
func ticks(size, rate uint64) uint32 {
	usec := float64(size) * 1e6 / float64(rate)
	return uint32(min(usec*netlink.TickInUsec(), maxTbfBuffer))
}

// listQdiscs lists the node's qdiscs once when more than one of the
// interfaces names is read back in full (start-up, resync): each listing
// is of the whole node.
func (m *qosManager) listQdiscs(names []string) error {
	n := 0
	for _, name := range names {
		if m.verify[name] || !m.started {
			n++
		}
	}
	if n < 2 {
		return nil
	}
	all, err := m.nl.h.QdiscList(nil)
	if err != nil {
		return fmt.Errorf("listing qdiscs: %w", err)
	}
	m.qdiscs = map[int][]netlink.Qdisc{}
	for _, q := range all {
		m.qdiscs[q.Attrs().LinkIndex] = append(m.qdiscs[q.Attrs().LinkIndex], q)
	}
	return nil
}
