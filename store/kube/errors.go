package kube

import (
	"errors"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/calico-aio/calico-aio/store/model"
)

// checkRevision refuses a revision the API server never issued: a
// resourceVersion is a positive decimal integer.
func checkRevision(rev model.Revision) error {
	if n, err := strconv.ParseUint(string(rev), 10, 64); err != nil || n == 0 {
		return fmt.Errorf("%q %w", string(rev), model.ErrInvalidRevision)
	}
	return nil
}

// apiError maps an API server's answer about key (written at rev) to the
// contract's typed errors; anything else says what failed and wraps err.
func (b *Backend) apiError(op string, key model.Key, rev model.Revision, err error) error {
	switch {
	case apierrors.IsNotFound(err) && !objectNotFound(err):
		return &noResourceError{fmt.Errorf("%s %s: the API server at %s serves no %s (are Calico's CRDs installed?): %w", op, key, b.client.Server(), key.Kind, err)}
	case apierrors.IsNotFound(err):
		return &model.NotFoundError{Key: key}
	case apierrors.IsAlreadyExists(err):
		return &model.AlreadyExistsError{Key: key}
	case apierrors.IsConflict(err):
		return &model.ConflictError{Key: key, Expected: rev}
	case apierrors.IsGone(err), apierrors.IsResourceExpired(err):
		return fmt.Errorf("%s %s: %w", op, key, &model.RevisionGoneError{Revision: rev})
	}
	return fmt.Errorf("kubernetes %s %s at %s: %w", op, key, b.client.Server(), err)
}

// noResourceError is a 404 for the resource type itself: the server does
// not serve the kind (in the group asked), as when its CRD is missing.
type noResourceError struct{ err error }

func (e *noResourceError) Error() string { return e.err.Error() }
func (e *noResourceError) Unwrap() error { return e.err }

// objectNotFound says a 404 is about an object, not about the resource
// type (a CRD not installed answers 404 with no object named).
func objectNotFound(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d != nil && d.Name != ""
}
