package build_test

// The Kubernetes-datastore manifest in a real kube-apiserver with RBAC and
// Calico's CRDs: the calico-cni-plugin identity may make every request real
// Calico v3.32.1's CNI plugin made (testdata/kdd-cni-api-calls-v3.32.1.json)
// and no more than Calico's role allows; calico-node may do what it needs;
// install-cni.sh, as the manifest runs it, gives the plugin a kubeconfig with
// a token for calico-cni-plugin that it requested as calico-node.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/e2e/kubeapi"
	"github.com/calico-aio/calico-aio/store/storetest"
)

const kddCNICalls = "testdata/kdd-cni-api-calls-v3.32.1.json"

func saName(name string) string { return "system:serviceaccount:" + kddNamespace + ":" + name }

// kddAttrs turns an API request path into SubjectAccessReview
// resourceAttributes: /api/v1/namespaces/shop/pods/web-1/status, PATCH
// becomes verb patch, resource pods, subresource status, namespace shop,
// name web-1.
func kddAttrs(t *testing.T, verb, path string) map[string]any {
	t.Helper()
	u, err := url.Parse(path)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	attrs := map[string]any{"verb": verb, "group": ""}
	switch {
	case len(parts) > 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) > 3 && parts[0] == "apis":
		attrs["group"], parts = parts[1], parts[3:]
	default:
		t.Fatalf("not a resource path: %s", path)
	}
	if len(parts) > 2 && parts[0] == "namespaces" {
		attrs["namespace"], parts = parts[1], parts[2:]
	}
	for i, k := range []string{"resource", "name", "subresource"} {
		if i < len(parts) {
			attrs[k] = parts[i]
		}
	}
	return attrs
}

type recordedCall struct{ Verb, Path string }

func recordedCNICalls(t *testing.T) []recordedCall {
	t.Helper()
	b, err := os.ReadFile(kddCNICalls)
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Operations []struct{ Calls []recordedCall }
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("%s: %v", kddCNICalls, err)
	}
	var calls []recordedCall
	for _, op := range rec.Operations {
		calls = append(calls, op.Calls...)
	}
	if len(calls) < 50 {
		t.Fatalf("%s: only %d calls", kddCNICalls, len(calls))
	}
	return calls
}

// applyKDDManifest installs the CRDs and the manifest as the admin, then
// waits until the RBAC authorizer sees the bindings.
func applyKDDManifest(t *testing.T) *kubeapi.Server {
	t.Helper()
	kapi := kubeapi.Start(t, storetest.StartEtcd(t).Endpoints()[0])
	kapi.InstallCRDs(t, crdsPath)
	for _, d := range loadManifestAt(t, kddManifest) {
		create(t, kapi, apiPath(t, d), d)
	}
	deadline := time.Now().Add(15 * time.Second)
	for !accessAs(t, kapi, saName(cniSA), map[string]any{"verb": "get", "resource": "pods", "namespace": "default"}) ||
		!accessAs(t, kapi, saName(nodeSA), map[string]any{"verb": "create", "group": "coordination.k8s.io", "resource": "leases", "namespace": kddNamespace}) {
		if time.Now().After(deadline) {
			t.Fatal("the manifest's bindings are not in force 15 s after they were created")
		}
		time.Sleep(100 * time.Millisecond)
	}
	return kapi
}

// checkAccess asks for each request (verb and path) whether user may make it.
func checkAccess(t *testing.T, kapi *kubeapi.Server, user string, want bool, reqs []recordedCall) {
	t.Helper()
	for _, r := range reqs {
		if got := accessAs(t, kapi, user, kddAttrs(t, r.Verb, r.Path)); got != want {
			t.Errorf("%s: %s %s allowed=%v, want %v", user, r.Verb, r.Path, got, want)
		}
	}
}

