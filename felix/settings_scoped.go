package felix

import (
	"log/slog"
	"slices"
	"strings"

	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/selector"
)

// Selector-scoped FelixConfiguration (Calico v3.32, tech preview): an
// object named neither "default" nor "node.<name>" whose spec.nodeSelector
// matches this node's labels sits between node.<name> and default. When
// several match, the oldest (creationTimestamp, then name) is used and a
// warning names the others. One without a nodeSelector applies to no
// node, as before the feature.

// scopedName says whether a FelixConfiguration name is selector-scoped.
func scopedName(name string) bool { return name != "default" && !strings.HasPrefix(name, "node.") }

// scopedFor picks the selector-scoped configuration of a node with labels
// from cfgs; ignored names the other matches.
func scopedFor(labels map[string]string, cfgs []*api.FelixConfiguration) (pick *api.FelixConfiguration, ignored []string) {
	var match []*api.FelixConfiguration
	for _, f := range cfgs {
		if f == nil || !scopedName(f.Metadata.Name) || strings.TrimSpace(f.Spec.NodeSelector) == "" {
			continue
		}
		sel, err := selector.Parse(f.Spec.NodeSelector)
		if err != nil || !sel.Evaluate(labels) {
			continue // validation refuses a bad selector at write
		}
		match = append(match, f)
	}
	if len(match) == 0 {
		return nil, nil
	}
	slices.SortFunc(match, func(a, b *api.FelixConfiguration) int {
		if c := strings.Compare(a.Metadata.CreationTimestamp, b.Metadata.CreationTimestamp); c != 0 {
			return c
		}
		return strings.Compare(a.Metadata.Name, b.Metadata.Name)
	})
	for _, f := range match[1:] {
		ignored = append(ignored, f.Metadata.Name)
	}
	return match[0], ignored
}

// scopedNow is the loader's selector-scoped configuration, warning once
// per set of conflicting matches.
func (l *settingsLoader) scopedNow() *api.FelixConfiguration {
	cfgs := make([]*api.FelixConfiguration, 0, len(l.scoped))
	for _, f := range l.scoped {
		cfgs = append(cfgs, f)
	}
	pick, ignored := scopedFor(l.labels, cfgs)
	if len(ignored) > 0 {
		key := "scoped:" + pick.Metadata.Name + ":" + strings.Join(ignored, ",")
		if !l.loggedProblems[key] {
			l.loggedProblems[key] = true
			slog.Warn("several selector-scoped FelixConfigurations match this node; the oldest is used", "used", pick.Metadata.Name, "ignored", ignored)
		}
	}
	return pick
}
