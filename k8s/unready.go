package k8s

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/calico-aio/calico-aio/store/model"
)

// maxStatusBody bounds how much of a 429's body is read to tell why.
const maxStatusBody = 64 << 10

// cacheFallback sends again, at the latest, a recent read (under
// model.RecentReads: resourceVersion 0, the apiserver's watch cache) that
// the apiserver refused because that cache is (re)initializing. The
// apiserver refuses with 429 a list it would serve from a cache not yet
// ready (KEP-4568: a kind's first list after the apiserver or its
// resource starts, or after the cache lost its etcd watch), with a
// Retry-After of one second, up to 30 after a long outage, and client-go
// waits that long before asking the cache again: a CNI call would stall.
// A read at the latest is what a reader that does not ask for recent
// reads makes every time (Calico's plugin does), so it asks nothing of
// etcd that such a reader would not. Other refusals (API priority and
// fairness) and every other read are left to client-go.
type cacheFallback struct{ next http.RoundTripper }

func (c cacheFallback) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusTooManyRequests || !recentRead(req) {
		return resp, err
	}
	body, rerr := io.ReadAll(io.LimitReader(resp.Body, maxStatusBody))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if rerr != nil || !cacheUnready(body) {
		return resp, nil
	}
	q := req.URL.Query()
	q.Del("resourceVersion")
	q.Del("resourceVersionMatch")
	again := req.Clone(req.Context())
	again.URL.RawQuery = q.Encode()
	return c.next.RoundTrip(again)
}

// recentRead: req is a get or list (not a watch) from the watch cache
// made under model.RecentReads.
func recentRead(req *http.Request) bool {
	q := req.URL.Query()
	return req.Method == http.MethodGet && q.Get("resourceVersion") == "0" && q.Get("watch") != "true" &&
		model.ReadsRecent(req.Context())
}

// cacheUnready: body is the apiserver's Status for a watch cache that is
// not ready ("storage is (re)initializing").
func cacheUnready(body []byte) bool {
	var s metav1.Status
	if json.Unmarshal(body, &s) != nil {
		return false
	}
	return s.Reason == metav1.StatusReasonTooManyRequests && strings.Contains(s.Message, "initializing")
}
