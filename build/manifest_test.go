package build_test

// The Kubernetes manifest, build/k8s/calico-aio.yaml, read as data.

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

type obj = map[string]any

func loadManifest(t *testing.T) []obj { t.Helper(); return loadManifestAt(t, manifest) }

// loadManifestAt reads the YAML documents of the manifest at path.
func loadManifestAt(t *testing.T, path string) []obj {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var docs []obj
	for i, part := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		var m obj
		if err := yaml.Unmarshal([]byte(part), &m); err != nil {
			t.Fatalf("%s document %d: %v", path, i, err)
		}
		if len(m) > 0 {
			docs = append(docs, m)
		}
	}
	return docs
}

// get walks a path of map keys and list indexes.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(obj)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func str(v any, path ...any) string { s, _ := get(v, path...).(string); return s }

// named returns the element of a list with the given "name".
func named(t *testing.T, list any, name string) obj {
	t.Helper()
	l, _ := list.([]any)
	for _, e := range l {
		if m, ok := e.(obj); ok && m["name"] == name {
			return m
		}
	}
	t.Fatalf("no %q in %v", name, list)
	return nil
}

// clusterScoped are the manifest's kinds that live in no namespace.
var clusterScoped = map[string]bool{"ClusterRole": true, "ClusterRoleBinding": true}

// manifestByKind loads the manifest and indexes it by kind (one object of
// each), checking every document's apiVersion, kind, name and namespace.
func manifestByKind(t *testing.T) map[string]obj {
	t.Helper()
	byKind := map[string]obj{}
	for _, d := range loadManifest(t) {
		kind := str(d, "kind")
		if str(d, "apiVersion") == "" || kind == "" || str(d, "metadata", "name") == "" {
			t.Errorf("document without apiVersion, kind or name: %v", d)
		}
		want := "kube-system"
		if clusterScoped[kind] {
			want = ""
		}
		if ns := str(d, "metadata", "namespace"); ns != want {
			t.Errorf("%s %s in namespace %q, want %q", kind, str(d, "metadata", "name"), ns, want)
		}
		if byKind[kind] != nil {
			t.Errorf("%s has two %s objects", manifest, kind)
		}
		byKind[kind] = d
	}
	for _, k := range []string{"DaemonSet", "ServiceAccount", "ConfigMap", "ClusterRole", "ClusterRoleBinding"} {
		if byKind[k] == nil {
			t.Fatalf("%s has no %s (kinds: %v)", manifest, k, byKind)
		}
	}
	return byKind
}

