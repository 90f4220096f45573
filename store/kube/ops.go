package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store/kdd"
	"github.com/calico-aio/calico-aio/store/model"
)

// Writes ask the API server to refuse, naming it, any field its schema
// does not have rather than drop it: a field we send is a field stored.
const fieldValidation = "Strict"

// Get reads one object.
func (b *Backend) Get(ctx context.Context, key model.Key) (o model.Object, err error) {
	err = b.onGroup(ctx, func() error { o, err = b.get(ctx, key); return err })
	return o, err
}

func (b *Backend) get(ctx context.Context, key model.Key) (model.Object, error) {
	if k, ok := kdd.LookupKind(key.Kind); ok && k.Storage == kdd.Derived {
		return b.getDerived(ctx, k, key)
	}
	r, err := b.refOf(key)
	if err != nil {
		return model.Object{}, err
	}
	u, err := k8s.GetRecent(ctx, func(o metav1.GetOptions) (*unstructured.Unstructured, error) {
		return b.resource(r).Get(ctx, r.name, o)
	})
	if err != nil {
		return model.Object{}, b.apiError("get", key, "", err)
	}
	src, err := sourceOf(r.kind, r.group)
	if err != nil {
		return model.Object{}, err
	}
	o, _, err := b.read(src, u)
	return o, err
}

