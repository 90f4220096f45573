package kube

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A WorkloadEndpoint write must first know the pod (writeEndpoint refuses
// what the pod cannot represent). The CNI plugin's ADD has just read that
// endpoint, so the pod it read is remembered for a short while and the
// write uses it instead of reading the pod again: one API round trip less
// per ADD (Calico's plugin makes no read before its patch either).

// podReuse is how long a read pod may stand in for a fresh read. An
// update is exact whatever the age (the remembered pod must be at the
// update's revision, and the patch carries it as a precondition); a
// create has no precondition, as Calico's, and the pod is only used to
// refuse fields it cannot represent.
const podReuse = 5 * time.Second

type seenPod struct {
	pod *unstructured.Unstructured
	at  time.Time
}

// sawPod remembers pod ns/name as just read.
func (b *Backend) sawPod(u *unstructured.Unstructured) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pods) >= maxRemembered {
		clear(b.pods)
	}
	b.pods[u.GetNamespace()+"/"+u.GetName()] = seenPod{pod: u, at: time.Now()}
}

// recentPod takes the pod ns/name read within podReuse (at rev, when rev
// is set); nil when there is none and it must be read.
func (b *Backend) recentPod(ns, name, rev string) *unstructured.Unstructured {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := ns + "/" + name
	s, ok := b.pods[k]
	delete(b.pods, k)
	if !ok || time.Since(s.at) > podReuse || rev != "" && s.pod.GetResourceVersion() != rev {
		return nil
	}
	return s.pod
}
