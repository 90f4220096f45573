package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/calico-aio/calico-aio/store/api"
)

// Encode renders a resource as its stored JSON value: the whole object
// without resourceVersion (that is the etcd mod revision), with every field
// it was decoded with that our types do not model (api.Marshal).
func Encode(r api.Resource) ([]byte, error) {
	meta := r.GetObjectMeta()
	rv := meta.ResourceVersion
	meta.ResourceVersion = ""
	defer func() { meta.ResourceVersion = rv }()
	return api.Marshal(r)
}

// DecodeKV parses a stored value and sets resourceVersion from the revision.
func DecodeKV(kv KV) (api.Resource, error) {
	r, err := api.Decode(kv.Value)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", kv.Key, err)
	}
	r.GetObjectMeta().ResourceVersion = strconv.FormatInt(kv.Revision, 10)
	return r, nil
}

func kindOf(r api.Resource) (api.KindInfo, error) {
	k, ok := api.LookupKind(r.GetTypeMeta().Kind)
	if !ok {
		return api.KindInfo{}, fmt.Errorf("unknown kind %q", r.GetTypeMeta().Kind)
	}
	return k, nil
}

func keyOf(r api.Resource) (api.KindInfo, string, error) {
	k, err := kindOf(r)
	if err != nil {
		return k, "", err
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
	m.ResourceVersion = strconv.FormatInt(rev, 10)
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
func (c *Client) prepareAndRead(ctx context.Context, r api.Resource) (string, KV, error) {
	if err := c.Prepare(ctx, r); err != nil {
		return "", KV{}, err
	}
	_, key, err := keyOf(r)
	if err != nil {
		return "", KV{}, err
	}
	cur, err := c.Get(ctx, key)
	return key, cur, err
}

func (c *Client) update(ctx context.Context, key string, r api.Resource, cur KV) (api.Resource, error) {
	m := r.GetObjectMeta()
	rev, err := revisionOf(m)
	if err != nil {
		return nil, err
	}
	if rev == 0 {
		rev = cur.Revision
	}
	if old, err := DecodeKV(cur); err == nil {
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
		return nil, err
	}
	m.ResourceVersion = strconv.FormatInt(newRev, 10)
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
	kv, err := c.Get(ctx, ResourceKey(k, ns, name))
	if err != nil {
		return nil, err
	}
	return DecodeKV(kv)
}

// ListResources lists a kind (in namespace ns, or all namespaces when ns is
// ""), with the store revision of the read.
func (c *Client) ListResources(ctx context.Context, k api.KindInfo, ns string) ([]api.Resource, int64, error) {
	kvs, rev, err := c.List(ctx, ResourceListPrefix(k, ns))
	if err != nil {
		return nil, 0, err
	}
	out := make([]api.Resource, 0, len(kvs))
	for _, kv := range kvs {
		r, err := DecodeKV(kv)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, r)
	}
	return out, rev, nil
}

// DeleteResource deletes one object (compare-and-swap when rev != 0) and
// returns what was deleted.
func (c *Client) DeleteResource(ctx context.Context, k api.KindInfo, ns, name string, rev int64) (api.Resource, error) {
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
	if rev == 0 {
		rev = cur.Revision
	}
	if err := c.Delete(ctx, key, rev); err != nil {
		return nil, err
	}
	return DecodeKV(cur)
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
	rev, err := revisionOf(m)
	if err != nil {
		return nil, err
	}
	return c.DeleteResource(ctx, k, m.Namespace, m.Name, rev)
}

// revisionOf is the etcd revision metadata.resourceVersion names; 0 when
// it is empty.
func revisionOf(m *api.ObjectMeta) (int64, error) {
	if m.ResourceVersion == "" {
		return 0, nil
	}
	rev, err := strconv.ParseInt(m.ResourceVersion, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("metadata.resourceVersion: %q is not a revision number", m.ResourceVersion)
	}
	return rev, nil
}