func TestKDDManifestRBACInKubeAPIServer(t *testing.T) {
	kapi := applyKDDManifest(t)
	cnp := "/apis/crd.projectcalico.org/v1/"
	calls := recordedCNICalls(t)

	t.Run("CNI plugin", func(t *testing.T) {
		checkAccess(t, kapi, saName(cniSA), true, calls)
		checkAccess(t, kapi, saName(cniSA), false, []recordedCall{
			{"delete", "/api/v1/namespaces/shop/pods/web-1"},
			{"create", "/api/v1/namespaces/shop/pods"},
			{"update", "/api/v1/namespaces/shop/pods/web-1"},
			{"patch", "/api/v1/namespaces/shop/pods/web-1"},
			{"list", "/api/v1/pods"},
			{"watch", "/api/v1/namespaces/shop/pods"},
			{"update", "/api/v1/nodes/node1/status"},
			{"get", "/api/v1/namespaces/kube-system/secrets/x"},
			{"create", "/api/v1/namespaces/kube-system/serviceaccounts/calico-cni-plugin/token"},
			{"create", cnp + "clusterinformations"},
			{"update", cnp + "clusterinformations/default"},
			{"delete", cnp + "clusterinformations/default"},
			{"create", cnp + "ippools"},
			{"update", cnp + "ippools/default-ipv4-ippool"},
			{"delete", cnp + "ipreservations/r"},
			{"create", cnp + "tiers"},
			{"create", cnp + "globalnetworkpolicies"},
			{"get", cnp + "felixconfigurations/default"},
			{"create", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"},
		})
	})

	t.Run("calico-node", func(t *testing.T) {
		// calico-node answers the plugin's calls itself (the fast path).
		checkAccess(t, kapi, saName(nodeSA), true, calls)
		allowed := []recordedCall{
			{"create", "/api/v1/namespaces/kube-system/serviceaccounts/calico-cni-plugin/token"},
			{"patch", "/api/v1/nodes/node1/status"},
			{"update", "/api/v1/nodes/node1/status"},
			{"list", "/api/v1/serviceaccounts"},
			{"get", "/api/v1/namespaces/shop/serviceaccounts/web-sa"},
			{"watch", "/api/v1/namespaces"},
			{"watch", "/api/v1/pods"},
			{"watch", "/api/v1/nodes"},
			{"list", "/apis/discovery.k8s.io/v1/endpointslices"},
			{"watch", "/apis/networking.k8s.io/v1/networkpolicies"},
			{"create", cnp + "clusterinformations"},
			{"update", cnp + "clusterinformations/default"},
			{"create", cnp + "tiers"},
			{"create", cnp + "ippools"},
			{"create", cnp + "felixconfigurations"},
			{"watch", cnp + "ipamblocks"},
			{"delete", cnp + "blockaffinities/node1-10-244-166-128-26"},
			{"delete", cnp + "ipamblocks/10-244-166-128-26"},
			{"update", cnp + "kubecontrollersconfigurations/default"},
			{"get", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/calico-aio-kube-controllers"},
			{"create", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"},
			{"update", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/calico-aio-kube-controllers"},
		}
		for _, kind := range []string{"globalnetworkpolicies", "networkpolicies", "tiers", "ippools", "ipamhandles",
			"felixconfigurations", "bgppeers", "hostendpoints", "globalnetworksets", "networksets", "ipreservations"} {
			allowed = append(allowed, recordedCall{"list", cnp + kind}, recordedCall{"watch", cnp + kind})
		}
		checkAccess(t, kapi, saName(nodeSA), true, allowed)
		checkAccess(t, kapi, saName(nodeSA), false, []recordedCall{
			{"create", "/api/v1/namespaces/kube-system/serviceaccounts/calico-node/token"},
			{"create", "/api/v1/namespaces/default/serviceaccounts/default/token"},
			{"delete", "/api/v1/namespaces/shop/pods/web-1"},
			{"create", "/api/v1/namespaces/shop/pods"},
			{"patch", "/api/v1/namespaces/shop/pods/web-1"},
			{"update", "/api/v1/nodes/node1"},
			{"delete", "/api/v1/nodes/node1"},
			{"get", "/api/v1/namespaces/kube-system/secrets/x"},
			{"create", "/apis/coordination.k8s.io/v1/namespaces/default/leases"},
			{"delete", cnp + "clusterinformations/default"},
			{"delete", cnp + "ippools/default-ipv4-ippool"},
			{"create", cnp + "globalnetworkpolicies"},
			{"create", "/apis/networking.k8s.io/v1/namespaces/shop/networkpolicies"},
		})
	})
}

// kddPod is what the kubelet gives the calico-node pod: a token of its
// service account, the CA and the namespace file.
func kddPod(t *testing.T, kapi *kubeapi.Server) (serviceAccount, map[string]string) {
	t.Helper()
	code, body := kapi.Do(t, http.MethodPost, "/api/v1/namespaces/kube-system/serviceaccounts/calico-node/token", obj{
		"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": obj{"expirationSeconds": 3600},
	})
	var tr struct{ Status struct{ Token string } }
	if err := json.Unmarshal(body, &tr); code != http.StatusCreated || err != nil || tr.Status.Token == "" {
		t.Fatalf("TokenRequest for calico-node: %d %s (%v)", code, body, err)
	}
	sa := fakeServiceAccount(t, tr.Status.Token)
	ca, err := os.ReadFile(kapi.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	sa.setCA(t, ca)
	replaceFile(t, filepath.Join(sa.dir, "namespace"), []byte(kddNamespace))
	u, err := url.Parse(kapi.URL)
	if err != nil {
		t.Fatal(err)
	}
	return sa, podEnv(sa, u.Hostname(), u.Port())
}

// containerEnv is a container's literal env values from the manifest.
func containerEnv(t *testing.T, list, name string) map[string]string {
	t.Helper()
	ds := kddManifestObjects(t)["DaemonSet/calico-node"]
	out := map[string]string{}
	for k, e := range envByName(named(t, get(ds, "spec", "template", "spec", list), name)) {
		if get(e, "valueFrom") == nil {
			out[k] = str(e, "value")
		}
	}
	return out
}

// asToken makes one request with a bearer token and returns the status and body.
func asToken(t *testing.T, kapi *kubeapi.Server, token, method, path, contentType, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, kapi.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", contentType)
	c := kapi.HTTPClient()
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// whoAmI is the user a token authenticates as (SelfSubjectReview).
func whoAmI(t *testing.T, kapi *kubeapi.Server, token string) string {
	t.Helper()
	code, body := asToken(t, kapi, token, http.MethodPost, "/apis/authentication.k8s.io/v1/selfsubjectreviews", "application/json",
		`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`)
	var r struct {
		Status struct{ UserInfo struct{ Username string } }
	}
	if err := json.Unmarshal([]byte(body), &r); code != http.StatusCreated || err != nil {
		t.Fatalf("SelfSubjectReview: %d %s (%v)", code, body, err)
	}
	return r.Status.UserInfo.Username
}

func TestKDDInstallCNIInKubeAPIServer(t *testing.T) {
	kapi := applyKDDManifest(t)
	sa, pod := kddPod(t, kapi)
	env := containerEnv(t, "initContainers", "install-cni")
	for k, v := range pod {
		env[k] = v
	}
	env["NODE_KUBECONFIG"] = filepath.Join(t.TempDir(), "calico-node", "kubeconfig")
	delete(env, "DESTDIR")
	root := t.TempDir()
	mustInstall(t, root, env, "--source", fakeBinary(t))

	conf := plugin(t, readKDDConflist(t, root), "calico")
	if conf["datastore_type"] != kddDatastore || conf["etcd_endpoints"] != nil || str(conf, "kubernetes", "kubeconfig") != kubeconfigFile {
		t.Errorf("calico plugin %v: want datastore_type kubernetes, no etcd_endpoints, kubeconfig %s", conf, kubeconfigFile)
	}
	_, user := loadKubeconfig(t, filepath.Join(root, kubeconfigRel))
	if got := whoAmI(t, kapi, user.Token); got != saName(cniSA) {
		t.Fatalf("the CNI plugin's kubeconfig authenticates as %q, want %s", got, saName(cniSA))
	}
	if _, nodeUser := loadKubeconfig(t, env["NODE_KUBECONFIG"]); nodeUser.TokenFile != sa.tokenFile() {
		t.Errorf("calico-node's kubeconfig has tokenFile %q, want %s", nodeUser.TokenFile, sa.tokenFile())
	}

	// What the plugin does with it, for real.
	create(t, kapi, "/api/v1/namespaces", obj{"apiVersion": "v1", "kind": "Namespace", "metadata": obj{"name": "shop"}})
	create(t, kapi, "/api/v1/namespaces/shop/pods", obj{"apiVersion": "v1", "kind": "Pod",
		"metadata": obj{"name": "web-1"}, "spec": obj{"nodeName": "node1", "containers": []any{obj{"name": "web", "image": "pause"}}}})
	create(t, kapi, "/apis/crd.projectcalico.org/v1/clusterinformations", obj{"apiVersion": "crd.projectcalico.org/v1",
		"kind": "ClusterInformation", "metadata": obj{"name": "default"}, "spec": obj{"datastoreReady": true, "clusterType": "kdd"}})
	annotate := `{"metadata":{"annotations":{"cni.projectcalico.org/podIP":"10.244.166.128/32","cni.projectcalico.org/podIPs":"10.244.166.128/32"}}}`
	handle := `{"apiVersion":"crd.projectcalico.org/v1","kind":"IPAMHandle","metadata":{"name":"k8s-pod-network.c0ffee"},"spec":{"handleID":"k8s-pod-network.c0ffee","block":{"10.244.166.128/26":1}}}`
	for _, r := range []struct {
		method, path, ctype, body string
		want                      int
	}{
		{http.MethodGet, "/apis/crd.projectcalico.org/v1/clusterinformations/default", "", "", http.StatusOK},
		{http.MethodGet, "/api/v1/namespaces/shop/pods/web-1", "", "", http.StatusOK},
		{http.MethodPatch, "/api/v1/namespaces/shop/pods/web-1/status", "application/strategic-merge-patch+json", annotate, http.StatusOK},
		{http.MethodPost, "/apis/crd.projectcalico.org/v1/ipamhandles", "application/json", handle, http.StatusCreated},
		{http.MethodDelete, "/apis/crd.projectcalico.org/v1/ipamhandles/k8s-pod-network.c0ffee", "", "", http.StatusOK},
		{http.MethodDelete, "/api/v1/namespaces/shop/pods/web-1", "", "", http.StatusForbidden},
		{http.MethodPatch, "/apis/crd.projectcalico.org/v1/clusterinformations/default", "application/merge-patch+json",
			`{"spec":{"datastoreReady":false}}`, http.StatusForbidden},
	} {
		if code, body := asToken(t, kapi, user.Token, r.method, r.path, r.ctype, r.body); code != r.want {
			t.Errorf("as %s: %s %s: %d %s, want %d", cniSA, r.method, r.path, code, body, r.want)
		}
	}

	// calico-node's own token, as its kubeconfig reads it from the file.
	create(t, kapi, "/api/v1/nodes", obj{"apiVersion": "v1", "kind": "Node", "metadata": obj{"name": "node1"}})
	nodeToken, err := os.ReadFile(sa.tokenFile())
	if err != nil {
		t.Fatal(err)
	}
	lease := `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"calico-aio-kube-controllers"},"spec":{"holderIdentity":"node1"}}`
	for _, r := range []struct {
		method, path, ctype, body string
		want                      int
	}{
		{http.MethodPost, "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases", "application/json", lease, http.StatusCreated},
		{http.MethodPatch, "/api/v1/nodes/node1/status", "application/strategic-merge-patch+json",
			`{"metadata":{"annotations":{"projectcalico.org/IPv4Address":"10.0.0.1/24"}}}`, http.StatusOK},
		{http.MethodGet, "/api/v1/namespaces/shop/pods/web-1", "", "", http.StatusOK},
		{http.MethodDelete, "/api/v1/namespaces/shop/pods/web-1", "", "", http.StatusForbidden},
		{http.MethodPatch, "/api/v1/nodes/node1", "application/merge-patch+json", `{"metadata":{"labels":{"x":"y"}}}`, http.StatusForbidden},
	} {
		if code, body := asToken(t, kapi, string(nodeToken), r.method, r.path, r.ctype, r.body); code != r.want {
			t.Errorf("as %s: %s %s: %d %s, want %d", nodeSA, r.method, r.path, code, body, r.want)
		}
	}

	// ClusterInformation read and written back (update, as Calico's role
	// has it; not patch).
	ci := "/apis/crd.projectcalico.org/v1/clusterinformations/default"
	code, body := asToken(t, kapi, string(nodeToken), http.MethodGet, ci, "", "")
	if code != http.StatusOK {
		t.Fatalf("as %s: GET %s: %d %s", nodeSA, ci, code, body)
	}
	body = strings.Replace(body, `"datastoreReady":true`, `"datastoreReady":true,"calicoVersion":"v3.32.1"`, 1)
	if code, body := asToken(t, kapi, string(nodeToken), http.MethodPut, ci, "application/json", body); code != http.StatusOK {
		t.Errorf("as %s: PUT %s: %d %s", nodeSA, ci, code, body)
	}

	// calico-node may not get tokens for any other account, itself included.
	env["CNI_SERVICE_ACCOUNT"] = nodeSA
	installFails(t, env, fmt.Sprintf("TokenRequest for %s/%s: HTTP 403", kddNamespace, nodeSA), "--source", fakeBinary(t))
}

// The cni-kubeconfig container, as the manifest runs it, writes a
// calico-cni-plugin token and requests a new one when the kubeconfig is gone.
func TestKDDWatchKubeconfigInKubeAPIServer(t *testing.T) {
	kapi := applyKDDManifest(t)
	_, pod := kddPod(t, kapi)
	env := containerEnv(t, "containers", "cni-kubeconfig")
	for k, v := range pod {
		env[k] = v
	}
	delete(env, "DESTDIR")
	env["KUBECONFIG_REFRESH_INTERVAL"] = "0.1"
	root := t.TempDir()
	cmd := scriptCommand(t, root, env, "--watch-kubeconfig")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-exited
		if t.Failed() {
			t.Logf("install-cni.sh --watch-kubeconfig:\n%s", out.String())
		}
	})
	path := filepath.Join(root, kubeconfigRel)
	waitToken := func(not string) string {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for tokenIn(path) == "" || tokenIn(path) == not {
			if time.Now().After(deadline) {
				t.Fatalf("no new token in %s within 15 s", path)
			}
			time.Sleep(50 * time.Millisecond)
		}
		return tokenIn(path)
	}
	first := waitToken("")
	if got := whoAmI(t, kapi, first); got != saName(cniSA) {
		t.Fatalf("the token authenticates as %q, want %s", got, saName(cniSA))
	}
	// Not renewed on every check: a quarter of a day has not passed.
	time.Sleep(500 * time.Millisecond)
	if got := tokenIn(path); got != first {
		t.Error("the token was renewed before a quarter of its validity passed")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	second := waitToken(first)
	if got := whoAmI(t, kapi, second); got != saName(cniSA) {
		t.Errorf("the renewed token authenticates as %q, want %s", got, saName(cniSA))
	}
}
