package model

// EventType says what a watch event means.
type EventType uint8

// Watch event types.
const (
	EventPut    EventType = iota + 1 // object created or changed
	EventDelete                      // object removed
	EventSynced                      // everything the watch selects has been delivered
)

func (t EventType) String() string {
	switch t {
	case EventPut:
		return "put"
	case EventDelete:
		return "delete"
	case EventSynced:
		return "synced"
	}
	return "unknown"
}

// Event is one change to what a watch selects. Key is empty for
// EventSynced; Value is nil for deletes and sync markers; Revision is the
// object's new revision (a put), the revision it was deleted at (a delete),
// or the point the state delivered so far is complete at (EventSynced).
type Event struct {
	Type     EventType
	Key      Key
	Value    []byte
	Revision Revision
}
