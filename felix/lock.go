package felix

import (
	"log/slog"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/store/api"
)

// clusterInformationKind is the update kind of ClusterInformation.
const clusterInformationKind = "clusterinformations"

// migrationLock is what `calicoctl datastore migrate lock` does to the
// agent, as to Calico's: while ClusterInformation default says
// datastoreReady false, nothing else read from the datastore reaches the
// dataplane (the kernel keeps what it has, pods keep their traffic); the
// updates are held, in order, and folded in once it says true again.
type migrationLock struct {
	locked bool
	held   []calc.Update
}

// hold reports whether u is held back; a ClusterInformation update that
// unlocks returns the held updates to fold in, in order.
func (l *migrationLock) hold(u calc.Update) (held bool, release []calc.Update) {
	if u.Kind != clusterInformationKind {
		if l.locked {
			l.held = append(l.held, u)
		}
		return l.locked, nil
	}
	locked := lockedBy(u)
	switch {
	case locked && !l.locked:
		slog.Warn("the datastore is locked (ClusterInformation datastoreReady false): holding datastore changes until it is ready")
	case !locked && l.locked:
		slog.Info("the datastore is ready again: applying the changes held while it was locked", "changes", len(l.held))
		release, l.held = l.held, nil
	}
	l.locked = locked
	return false, release
}

// lockedBy: u is ClusterInformation default saying datastoreReady false.
func lockedBy(u calc.Update) bool {
	if u.Deleted || u.Key == "" {
		return false
	}
	ci, ok := u.Resource.(*api.ClusterInformation)
	if !ok || ci.Metadata.Name != "default" {
		return false
	}
	return ci.Spec.DatastoreReady != nil && !*ci.Spec.DatastoreReady
}
