package config

import (
	"time"

	"github.com/calico-aio/calico-aio/felix/dataplane"
)

// Periodic refreshes: each re-reads one part of the kernel on the next
// apply so drift made by others is repaired, at its own interval
// (FelixConfiguration iptablesRefreshInterval, routeRefreshInterval,
// ipsetsRefreshInterval, interfaceRefreshInterval; Calico's defaults:
// iptables 180 s, the others 90 s; 0 turns the refresh off). A changed
// interval applies at once. Precedence, first set wins: FELIX_<NAME>,
// --resync-interval (it fills every one of the four the environment
// leaves unset), FelixConfiguration node.<name>, default, Calico's default.

// Refresh is one periodic re-read.
type Refresh struct {
	Name     string // the setting
	Interval func(s *spec) time.Duration
	do       func(d *dataplane.Dataplane)
	Last     time.Time // when it last ran
}

// Calico's default refresh intervals (Felix's config_params.go).
const (
	defaultIPTablesRefresh = 180 * time.Second
	defaultRefresh         = 90 * time.Second
)

func refreshInterval(get func(s *spec) *durationPtr, def time.Duration) func(s *spec) time.Duration {
	return func(s *spec) time.Duration {
		if d := *get(s); d != nil {
			return d.Duration
		}
		return def
	}
}

// NewRefreshes lists the refreshes, all last done at now.
func NewRefreshes(now time.Time) []*Refresh {
	return []*Refresh{
		{"iptablesRefreshInterval", refreshInterval(func(s *spec) *durationPtr { return &s.IptablesRefreshInterval }, defaultIPTablesRefresh), (*dataplane.Dataplane).ResyncIPTables, now},
		{"routeRefreshInterval", refreshInterval(func(s *spec) *durationPtr { return &s.RouteRefreshInterval }, defaultRefresh), (*dataplane.Dataplane).ResyncRoutes, now},
		{"ipsetsRefreshInterval", refreshInterval(func(s *spec) *durationPtr { return &s.IpsetsRefreshInterval }, defaultRefresh), (*dataplane.Dataplane).ResyncIPSets, now},
		{"interfaceRefreshInterval", refreshInterval(func(s *spec) *durationPtr { return &s.InterfaceRefreshInterval }, defaultRefresh), (*dataplane.Dataplane).ResyncInterfaces, now},
	}
}

// DueRefreshes runs the refreshes due at now and returns them and how long
// until the next one is due (0: none is on).
func DueRefreshes(rs []*Refresh, s *spec, d *dataplane.Dataplane, now time.Time) (ran []string, next time.Duration) {
	for _, r := range rs {
		iv := r.Interval(s)
		if iv <= 0 {
			continue
		}
		if !now.Before(r.Last.Add(iv)) {
			if d != nil {
				r.do(d)
			}
			r.Last = now
			ran = append(ran, r.Name)
		}
		if wait := r.Last.Add(iv).Sub(now); next == 0 || wait < next {
			next = wait
		}
	}
	return ran, next
}
