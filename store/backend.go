package store

import "github.com/calico-aio/calico-aio/store/model"

// The datastore contract (package model: docs/DATASTORE.md, DESIGN.md
// section 4), re-exported: everything above store/ names it through store.
type (
	Backend     = model.Backend
	Key         = model.Key
	Revision    = model.Revision
	Object      = model.Object
	ListOptions = model.ListOptions
	Read        = model.Read
	Op          = model.Op
	Write       = model.Write
	Event       = model.Event
	EventType   = model.EventType

	NotFoundError      = model.NotFoundError
	AlreadyExistsError = model.AlreadyExistsError
	ConflictError      = model.ConflictError
	RevisionGoneError  = model.RevisionGoneError
)

// Model kinds that are not projectcalico.org/v3 resources.
const (
	KindIPAMBlock     = model.KindIPAMBlock
	KindBlockAffinity = model.KindBlockAffinity
	KindIPAMHandle    = model.KindIPAMHandle
	KindIPAMConfig    = model.KindIPAMConfig
)

// Write operations and watch event types.
const (
	OpPut       = model.OpPut
	OpDelete    = model.OpDelete
	EventPut    = model.EventPut
	EventDelete = model.EventDelete
	EventSynced = model.EventSynced
)

// Recent reads (model.RecentReads).
var (
	RecentReads = model.RecentReads
	LatestReads = model.LatestReads
	ReadsRecent = model.ReadsRecent
)

// Sentinels for errors.Is.
var (
	ErrNotFound      = model.ErrNotFound
	ErrAlreadyExists = model.ErrAlreadyExists
	ErrConflict      = model.ErrConflict
	ErrRevisionGone  = model.ErrRevisionGone

	ErrInvalidRevision = model.ErrInvalidRevision
)
