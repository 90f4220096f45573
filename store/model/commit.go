package model

import (
	"context"
	"errors"
	"fmt"
)

// ObjectWriter is what CommitInTurn writes through: a Backend's
// single-object calls.
type ObjectWriter interface {
	Create(ctx context.Context, k Key, value []byte) (Revision, error)
	Update(ctx context.Context, k Key, value []byte, rev Revision) (Revision, error)
	Delete(ctx context.Context, k Key, rev Revision) error
}

// CommitInTurn is Commit for a datastore without multi-object transactions:
// each write applied through w in the order given, stopping at the first
// that fails. A lost precondition, whatever form the write reported it in
// (a conflict, an object already there, one gone), is a *ConflictError.
// before, when set, runs before each write (i its index).
func CommitInTurn(ctx context.Context, w ObjectWriter, writes []Write, before func(i int, wr Write)) ([]Revision, error) {
	var revs []Revision
	for i, wr := range writes {
		if before != nil {
			before(i, wr)
		}
		var rev Revision
		var err error
		switch {
		case wr.Op == OpPut && wr.Revision == "":
			rev, err = w.Create(ctx, wr.Key, wr.Value)
		case wr.Op == OpPut:
			rev, err = w.Update(ctx, wr.Key, wr.Value, wr.Revision)
		case wr.Op == OpDelete:
			err = w.Delete(ctx, wr.Key, wr.Revision)
		default:
			return revs, fmt.Errorf("%s: write operation %d is neither put nor delete", wr.Key, wr.Op)
		}
		var ce *ConflictError
		switch {
		case err == nil:
			revs = append(revs, rev)
			continue
		case errors.As(err, &ce):
		case errors.Is(err, ErrConflict), errors.Is(err, ErrAlreadyExists), errors.Is(err, ErrNotFound):
			err = &ConflictError{Key: wr.Key, Expected: wr.Revision}
		}
		return revs, err
	}
	return revs, nil
}
