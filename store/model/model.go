// Package model is the datastore contract (docs/DATASTORE.md, DESIGN.md
// section 4), in a package of its own so that both the backends and store,
// which builds on them, can import it; store re-exports every name.
package model

import "context"

// The datastore contract (docs/DATASTORE.md, DESIGN.md section 4): everything
// above store/ talks to a Backend and never knows whether etcd or the
// Kubernetes API is behind it. The contract speaks Calico's model: objects
// named by kind, namespace and name; values in Calico's model JSON (the
// projectcalico.org/v3 resource JSON without resourceVersion, and the IPAM
// values in the shape Calico's etcd backend stores); revisions as opaque
// strings. Backend-specific forms (etcd keys, int64 mod revisions, Txn,
// custom resources) stay inside the backend.

// Model kinds that are not projectcalico.org/v3 resources. Resource kinds use
// their API kind name (api.KindInfo.Kind: "IPPool", "WorkloadEndpoint", ...).
const (
	KindIPAMBlock     = "IPAMBlock"     // Name: the block CIDR ("10.65.0.0/26")
	KindBlockAffinity = "BlockAffinity" // Node: the host; Name: the block CIDR
	KindIPAMHandle    = "IPAMHandle"    // Name: the handle ID
	KindIPAMConfig    = "IPAMConfig"    // Name: "default"
)

// Key names one object of Calico's model.
type Key struct {
	Kind      string
	Namespace string // namespaced resource kinds only
	Name      string
	Node      string // BlockAffinity only: the host the block is affine to
}

// Revision identifies one stored version of an object, or a point in the
// datastore's history for a list. It is opaque: compare for equality only.
// The empty Revision means "not stored" (a create) or "any" (a delete without
// precondition).
type Revision string

// Object is one stored object: its key, model JSON and revision.
type Object struct {
	Key      Key
	Value    []byte
	Revision Revision
}

// ListOptions selects what List and Watch cover: every object of Kind, or only
// those in Namespace (namespaced kinds), or only Node's affinities
// (BlockAffinity), or only blocks or Node's affinities of one IP family
// (IPAMBlock, BlockAffinity with Node; Family 4 or 6, 0 for both).
type ListOptions struct {
	Kind      string
	Namespace string
	Node      string
	Family    int
}

// Read is one part of a ReadMany: the object Key names, or (List set) what
// the ListOptions select.
type Read struct {
	Key  Key
	List *ListOptions
}

// Op is what a Write does.
type Op uint8

// Write operations.
const (
	OpPut    Op = iota + 1 // create (Revision "") or compare-and-swap update
	OpDelete               // delete if the stored revision is Revision
)

// Write is one object's part of a Commit.
type Write struct {
	Op       Op
	Key      Key
	Value    []byte   // OpPut only
	Revision Revision // the revision read; "" for a create
}

// Backend is a datastore holding Calico's model. Every method honours ctx
// and the backend's own request timeout. Errors match ErrNotFound,
// ErrAlreadyExists, ErrConflict, ErrRevisionGone and ErrInvalidRevision
// (errors.Is); anything else is the datastore being unreachable or
// refusing.
type Backend interface {
	// Get reads one object.
	Get(ctx context.Context, k Key) (Object, error)
	// ReadMany makes several reads at one point, in one request where the
	// backend can (etcd: one transaction), and returns one result per read:
	// the object a Key read names (none when it does not exist) or what a
	// List read selects. IPAM's hot path reads its pools, config, node,
	// affinities and handle with it in one round trip.
	ReadMany(ctx context.Context, reads []Read) ([][]Object, error)
	// List reads every object opts selects, and the revision the list was
	// taken at (a Watch from it misses nothing).
	List(ctx context.Context, opts ListOptions) ([]Object, Revision, error)
	// Create stores a new object; ErrAlreadyExists when it exists.
	Create(ctx context.Context, k Key, value []byte) (Revision, error)
	// Update replaces an object if its stored revision is rev; ErrConflict
	// otherwise, ErrNotFound when it is gone.
	Update(ctx context.Context, k Key, value []byte, rev Revision) (Revision, error)
	// Delete removes an object if its stored revision is rev (any revision
	// when rev is empty); ErrNotFound when it is already gone.
	Delete(ctx context.Context, k Key, rev Revision) error
	// Watch lists what opts selects, then follows every change until ctx
	// ends, calling h for each event (puts for the initial state, then
	// EventSynced, then changes). When the backend loses its place (history
	// compacted, connection lost, server restarted) it resumes from the last
	// revision seen, and only if that revision is gone does it re-list and
	// deliver the difference (puts and deletes) followed by EventSynced.
	Watch(ctx context.Context, opts ListOptions, h func(Event)) error
	// Commit applies writes of IPAM objects (blocks, handles, affinities) as
	// one step of Calico's IPAM protocol (and calicoctl's IP pool split) and
	// returns the revision each applied write left, in order (a put's new
	// revision, "" for a delete; one per write applied); a lost revision
	// precondition (a create of an object that exists, an update or delete
	// of one changed or gone) is a *ConflictError naming the write that
	// lost. The etcd backend commits them in one transaction (all or
	// nothing: none or len(writes) revisions); the
	// Kubernetes backend applies them one object at a time in the order
	// given, which callers choose as Calico's (handle before block on
	// assign, block before handle on release), stops at the first failure,
	// and undoes nothing: the caller undoes what Calico's protocol undoes
	// (a handle incremented for a block write that lost is decremented).
	// Atomic says which kind of backend this is.
	Commit(ctx context.Context, writes []Write) (written []Revision, err error)
	// Atomic reports whether Commit is all-or-nothing.
	Atomic() bool
	// Close releases the backend's connections.
	Close() error
}
