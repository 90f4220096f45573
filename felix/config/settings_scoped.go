package config

import (
	"log/slog"
	"strings"

	"github.com/calico-aio/calico-aio/store/api"
)

// scopedNow is the loader's selector-scoped configuration, warning once
// per set of conflicting matches.
func (l *Loader) scopedNow() *api.FelixConfiguration {
	cfgs := make([]*api.FelixConfiguration, 0, len(l.scoped))
	for _, f := range l.scoped {
		cfgs = append(cfgs, f)
	}
	pick, ignored := ScopedFor(l.labels, cfgs)
	if len(ignored) > 0 {
		key := "scoped:" + pick.Metadata.Name + ":" + strings.Join(ignored, ",")
		if !l.loggedProblems[key] {
			l.loggedProblems[key] = true
			slog.Warn("several selector-scoped FelixConfigurations match this node; the oldest is used", "used", pick.Metadata.Name, "ignored", ignored)
		}
	}
	return pick
}
