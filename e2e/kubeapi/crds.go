package kubeapi

import (
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

const crdsAPI = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

// InstallCRDs creates every CustomResourceDefinition of a multi-document
// YAML file (build/k8s/crds.yaml) and waits until each is Established.
func (s *Server) InstallCRDs(t testing.TB, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		var crd map[string]any
		if err := yaml.Unmarshal([]byte(doc), &crd); err != nil {
			t.Fatalf("%s document %d: %v", path, i, err)
		}
		if len(crd) == 0 {
			continue
		}
		if code, body := s.Do(t, http.MethodPost, crdsAPI, crd); code != http.StatusCreated {
			t.Fatalf("creating CRD %d of %s: %d %s", i, path, code, body)
		}
		meta, _ := crd["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		names = append(names, name)
	}
	for _, name := range names {
		s.waitEstablished(t, name)
	}
}

// waitEstablished waits until a CRD's names are accepted and it serves.
func (s *Server) waitEstablished(t testing.TB, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := s.Do(t, http.MethodGet, crdsAPI+"/"+name, nil)
		var crd struct {
			Status struct{ Conditions []struct{ Type, Status string } }
		}
		if code != http.StatusOK || json.Unmarshal(body, &crd) != nil {
			t.Fatalf("GET CRD %s: %d %s", name, code, body)
		}
		ok := 0
		for _, c := range crd.Status.Conditions {
			if (c.Type == "Established" || c.Type == "NamesAccepted") && c.Status == "True" {
				ok++
			}
		}
		if ok == 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("CRD %s not Established after 30 s: %+v", name, crd.Status.Conditions)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
