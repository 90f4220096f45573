package ipam

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/calico-aio/calico-aio/store"
)

// Config is the cluster IPAM configuration (IPAMConfig "default"; in etcd
// /calico/ipam/v2/config).
type Config struct {
	StrictAffinity     bool `json:"strict_affinity,omitempty"`
	AutoAllocateBlocks bool `json:"auto_allocate_blocks"`
	// MaxBlocksPerHost limits the blocks a node may claim; 0 is unlimited.
	MaxBlocksPerHost             int    `json:"maxBlocksPerHost,omitempty"`
	KubeVirtVMAddressPersistence string `json:"kubeVirtVMAddressPersistence,omitempty"`
}

// DefaultConfig is what applies when no config is stored.
func DefaultConfig() Config { return Config{AutoAllocateBlocks: true} }

// createdConfig is what Calico's IPAM stores as IPAMConfig "default" when
// an assignment finds none (recorded: {autoAllocateBlocks: true,
// kubeVirtVMAddressPersistence: Enabled, strictAffinity: false} on the
// Kubernetes datastore; {"auto_allocate_blocks":true,
// "kubeVirtVMAddressPersistence":"Enabled"} in etcd).
func createdConfig() Config {
	return Config{AutoAllocateBlocks: true, KubeVirtVMAddressPersistence: "Enabled"}
}

// ensureConfig stores createdConfig when no config is stored, as Calico's
// first assignment does, and returns the config that applies: what another
// writer stored first, if one did.
func (a *Allocator) ensureConfig(ctx context.Context) (Config, error) {
	cfg := createdConfig()
	val, _ := json.Marshal(cfg)
	a.roundTrips.Add(1)
	_, err := a.c.Create(ctx, ipamConfigKey, val)
	if errors.Is(err, store.ErrAlreadyExists) {
		return a.GetConfig(ctx)
	}
	if err != nil {
		return Config{}, fmt.Errorf("creating IPAM config %s: %w", ipamConfigKey.Name, err)
	}
	return cfg, nil
}

func parseConfig(val []byte) (Config, error) {
	if val == nil {
		return DefaultConfig(), nil
	}
	var c Config
	if err := json.Unmarshal(val, &c); err != nil {
		return c, fmt.Errorf("IPAM config %s: %w", ipamConfigKey, err)
	}
	return c, nil
}

// GetConfig reads the IPAM config (the default when none is stored).
func (a *Allocator) GetConfig(ctx context.Context) (Config, error) {
	kv, err := a.get(ctx, ipamConfigKey)
	if errors.Is(err, store.ErrNotFound) {
		return DefaultConfig(), nil
	}
	if err != nil {
		return Config{}, err
	}
	return parseConfig(kv.Value)
}

// SetConfig writes the IPAM config (compare-and-swap against what was read).
func (a *Allocator) SetConfig(ctx context.Context, update func(*Config)) (Config, error) {
	for attempt := 0; attempt < maxRetries; attempt++ {
		kv, err := a.get(ctx, ipamConfigKey)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return Config{}, err
		}
		cfg := DefaultConfig()
		if err == nil {
			if cfg, err = parseConfig(kv.Value); err != nil {
				return cfg, err
			}
		}
		update(&cfg)
		if cfg.MaxBlocksPerHost < 0 {
			return cfg, fmt.Errorf("maxBlocksPerHost: %d is negative", cfg.MaxBlocksPerHost)
		}
		val, _ := json.Marshal(cfg)
		if kv.Revision == "" {
			_, err = a.c.Create(ctx, ipamConfigKey, val)
		} else {
			_, err = a.c.Update(ctx, ipamConfigKey, val, kv.Revision)
		}
		if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrAlreadyExists) {
			continue
		}
		return cfg, err
	}
	return Config{}, fmt.Errorf("writing IPAM config: too many conflicts")
}
