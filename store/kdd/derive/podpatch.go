package derive

import (
	"encoding/json"
	"net/netip"
	"strings"
)

// podPatch is the strategic-merge patch of pods/<pod>/status the CNI
// plugin sends in Kubernetes datastore mode.
type podPatch struct {
	Metadata podPatchMeta `json:"metadata"`
}

type podPatchMeta struct {
	Annotations     map[string]string `json:"annotations"`
	ResourceVersion string            `json:"resourceVersion,omitempty"`
	UID             string            `json:"uid,omitempty"`
}

// AddPatch is the pod status patch of a CNI ADD: the container ID, the
// first address as podIP and all of them, comma-separated, as podIPs. It
// has no preconditions.
func AddPatch(containerID string, ips []netip.Prefix) ([]byte, error) {
	all := make([]string, len(ips))
	for i, p := range ips {
		all[i] = p.String()
	}
	first := ""
	if len(all) > 0 {
		first = all[0]
	}
	return json.Marshal(podPatch{podPatchMeta{Annotations: map[string]string{
		AnnotationContainerID: containerID, AnnotationPodIP: first, AnnotationPodIPs: strings.Join(all, ","),
	}}})
}

// DelPatch is the pod status patch of a CNI DEL: podIP and podIPs emptied
// (the container ID stays), on the condition that the pod is still the
// one read (its resourceVersion and uid).
func DelPatch(resourceVersion, uid string) ([]byte, error) {
	return json.Marshal(podPatch{podPatchMeta{
		Annotations:     map[string]string{AnnotationPodIP: "", AnnotationPodIPs: ""},
		ResourceVersion: resourceVersion, UID: uid,
	}})
}
