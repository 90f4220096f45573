// Package rtproto holds the rtnetlink route protocol numbers that mark
// routes as ours, so a restarted agent can tell them from everyone else's.
// Numbers 11 (zebra), 12 (bird), 17 and 186 (bgp) are taken by others.
package rtproto

const (
	// Workload marks pod /32 (/128) routes and block blackhole routes.
	Workload = 80
	// BGP marks routes learned from BGP peers.
	BGP = 81
)
