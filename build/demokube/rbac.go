package main

import (
	"fmt"
	"net/http"

	"github.com/calico-aio/calico-aio/e2e/kubeapi"
)

// rbacPaths: where each kind of the manifest's identities and their
// permissions is created ("%s": the object's namespace).
var rbacPaths = map[string]string{
	"ServiceAccount":     "/api/v1/namespaces/%s/serviceaccounts",
	"ClusterRole":        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
	"ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
	"Role":               "/apis/rbac.authorization.k8s.io/v1/namespaces/%s/roles",
	"RoleBinding":        "/apis/rbac.authorization.k8s.io/v1/namespaces/%s/rolebindings",
}

// installRBAC creates the service accounts, roles and bindings of the
// manifest at path (build/k8s/calico-aio-kdd.yaml), and nothing else of it.
func installRBAC(dir, ip, path string) error {
	a, err := newAdmin(dir, ip)
	if err != nil {
		return fmt.Errorf("rbac: %w", err)
	}
	docs, err := kubeapi.ReadManifest(path)
	if err != nil {
		return fmt.Errorf("rbac: %w", err)
	}
	n := 0
	for _, doc := range docs {
		kind, _ := doc["kind"].(string)
		where, ok := rbacPaths[kind]
		if !ok {
			continue
		}
		meta, _ := doc["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		if ns, _ := meta["namespace"].(string); ns != "" {
			where = fmt.Sprintf(where, ns)
		}
		code, body, err := a.do(http.MethodPost, where, doc)
		if err != nil {
			return fmt.Errorf("rbac: creating %s %s: %w", kind, name, err)
		}
		if code != http.StatusCreated {
			return fmt.Errorf("rbac: creating %s %s: %d %s", kind, name, code, body)
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("rbac: %s has no service account, role or binding", path)
	}
	return nil
}
