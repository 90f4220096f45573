// Command crdgen writes the CustomResourceDefinitions our Kubernetes
// manifest installs (build/k8s/crds.yaml): every CRD of Calico v3.32.1's
// bundle, structurally identical to Calico's, generated from the field list
// in store/api/calicoschema (the recorded facts) and the few facts it does
// not carry (facts.go). A cluster that has Calico's CRDs and one that has
// ours accept and store the same objects.
//
//	go run ./build/crdgen -o build/k8s/crds.yaml   (make crds)
//	go run ./build/crdgen -group projectcalico.org/v3 -o store/kube/testdata/crds-v3.yaml
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
)

func main() {
	out := flag.String("o", "build/k8s/crds.yaml", "file to write")
	group := flag.String("group", "crd.projectcalico.org/v1", "API group/version: crd.projectcalico.org/v1 (Calico's bundle) or "+GroupV3+" (the resource kinds as native v3 CRDs)")
	flag.Parse()
	if err := run(*out, *group); err != nil {
		slog.Error("crdgen failed", "err", err)
		os.Exit(1)
	}
}

func run(path, group string) error {
	gen := Generate
	switch group {
	case "crd.projectcalico.org/v1":
	case GroupV3:
		gen = GenerateV3
	default:
		return fmt.Errorf("-group %q: want crd.projectcalico.org/v1 or %s", group, GroupV3)
	}
	b, err := gen()
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("writing CRDs: %w", err)
	}
	return nil
}

// description is our one-line description of a kind's CRD.
func description(kind string) string {
	if kind == "ClusterNetworkPolicy" {
		return "ClusterNetworkPolicy of the Kubernetes network-policy-api, as Calico v3.32.1 installs it."
	}
	return "Calico's " + kind + " resource, as Calico v3.32.1 stores it in the Kubernetes datastore."
}
