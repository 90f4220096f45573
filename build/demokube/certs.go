package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Files writeCerts leaves in the state directory, which the demo passes
// to kube-apiserver and to everything that reaches it.
const (
	caFile         = "ca.pem"
	servingFile    = "serving.pem"
	servingKeyFile = "serving-key.pem"
	saKeyFile      = "sa-key.pem" // service-account signing key (kube-apiserver takes the public half from it)
	tokenFile      = "token"      // the admin's bearer token
	tokensFile     = "tokens.csv" // --token-auth-file: the identities below
	kubeconfigFile = "kubeconfig" // the admin's, for https://<ip>:6443; kubeconfig-<identity> the others'
	apiPort        = "6443"
)

// identity is a user the apiserver's token file knows.
type identity struct {
	name   string // "admin", or the service account's name in kube-system
	user   string
	groups string
}

// identities: the admin (calicoctl, the demo's own requests), and the two
// service accounts of build/k8s/calico-aio-kdd.yaml, so that calico-node
// and the CNI plugin run with exactly the manifest's RBAC (the tokens are
// static rather than issued for the service accounts, but RBAC binds the
// same user names and groups).
var identities = []identity{
	{"admin", "admin", "system:masters"},
	{"calico-node", "system:serviceaccount:kube-system:calico-node", "system:serviceaccounts,system:serviceaccounts:kube-system"},
	{"calico-cni-plugin", "system:serviceaccount:kube-system:calico-cni-plugin", "system:serviceaccounts,system:serviceaccounts:kube-system"},
}

// writeCerts writes a CA, the apiserver's serving cert for ip and
// 127.0.0.1, a service-account key, and a token and a kubeconfig for each
// of the identities into dir.
func writeCerts(dir, ip string) error {
	addr := net.ParseIP(ip)
	if addr == nil {
		return fmt.Errorf("certs: -ip %q is not an IP address", ip)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "calico-aio demo CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(1, 0, 0),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("certs: CA: %w", err)
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		return fmt.Errorf("certs: CA: %w", err)
	}
	serving := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(1, 0, 0),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{addr, net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost", "kubernetes"},
	}
	servingPEM, servingKeyPEM, err := signed(serving, ca, caKey)
	if err != nil {
		return fmt.Errorf("certs: serving: %w", err)
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("certs: service-account key: %w", err)
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	files := map[string][]byte{
		caFile:         caPEM,
		servingFile:    servingPEM,
		servingKeyFile: servingKeyPEM,
		saKeyFile:      pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)}),
	}
	var tokens []byte
	for _, id := range identities {
		tok := make([]byte, 16)
		if _, err := rand.Read(tok); err != nil {
			return fmt.Errorf("certs: token: %w", err)
		}
		token := hex.EncodeToString(tok)
		tokens = fmt.Appendf(tokens, "%s,%s,%s,%q\n", token, id.user, id.user, id.groups)
		kc := kubeconfigFile + "-" + id.name
		if id.name == "admin" {
			kc = kubeconfigFile
			files[tokenFile] = []byte(token)
		}
		files[kc] = kubeconfig("https://"+net.JoinHostPort(ip, apiPort), caPEM, id.name, token)
	}
	files[tokensFile] = tokens
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return fmt.Errorf("certs: %w", err)
		}
	}
	return nil
}

// signed makes a key and tmpl's certificate signed by ca, both as PEM.
func signed(tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// kubeconfig is user's kubeconfig for server.
func kubeconfig(server string, caPEM []byte, user, token string) []byte {
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: demo
  cluster: {server: %q, certificate-authority-data: %s}
users:
- name: %[3]s
  user: {token: %[4]q}
contexts:
- name: demo
  context: {cluster: demo, user: %[3]s}
current-context: demo
`, server, base64.StdEncoding.EncodeToString(caPEM), user, token))
}