func TestManifest(t *testing.T) {
	byKind := manifestByKind(t)
	ds, cm := byKind["DaemonSet"], byKind["ConfigMap"]
	if str(ds, "apiVersion") != "apps/v1" {
		t.Errorf("DaemonSet apiVersion %q", str(ds, "apiVersion"))
	}
	pod := get(ds, "spec", "template", "spec")
	if get(pod, "hostNetwork") != true {
		t.Errorf("hostNetwork = %v, want true", get(pod, "hostNetwork"))
	}
	if get(pod, "hostPID") == true {
		t.Error("hostPID is set; calico-node does not need it")
	}
	if sa := str(pod, "serviceAccountName"); sa != str(byKind["ServiceAccount"], "metadata", "name") {
		t.Errorf("serviceAccountName %q is not the manifest's ServiceAccount", sa)
	}
	sel, labels := get(ds, "spec", "selector", "matchLabels").(obj), get(ds, "spec", "template", "metadata", "labels").(obj)
	for k, v := range sel {
		if labels[k] != v {
			t.Errorf("selector %s=%v does not match the pod labels %v", k, v, labels)
		}
	}
	tolerateAll := false
	for _, tol := range get(pod, "tolerations").([]any) {
		if str(tol, "operator") == "Exists" && str(tol, "key") == "" && str(tol, "effect") == "" {
			tolerateAll = true
		}
	}
	if !tolerateAll {
		t.Errorf("tolerations %v do not tolerate every taint", get(pod, "tolerations"))
	}

	volumes := map[string]string{} // name -> host path, "emptyDir:" for an emptyDir
	for _, v := range get(pod, "volumes").([]any) {
		volumes[str(v, "name")] = str(v, "hostPath", "path")
		if get(v, "emptyDir") != nil {
			volumes[str(v, "name")] = "emptyDir:" + str(v, "name")
		}
	}
	// mounts checks a container's mounts and returns mount path -> host path.
	mounts := func(c obj) map[string]string {
		out := map[string]string{}
		for _, m := range get(c, "volumeMounts").([]any) {
			hp, ok := volumes[str(m, "name")]
			if !ok {
				t.Errorf("container %s mounts undefined volume %q", c["name"], str(m, "name"))
			}
			out[str(m, "mountPath")] = hp
		}
		return out
	}
	// envOf resolves a container's env: literal values, ConfigMap keys
	// (from this manifest's ConfigMap) and field references as "field:...".
	envOf := func(c obj) map[string]string {
		out := map[string]string{}
		for _, e := range get(c, "env").([]any) {
			name := str(e, "name")
			switch {
			case get(e, "valueFrom", "configMapKeyRef") != nil:
				ref := get(e, "valueFrom", "configMapKeyRef")
				if str(ref, "name") != str(cm, "metadata", "name") {
					t.Errorf("%s: env %s refers to ConfigMap %q", c["name"], name, str(ref, "name"))
				}
				v, ok := get(cm, "data", str(ref, "key")).(string)
				if !ok && get(ref, "optional") != true {
					t.Errorf("%s: env %s needs ConfigMap key %q, which is missing", c["name"], name, str(ref, "key"))
				}
				if ok {
					out[name] = v
				}
			case get(e, "valueFrom", "fieldRef") != nil:
				out[name] = "field:" + str(e, "valueFrom", "fieldRef", "fieldPath")
			default:
				out[name] = str(e, "value")
			}
		}
		return out
	}

	// The init container installs the CNI plugin and config into the host.
	initC := named(t, get(pod, "initContainers"), "install-cni")
	if cmd := fmt.Sprint(get(initC, "command")); !strings.Contains(cmd, "/usr/local/bin/install-cni.sh") {
		t.Errorf("install-cni command %s, want /usr/local/bin/install-cni.sh", cmd)
	}
	initEnv := envOf(initC)
	if initEnv["DESTDIR"] != "/host" {
		t.Errorf("install-cni DESTDIR = %q, want /host", initEnv["DESTDIR"])
	}
	initMounts := mounts(initC)
	for _, dir := range []string{"/opt/cni/bin", "/etc/cni/net.d"} {
		if got := initMounts["/host"+dir]; got != dir {
			t.Errorf("install-cni: /host%s is host path %q, want %s", dir, got, dir)
		}
	}

	// The main container runs calico-node, privileged, with its host state.
	node := named(t, get(pod, "containers"), "calico-node")
	for _, c := range get(pod, "containers").([]any) {
		if str(c, "image") != str(initC, "image") || str(c, "image") == "" {
			t.Errorf("images differ or are empty: %s %q, install-cni %q", str(c, "name"), str(c, "image"), str(initC, "image"))
		}
	}
	if cmd := fmt.Sprint(get(node, "command")); cmd != "[/usr/local/bin/calico-node]" && get(node, "command") != nil {
		t.Errorf("calico-node command %s", cmd)
	}
	if get(node, "securityContext", "privileged") != true {
		t.Error("calico-node is not privileged")
	}
	nodeEnv := envOf(node)
	if nodeEnv["NODENAME"] != "field:spec.nodeName" {
		t.Errorf("NODENAME = %q, want the pod's spec.nodeName", nodeEnv["NODENAME"])
	}
	if _, ok := nodeEnv["ETCD_ENDPOINTS"]; !ok {
		t.Error("calico-node gets no ETCD_ENDPOINTS from the ConfigMap")
	}
	if _, ok := get(cm, "data", "etcd_endpoints").(string); !ok {
		t.Error("ConfigMap has no etcd_endpoints")
	}
	if nodeEnv["CALICO_K8S_NODE_REF"] != "field:spec.nodeName" {
		t.Errorf("CALICO_K8S_NODE_REF = %q, want the pod's spec.nodeName", nodeEnv["CALICO_K8S_NODE_REF"])
	}
	// calico-node runs the policy controller with the kubeconfig that
	// install-cni writes, in a volume both mount.
	nodeKC := nodeEnv["CALICO_KUBE_CONTROLLERS_KUBECONFIG"]
	if nodeKC == "" || nodeKC != initEnv["NODE_KUBECONFIG"] {
		t.Errorf("calico-node's CALICO_KUBE_CONTROLLERS_KUBECONFIG %q is not install-cni's NODE_KUBECONFIG %q", nodeKC, initEnv["NODE_KUBECONFIG"])
	}
	kcDir := filepath.Dir(nodeKC)
	if v := mounts(initC)[kcDir]; !strings.HasPrefix(v, "emptyDir:") || mounts(node)[kcDir] != v {
		t.Errorf("%s: install-cni mounts %q, calico-node %q; want the same emptyDir", kcDir, v, mounts(node)[kcDir])
	}
	nodeMounts := mounts(node)
	for path, host := range map[string]string{
		"/var/lib/calico":   "/var/lib/calico",
		"/var/run/calico":   "/var/run/calico",
		"/lib/modules":      "/lib/modules",
		"/run/xtables.lock": "/run/xtables.lock",
		"/var/run/netns":    "/var/run/netns", // pod netns for CNI calls through the agent (#16)
		"/etc/cni/net.d":    "/etc/cni/net.d", // the CNI plugin's kubeconfig at its host path
	} {
		if nodeMounts[path] != host {
			t.Errorf("calico-node: %s is host path %q, want %s", path, nodeMounts[path], host)
		}
	}
	for _, m := range get(node, "volumeMounts").([]any) {
		mp := str(m, "mountPath")
		if (mp == "/lib/modules" || mp == kcDir || mp == "/etc/cni/net.d") && get(m, "readOnly") != true {
			t.Errorf("calico-node: %s is not mounted read-only", mp)
		}
		// Namespaces the runtime mounts after calico-node started must
		// appear inside it.
		if mp == "/var/run/netns" && str(m, "mountPropagation") != "HostToContainer" {
			t.Errorf("calico-node: /var/run/netns propagation %q, want HostToContainer", str(m, "mountPropagation"))
		}
	}

	// The sidecar keeps the CNI plugin's kubeconfig in the same host
	// directory as the init container's install current.
	watch := named(t, get(pod, "containers"), "cni-kubeconfig")
	if cmd := fmt.Sprint(get(watch, "command")); cmd != "[/usr/local/bin/install-cni.sh --watch-kubeconfig]" {
		t.Errorf("cni-kubeconfig command %s, want install-cni.sh --watch-kubeconfig", cmd)
	}
	watchEnv := envOf(watch)
	for _, k := range []string{"DESTDIR", "CNI_CONF_DIR"} {
		if watchEnv[k] != initEnv[k] {
			t.Errorf("cni-kubeconfig %s = %q, install-cni's %q", k, watchEnv[k], initEnv[k])
		}
	}
	if got := mounts(watch)["/host/etc/cni/net.d"]; got != "/etc/cni/net.d" {
		t.Errorf("cni-kubeconfig: /host/etc/cni/net.d is host path %q, want /etc/cni/net.d", got)
	}
	if get(watch, "securityContext", "privileged") == true {
		t.Error("cni-kubeconfig is privileged; it only writes a file")
	}
	for probe, path := range map[string]string{"livenessProbe": "/liveness", "readinessProbe": "/readiness"} {
		hg := get(node, probe, "httpGet")
		if str(hg, "path") != path || get(hg, "port") != float64(9099) || str(hg, "host") != "127.0.0.1" {
			t.Errorf("%s = %v, want http 127.0.0.1:9099%s", probe, hg, path)
		}
	}
	// The probes reach the health server only if it listens where they look.
	if ha := nodeEnv["FELIX_HEALTHADDR"]; ha != "" && ha != ":9099" && ha != "127.0.0.1:9099" {
		t.Errorf("FELIX_HEALTHADDR = %q does not serve 127.0.0.1:9099", ha)
	}

	// The init container's environment, as the ConfigMap gives it, works
	// with the install script once etcd_endpoints is filled in; the shipped
	// placeholder stops it with a message.
	t.Run("init container env", func(t *testing.T) {
		env := map[string]string{}
		for k, v := range initEnv {
			if k != "DESTDIR" && !strings.HasPrefix(v, "field:") {
				env[k] = v
			}
		}
		env["KUBERNETES_NODE_NAME"] = "node-1"
		// Not under DESTDIR: a path in the pod.
		env["NODE_KUBECONFIG"] = filepath.Join(t.TempDir(), "kubeconfig")
		r := install(t, t.TempDir(), env, "--source", fakeBinary(t))
		if r.code == 0 || !strings.Contains(r.stderr, "ETCD_ENDPOINTS") {
			t.Errorf("placeholder etcd_endpoints %q: exit %d, stderr %q; want a failure naming ETCD_ENDPOINTS", env["ETCD_ENDPOINTS"], r.code, r.stderr)
		}
		env["ETCD_ENDPOINTS"] = "http://10.0.0.1:2379"
		root := t.TempDir()
		mustInstall(t, root, env, "--source", fakeBinary(t))
		checkLink(t, root, cniLink, "calico-aio")
		checkLink(t, root, ipamLink, "calico-aio")
		if c := plugin(t, readConflist(t, root), "calico"); c["etcd_endpoints"] != "http://10.0.0.1:2379" {
			t.Errorf("etcd_endpoints = %v", c["etcd_endpoints"])
		}

		// In the pod: what the kubelet adds (the service account mount,
		// KUBERNETES_SERVICE_*) gives the plugin its kubeconfig in the
		// host directory the conflist names, and calico-node its own.
		sa := fakeServiceAccount(t, testToken)
		for k, v := range podEnv(sa, "10.96.0.1", "443") {
			env[k] = v
		}
		root = t.TempDir()
		mustInstall(t, root, env, "--source", fakeBinary(t))
		c := plugin(t, readConflist(t, root), "calico")
		hostKC := str(c, "kubernetes", "kubeconfig")
		if hostKC != kubeconfigFile || filepath.Dir(hostKC) != initEnv["CNI_CONF_DIR"] {
			t.Errorf("kubernetes.kubeconfig = %q, want %s in CNI_CONF_DIR %s", hostKC, kubeconfigFile, initEnv["CNI_CONF_DIR"])
		}
		if str(c, "policy", "type") != "k8s" {
			t.Errorf("policy = %v, want type k8s", c["policy"])
		}
		if _, user := loadKubeconfig(t, filepath.Join(root, hostKC)); user.Token != testToken {
			t.Errorf("the plugin's kubeconfig has token %q", user.Token)
		}
		if _, user := loadKubeconfig(t, env["NODE_KUBECONFIG"]); user.TokenFile != sa.tokenFile() {
			t.Errorf("calico-node's kubeconfig has tokenFile %q", user.TokenFile)
		}
	})
}

