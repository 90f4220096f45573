package calc

import (
	"github.com/calico-aio/calico-aio/store/api"
)

// layeredLabels are an object's own labels over the labels its profiles
// apply (later profiles first, own labels win), as Calico evaluates them.
type layeredLabels struct {
	own      map[string]string
	inherits []map[string]string
}

func (l layeredLabels) Get(k string) (string, bool) {
	if v, ok := l.own[k]; ok {
		return v, true
	}
	for i := len(l.inherits) - 1; i >= 0; i-- {
		if v, ok := l.inherits[i][k]; ok {
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

// namespaceLabels are the labels a namespaceSelector sees: those of the
// namespace's profile "kns.<ns>" plus projectcalico.org/name.
func (s *State) namespaceLabels(ns string) layeredLabels {
	l := layeredLabels{own: map[string]string{"projectcalico.org/name": ns}}
	if prof, ok := s.profiles["kns."+ns]; ok && len(prof.Spec.LabelsToApply) > 0 {
		l.inherits = append(l.inherits, prof.Spec.LabelsToApply)
	}
	return l
}
