package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/felix/rules"
	"github.com/calico-aio/calico-aio/k8s"
)

// The Kubernetes NetworkPolicy conformance test's checks that differ by
// datastore: what a step waits for after an API change, and on Kubernetes
// that nothing copies the policies into Calico's custom resources.

// synced is nil once the step's change has reached what the datastore
// decides: on etcd the controller's copies (inDatastore), on Kubernetes
// the agent's chains (inDataplane).
func (s *kpPolicies) synced() error {
	if s.e.ds == onKube {
		return s.inDataplane()
	}
	return s.inDatastore()
}

// syncedWhat says what synced waits for.
func (s *kpPolicies) syncedWhat() string {
	if s.e.ds == onKube {
		return "the agent's dataplane has the chains of exactly the policies in the API"
	}
	return "the datastore holds exactly the translations of the policies in the API"
}

// syncedColumn heads the timing table's column of synced.
func (s *kpPolicies) syncedColumn() string {
	if s.e.ds == onKube {
		return "API->chains"
	}
	return "API->store"
}

// inDataplane is nil when the host has a policy chain (ingress or egress)
// of knp.default.<name> for every policy in the API and none for a deleted
// one: the agent read them from the API, since nothing else holds them.
func (s *kpPolicies) inDataplane() error {
	save, err := inNS(s.e.host.ns, "iptables-save", "-t", "filter")
	if err != nil {
		return err
	}
	has := func(id string) bool {
		namespace, name, _ := strings.Cut(id, "/")
		k := rules.PolicyKey{Namespace: namespace, Name: k8s.NetworkPolicyPrefix + name}
		for _, dir := range []string{rules.DirIngress, rules.DirEgress} {
			if strings.Contains(save, ":"+rules.PolicyChainName(dir, k)+" ") {
				return true
			}
		}
		return false
	}
	for id := range s.have {
		if !has(id) {
			return fmt.Errorf("no chain of %s's knp.default policy", id)
		}
	}
	for id := range s.gone {
		if has(id) {
			return fmt.Errorf("the deleted %s's knp.default policy still has a chain", id)
		}
	}
	return nil
}

// noCopies fails the test if a Calico NetworkPolicy custom resource exists
// (the test writes none, so a knp.default.* copy under any name is one):
// on Kubernetes the agent reads NetworkPolicies directly and neither the
// controller nor anyone else copies them.
func (s *kpPolicies) noCopies(t testing.TB, what string) {
	t.Helper()
	var crs struct {
		Items []struct {
			Metadata struct{ Namespace, Name string } `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal(s.e.do(t, http.MethodGet, "/apis/crd.projectcalico.org/v1/networkpolicies", nil, http.StatusOK), &crs); err != nil {
		t.Fatal(err)
	}
	var written []string
	for _, it := range crs.Items {
		written = append(written, it.Metadata.Namespace+"/"+it.Metadata.Name)
	}
	if len(written) != 0 {
		t.Fatalf("%s: Calico NetworkPolicies %v written on the Kubernetes datastore", what, written)
	}
}