// The RBAC objects give the calico-node service account read access to
// exactly what the CNI plugin and the policy controller read, and nothing
// else. rbac_test.go checks the same against a real kube-apiserver.
func TestManifestRBAC(t *testing.T) {
	byKind := manifestByKind(t)
	sa, role, binding := byKind["ServiceAccount"], byKind["ClusterRole"], byKind["ClusterRoleBinding"]
	if str(role, "apiVersion") != "rbac.authorization.k8s.io/v1" || str(binding, "apiVersion") != "rbac.authorization.k8s.io/v1" {
		t.Errorf("apiVersions %q, %q; want rbac.authorization.k8s.io/v1", str(role, "apiVersion"), str(binding, "apiVersion"))
	}
	got := map[string][]string{} // group/resource -> verbs
	for _, r := range get(role, "rules").([]any) {
		if get(r, "resourceNames") != nil || get(r, "nonResourceURLs") != nil {
			t.Errorf("rule %v: want plain resource rules", r)
		}
		for _, g := range get(r, "apiGroups").([]any) {
			for _, res := range get(r, "resources").([]any) {
				for _, v := range get(r, "verbs").([]any) {
					k := g.(string) + "/" + res.(string)
					got[k] = append(got[k], v.(string))
				}
			}
		}
	}
	read := []string{"get", "list", "watch"}
	want := map[string][]string{
		"/pods": read, "/namespaces": read, "/serviceaccounts": read, "/nodes": read,
		"networking.k8s.io/networkpolicies": read, "discovery.k8s.io/endpointslices": read,
	}
	for k := range got {
		sort.Strings(got[k])
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ClusterRole grants %v, want exactly %v", got, want)
	}
	if ref := get(binding, "roleRef"); str(ref, "kind") != "ClusterRole" || str(ref, "name") != str(role, "metadata", "name") ||
		str(ref, "apiGroup") != "rbac.authorization.k8s.io" {
		t.Errorf("roleRef %v is not the manifest's ClusterRole", ref)
	}
	subjects := get(binding, "subjects").([]any)
	if len(subjects) != 1 || str(subjects[0], "kind") != "ServiceAccount" ||
		str(subjects[0], "name") != str(sa, "metadata", "name") || str(subjects[0], "namespace") != str(sa, "metadata", "namespace") {
		t.Errorf("subjects %v, want only the manifest's ServiceAccount", subjects)
	}
}
