package build_test

// The manifest's RBAC against a real kube-apiserver (e2e/kubeapi, with RBAC
// authorization): what the calico-node service account may and may not do,
// and the kubeconfigs install-cni.sh writes from that account's token, used
// by our own Kubernetes client.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/e2e/kubeapi"
	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store/storetest"
)

const (
	saUser   = "system:serviceaccount:kube-system:calico-node"
	saTokens = "/api/v1/namespaces/kube-system/serviceaccounts/calico-node/token"
)

var saGroups = []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}

// apiPath is where objects of a kind are created.
func apiPath(t *testing.T, o obj) string {
	t.Helper()
	ns := str(o, "metadata", "namespace")
	switch kind := str(o, "kind"); kind {
	case "ServiceAccount":
		return "/api/v1/namespaces/" + ns + "/serviceaccounts"
	case "ConfigMap":
		return "/api/v1/namespaces/" + ns + "/configmaps"
	case "DaemonSet":
		return "/apis/apps/v1/namespaces/" + ns + "/daemonsets"
	case "ClusterRole":
		return "/apis/rbac.authorization.k8s.io/v1/clusterroles"
	case "ClusterRoleBinding":
		return "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"
	case "Role":
		return "/apis/rbac.authorization.k8s.io/v1/namespaces/" + ns + "/roles"
	case "RoleBinding":
		return "/apis/rbac.authorization.k8s.io/v1/namespaces/" + ns + "/rolebindings"
	default:
		t.Fatalf("no API path for kind %s", kind)
		return ""
	}
}

