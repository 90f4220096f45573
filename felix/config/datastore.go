package config

import (
	"fmt"
	"os"
)

// Datastore selection, as Calico's DATASTORE_TYPE: etcdv3 (the default off
// Kubernetes) or kubernetes. The Kubernetes datastore is not built yet, so
// asking for it, or running in a Kubernetes pod with no etcd configured
// (where Calico's default is the Kubernetes datastore), is a start-up
// error: a node there must never start a private embedded etcd of its own,
// which would hand out the same pod addresses as every other node.

const (
	datastoreEtcd       = "etcdv3"
	datastoreKubernetes = "kubernetes"
	// serviceAccountToken is where Kubernetes mounts a pod's token.
	serviceAccountToken = "/var/run/secrets/kubernetes.io/serviceaccount/token"
)

// inKubernetesPod says whether the agent runs in a Kubernetes pod: the
// service account token is mounted or the API server's service variables
// are set, as in every pod.
func inKubernetesPod(getenv func(string) string) bool {
	if getenv("KUBERNETES_SERVICE_HOST") != "" {
		return true
	}
	_, err := os.Stat(serviceAccountToken)
	return err == nil
}

// checkDatastore validates DATASTORE_TYPE against the rest of the
// configuration: etcdConfigured is whether ETCD_ENDPOINTS (or
// --etcd-endpoints) names an etcd cluster.
func checkDatastore(getenv func(string) string, inPod, etcdConfigured bool) error {
	switch t := getenv("DATASTORE_TYPE"); t {
	case datastoreKubernetes:
		return fmt.Errorf("DATASTORE_TYPE=kubernetes: the Kubernetes datastore is not supported yet; " +
			"run with DATASTORE_TYPE=etcdv3 and ETCD_ENDPOINTS naming your etcd cluster")
	case "", datastoreEtcd:
		if inPod && !etcdConfigured {
			return fmt.Errorf("running in a Kubernetes pod with no ETCD_ENDPOINTS: Calico's default here is the " +
				"Kubernetes datastore, which is not supported yet, and a private embedded etcd per node would hand out " +
				"the same pod addresses on every node; set ETCD_ENDPOINTS to your etcd cluster")
		}
		return nil
	default:
		return fmt.Errorf("DATASTORE_TYPE=%q: must be %s or %s", t, datastoreEtcd, datastoreKubernetes)
	}
}
