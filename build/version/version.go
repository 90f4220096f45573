// Package version holds the build version, stamped in by the Makefile with
// -ldflags "-X github.com/calico-aio/calico-aio/build/version.Version=...".
package version

// Version is the release version of the binary ("dev" for unstamped builds).
var Version = "dev"
