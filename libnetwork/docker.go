package libnetwork

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// dockerNames asks Docker's API for a network's name: the protocol only
// carries network IDs, and profiles are named after networks, as Calico's
// plugin does.
type dockerNames struct{ host string }

func (n *dockerNames) lookup(ctx context.Context, networkID string) (string, error) {
	path, ok := strings.CutPrefix(n.host, "unix://")
	if !ok {
		return "", fmt.Errorf("docker host %q: only unix:// sockets are supported", n.host)
	}
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker/networks/"+url.PathEscape(networkID), nil)
	if err != nil {
		return "", err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return "", fmt.Errorf("asking Docker at %s: %w", n.host, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return "", fmt.Errorf("reading Docker's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("docker network inspect %s: %s: %s", networkID, resp.Status, strings.TrimSpace(string(body)))
	}
	var nw struct{ Name string }
	if err := json.Unmarshal(body, &nw); err != nil || nw.Name == "" {
		return "", fmt.Errorf("docker network inspect %s: no name in %q", networkID, body)
	}
	return nw.Name, nil
}
