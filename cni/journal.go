package cni

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// pendingDelete is a DEL that could not reach the datastore: the addresses
// of Handle to release and, when set, the endpoint to delete if it still
// belongs to ContainerID.
type pendingDelete struct {
	Handle      string `json:"handle"`
	Namespace   string `json:"namespace,omitempty"`
	Endpoint    string `json:"endpoint,omitempty"`
	ContainerID string `json:"containerID,omitempty"`
}

// journalDir holds DELs that could not reach the datastore.
func (c *NetConf) journalDir() string { return filepath.Join(c.libDir(), "pending-releases") }

// journal records a pending delete; DEL then succeeds so the pod does not
// hang in Terminating. The write is atomic (temp file + rename).
func (c *NetConf) journal(p pendingDelete) error {
	dir := c.journalDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("journal dir: %w", err)
	}
	data, _ := json.Marshal(p)
	tmp := filepath.Join(dir, "."+p.Handle+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("journal write: %w", err)
	}
	return os.Rename(tmp, filepath.Join(dir, p.Handle))
}

// ReplayJournal carries out every journaled delete the datastore now
// accepts. It is called by each CNI invocation once connected, and by the
// agent. It returns how many entries it completed.
func ReplayJournal(ctx context.Context, cl *store.Client, al *ipam.Allocator, dir string) (int, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || e.IsDir() {
			continue
		}
		path := filepath.Join(dir, name)
		data, err := os.ReadFile(path)
		if err != nil {
			return n, err
		}
		p := pendingDelete{Handle: name}
		_ = json.Unmarshal(data, &p)
		if err := completeDelete(ctx, cl, al, p); err != nil {
			return n, fmt.Errorf("replaying delete of %s: %w", name, err)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return n, err
		}
		n++
	}
	return n, nil
}

// completeDelete deletes the endpoint when it still belongs to the
// container, then releases the handle: Calico's order (on Kubernetes the
// pod's annotations are emptied before the IPAM calls).
func completeDelete(ctx context.Context, cl *store.Client, al *ipam.Allocator, p pendingDelete) error {
	if p.Endpoint != "" {
		if err := deleteEndpoint(ctx, cl, p.Namespace, p.Endpoint, p.ContainerID); err != nil {
			return err
		}
	}
	if p.Handle == "" {
		return nil
	}
	_, err := al.ReleaseByHandle(ctx, p.Handle)
	return err
}

// deleteEndpoint deletes a WorkloadEndpoint only if it belongs to
// containerID (a newer container of the same pod keeps its endpoint).
func deleteEndpoint(ctx context.Context, cl *store.Client, ns, name, containerID string) error {
	k, _ := api.LookupKind("WorkloadEndpoint")
	r, err := cl.GetResource(ctx, k, ns, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	wep := r.(*api.WorkloadEndpoint)
	if containerID != "" && wep.Spec.ContainerID != containerID {
		return nil
	}
	// At the revision read (a newer container's write makes it fail), and
	// without reading it again (on Kubernetes: GET pod, PATCH, as Calico's).
	err = cl.Delete(ctx, store.ResourceKey(k, ns, name), store.Revision(wep.Metadata.ResourceVersion))
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// JournalBacklog counts the deletes journaled in dir and not yet replayed
// (0 when dir does not exist). Read-only.
func JournalBacklog(dir string) (int, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("journal dir %s: %w", dir, err)
	}
	n := 0
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") && !e.IsDir() {
			n++
		}
	}
	return n, nil
}
