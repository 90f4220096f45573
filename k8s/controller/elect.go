package controller

import (
	"context"
	"fmt"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/etcdv3"
)

// LeaderPrefix is the etcd election prefix RunElected campaigns on.
const LeaderPrefix = "/calico/kube-controllers/leader"

// LeaseTTL is the leader session's TTL in seconds: a leader that dies
// without resigning is replaced after at most this long.
const LeaseTTL = 5

// RunElected runs c while this instance (named id) is the leader elected
// under LeaderPrefix in the etcd behind client, with a session of LeaseTTL
// seconds. It campaigns again when it loses the session, and returns nil
// when ctx ends, resigning (revoking its lease) so another instance takes
// over at once.
func RunElected(ctx context.Context, client *store.Client, id string, c *Controller) error {
	raw, ok := etcdv3.Of(client.Backend)
	if !ok {
		return fmt.Errorf("kube-controllers %s: the leader election runs on etcd only", id)
	}
	cli := raw.Etcd()
	for ctx.Err() == nil {
		sess, err := concurrency.NewSession(cli, concurrency.WithTTL(LeaseTTL), concurrency.WithContext(ctx))
		if err != nil {
			if ctx.Err() == nil {
				c.logf("kube-controllers %s: election session: %v", id, err)
				sleep(ctx, time.Second)
			}
			continue
		}
		release := func() {
			// ctx may be done: revoke with a fresh one so the key goes now.
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, _ = cli.Revoke(rctx, sess.Lease())
			cancel()
			_ = sess.Close()
		}
		el := concurrency.NewElection(sess, LeaderPrefix)
		if err := el.Campaign(ctx, id); err != nil {
			release()
			if ctx.Err() == nil {
				c.logf("kube-controllers %s: campaign: %v", id, err)
				sleep(ctx, time.Second)
			}
			continue
		}
		c.logf("kube-controllers %s: elected leader", id)
		runCtx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-sess.Done():
				c.logf("kube-controllers %s: lost leader session", id)
			case <-runCtx.Done():
			}
			cancel()
		}()
		err = c.Run(runCtx)
		cancel()
		release()
		if err != nil && ctx.Err() == nil {
			c.logf("kube-controllers %s: %v", id, err)
		}
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
