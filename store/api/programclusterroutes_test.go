package api

import (
	"testing"
)

// programClusterRoutes takes Calico's enum on both kinds, naming the
// field; on a node.<name> BGPConfiguration (which Calico's confd never
// reads) it is refused rather than stored and ignored.
func TestProgramClusterRoutesValidation(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want string // "" valid
	}{
		{`{"kind":"FelixConfiguration","metadata":{"name":"default"},"spec":{"programClusterRoutes":"Enabled"}}`, ""},
		{`{"kind":"FelixConfiguration","metadata":{"name":"node.n1"},"spec":{"programClusterRoutes":"Disabled"}}`, ""},
		{`{"kind":"FelixConfiguration","metadata":{"name":"default"},"spec":{"programClusterRoutes":"enabled"}}`, "spec.programClusterRoutes: "},
		{`{"kind":"BGPConfiguration","metadata":{"name":"default"},"spec":{"programClusterRoutes":"Disabled"}}`, ""},
		{`{"kind":"BGPConfiguration","metadata":{"name":"default"},"spec":{"programClusterRoutes":"Enabled"}}`, ""},
		{`{"kind":"BGPConfiguration","metadata":{"name":"default"},"spec":{"programClusterRoutes":"Felix"}}`, "spec.programClusterRoutes: "},
		{`{"kind":"BGPConfiguration","metadata":{"name":"node.n1"},"spec":{"programClusterRoutes":"Disabled"}}`, "spec.programClusterRoutes: "},
	} {
		checkValidate(t, tc.doc, tc.want)
	}
}
