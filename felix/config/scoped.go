package config

import (
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

// ScopedName says whether a FelixConfiguration name is selector-scoped.
func ScopedName(name string) bool { return name != "default" && !strings.HasPrefix(name, "node.") }

// ScopedFor picks the selector-scoped configuration of a node with labels
// from cfgs; ignored names the other matches.
func ScopedFor(labels map[string]string, cfgs []*api.FelixConfiguration) (pick *api.FelixConfiguration, ignored []string) {
	var match []*api.FelixConfiguration
	for _, f := range cfgs {
		if f == nil || !ScopedName(f.Metadata.Name) || strings.TrimSpace(f.Spec.NodeSelector) == "" {
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
