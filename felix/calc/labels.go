package calc

import (
	"strings"

	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/selector"
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

// serviceAccountLabelPrefix marks a service account's labels among the
// labelsToApply of its profile "ksa.<ns>.<sa>" ("pcsa.role": "db" for the
// account label role=db), as the controller writes them.
const serviceAccountLabelPrefix = "pcsa."

// serviceAccountLabels are the labels a service-account selector sees for
// an endpoint: the pcsa. labels of its account's profile, without the
// prefix, plus projectcalico.org/name. An endpoint with no service account
// has none (ok false), and no service-account selector matches it.
func (s *State) serviceAccountLabels(w *api.WorkloadEndpoint) (l layeredLabels, ok bool) {
	sa := w.Spec.ServiceAccountName
	if sa == "" {
		sa = w.Metadata.Labels[api.LabelServiceAccount]
	}
	if sa == "" {
		return layeredLabels{}, false
	}
	own := map[string]string{}
	if prof, ok := s.profiles["ksa."+w.Metadata.Namespace+"."+sa]; ok {
		for k, v := range prof.Spec.LabelsToApply {
			if name, ok := strings.CutPrefix(k, serviceAccountLabelPrefix); ok {
				own[name] = v
			}
		}
	}
	own["projectcalico.org/name"] = sa
	return layeredLabels{own: own}, true
}

// matchesServiceAccount reports whether sel (nil: no restriction) selects
// the endpoint's service account.
func (s *State) matchesServiceAccount(sel *selector.Selector, w *api.WorkloadEndpoint) bool {
	if sel == nil {
		return true
	}
	l, ok := s.serviceAccountLabels(w)
	return ok && sel.EvaluateLabels(l)
}
