package main

// What Calico v3.32.1's CRDs have beyond their schemas (the field list and
// crd-extras-v3.32.1.tsv): facts of Calico's bundle that change how the
// apiserver treats objects.
type crdFact struct {
	required    []string // top-level required members the field list has no row for
	status      bool     // a status subresource
	shortNames  []string
	columns     []PrinterColumn
	annotations map[string]string
}

var crdFacts = map[string]crdFact{
	"Tier":                         {required: []string{"metadata"}},
	"KubeControllersConfiguration": {status: true},
	// The Kubernetes network-policy-api's CRD, as Calico ships it: a group
	// under k8s.io needs its API-approval annotation to be accepted.
	"ClusterNetworkPolicy": {
		required:   []string{"metadata"},
		status:     true,
		shortNames: []string{"cnp"},
		columns: []PrinterColumn{
			{Name: "Tier", Type: "string", JSONPath: ".spec.tier"},
			{Name: "Priority", Type: "string", JSONPath: ".spec.priority"},
			{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
		},
		annotations: map[string]string{
			"api-approved.kubernetes.io":              "https://github.com/kubernetes-sigs/network-policy-api/pull/347",
			"policy.networking.k8s.io/bundle-version": "v0.2.0",
			"policy.networking.k8s.io/channel":        "standard",
		},
	},
}
