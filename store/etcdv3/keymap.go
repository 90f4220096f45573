package etcdv3

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/model"
)

// ipamConfigName is the one IPAMConfig's name (Calico's "default").
const ipamConfigName = "default"

// EtcdKey is the etcd key Calico's etcdv3 datastore keeps k under.
func EtcdKey(k model.Key) (string, error) {
	switch k.Kind {
	case model.KindIPAMBlock:
		p, err := blockCIDR(k)
		return BlockKey(p), err
	case model.KindBlockAffinity:
		p, err := blockCIDR(k)
		if err == nil && !validSegment(k.Node) {
			err = fmt.Errorf("%s: node %q is not a valid host name", k, k.Node)
		}
		return AffinityKey(k.Node, p), err
	case model.KindIPAMHandle:
		if !validSegment(k.Name) {
			return "", fmt.Errorf("%s: handle ID %q is empty or has a '/'", k, k.Name)
		}
		return HandleKey(k.Name), nil
	case model.KindIPAMConfig:
		if k.Name != ipamConfigName {
			return "", fmt.Errorf("%s: the IPAM configuration is named %q", k, ipamConfigName)
		}
		return IPAMConfigKey, nil
	}
	ki, err := kindInfo(k.Kind)
	if err != nil {
		return "", err
	}
	// An empty namespace names nothing stored (a read finds nothing, as
	// Calico's); resource validation refuses writing one.
	if !validSegment(k.Name) || strings.Contains(k.Namespace, "/") {
		return "", fmt.Errorf("%s: a %s needs a name, and a namespace if namespaced, without '/'", k, ki.Kind)
	}
	return ResourceKey(ki, k.Namespace, k.Name), nil
}

func validSegment(s string) bool { return s != "" && !strings.Contains(s, "/") }

func kindInfo(kind string) (api.KindInfo, error) {
	ki, ok := api.LookupKind(kind)
	if !ok || ki.Kind != kind {
		return api.KindInfo{}, fmt.Errorf("kind %q is not a kind of Calico's model", kind)
	}
	return ki, nil
}

func blockCIDR(k model.Key) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(k.Name)
	if err != nil || p != p.Masked() {
		return netip.Prefix{}, fmt.Errorf("%s: block %q is not a CIDR", k, k.Name)
	}
	return p, nil
}

// ModelKey is the model key an etcd key names; false when it names none
// (a key outside Calico's model, or one of a kind we do not serve).
func ModelKey(ekey string) (model.Key, bool) {
	switch {
	case ekey == IPAMConfigKey:
		return model.Key{Kind: model.KindIPAMConfig, Name: ipamConfigName}, true
	case strings.HasPrefix(ekey, BlockPrefix):
		// assignment/<family>/block/<cidr>
		parts := strings.Split(strings.TrimPrefix(ekey, BlockPrefix), "/")
		if len(parts) != 3 || parts[1] != "block" {
			return model.Key{}, false
		}
		p, err := ParseCIDRSegment(parts[2])
		return model.Key{Kind: model.KindIPAMBlock, Name: p.String()}, err == nil
	case strings.HasPrefix(ekey, HostPrefix):
		// host/<node>/<family>/block/<cidr>
		parts := strings.Split(strings.TrimPrefix(ekey, HostPrefix), "/")
		if len(parts) != 4 || parts[2] != "block" {
			return model.Key{}, false
		}
		p, err := ParseCIDRSegment(parts[3])
		return model.Key{Kind: model.KindBlockAffinity, Node: parts[0], Name: p.String()}, err == nil
	case strings.HasPrefix(ekey, HandlePrefix):
		id := strings.TrimPrefix(ekey, HandlePrefix)
		return model.Key{Kind: model.KindIPAMHandle, Name: id}, validSegment(id)
	case strings.HasPrefix(ekey, ResourcePrefix):
		return resourceKeyOf(strings.TrimPrefix(ekey, ResourcePrefix))
	}
	return model.Key{}, false
}

func resourceKeyOf(rest string) (model.Key, bool) {
	parts := strings.Split(rest, "/")
	ki, ok := api.LookupKind(parts[0])
	if !ok || ki.Plural != parts[0] {
		return model.Key{}, false
	}
	switch {
	case ki.Namespaced && len(parts) == 3 && parts[1] != "" && parts[2] != "":
		return model.Key{Kind: ki.Kind, Namespace: parts[1], Name: parts[2]}, true
	case !ki.Namespaced && len(parts) == 2 && parts[1] != "":
		return model.Key{Kind: ki.Kind, Name: parts[1]}, true
	}
	return model.Key{}, false
}

// listPrefix is the etcd prefix holding what opts selects; keys under it
// that ModelKey does not name, or that are of another family, are skipped
// by selects.
func listPrefix(opts model.ListOptions) (string, error) {
	if opts.Family != 0 && opts.Family != 4 && opts.Family != 6 {
		return "", fmt.Errorf("list %s: family %d is not 4 or 6", opts.Kind, opts.Family)
	}
	fam := map[int]string{4: "ipv4", 6: "ipv6"}[opts.Family]
	switch opts.Kind {
	case model.KindIPAMBlock:
		if fam != "" {
			return BlockPrefix + fam + "/block/", nil
		}
		return BlockPrefix, nil
	case model.KindBlockAffinity:
		if opts.Node == "" {
			if fam != "" {
				return "", fmt.Errorf("list %s: a family needs a node", opts.Kind)
			}
			return HostPrefix, nil
		}
		if !validSegment(opts.Node) {
			return "", fmt.Errorf("list %s: node %q is not a valid host name", opts.Kind, opts.Node)
		}
		return HostAffinityPrefix(opts.Node, fam), nil
	case model.KindIPAMHandle:
		return HandlePrefix, nil
	case model.KindIPAMConfig:
		return IPAMConfigKey, nil
	}
	ki, err := kindInfo(opts.Kind)
	if err != nil {
		return "", err
	}
	if opts.Namespace != "" && !validSegment(opts.Namespace) {
		return "", fmt.Errorf("list %s: namespace %q is not valid", opts.Kind, opts.Namespace)
	}
	return ResourceListPrefix(ki, opts.Namespace), nil
}

// selects says whether ekey, found under opts' prefix, is an object opts
// selects, and which.
func selects(opts model.ListOptions, ekey string) (model.Key, bool) {
	k, ok := ModelKey(ekey)
	return k, ok && k.Kind == opts.Kind
}