// create POSTs o as the admin and fails the test unless it is created.
// The apiserver rejects fields it does not know (fieldValidation=Strict).
func create(t *testing.T, kapi *kubeapi.Server, path string, o any) {
	t.Helper()
	// kube-system is created by the apiserver itself, just after it is ready.
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, body := kapi.Do(t, http.MethodPost, path+"?fieldValidation=Strict", o)
		if code == http.StatusCreated {
			return
		}
		if code != http.StatusNotFound || time.Now().After(deadline) {
			t.Fatalf("POST %s: %d %s", path, code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// access asks the apiserver (SubjectAccessReview, as the admin) whether the
// calico-node service account may do verb on group/resource in ns.
func access(t *testing.T, kapi *kubeapi.Server, verb, group, resource, ns string) bool {
	t.Helper()
	attrs := map[string]any{"verb": verb, "group": group, "resource": resource}
	if ns != "" {
		attrs["namespace"] = ns
	}
	return accessAs(t, kapi, saUser, attrs)
}

// accessAs asks the apiserver whether the service account user (in the
// groups every service account of its namespace has) may do what the
// SubjectAccessReview resourceAttributes attrs describe.
func accessAs(t *testing.T, kapi *kubeapi.Server, user string, attrs map[string]any) bool {
	t.Helper()
	groups := saGroups
	if parts := strings.Split(user, ":"); len(parts) == 4 && parts[1] == "serviceaccount" {
		groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + parts[2], "system:authenticated"}
	}
	code, body := kapi.Do(t, http.MethodPost, "/apis/authorization.k8s.io/v1/subjectaccessreviews", map[string]any{
		"apiVersion": "authorization.k8s.io/v1",
		"kind":       "SubjectAccessReview",
		"spec":       map[string]any{"user": user, "groups": groups, "resourceAttributes": attrs},
	})
	if code != http.StatusCreated && code != http.StatusOK {
		t.Fatalf("SubjectAccessReview: %d %s", code, body)
	}
	var r struct {
		Status struct {
			Allowed bool   `json:"allowed"`
			Denied  bool   `json:"denied"`
			Reason  string `json:"reason"`
		} `json:"status"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("SubjectAccessReview answer %s: %v", body, err)
	}
	return r.Status.Allowed
}

func TestManifestRBACInKubeAPIServer(t *testing.T) {
	etcd := storetest.StartEtcd(t)
	kapi := kubeapi.Start(t, etcd.Endpoints()[0])

	// The whole manifest goes in as written: the apiserver validates it
	// (nothing runs the DaemonSet: there is no controller-manager).
	byKind := manifestByKind(t)
	for _, kind := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet"} {
		create(t, kapi, apiPath(t, byKind[kind]), byKind[kind])
	}

	// The RBAC authorizer sees new bindings through an informer: wait for it.
	deadline := time.Now().Add(15 * time.Second)
	for !access(t, kapi, "get", "", "pods", "default") {
		if time.Now().After(deadline) {
			t.Fatal("the calico-node service account still may not get pods 15 s after the binding was created")
		}
		time.Sleep(100 * time.Millisecond)
	}

	t.Run("SubjectAccessReview", func(t *testing.T) {
		type res struct{ group, resource string }
		readable := []res{{"", "pods"}, {"", "namespaces"}, {"", "serviceaccounts"}, {"", "nodes"}, {"networking.k8s.io", "networkpolicies"},
			{"discovery.k8s.io", "endpointslices"}}
		for _, r := range readable {
			for _, verb := range []string{"get", "list", "watch"} {
				// Namespaced resources: in one namespace and across all.
				for _, ns := range []string{"", "default"} {
					if !access(t, kapi, verb, r.group, r.resource, ns) {
						t.Errorf("%s %s/%s in %q: denied, want allowed", verb, r.group, r.resource, ns)
					}
				}
			}
		}
		for _, c := range []struct{ verb, group, resource, ns string }{
			{"create", "", "pods", "default"},
			{"delete", "", "pods", "default"},
			{"patch", "", "pods", "default"},
			{"update", "", "nodes", ""},
			{"patch", "", "nodes", ""},
			{"create", "", "namespaces", ""},
			{"create", "", "serviceaccounts", "kube-system"},
			{"delete", "networking.k8s.io", "networkpolicies", "default"},
			{"create", "networking.k8s.io", "networkpolicies", "default"},
			{"create", "discovery.k8s.io", "endpointslices", "default"},
			{"delete", "discovery.k8s.io", "endpointslices", "default"},
			{"get", "", "secrets", "kube-system"},
			{"list", "", "secrets", ""},
			{"get", "", "configmaps", "kube-system"},
			{"create", "", "serviceaccounts/token", "kube-system"},
			{"list", "apps", "daemonsets", ""},
			{"update", "rbac.authorization.k8s.io", "clusterroles", ""},
		} {
			if access(t, kapi, c.verb, c.group, c.resource, c.ns) {
				t.Errorf("%s %s/%s in %q: allowed, want denied", c.verb, c.group, c.resource, c.ns)
			}
		}
	})

	// Objects for the service account to read.
	create(t, kapi, "/api/v1/nodes", map[string]any{
		"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{"name": "node-1"},
		"spec":     map[string]any{"podCIDR": "10.244.1.0/24"},
	})
	create(t, kapi, "/api/v1/namespaces/default/pods", map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "web", "labels": map[string]string{"app": "web"}},
		"spec": map[string]any{
			"nodeName":   "node-1",
			"containers": []map[string]any{{"name": "web", "image": "registry.k8s.io/pause:3.10"}},
		},
	})
	create(t, kapi, "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies", map[string]any{
		"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
		"metadata": map[string]any{"name": "deny-all"},
		"spec":     map[string]any{"podSelector": map[string]any{}},
	})

	// The service account's token, as the kubelet would mount it.
	code, body := kapi.Do(t, http.MethodPost, saTokens, map[string]any{
		"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
		"spec": map[string]any{"expirationSeconds": 3600},
	})
	if code != http.StatusCreated {
		t.Fatalf("TokenRequest for calico-node: %d %s", code, body)
	}
	var tr struct {
		Status struct{ Token string } `json:"status"`
	}
	if err := json.Unmarshal(body, &tr); err != nil || tr.Status.Token == "" {
		t.Fatalf("TokenRequest answer %s: %v", body, err)
	}
	ca, err := os.ReadFile(kapi.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	sa := fakeServiceAccount(t, tr.Status.Token)
	sa.setCA(t, ca)

	// install-cni.sh, pointed at the apiserver as a pod's environment would.
	u, err := url.Parse(kapi.URL)
	if err != nil {
		t.Fatal(err)
	}
	env := podEnv(sa, u.Hostname(), u.Port())
	env["NODE_KUBECONFIG"] = filepath.Join(t.TempDir(), "calico-node", "kubeconfig")
	root := t.TempDir()
	mustInstall(t, root, env, "--source", fakeBinary(t))
	conf := plugin(t, readConflist(t, root), "calico")
	cniKC := filepath.Join(root, str(conf, "kubernetes", "kubeconfig"))

	for name, path := range map[string]string{"CNI plugin": cniKC, "calico-node": env["NODE_KUBECONFIG"]} {
		t.Run(name+" kubeconfig", func(t *testing.T) {
			kc, err := k8s.NewClient(path)
			if err != nil {
				t.Fatalf("k8s.NewClient(%s): %v", path, err)
			}
			if kc.Server() != kapi.URL {
				t.Errorf("server %q, want %q", kc.Server(), kapi.URL)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// What the CNI plugin reads for a pod.
			pod, err := kc.GetPod(ctx, "default", "web")
			if err != nil {
				t.Fatalf("GetPod: %v", err)
			}
			if pod.Metadata.Labels["app"] != "web" {
				t.Errorf("pod labels %v", pod.Metadata.Labels)
			}
			if _, err := kc.GetNamespace(ctx, "default"); err != nil {
				t.Errorf("GetNamespace: %v", err)
			}
			if n, err := kc.GetNode(ctx, "node-1"); err != nil || n.Spec.PodCIDR != "10.244.1.0/24" {
				t.Errorf("GetNode: %+v, %v", n, err)
			}
			// What the policy controller lists.
			nss, err := kc.ListNamespaces(ctx)
			if err != nil {
				t.Fatalf("ListNamespaces: %v", err)
			}
			if !slices.ContainsFunc(nss, func(n k8s.Namespace) bool { return n.Metadata.Name == "kube-system" }) {
				t.Errorf("ListNamespaces has no kube-system: %+v", nss)
			}
			sas, err := kc.ListServiceAccounts(ctx)
			if err != nil {
				t.Fatalf("ListServiceAccounts: %v", err)
			}
			if !slices.ContainsFunc(sas, func(s k8s.ServiceAccount) bool { return s.Metadata.Name == "calico-node" }) {
				t.Errorf("ListServiceAccounts has no calico-node: %+v", sas)
			}
			nps, err := kc.ListNetworkPolicies(ctx)
			if err != nil || len(nps) != 1 {
				t.Errorf("ListNetworkPolicies: %d, %v; want the one", len(nps), err)
			}
			// Services' endpoints, for rule services matches.
			if _, err := kc.ListEndpointSlices(ctx); err != nil {
				t.Errorf("ListEndpointSlices: %v", err)
			}
		})
	}

	// The same token may not write, nor read secrets.
	t.Run("token writes", func(t *testing.T) {
		_, user := loadKubeconfig(t, cniKC)
		c := kapi.HTTPClient()
		defer c.CloseIdleConnections()
		for _, r := range []struct{ method, path, body string }{
			{http.MethodPost, "/api/v1/namespaces", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"by-calico"}}`},
			{http.MethodDelete, "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies/deny-all", ""},
			{http.MethodPatch, "/api/v1/nodes/node-1", `{"metadata":{"labels":{"x":"y"}}}`},
			{http.MethodGet, "/api/v1/namespaces/kube-system/secrets", ""},
		} {
			req, err := http.NewRequest(r.method, kapi.URL+r.path, strings.NewReader(r.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+user.Token)
			req.Header.Set("Content-Type", "application/json")
			if r.method == http.MethodPatch {
				req.Header.Set("Content-Type", "application/merge-patch+json")
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s %s with the service account token: %s, want 403", r.method, r.path, resp.Status)
			}
		}
	})

	// A token the apiserver does not know is refused as such.
	t.Run("foreign token", func(t *testing.T) {
		sa.setToken(t, "not-a-token")
		root := t.TempDir()
		mustInstall(t, root, env, "--source", fakeBinary(t))
		kc, err := k8s.NewClient(filepath.Join(root, kubeconfigRel))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := kc.GetPod(ctx, "default", "web"); !errors.Is(err, k8s.ErrDenied) {
			t.Errorf("GetPod with a foreign token: %v, want %v", err, k8s.ErrDenied)
		}
	})
}
