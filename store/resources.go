package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/calico-aio/calico-aio/store/api"
)

// Encode renders a resource as its stored JSON value: the whole object
// without resourceVersion (that is the stored revision), with every field
// it was decoded with that our types do not model (api.Marshal).
func Encode(r api.Resource) ([]byte, error) {
	meta := r.GetObjectMeta()
	rv := meta.ResourceVersion
	meta.ResourceVersion = ""
	defer func() { meta.ResourceVersion = rv }()
	return api.Marshal(r)
}

// DecodeObject parses a stored resource and sets resourceVersion from its
// revision.
func DecodeObject(o Object) (api.Resource, error) {
	r, err := api.Decode(o.Value)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Key, err)
	}
	r.GetObjectMeta().ResourceVersion = string(o.Revision)
	return r, nil
}

// ResourceKey is the model key of a kind's object; ns is ignored for
// cluster-scoped kinds.
func ResourceKey(k api.KindInfo, ns, name string) Key {
	if !k.Namespaced {
		ns = ""
	}
	return Key{Kind: k.Kind, Namespace: ns, Name: name}
}

func kindOf(r api.Resource) (api.KindInfo, error) {
	k, ok := api.LookupKind(r.GetTypeMeta().Kind)
	if !ok {
		return api.KindInfo{}, fmt.Errorf("unknown kind %q", r.GetTypeMeta().Kind)
	}
	return k, nil
}

func keyOf(r api.Resource) (api.KindInfo, Key, error) {
	k, err := kindOf(r)
	if err != nil {
		return k, Key{}, err
	}
	m := r.GetObjectMeta()
	return k, ResourceKey(k, m.Namespace, m.Name), nil
}

// Prepare applies defaults and validates a resource, including checks that
// need the datastore (overlapping IP pools). It writes nothing.
func (c *Client) Prepare(ctx context.Context, r api.Resource) error {
	r.Default()
	if err := r.Validate(); err != nil {
		return err
	}
	if pool, ok := r.(*api.IPPool); ok {
		existing, err := c.listPools(ctx)
		if err != nil {
			return err
		}
		if err := api.CheckPoolOverlap(pool, existing); err != nil {
			return err
		}
	}
	return nil
}

func (c *Client) listPools(ctx context.Context) ([]*api.IPPool, error) {
	k, _ := api.LookupKind("IPPool")
	objs, _, err := c.ListResources(ctx, k, "")
	if err != nil {
		return nil, err
	}
	pools := make([]*api.IPPool, 0, len(objs))
	for _, o := range objs {
		pools = append(pools, o.(*api.IPPool))
	}
	return pools, nil
}

// NewUID returns a random RFC 4122 version 4 UID, the form metadata.uid holds.
func NewUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// CreateResource validates and creates r; it fails with *AlreadyExistsError
// when the object exists. The returned object carries its resourceVersion.
func (c *Client) CreateResource(ctx context.Context, r api.Resource) (api.Resource, error) {
	if err := c.Prepare(ctx, r); err != nil {
		return nil, err
	}
	return c.create(ctx, r)
}

func (c *Client) create(ctx context.Context, r api.Resource) (api.Resource, error) {
	_, key, err := keyOf(r)
	if err != nil {
		return nil, err
	}
	m := r.GetObjectMeta()
	m.ResourceVersion = ""
	if m.UID == "" {
		m.UID = NewUID()
	}
	if m.CreationTimestamp == "" {
		m.CreationTimestamp = time.Now().UTC().Format(time.RFC3339)
	}
	val, err := Encode(r)
	if err != nil {
		return nil, err
	}
	rev, err := c.Create(ctx, key, val)
	if err != nil {
		return nil, err
	}
	m.ResourceVersion = string(rev)
	return r, nil
}

// UpdateResource validates and replaces an existing object. With a
// resourceVersion set the write is a compare-and-swap against it; without one
// it is made against the revision just read. uid and creationTimestamp are
// kept from the stored object, and so is every stored field our types do not
// model that r does not carry itself (api.KeepUnmodelled): a writer cannot
// lose what it does not understand.
func (c *Client) UpdateResource(ctx context.Context, r api.Resource) (api.Resource, error) {
	key, cur, err := c.prepareAndRead(ctx, r)
	if err != nil {
		return nil, err
	}
	return c.update(ctx, key, r, cur)
}

