package k8s

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ErrLeaseConflict: a Lease write lost a race: the Lease changed since the
// resource version it was to replace, or another writer created it first
// (HTTP 409). Read it again before deciding anything.
var ErrLeaseConflict = errors.New("lease changed by another writer")

var leasesResource = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}

// Lease is a coordination.k8s.io/v1 Lease, as leader election uses it.
type Lease struct {
	TypeMeta
	Metadata ObjectMeta `json:"metadata"`
	Spec     LeaseSpec  `json:"spec"`

	// raw is the object as read; an update keeps the fields this type
	// does not know (spec.strategy, spec.preferredHolder, managedFields).
	raw map[string]any
}

// LeaseSpec is a Lease's record of its holder. Times are MicroTime, as the
// API requires.
type LeaseSpec struct {
	HolderIdentity       *string           `json:"holderIdentity,omitempty"`
	LeaseDurationSeconds *int32            `json:"leaseDurationSeconds,omitempty"`
	AcquireTime          *metav1.MicroTime `json:"acquireTime,omitempty"`
	RenewTime            *metav1.MicroTime `json:"renewTime,omitempty"`
	LeaseTransitions     *int32            `json:"leaseTransitions,omitempty"`
}

// leaseSpecFields are the spec fields LeaseSpec owns on a write.
var leaseSpecFields = []string{"holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime", "leaseTransitions"}

// GetLease reads Lease ns/name; the error wraps ErrNotFound when it does
// not exist.
func (c *Client) GetLease(ctx context.Context, ns, name string) (*Lease, error) {
	u, err := c.dyn.Resource(leasesResource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, leaseError("lease "+ns+"/"+name, c, err)
	}
	return decodeLease(u)
}

// CreateLease creates l (its Metadata.Namespace and Name) and returns it as
// stored; the error wraps ErrLeaseConflict when it already exists.
func (c *Client) CreateLease(ctx context.Context, l *Lease) (*Lease, error) {
	u, err := encodeLease(l, false)
	if err != nil {
		return nil, err
	}
	u, err = c.dyn.Resource(leasesResource).Namespace(l.Metadata.Namespace).Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		return nil, leaseError("creating lease "+l.Metadata.Namespace+"/"+l.Metadata.Name, c, err)
	}
	return decodeLease(u)
}

// UpdateLease replaces l's spec if the Lease is still at
// l.Metadata.ResourceVersion (compare-and-swap) and returns it as stored;
// the error wraps ErrLeaseConflict when it changed meanwhile and
// ErrNotFound when it was deleted.
func (c *Client) UpdateLease(ctx context.Context, l *Lease) (*Lease, error) {
	what := "updating lease " + l.Metadata.Namespace + "/" + l.Metadata.Name
	if l.Metadata.ResourceVersion == "" {
		return nil, fmt.Errorf("%s: no resource version to compare with", what)
	}
	u, err := encodeLease(l, true)
	if err != nil {
		return nil, err
	}
	u, err = c.dyn.Resource(leasesResource).Namespace(l.Metadata.Namespace).Update(ctx, u, metav1.UpdateOptions{})
	if err != nil {
		return nil, leaseError(what, c, err)
	}
	return decodeLease(u)
}

// leaseError classifies a failed Lease request: conflicts first, then as
// every other request (Client.classify).
func leaseError(what string, c *Client, err error) error {
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("%s: %w: %w", what, ErrLeaseConflict, err)
	}
	return c.classify(what, err)
}

func decodeLease(u *unstructured.Unstructured) (*Lease, error) {
	b, err := u.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encoding lease %s: %w", u.GetName(), err)
	}
	var l Lease
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("decoding lease %s: %w", u.GetName(), err)
	}
	l.raw = u.Object
	return &l, nil
}

// encodeLease renders l for a write. An update starts from the object as
// read (keeping what Lease does not model) and replaces the resource
// version and LeaseSpec's fields; a create writes only what Lease holds.
func encodeLease(l *Lease, update bool) (*unstructured.Unstructured, error) {
	b, err := json.Marshal(l)
	if err != nil {
		return nil, fmt.Errorf("encoding lease %s: %w", l.Metadata.Name, err)
	}
	var fresh map[string]any
	if err := json.Unmarshal(b, &fresh); err != nil {
		return nil, fmt.Errorf("encoding lease %s: %w", l.Metadata.Name, err)
	}
	fresh["apiVersion"], fresh["kind"] = "coordination.k8s.io/v1", "Lease"
	if !update || l.raw == nil {
		return &unstructured.Unstructured{Object: fresh}, nil
	}
	u := (&unstructured.Unstructured{Object: l.raw}).DeepCopy()
	u.SetResourceVersion(l.Metadata.ResourceVersion)
	spec, _ := fresh["spec"].(map[string]any)
	for _, f := range leaseSpecFields {
		unstructured.RemoveNestedField(u.Object, "spec", f)
		if v, ok := spec[f]; ok {
			if err := unstructured.SetNestedField(u.Object, v, "spec", f); err != nil {
				return nil, fmt.Errorf("encoding lease %s: spec.%s: %w", l.Metadata.Name, f, err)
			}
		}
	}
	return u, nil
}

// Clone is a copy of l to change and write back; the fields' values are
// shared, so replace them rather than write through them.
func (l *Lease) Clone() *Lease {
	c := *l
	return &c
}
