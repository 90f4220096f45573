// Command crdgen writes the CustomResourceDefinitions our Kubernetes
// manifest installs (build/k8s/crds.yaml): every CRD of Calico v3.32.1's
// bundle, structurally identical to Calico's, generated from the field list
// in store/api/calicoschema (the recorded facts) and the few facts it does
// not carry (facts.go). A cluster that has Calico's CRDs and one that has
// ours accept and store the same objects.
//
//	go run ./build/crdgen -o build/k8s/crds.yaml   (make crds)
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
)

func main() {
	out := flag.String("o", "build/k8s/crds.yaml", "file to write")
	flag.Parse()
	if err := run(*out); err != nil {
		slog.Error("crdgen failed", "err", err)
		os.Exit(1)
	}
}

func run(path string) error {
	b, err := Generate()
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
