package ctl

import (
	"context"
	"io"

	"github.com/calico-aio/calico-aio/store"
)

// MigrateImport and SetDatastoreReady run import and lock/unlock on a
// client the test holds (the Kubernetes backend, which calicoctl's
// datastore selection reaches from outside the package).
func MigrateImport(c *store.Client, warn io.Writer, data []byte) error {
	ex, err := parseExport(data)
	if err != nil {
		return err
	}
	return migrateImport(context.Background(), c, warn, ex)
}

func SetDatastoreReady(c *store.Client, ready bool) error {
	return setDatastoreReady(context.Background(), c, ready)
}
