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
	"slices"
	"strings"
	"time"

	"github.com/calico-aio/calico-aio/e2e/kubeapi"
)

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

// load is the admin for the apiserver at ip and the documents of the
// manifest at path.
func load(dir, ip, path string) (*admin, []map[string]any, error) {
	a, err := newAdmin(dir, ip)
	if err != nil {
		return nil, nil, err
	}
	docs, err := kubeapi.ReadManifest(path)
	if err != nil {
		return nil, nil, err
	}
	return a, docs, nil
}

// create POSTs obj to path and returns its name; any status but
// 201 Created and those in also is an error.
func (a *admin) create(path string, obj map[string]any, also ...int) (string, error) {
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	code, body, err := a.do(http.MethodPost, path, obj)
	if err != nil {
		return name, fmt.Errorf("creating %s %s: %w", obj["kind"], name, err)
	}
	if code != http.StatusCreated && !slices.Contains(also, code) {
		return name, fmt.Errorf("creating %s %s: %d %s", obj["kind"], name, code, body)
	}
	return name, nil
}
