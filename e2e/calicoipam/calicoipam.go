// Package calicoipam is a stand-in for real Calico's calico-ipam (and the
// pod bookkeeping of its CNI plugin) in Kubernetes datastore mode: it
// allocates and releases pod addresses by the API calls real Calico v3.32.1
// makes, as recorded (testdata/api-calls.json, testdata/objects.json), so
// tests can run it beside our own IPAM against the same custom resources.
// It is written from the recording, not from Calico's code, and speaks
// plain HTTP+JSON to a kube-apiserver.
//
// One Assign, as recorded for a CNI ADD:
//
//	GET clusterinformations/default (refuse unless datastoreReady)
//	GET pod, GET namespace, GET pod, GET namespace (CNI plugin, then calico-ipam)
//	LIST ipreservations, GET node, LIST ippools
//	LIST blockaffinities by the node's labels (affinity-type, hostname-hash, ip-version)
//	GET ipamconfigs/default (404: POST it, GET it again)
//	per confirmed affinity: GET affinity, GET block, then allocate in it
//	or, no room: LIST ipamblocks, POST affinity pending, GET block (404),
//	  PUT affinity pending, GET ipamconfigs/default, POST block,
//	  PUT affinity confirmed (the claim), then allocate in it
//	allocate: GET handle (404: POST it with {block: {cidr: 1}}, else PUT
//	  it +1), PUT block with the allocation (compare-and-swap on
//	  resourceVersion; on 409 undo the handle increment, GET the block and
//	  try again)
//	PATCH pods/<pod>/status with Calico's annotations (when the pod exists)
//
// One Release, as recorded for a CNI DEL:
//
//	GET clusterinformations/default; GET pod, PATCH its status (podIP and
//	podIPs emptied, with its resourceVersion and uid) when it exists
//	GET handle; per block of it: GET block, PUT it with the ordinals freed
//	  (to the end of unallocated, sequenceNumber +1); GET handle, PUT it
//	  {deleted: true, block: {}}, GET handle, DELETE it with preconditions.uid
//	after a release: GET node, LIST ippools
//	GET ipamhandles/<namespace>.<pod> (the old handle form; released alike)
//
// Audit reads every block, affinity and handle, whoever wrote them, and
// names each inconsistency (an address held twice, a block not whole, a
// handle whose counts are not what the blocks hold, a leaked address), so
// interop tests can check the shared state from Calico's side.
//
// Where the double differs from Calico: Calico starts its search for a free
// block at a place derived from the node name; the double takes the pool's
// blocks in order from its first one (or from WithStartBlock). It serves
// IPv4 only, never borrows from another node's block and never releases
// block affinities. One double serialises the calls for one node, as
// calico-ipam's host-wide lock does; two doubles (two "hosts") do not.
package calicoipam

import (
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
)

// DefaultNetwork is the CNI network name of Calico's manifest: handle IDs
// are "<network>.<containerID>".
const DefaultNetwork = "k8s-pod-network"

// maxAttempts bounds every compare-and-swap retry loop.
const maxAttempts = 50

// ErrNotReady is the refusal while ClusterInformation says the datastore is
// not ready: Calico's exact text (capitalised), which scripts match.
var ErrNotReady = errors.New("Calico is currently not ready to process requests")

// Pod is one CNI call's workload: where it runs and its container ID.
type Pod struct {
	Node        string
	Namespace   string
	Name        string
	ContainerID string
}

// Double is the stand-in; safe for concurrent use.
type Double struct {
	conn    Conn
	network string
	start   netip.Prefix

	mu        sync.Mutex
	nodeLocks map[string]*sync.Mutex

	conflicts atomic.Int64
}

// Option changes a Double.
type Option func(*Double)

// WithNetwork sets the CNI network name (default DefaultNetwork).
func WithNetwork(name string) Option { return func(d *Double) { d.network = name } }

// WithStartBlock makes the search for a free block start at block (when it
// lies in the pool), as Calico's hostname-derived start would.
func WithStartBlock(block netip.Prefix) Option { return func(d *Double) { d.start = block.Masked() } }

// New is a double that talks to the apiserver conn.
func New(conn Conn, opts ...Option) *Double {
	d := &Double{conn: conn, network: DefaultNetwork, nodeLocks: map[string]*sync.Mutex{}}
	for _, o := range opts {
		o(d)
	}
	return d
}

// Conflicts is how many compare-and-swap or create conflicts the double
// met and retried.
func (d *Double) Conflicts() int64 { return d.conflicts.Load() }

// HandleID is the IPAM handle of a pod's container.
func (d *Double) HandleID(p Pod) string { return d.network + "." + p.ContainerID }

// lockNode takes the node's lock (calico-ipam's host-wide IPAM lock).
func (d *Double) lockNode(node string) func() {
	d.mu.Lock()
	l := d.nodeLocks[node]
	if l == nil {
		l = &sync.Mutex{}
		d.nodeLocks[node] = l
	}
	d.mu.Unlock()
	l.Lock()
	return l.Unlock
}
