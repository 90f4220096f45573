package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

const crdsAPI = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

// installCRDs creates every CRD of the manifest at path (one already there
// is left as it is) and waits until each is Established.
func installCRDs(dir, ip, path string) error {
	a, crds, err := load(dir, ip, path)
	if err != nil {
		return fmt.Errorf("crds: %w", err)
	}
	var names []string
	for _, crd := range crds {
		name, err := a.create(crdsAPI, crd, http.StatusConflict)
		if err != nil {
			return fmt.Errorf("crds: %w", err)
		}
		names = append(names, name)
	}
	for _, name := range names {
		if err := a.waitEstablished(name); err != nil {
			return fmt.Errorf("crds: %w", err)
		}
	}
	return nil
}

// waitEstablished waits up to 30 s until CRD name is Established.
func (a *admin) waitEstablished(name string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body, err := a.do(http.MethodGet, crdsAPI+"/"+name, nil)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("GET CRD %s: %d %s", name, code, body)
		}
		var crd struct {
			Status struct {
				Conditions []struct{ Type, Status string }
			}
		}
		if err := json.Unmarshal(body, &crd); err != nil {
			return fmt.Errorf("CRD %s: %w", name, err)
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == "Established" && c.Status == "True" {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("CRD %s not Established after 30 s", name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
