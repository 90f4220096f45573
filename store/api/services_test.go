package api

import (
	"strings"
	"testing"
)

// Rule services: the combinations Calico's validation refuses are refused
// naming the field; the ones it takes pass (and are no longer refused as
// unsupported).
func TestValidateServices(t *testing.T) {
	in := func(r string) string { return `"ingress":[` + r + `]` }
	out := func(r string) string { return `"egress":[` + r + `]` }
	for _, doc := range []string{
		obj("NetworkPolicy", inNS, out(`{"action":"Allow","destination":{"services":{"name":"kube-dns","namespace":"kube-system"}}}`)),
		obj("NetworkPolicy", inNS, out(`{"action":"Allow","protocol":"UDP","destination":{"services":{"name":"dns"}}}`)),
		obj("NetworkPolicy", inNS, in(`{"action":"Allow","protocol":"TCP","source":{"services":{"name":"web"},"ports":[1000]},"destination":{"ports":[80]}}`)),
		obj("GlobalNetworkPolicy", named, in(`{"action":"Deny","source":{"services":{"name":"web","namespace":"shop"}}}`)),
	} {
		r, err := Decode([]byte(doc))
		if err != nil {
			t.Fatalf("Decode(%s): %v", doc, err)
		}
		r.Default()
		if err := r.Validate(); err != nil {
			t.Errorf("%s\n  refused: %v", doc, err)
		}
	}
	for _, tc := range []struct{ doc, want string }{
		{obj("NetworkPolicy", inNS, out(`{"action":"Allow","protocol":"TCP","destination":{"services":{"name":"a"},"ports":[80]}}`)),
			"spec.egress[0].destination.ports: cannot be combined with destination services"},
		{obj("NetworkPolicy", inNS, out(`{"action":"Allow","protocol":"TCP","destination":{"services":{"name":"a"},"notPorts":[80]}}`)),
			"spec.egress[0].destination.notPorts: cannot be combined with destination services"},
		{obj("NetworkPolicy", inNS, in(`{"action":"Allow","source":{"services":{"name":"a"},"selector":"all()"}}`)),
			"spec.ingress[0].source.services: cannot be combined with selectors"},
		{obj("NetworkPolicy", inNS, in(`{"action":"Allow","source":{"services":{"name":"a"},"namespaceSelector":"all()"}}`)),
			"spec.ingress[0].source.services: cannot be combined"},
		{obj("NetworkPolicy", inNS, in(`{"action":"Allow","source":{"services":{"name":"a"},"serviceAccounts":{"names":["x"]}}}`)),
			"spec.ingress[0].source.services: cannot be combined"},
		{obj("NetworkPolicy", inNS, in(`{"action":"Allow","source":{"services":{"name":"a"},"notNets":["10.0.0.0/8"]}}`)),
			"spec.ingress[0].source.services: cannot be combined"},
		{obj("NetworkPolicy", inNS, in(`{"action":"Allow","source":{"services":{"namespace":"b"}}}`)),
			"spec.ingress[0].source.services.name: is required"},
		{obj("NetworkPolicy", inNS, out(`{"action":"Allow","source":{"services":{"name":"a"}}}`)),
			"spec.egress[0].source.services: is not allowed in an egress rule"},
		{obj("NetworkPolicy", inNS, in(`{"action":"Allow","destination":{"services":{"name":"a"}}}`)),
			"spec.ingress[0].destination.services: is not allowed in an ingress rule"},
		{obj("GlobalNetworkPolicy", named, out(`{"action":"Allow","destination":{"services":{"name":"a"}}}`)),
			"spec.egress[0].destination.services.namespace: is required in a global policy"},
		{obj("GlobalNetworkPolicy", named, in(`{"action":"Allow","source":{"services":{"name":"a"}}}`)),
			"spec.ingress[0].source.services.namespace: is required in a global policy"},
	} {
		r, err := Decode([]byte(tc.doc))
		if err != nil {
			t.Fatalf("Decode(%s): %v", tc.doc, err)
		}
		r.Default()
		err = r.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s\n  error %v\n  want %q", tc.doc, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "not supported") {
			t.Errorf("%s: services refused as unsupported: %v", tc.doc, err)
		}
	}
}
