package apiconfig

import (
	"errors"
	"net"
	"strings"
	"testing"
)

// fakeDNS answers SRV lookups from a table keyed "_service._proto.name".
func fakeDNS(records map[string][]*net.SRV) LookupSRV {
	return func(service, proto, name string) (string, []*net.SRV, error) {
		key := "_" + service + "._" + proto + "." + name
		if r, ok := records[key]; ok {
			return key, r, nil
		}
		return "", nil, &net.DNSError{Err: "no such host", Name: key, IsNotFound: true}
	}
}

// ETCD_DISCOVERY_SRV finds etcd by the domain's SRV records, https from
// _etcd-client-ssl and http from _etcd-client; etcd is then the default
// datastore, as with listed endpoints.
func TestEtcdDiscoverySrv(t *testing.T) {
	dns := fakeDNS(map[string][]*net.SRV{
		"_etcd-client-ssl._tcp.example.com": {{Target: "etcd1.example.com.", Port: 2379}, {Target: "etcd2.example.com.", Port: 2379}},
		"_etcd-client._tcp.example.com":     {{Target: "10.0.0.3", Port: 4001}},
		"_etcd-client._tcp.empty.com":       {},
	})
	h := fakeHost(merged(inPodEnv, map[string]string{"ETCD_DISCOVERY_SRV": "example.com"}), nil)
	h.LookupSRV = dns
	cfg, err := FromEnv(h, EtcdFlags{})
	if err != nil {
		t.Fatal(err)
	}
	want := "https://etcd1.example.com.:2379,https://etcd2.example.com.:2379,http://10.0.0.3:4001"
	if cfg.Type != EtcdV3 || strings.Join(cfg.Etcd.Endpoints, ",") != want || cfg.Source(KeyEtcdDiscoverySrv) != "ETCD_DISCOVERY_SRV" {
		t.Errorf("type %s endpoints %v from %q, want etcdv3 %s", cfg.Type, cfg.Etcd.Endpoints, cfg.Source(KeyEtcdDiscoverySrv), want)
	}

	h = fakeHost(map[string]string{"ETCD_DISCOVERY_SRV": "nowhere.com"}, nil)
	h.LookupSRV = dns
	var dnsErr *net.DNSError
	if _, err := FromEnv(h, EtcdFlags{}); !errors.As(err, &dnsErr) || !strings.Contains(err.Error(), `ETCD_DISCOVERY_SRV="nowhere.com": no etcd found by DNS SRV records`) {
		t.Errorf("no records: %v", err)
	}
	// Unused in Kubernetes mode: no lookup, a warning.
	h = fakeHost(map[string]string{"DATASTORE_TYPE": "kubernetes", "KUBECONFIG": "/k", "ETCD_DISCOVERY_SRV": "nowhere.com"}, nil)
	h.LookupSRV = dns
	if cfg, err := FromEnv(h, EtcdFlags{}); err != nil || len(cfg.Warnings) != 1 || !strings.HasPrefix(cfg.Warnings[0], "ETCD_DISCOVERY_SRV is set") {
		t.Errorf("kubernetes with a discovery domain: %v %v", cfg, err)
	}
	h = fakeHost(nil, nil)
	h.LookupSRV = dns
	if _, err := FromNetConf(h, NetConf{EtcdDiscoverySrv: "empty.com"}); err == nil || !strings.Contains(err.Error(), `netconf etcd_discovery_srv="empty.com": the DNS SRV records name no etcd`) {
		t.Errorf("empty records: %v", err)
	}
}
