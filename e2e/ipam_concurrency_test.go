package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// Eight nodes, three plugin processes at a time on each, about a thousand ADDs
// and DELs of the real binary against one etcd, in a pool small enough
// that nodes claim every block and then borrow from each other: no address
// is ever held twice, conflicts happen and are retried, and nothing leaks.
func TestIPAMConcurrentNodesAndProcesses(t *testing.T) {
	const nodes, workers, rounds, keep = 8, 3, 20, 0
	if testing.Short() {
		t.Skip("long test")
	}
	e := storetest.StartEtcd(t)
	c := e.Client(t)
	createPool(t, c, "small", "10.99.0.0/27", 29) // 4 blocks of 8 addresses for 8 nodes: half must borrow
	for n := 0; n < nodes; n++ {
		createNode(t, c, fmt.Sprintf("node%d", n))
	}
	ep := e.Endpoints()[0]

	var mu sync.Mutex
	holder := map[string]string{} // address -> container holding it
	var ops, conflictLogs atomic.Int64
	fail := func(format string, a ...any) {
		t.Errorf(format, a...)
	}
	var wg sync.WaitGroup
	for n := 0; n < nodes; n++ {
		node := fmt.Sprintf("node%d", n)
		dir := t.TempDir() // one lock and state dir per node, shared by its processes
		conf := ipamConf("1.1.0", "stress", node, ep, dir, "")
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				var live []string
				release := func(id string) {
					mu.Lock()
					for addr, h := range holder {
						if h == id {
							delete(holder, addr) // before DEL: the address is ours until DEL commits
						}
					}
					mu.Unlock()
					r := runCNI(cniCall{Plugin: "calico-ipam", Command: "DEL", ContainerID: id, Conf: conf})
					ops.Add(1)
					if r.Err != nil {
						fail("DEL %s: %v %s", id, r.Err, r.Stdout)
					}
					conflictLogs.Add(int64(strings.Count(r.Stderr, "ipam conflicts retried")))
				}
				for i := 0; i < rounds; i++ {
					id := fmt.Sprintf("%s-w%d-c%d", node, w, i)
					r := runCNI(cniCall{Plugin: "calico-ipam", Command: "ADD", ContainerID: id, Conf: conf})
					ops.Add(1)
					conflictLogs.Add(int64(strings.Count(r.Stderr, "ipam conflicts retried")))
					if r.Err != nil {
						fail("ADD %s: %v %s %s", id, r.Err, r.Stdout, r.Stderr)
						return
					}
					for _, ip := range r.ips(t) {
						addr := strings.Split(ip, "/")[0]
						mu.Lock()
						if other, taken := holder[addr]; taken {
							fail("address %s handed to %s while %s holds it", addr, id, other)
						}
						holder[addr] = id
						mu.Unlock()
					}
					live = append(live, id)
					if len(live) > keep {
						// keep 0: each worker holds one address at a time, 24 of the 32.
						release(live[0])
						live = live[1:]
					}
				}
				for _, id := range live {
					release(id)
				}
			}(w)
		}
	}
	wg.Wait()
	t.Logf("%d plugin executions, %d of them retried compare-and-swap conflicts", ops.Load(), conflictLogs.Load())
	if ops.Load() < nodes*workers*rounds*2 {
		t.Errorf("only %d operations ran", ops.Load())
	}
	if conflictLogs.Load() == 0 {
		t.Errorf("no compare-and-swap conflict was observed: the test did not contend")
	}
	al := ipam.New(c)
	blocks, err := al.ListBlocks(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		if n := len(b.Allocations()); n != 0 {
			t.Errorf("block %s still has %d allocations", b.Prefix, n)
		}
	}
	if hs, _ := al.ListHandles(context.Background()); len(hs) != 0 {
		t.Errorf("%d handles leaked", len(hs))
	}
	if len(blocks) == 0 {
		t.Errorf("no blocks were claimed")
	}
	// And calicoctl agrees: nothing leaked, nothing inconsistent.
	out, _, err := runBin(t, "", "ctl", "ipam", "check", "--etcd-endpoints", ep, "--config", "")
	if err != nil || !strings.Contains(out, "Check complete; found 0 problems.") {
		t.Errorf("ipam check: %v\n%s", err, out)
	}
}
