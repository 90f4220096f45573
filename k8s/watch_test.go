package k8s

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// watchAPI serves watches of network policies: from "" it sends two
// changes and a bookmark, then (after hold) one more change and ends;
// from "12" it answers that the version is too old.
func watchAPI(t *testing.T, hold time.Duration) string {
	t.Helper()
	np := func(typ, rv string) string {
		return fmt.Sprintf(`{"type":%q,"object":{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"web","namespace":"shop","resourceVersion":%q}}}`+"\n", typ, rv)
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/apis/networking.k8s.io/v1/networkpolicies" || r.URL.Query().Get("watch") != "true" {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, status(404, "NotFound"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		flush := func() { w.(http.Flusher).Flush() }
		switch r.URL.Query().Get("resourceVersion") {
		case "":
			fmt.Fprint(w, np("ADDED", "10"), np("MODIFIED", "11"))
			fmt.Fprint(w, `{"type":"BOOKMARK","object":{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"resourceVersion":"12"}}}`+"\n")
			flush()
			select {
			case <-time.After(hold):
			case <-r.Context().Done():
				return
			}
			fmt.Fprint(w, np("DELETED", "13"))
		case "13":
			fmt.Fprint(w, `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Expired","code":410,"message":"too old resource version: 13 (20)"}}`+"\n")
		default:
			w.WriteHeader(http.StatusGone)
			fmt.Fprint(w, status(410, "Gone"))
		}
	}))
	t.Cleanup(srv.Close)
	return writeKubeconfig(t, srv.URL, srv.Certificate())
}

func TestWatchChanges(t *testing.T) {
	t.Parallel()
	// The watch outlives the client's request timeout.
	c, err := NewClient(watchAPI(t, RequestTimeout+500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	n := 0
	rv, err := c.WatchChanges(ctx, WatchNetworkPolicies, "", func() { n++ })
	if err != nil || rv != "13" || n != 3 {
		t.Fatalf("watch from now: rv %q, %d changes, %v; want 13, 3, nil", rv, n, err)
	}
	// Resuming from a version the server no longer has.
	rv, err = c.WatchChanges(ctx, WatchNetworkPolicies, rv, func() { n++ })
	if !errors.Is(err, ErrExpired) || rv != "" || n != 3 {
		t.Errorf("expired (event): rv %q, %d changes, %v", rv, n, err)
	}
	rv, err = c.WatchChanges(ctx, WatchNetworkPolicies, "5", func() { n++ })
	if !errors.Is(err, ErrExpired) || rv != "" {
		t.Errorf("expired (status): rv %q, %v", rv, err)
	}
	if _, err := c.WatchChanges(ctx, "secrets", "", func() {}); err == nil {
		t.Error("watching an unknown kind succeeded")
	}
}

func TestWatchChangesEndsWithContext(t *testing.T) {
	t.Parallel()
	c, err := NewClient(watchAPI(t, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	changed := make(chan struct{}, 3)
	done := make(chan error)
	go func() {
		_, err := c.WatchChanges(ctx, WatchNetworkPolicies, "", func() { changed <- struct{}{} })
		done <- err
	}()
	<-changed
	<-changed
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("after cancel: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("watch did not end with its context")
	}
}
