package main

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The certs the demo's kube-apiserver serves with: its serving cert is
// signed by the CA the kubeconfig carries, for the address the nodes reach
// it on and for loopback; the admin's token is the one the apiserver's
// token file puts in system:masters.
func TestWriteCerts(t *testing.T) {
	dir := t.TempDir()
	if err := run([]string{"certs", "-dir", dir, "-ip", "10.250.99.250"}); err != nil {
		t.Fatal(err)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var kc struct {
		Clusters []struct {
			Cluster struct {
				Server string `json:"server"`
				CA     []byte `json:"certificate-authority-data"`
			} `json:"cluster"`
		} `json:"clusters"`
		Users []struct {
			User struct {
				Token string `json:"token"`
			} `json:"user"`
		} `json:"users"`
	}
	if err := yaml.Unmarshal(read(kubeconfigFile), &kc); err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	if len(kc.Clusters) != 1 || len(kc.Users) != 1 {
		t.Fatalf("kubeconfig: %d clusters, %d users, want 1 each", len(kc.Clusters), len(kc.Users))
	}
	if got := kc.Clusters[0].Cluster.Server; got != "https://10.250.99.250:6443" {
		t.Errorf("kubeconfig server %q, want https://10.250.99.250:6443", got)
	}
	token := string(read(tokenFile))
	if kc.Users[0].User.Token != token || len(token) != 32 {
		t.Errorf("kubeconfig token %q, token file %q (want the same 32 hex digits)", kc.Users[0].User.Token, token)
	}
	// Each identity's kubeconfig carries the token tokens.csv gives its
	// user and groups (the service accounts as RBAC names them).
	tokens := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(read(tokensFile))), "\n") {
		tok, rest, _ := strings.Cut(line, ",")
		tokens[tok] = rest
	}
	for name, want := range map[string]string{
		kubeconfigFile: `admin,admin,"system:masters"`,
		kubeconfigFile + "-calico-node": `system:serviceaccount:kube-system:calico-node,system:serviceaccount:kube-system:calico-node,` +
			`"system:serviceaccounts,system:serviceaccounts:kube-system"`,
		kubeconfigFile + "-calico-cni-plugin": `system:serviceaccount:kube-system:calico-cni-plugin,system:serviceaccount:kube-system:calico-cni-plugin,` +
			`"system:serviceaccounts,system:serviceaccounts:kube-system"`,
	} {
		kc.Users = nil
		if err := yaml.Unmarshal(read(name), &kc); err != nil || len(kc.Users) != 1 {
			t.Fatalf("%s: %v, %d users", name, err, len(kc.Users))
		}
		if got := tokens[kc.Users[0].User.Token]; got != want {
			t.Errorf("%s: its token is for %q in tokens.csv, want %q", name, got, want)
		}
	}
	if len(tokens) != 3 {
		t.Errorf("tokens.csv has %d tokens, want 3", len(tokens))
	}

	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(kc.Clusters[0].Cluster.CA) {
		t.Fatal("kubeconfig: no CA certificate")
	}
	block, _ := pem.Decode(read(servingFile))
	if block == nil {
		t.Fatal("serving.pem: no PEM")
	}
	serving, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"10.250.99.250", "127.0.0.1"} {
		if _, err := serving.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("serving cert for %s: %v", host, err)
		}
	}
	if _, err := serving.Verify(x509.VerifyOptions{Roots: roots, DNSName: "10.250.99.1"}); err == nil {
		t.Error("serving cert valid for 10.250.99.1, an address it was not made for")
	}
	for _, f := range []string{servingKeyFile, saKeyFile} {
		if !strings.Contains(string(read(f)), "PRIVATE KEY") {
			t.Errorf("%s holds no private key", f)
		}
	}
}

// Bad invocations are refused with a message naming the problem.
func TestRunUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "usage"},
		{[]string{"serve", "-dir", "x"}, "usage"},
		{[]string{"certs"}, "-dir is required"},
		{[]string{"certs", "-dir", t.TempDir(), "-ip", "node1"}, `-ip "node1" is not an IP address`},
		{[]string{"crds", "-dir", t.TempDir(), "-ip", "127.0.0.1", "-f", "x.yaml"}, "ca.pem"},
	} {
		err := run(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q) = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}
