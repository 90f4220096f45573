package node

import (
	"context"
	"testing"
	"time"
)

// An attempt is cut short when ctx is done or its deadline comes before
// the next attempt would.
func TestCutShort(t *testing.T) {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	soon, c1 := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer c1()
	later, c2 := context.WithTimeout(context.Background(), time.Minute)
	defer c2()
	for name, c := range map[string]struct {
		ctx  context.Context
		want bool
	}{"done": {done, true}, "deadline before the next attempt": {soon, true}, "deadline later": {later, false}, "no deadline": {context.Background(), false}} {
		if got := cutShort(c.ctx, time.Second); got != c.want {
			t.Errorf("%s: cutShort %v, want %v", name, got, c.want)
		}
	}
}
