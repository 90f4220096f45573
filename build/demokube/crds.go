package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/calico-aio/calico-aio/e2e/kubeapi"
)

const crdsAPI = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

// admin speaks to the apiserver as the admin writeCerts made.
type admin struct {
	server, token string
	client        *http.Client
}

func newAdmin(dir, ip string) (*admin, error) {
	ca, err := os.ReadFile(filepath.Join(dir, caFile))
	if err != nil {
		return nil, err
	}
	token, err := os.ReadFile(filepath.Join(dir, tokenFile))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s: no certificate", caFile)
	}
	return &admin{
		server: "https://" + net.JoinHostPort(ip, apiPort), token: strings.TrimSpace(string(token)),
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}},
	}, nil
}

// do sends obj (nil: no body) as JSON and returns the status and body.
func (a *admin) do(method, path string, obj any) (int, []byte, error) {
	var body io.Reader
	if obj != nil {
		b, err := json.Marshal(obj)
		if err != nil {
			return 0, nil, err
		}
		body = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, a.server+path, body)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// installCRDs creates every CRD of the manifest at path (one already there
// is left as it is) and waits until each is Established.
func installCRDs(dir, ip, path string) error {
	a, err := newAdmin(dir, ip)
	if err != nil {
		return fmt.Errorf("crds: %w", err)
	}
	crds, err := kubeapi.ReadManifest(path)
	if err != nil {
		return fmt.Errorf("crds: %w", err)
	}
	var names []string
	for _, crd := range crds {
		meta, _ := crd["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		code, body, err := a.do(http.MethodPost, crdsAPI, crd)
		if err != nil {
			return fmt.Errorf("crds: creating %s: %w", name, err)
		}
		if code != http.StatusCreated && code != http.StatusConflict {
			return fmt.Errorf("crds: creating %s: %d %s", name, code, body)
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
