package store

import (
	"errors"
	"fmt"
)

// Sentinels for errors.Is; the typed errors below match them.
var (
	ErrNotFound      = errors.New("resource does not exist")
	ErrAlreadyExists = errors.New("resource already exists")
	ErrConflict      = errors.New("update conflict")
)

// NotFoundError says a key is absent.
type NotFoundError struct{ Key string }

func (e *NotFoundError) Error() string        { return fmt.Sprintf("%s: %v", e.Key, ErrNotFound) }
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// AlreadyExistsError says a create found the key present.
type AlreadyExistsError struct{ Key string }

func (e *AlreadyExistsError) Error() string        { return fmt.Sprintf("%s: %v", e.Key, ErrAlreadyExists) }
func (e *AlreadyExistsError) Is(target error) bool { return target == ErrAlreadyExists }

// ConflictError says a compare-and-swap lost: the key's revision was not the
// expected one. Current holds the value read in the same transaction (nil if
// the key is gone), so a caller can retry without another read.
type ConflictError struct {
	Key      string
	Expected int64
	Current  *KV
}

func (e *ConflictError) Error() string {
	actual := int64(0)
	if e.Current != nil {
		actual = e.Current.Revision
	}
	return fmt.Sprintf("%s: %v: expected revision %d, found %d (modified by someone else; re-read and retry)", e.Key, ErrConflict, e.Expected, actual)
}
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }
