package main

import (
	"slices"

	"github.com/calico-aio/calico-aio/store/api/calicoschema"
)

// GroupV3 is the group/version of Calico's native v3 CRDs (Calico's tech
// preview "native projectcalico.org/v3 CRDs": the custom resource is the
// v3 object itself, with no aggregated API server in front).
const GroupV3 = "projectcalico.org/v3"

// headerV3 opens the generated v3 file.
const headerV3 = `# Calico's resource kinds as native projectcalico.org/v3 CRDs, generated
# by build/crdgen -group projectcalico.org/v3 from the same recorded field
# list as the crd.projectcalico.org/v1 bundle. For tests of the Kubernetes
# backend's v3 mode; the IPAM kinds are left out (not served on v3).
# Do not edit: run "make crds".
`

// notOnV3 are the v1 bundle's kinds the v3 file leaves out: the IPAM kinds
// (their v3 names and shapes differ and store/kube does not serve them on
// v3) and the policy.networking.k8s.io kind (another group).
var notOnV3 = []string{"IPAMBlock", "BlockAffinity", "IPAMHandle", "IPAMConfig", "ClusterNetworkPolicy"}

// GenerateV3 renders the resource kinds' CRDs in the projectcalico.org/v3
// group: the same kinds, plurals, scopes and schemas as the v1 bundle.
func GenerateV3() ([]byte, error) {
	var crds []calicoschema.CRD
	for _, c := range calicoschema.CRDs() {
		if slices.Contains(notOnV3, c.Kind) {
			continue
		}
		c.GroupVersion = GroupV3
		crds = append(crds, c)
	}
	return generate(headerV3, crds)
}
