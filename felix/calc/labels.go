package calc

import (
	"strings"

	"github.com/calico-aio/calico-aio/store/api"
)

// layeredLabels are an object's own labels over the labels its profiles
// apply: own labels win, then the profiles in the order listed (the first
// that has the key), as Calico's label inheritance index evaluates them.
type layeredLabels struct {
	own      map[string]string
	inherits []map[string]string
}

func (l layeredLabels) Get(k string) (string, bool) {
	if v, ok := l.own[k]; ok {
		return v, true
	}
	for _, m := range l.inherits {
		if v, ok := m[k]; ok {
			return v, true
		}
	}
	return "", false
}

// endpointLabels are a workload endpoint's effective labels.
func (s *State) endpointLabels(w *api.WorkloadEndpoint) layeredLabels {
	l := layeredLabels{own: w.Metadata.Labels}
	for _, p := range w.Spec.Profiles {
		if prof, ok := s.profiles[p]; ok && len(prof.Spec.LabelsToApply) > 0 {
			l.inherits = append(l.inherits, prof.Spec.LabelsToApply)
		}
	}
	return l
}

// namespaceLabelPrefix marks a namespace's labels among the labelsToApply
// of its profile "kns.<ns>", as Calico's kube-controllers write them
// ("pcns.team": "blue" for the namespace label team=blue). Calico matches a
// namespaceSelector against exactly these; other labelsToApply are the
// pods' labels, not the namespace's.
const namespaceLabelPrefix = "pcns."

// namespaceLabels are the labels a namespaceSelector sees: the pcns.
// labels of the namespace's profile "kns.<ns>", without the prefix, plus
// projectcalico.org/name.
func (s *State) namespaceLabels(ns string) layeredLabels {
	own := map[string]string{}
	if prof, ok := s.profiles["kns."+ns]; ok {
		for k, v := range prof.Spec.LabelsToApply {
			if name, ok := strings.CutPrefix(k, namespaceLabelPrefix); ok {
				own[name] = v
			}
		}
	}
	own["projectcalico.org/name"] = ns
	return layeredLabels{own: own}
}
