package kubeapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// crdsAPI is where CustomResourceDefinitions are created.
const crdsAPI = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// ReadManifest parses a multi-document YAML file (a manifest such as
// build/k8s/crds.yaml) into its non-empty documents, as JSON-shaped maps.
func ReadManifest(path string) ([]map[string]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []map[string]any
	for i, part := range docSeparator.Split(string(b), -1) {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(part), &m); err != nil {
			return nil, fmt.Errorf("%s document %d: %w", path, i, err)
		}
		if len(m) > 0 {
			out = append(out, m)
		}
	}
	return out, nil
}

// InstallCRDs creates every CustomResourceDefinition of the manifest at path
// and waits until each is Established, failing the test on any condition
// that reports a problem (a non-structural schema, a missing API approval).
// It returns the CRDs as read.
func (s *Server) InstallCRDs(t testing.TB, path string) []map[string]any {
	t.Helper()
	crds, err := ReadManifest(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds {
		if code, body := s.Do(t, http.MethodPost, crdsAPI, crd); code != http.StatusCreated {
			t.Fatalf("creating CRD %v: %d %s", crd["metadata"], code, body)
		}
	}
	for _, crd := range crds {
		meta, _ := crd["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		s.WaitEstablished(t, name)
	}
	return crds
}

// WaitEstablished waits up to 30 s until the CRD's names are accepted and it
// is Established, and fails the test on any condition reporting a problem.
func (s *Server) WaitEstablished(t testing.TB, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := s.Do(t, http.MethodGet, crdsAPI+"/"+name, nil)
		if code != http.StatusOK {
			t.Fatalf("GET CRD %s: %d %s", name, code, body)
		}
		var crd struct {
			Status struct {
				Conditions []struct{ Type, Status, Reason, Message string }
			}
		}
		if err := json.Unmarshal(body, &crd); err != nil {
			t.Fatalf("CRD %s: %v", name, err)
		}
		conds := map[string]string{}
		for _, c := range crd.Status.Conditions {
			conds[c.Type] = c.Status
			if bad := c.Type == "NonStructuralSchema" || c.Type == "Terminating" ||
				c.Type == "KubernetesAPIApprovalPolicyConformant" && c.Status != "True"; bad {
				t.Fatalf("CRD %s: condition %s=%s: %s %s", name, c.Type, c.Status, c.Reason, c.Message)
			}
		}
		if conds["Established"] == "True" && conds["NamesAccepted"] == "True" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("CRD %s not Established after 30 s: %v", name, conds)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// DecodeExact decodes a JSON object keeping numbers as written (an
// IPAMBlock's 64-bit sequenceNumber stays exact), failing the test on bad
// JSON.
func DecodeExact(t testing.TB, b []byte) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var o map[string]any
	if err := d.Decode(&o); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return o
}
