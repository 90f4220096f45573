package k8s

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/calico-aio/calico-aio/store/model"
)

// refusingAPI refuses every list from the watch cache (resourceVersion 0)
// with a 429 whose message is message (Retry-After 0, so that client-go's
// own retries do not wait), at most refusals times; it answers the rest
// with an empty list. It records the resourceVersion of each request.
type refusingAPI struct {
	message  string
	refusals int
	mu       sync.Mutex
	got      []string
}

func (f *refusingAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rv := r.URL.Query().Get("resourceVersion")
	f.mu.Lock()
	f.got = append(f.got, rv)
	refuse := rv == "0" && f.refusals > 0
	if refuse {
		f.refusals--
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if refuse {
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429,"message":%q}`, f.message)
		return
	}
	fmt.Fprint(w, `{"kind":"ThingList","apiVersion":"x.io/v1","metadata":{"resourceVersion":"7"},"items":[]}`)
}

func (f *refusingAPI) versions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.got)
}

// TestCacheUnreadyReadsLatest: a recent list the apiserver refuses because
// its watch cache is (re)initializing is sent again at the latest at once
// (client-go would wait the Retry-After, up to 30 s, and ask the cache
// again); a list outside model.RecentReads (an informer's) and a refusal
// for another reason (priority and fairness) are left to client-go's
// retries.
func TestCacheUnreadyReadsLatest(t *testing.T) {
	const unready = "storage is (re)initializing"
	cases := []struct {
		name    string
		message string
		recent  bool
		want    []string
	}{
		{"recent read, cache not ready", unready, true, []string{"0", ""}},
		{"informer's list, cache not ready", unready, false, []string{"0", "0"}},
		{"recent read, throttled", "Too many requests, please try again later.", true, []string{"0", "0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &refusingAPI{message: tc.message, refusals: 1}
			srv := httptest.NewTLSServer(f)
			t.Cleanup(srv.Close)
			c, err := NewClient(writeKubeconfig(t, srv.URL, srv.Certificate()))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if tc.recent {
				ctx = model.RecentReads(ctx)
			}
			things := schema.GroupVersionResource{Group: "x.io", Version: "v1", Resource: "things"}
			_, err = c.dyn.Resource(things).List(ctx, metav1.ListOptions{LabelSelector: "a=b", ResourceVersion: "0"})
			if err != nil {
				t.Fatal(err)
			}
			if got := f.versions(); !slices.Equal(got, tc.want) {
				t.Errorf("resourceVersions asked %q, want %q", got, tc.want)
			}
		})
	}
}
