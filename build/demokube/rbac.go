package main

import (
	"fmt"
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
	a, docs, err := load(dir, ip, path)
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
		if meta, _ := doc["metadata"].(map[string]any); meta["namespace"] != nil {
			where = fmt.Sprintf(where, meta["namespace"])
		}
		if _, err := a.create(where, doc); err != nil {
			return fmt.Errorf("rbac: %w", err)
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("rbac: %s has no service account, role or binding", path)
	}
	return nil
}
