package model

import (
	"errors"
	"fmt"
)

// Sentinels for errors.Is; the typed errors below match them.
var (
	ErrNotFound      = errors.New("resource does not exist")
	ErrAlreadyExists = errors.New("resource already exists")
	ErrConflict      = errors.New("update conflict")
	// ErrRevisionGone says a revision asked for is no longer in the
	// datastore's history (etcd compacted it; Kubernetes answered 410
	// Gone): the caller lists again.
	ErrRevisionGone = errors.New("revision is gone from the datastore's history")
	// ErrInvalidRevision says a revision was never issued by this
	// datastore (a resourceVersion typed by hand, or another backend's).
	ErrInvalidRevision = errors.New("is not a revision of this datastore")
)

// String names the object as Calico's messages do: Kind(name),
// Kind(namespace/name), and BlockAffinity(node/cidr); a Key with no Kind
// (a backend's own raw key, outside the model) is its Name.
func (k Key) String() string {
	switch {
	case k.Kind == "":
		return k.Name
	case k.Node != "":
		return k.Kind + "(" + k.Node + "/" + k.Name + ")"
	case k.Namespace != "":
		return k.Kind + "(" + k.Namespace + "/" + k.Name + ")"
	}
	return k.Kind + "(" + k.Name + ")"
}

// NotFoundError says an object is absent.
type NotFoundError struct{ Key Key }

func (e *NotFoundError) Error() string        { return fmt.Sprintf("%s: %v", e.Key, ErrNotFound) }
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// AlreadyExistsError says a create found the object present.
type AlreadyExistsError struct{ Key Key }

func (e *AlreadyExistsError) Error() string        { return fmt.Sprintf("%s: %v", e.Key, ErrAlreadyExists) }
func (e *AlreadyExistsError) Is(target error) bool { return target == ErrAlreadyExists }

// ConflictError says a compare-and-swap lost: the object's revision was not
// the expected one. Current holds the object as read in the same step when
// the backend has it (nil when it is gone or was not read), so a caller can
// retry without another read.
type ConflictError struct {
	Key      Key
	Expected Revision
	Current  *Object
}

func (e *ConflictError) Error() string {
	actual := Revision("none")
	if e.Current != nil {
		actual = e.Current.Revision
	}
	expected := e.Expected
	if expected == "" {
		expected = "none"
	}
	return fmt.Sprintf("%s: %v: expected revision %s, found %s (modified by someone else; re-read and retry)", e.Key, ErrConflict, expected, actual)
}
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// RevisionGoneError says Revision is no longer in the datastore's history.
type RevisionGoneError struct{ Revision Revision }

func (e *RevisionGoneError) Error() string {
	return fmt.Sprintf("revision %s: %v", e.Revision, ErrRevisionGone)
}
func (e *RevisionGoneError) Is(target error) bool { return target == ErrRevisionGone }