// ReadMany makes the reads concurrently: the API has no multi-object
// read, but requests share the connection, so the reads take about one
// round trip instead of one each (IPAM's hot path makes five). They are
// not at one point. Each gives a key's object (none when it does not
// exist) or what a list selects; a failure is the first failed read's.
// Under model.RecentReads they come from the apiserver's watch cache, an
// object it lacks reported missing (k8s.AbsentFromCache): ReadMany's
// reader, the IPAM, writes with compare-and-swap.
func (b *Backend) ReadMany(ctx context.Context, reads []model.Read) ([][]model.Object, error) {
	ctx = k8s.AbsentFromCache(ctx)
	out := make([][]model.Object, len(reads))
	errs := make([]error, len(reads))
	var wg sync.WaitGroup
	for i, r := range reads {
		wg.Go(func() { out[i], errs[i] = b.readOne(ctx, r) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readOne is one read of ReadMany.
func (b *Backend) readOne(ctx context.Context, r model.Read) ([]model.Object, error) {
	if r.List != nil {
		objs, _, err := b.List(ctx, *r.List)
		return objs, err
	}
	o, err := b.Get(ctx, r.Key)
	switch {
	case errors.Is(err, model.ErrNotFound):
		return []model.Object{}, nil
	case err != nil:
		return nil, err
	}
	return []model.Object{o}, nil
}

// Create stores a new object. A WorkloadEndpoint is written as its pod's
// annotations (wepwrite.go).
func (b *Backend) Create(ctx context.Context, key model.Key, value []byte) (rev model.Revision, err error) {
	err = b.onGroup(ctx, func() error { rev, err = b.create(ctx, key, value); return err })
	return rev, err
}

func (b *Backend) create(ctx context.Context, key model.Key, value []byte) (model.Revision, error) {
	if key.Kind == kindWEP {
		return b.writeEndpoint(ctx, key, value, "")
	}
	r, err := b.refOf(key)
	if err != nil {
		return "", err
	}
	u, err := toCR(r, key, value, "", "")
	if err != nil {
		return "", err
	}
	out, err := b.resource(r).Create(ctx, u, metav1.CreateOptions{FieldValidation: fieldValidation})
	if err != nil {
		return "", b.apiError("create", key, "", err)
	}
	if out, err = b.writeStatus(ctx, r, key, u, out); err != nil {
		return "", err
	}
	return b.written(r, out), nil
}

// Update replaces an object if its resourceVersion is still rev. A Node
// is written as annotations on the Kubernetes Node (nodewrite.go).
func (b *Backend) Update(ctx context.Context, key model.Key, value []byte, rev model.Revision) (out model.Revision, err error) {
	err = b.onGroup(ctx, func() error { out, err = b.update(ctx, key, value, rev); return err })
	return out, err
}

func (b *Backend) update(ctx context.Context, key model.Key, value []byte, rev model.Revision) (model.Revision, error) {
	switch key.Kind {
	case "Node":
		return b.updateNode(ctx, key, value, rev)
	case kindWEP:
		if err := checkRevision(rev); err != nil {
			return "", fmt.Errorf("%s: %w", key, err)
		}
		return b.writeEndpoint(ctx, key, value, rev)
	}
	r, err := b.refOf(key)
	if err != nil {
		return "", err
	}
	u, err := toCR(r, key, value, rev, b.handleUID(r, rev))
	if err != nil {
		return "", err
	}
	out, err := b.resource(r).Update(ctx, u, metav1.UpdateOptions{FieldValidation: fieldValidation})
	if err != nil {
		return "", b.apiError("update", key, rev, err)
	}
	if out, err = b.writeStatus(ctx, r, key, u, out); err != nil {
		return "", err
	}
	return b.written(r, out), nil
}

// writeStatus writes the status of u, which the API server ignores in a
// write of the object when the CRD has a status subresource
// (KubeControllersConfiguration), through that subresource when the
// object as the first write left it (out) has another.
func (b *Backend) writeStatus(ctx context.Context, r ref, key model.Key, u, out *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	want, _ := u.Object["status"].(map[string]any)
	have, _ := out.Object["status"].(map[string]any)
	if !r.kind.CRStatus || len(want) == 0 && len(have) == 0 || reflect.DeepEqual(want, have) {
		return out, nil
	}
	out.Object["status"] = want
	if want == nil {
		delete(out.Object, "status")
	}
	res, err := b.resource(r).UpdateStatus(ctx, out, metav1.UpdateOptions{FieldValidation: fieldValidation})
	if err != nil {
		return nil, b.apiError("update status of", key, model.Revision(out.GetResourceVersion()), err)
	}
	return res, nil
}

// Delete removes an object if its resourceVersion is rev (any when rev is
// empty). A handle's delete also names its uid, as Calico's does. A
// WorkloadEndpoint's delete empties its pod's address annotations
// (wepwrite.go).
func (b *Backend) Delete(ctx context.Context, key model.Key, rev model.Revision) error {
	return b.onGroup(ctx, func() error { return b.delete(ctx, key, rev) })
}

func (b *Backend) delete(ctx context.Context, key model.Key, rev model.Revision) error {
	if key.Kind == kindWEP {
		return b.deleteEndpoint(ctx, key, rev)
	}
	r, err := b.refOf(key)
	if err != nil {
		return err
	}
	opts := metav1.DeleteOptions{}
	if rev != "" {
		if err := checkRevision(rev); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		rv := string(rev)
		opts.Preconditions = &metav1.Preconditions{ResourceVersion: &rv}
		if uid := b.handleUID(r, rev); uid != "" {
			opts.Preconditions.UID = (*types.UID)(&uid)
		}
	}
	if err := b.resource(r).Delete(ctx, r.name, opts); err != nil {
		return b.apiError("delete", key, rev, err)
	}
	b.forgetHandle(r)
	return nil
}

// Commit applies writes one object at a time, in the order given, and
// stops at the first that fails: a lost precondition (the object changed,
// was created or vanished since it was read) is a *model.ConflictError.
func (b *Backend) Commit(ctx context.Context, writes []model.Write) ([]model.Revision, error) {
	return model.CommitInTurn(ctx, b, writes, nil)
}

// read converts an object read from the API server; ok is false when it
// has no model object.
func (b *Backend) read(src source, u *unstructured.Unstructured) (model.Object, bool, error) {
	o, uid, ok, err := src.convert(u)
	if err != nil || !ok {
		return o, ok, err
	}
	b.sawUID(src.kind.Kind, u.GetNamespace(), u.GetName(), string(o.Revision), uid)
	return o, true, nil
}

// written notes what a write returned and gives its revision.
func (b *Backend) written(r ref, out *unstructured.Unstructured) model.Revision {
	b.sawUID(r.kind.Kind, out.GetNamespace(), out.GetName(), out.GetResourceVersion(), string(out.GetUID()))
	return model.Revision(out.GetResourceVersion())
}

// readable converts a listed or watched object; one that does not
// convert (written by something else, in a shape Calico does not write)
// is left out and logged once.
func (b *Backend) readable(src source, u *unstructured.Unstructured) (model.Object, bool) {
	o, ok, err := b.read(src, u)
	if err == nil {
		return o, ok
	}
	id := src.gvr.Resource + "/" + u.GetNamespace() + "/" + u.GetName() + "@" + u.GetResourceVersion()
	b.mu.Lock()
	first := !b.unreadable[id]
	if len(b.unreadable) >= maxRemembered {
		clear(b.unreadable) // bounded: at worst a warning is logged again
	}
	b.unreadable[id] = true
	b.mu.Unlock()
	if first {
		slog.Warn("object left out: it does not convert to Calico's model", "kind", src.kind.Kind, "resource", src.gvr.Resource, "namespace", u.GetNamespace(), "name", u.GetName(), "resourceVersion", u.GetResourceVersion(), "err", err)
	}
	return o, false
}

// kindWEP is the kind whose pods' uids are remembered besides handles'.
const kindWEP = "WorkloadEndpoint"

// uidKey is where an object's uid is remembered.
func uidKey(kind, ns, name string) string { return kind + "/" + ns + "/" + name }

// sawUID remembers the uid at a revision of an IPAMHandle, or of the pod
// of a WorkloadEndpoint: their deletes carry a uid precondition, as
// Calico's do.
func (b *Backend) sawUID(kind, ns, name, rev, uid string) {
	if kind != kdd.KindIPAMHandle && kind != kindWEP || uid == "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.uids) >= maxRemembered {
		clear(b.uids) // bounded: a delete then reads the object again or names the revision only
	}
	b.uids[uidKey(kind, ns, name)] = seenUID{rev: rev, uid: uid}
}

// seenUID is an object's uid at rev, if seen.
func (b *Backend) seenUID(kind, ns, name, rev string) string {
	if rev == "" {
		return ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.uids[uidKey(kind, ns, name)]; s.rev == rev {
		return s.uid
	}
	return ""
}

// handleUID is an IPAMHandle's uid at rev, if seen.
func (b *Backend) handleUID(r ref, rev model.Revision) string {
	if r.kind.Kind != kdd.KindIPAMHandle {
		return ""
	}
	return b.seenUID(r.kind.Kind, "", r.name, string(rev))
}

// forgetHandle drops a deleted IPAMHandle's uid.
func (b *Backend) forgetHandle(r ref) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.uids, uidKey(r.kind.Kind, "", r.name))
}

// maxRemembered bounds the backend's memory of handle uids and of the
// objects it logged as unreadable.
const maxRemembered = 100000
