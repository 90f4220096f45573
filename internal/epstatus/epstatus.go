// Package epstatus names the endpoint status files Calico's Felix writes
// once a local workload endpoint's policy is programmed, and that the CNI
// plugin waits for (netconf policy_setup_timeout_seconds).
//
// The files live in <endpointStatusPathPrefix>/endpoint-status; each is
// named after the endpoint's key, "<orchestrator> <workload> <endpoint>",
// each part path-escaped (so the separating spaces and the "/" of
// "<namespace>/<pod>" cannot appear unescaped), where workload is
// "<namespace>/<pod>" for a Kubernetes pod and "<namespace>/<workload or
// container ID>" otherwise.
package epstatus

import (
	"net/url"
	"strings"

	"github.com/calico-aio/calico-aio/store/api"
)

// Dir is the status directory under the agent's prefix.
const Dir = "endpoint-status"

// DefaultPrefix is Calico's default endpointStatusPathPrefix.
const DefaultPrefix = "/var/run/calico"

// FileName is the status file name of endpoint w.
func FileName(w *api.WorkloadEndpoint) string {
	workload := w.Spec.Pod
	if workload == "" {
		workload = w.Spec.Workload
	}
	if workload == "" {
		workload = w.Spec.ContainerID
	}
	parts := []string{w.Spec.Orchestrator, w.Metadata.Namespace + "/" + workload, w.Spec.Endpoint}
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, " ")
}