// prepareAndRead validates r and reads what is stored under its key (the
// error is *NotFoundError when nothing is).
func (c *Client) prepareAndRead(ctx context.Context, r api.Resource) (Key, Object, error) {
	if err := c.Prepare(ctx, r); err != nil {
		return Key{}, Object{}, err
	}
	_, key, err := keyOf(r)
	if err != nil {
		return Key{}, Object{}, err
	}
	cur, err := c.Get(ctx, key)
	return key, cur, err
}

func (c *Client) update(ctx context.Context, key Key, r api.Resource, cur Object) (api.Resource, error) {
	m := r.GetObjectMeta()
	rev := Revision(m.ResourceVersion)
	if rev == "" {
		rev = cur.Revision
	}
	if old, err := DecodeObject(cur); err == nil {
		om := old.GetObjectMeta()
		m.UID, m.CreationTimestamp = om.UID, om.CreationTimestamp
		api.KeepUnmodelled(r, old)
	}
	val, err := Encode(r)
	if err != nil {
		return nil, err
	}
	newRev, err := c.Update(ctx, key, val, rev)
	if err != nil {
		return nil, resourceVersionError(err)
	}
	m.ResourceVersion = string(newRev)
	return r, nil
}

// ApplyResource creates r or, when it exists, updates it.
func (c *Client) ApplyResource(ctx context.Context, r api.Resource) (api.Resource, error) {
	key, cur, err := c.prepareAndRead(ctx, r)
	if errors.Is(err, ErrNotFound) {
		out, err := c.create(ctx, r)
		if errors.Is(err, ErrAlreadyExists) {
			return nil, &ConflictError{Key: key}
		}
		return out, err
	}
	if err != nil {
		return nil, err
	}
	return c.update(ctx, key, r, cur)
}

// GetResource reads one object.
func (c *Client) GetResource(ctx context.Context, k api.KindInfo, ns, name string) (api.Resource, error) {
	o, err := c.Get(ctx, ResourceKey(k, ns, name))
	if err != nil {
		return nil, err
	}
	return DecodeObject(o)
}

// ListResources lists a kind (in namespace ns, or all namespaces when ns is
// ""), with the store revision of the read.
func (c *Client) ListResources(ctx context.Context, k api.KindInfo, ns string) ([]api.Resource, Revision, error) {
	if !k.Namespaced {
		ns = ""
	}
	objs, rev, err := c.List(ctx, ListOptions{Kind: k.Kind, Namespace: ns})
	if err != nil {
		return nil, "", err
	}
	out := make([]api.Resource, 0, len(objs))
	for _, o := range objs {
		r, err := DecodeObject(o)
		if err != nil {
			return nil, "", err
		}
		out = append(out, r)
	}
	return out, rev, nil
}

// DeleteResource deletes one object (compare-and-swap when rev is set) and
// returns what was deleted.
func (c *Client) DeleteResource(ctx context.Context, k api.KindInfo, ns, name string, rev Revision) (api.Resource, error) {
	key := ResourceKey(k, ns, name)
	cur, err := c.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	if k.Kind == "Tier" {
		if err := c.checkTierDeletable(ctx, name); err != nil {
			return nil, err
		}
	}
	if rev == "" {
		rev = cur.Revision
	}
	if err := c.Delete(ctx, key, rev); err != nil {
		return nil, resourceVersionError(err)
	}
	return DecodeObject(cur)
}

// DeleteObject deletes r at the revision its metadata.resourceVersion
// names (compare-and-swap: a newer write makes it fail), or at whatever is
// stored when it names none, and returns what was deleted.
func (c *Client) DeleteObject(ctx context.Context, r api.Resource) (api.Resource, error) {
	k, err := kindOf(r)
	if err != nil {
		return nil, err
	}
	m := r.GetObjectMeta()
	return c.DeleteResource(ctx, k, m.Namespace, m.Name, Revision(m.ResourceVersion))
}

// resourceVersionError names metadata.resourceVersion when that is what
// the backend refused.
func resourceVersionError(err error) error {
	if errors.Is(err, ErrInvalidRevision) {
		return fmt.Errorf("metadata.resourceVersion: %w", err)
	}
	return err
}
