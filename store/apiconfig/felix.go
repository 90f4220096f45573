package apiconfig

import "fmt"

// felixLayer reads Felix's own datastore variables, which Calico's Felix
// lets override the common ones: FELIX_DATASTORETYPE, FELIX_ETCDENDPOINTS
// (else FELIX_ETCDSCHEME://FELIX_ETCDADDR), FELIX_ETCDKEYFILE,
// FELIX_ETCDCERTFILE, FELIX_ETCDCAFILE. Etcd endpoints given there mean
// etcdv3, as in Felix; an explicit kubernetes type with them is refused
// (Calico's Felix would use etcd while the rest of calico-node used
// Kubernetes). warn collects the variables that have no effect.
func felixLayer(getenv func(string) string, warn *[]string) (layer, error) {
	l := layer{}
	l.set(KeyDatastoreType, getenv("FELIX_DATASTORETYPE"), "FELIX_DATASTORETYPE")
	l.set(KeyEtcdKeyFile, getenv("FELIX_ETCDKEYFILE"), "FELIX_ETCDKEYFILE")
	l.set(KeyEtcdCertFile, getenv("FELIX_ETCDCERTFILE"), "FELIX_ETCDCERTFILE")
	l.set(KeyEtcdCACertFile, getenv("FELIX_ETCDCAFILE"), "FELIX_ETCDCAFILE")
	scheme, addr := getenv("FELIX_ETCDSCHEME"), getenv("FELIX_ETCDADDR")
	switch {
	case getenv("FELIX_ETCDENDPOINTS") != "":
		l.set(KeyEtcdEndpoints, getenv("FELIX_ETCDENDPOINTS"), "FELIX_ETCDENDPOINTS")
	case addr != "":
		if scheme == "" {
			scheme = "http"
		}
		if scheme != "http" && scheme != "https" {
			return nil, fmt.Errorf("FELIX_ETCDSCHEME=%q: must be http or https", scheme)
		}
		l.set(KeyEtcdEndpoints, scheme+"://"+addr, "FELIX_ETCDADDR")
	}
	if scheme != "" && addr == "" {
		*warn = append(*warn, "FELIX_ETCDSCHEME is set without FELIX_ETCDADDR: it has no effect")
	}
	if eps, ok := l[KeyEtcdEndpoints]; ok {
		if err := felixEtcdVsKube(eps, l); err != nil {
			return nil, err
		}
		l[KeyDatastoreType] = value{text: string(EtcdV3), src: eps.src}
	}
	return l, nil
}

// felixEtcdVsKube refuses Felix's etcd endpoints with a layer's explicit
// kubernetes type.
func felixEtcdVsKube(eps value, l layer) error {
	if t, ok := l[KeyDatastoreType]; ok && Type(t.text) == Kubernetes {
		return fmt.Errorf("%s names etcd but %s=kubernetes: set one datastore", eps.src, t.src)
	}
	return nil
}
