package storetest

import (
	"net"
	"testing"
)

// TestStartMovesOffATakenPort: a peer port another process took between the
// pick and the bind gets the member fresh ports instead of failing the test.
func TestStartMovesOffATakenPort(t *testing.T) {
	c := testConfig(t)
	l, err := net.Listen("tcp", c.PeerURL[len("http://"):])
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	e := start(t, &Etcd{Config: c})
	if e.Config.PeerURL == c.PeerURL {
		t.Fatalf("member kept the taken peer URL %s", c.PeerURL)
	}
	conn, err := net.Dial("tcp", e.Config.ClientURL[len("http://"):])
	if err != nil {
		t.Fatalf("member not serving on %s: %v", e.Config.ClientURL, err)
	}
	conn.Close()
}
