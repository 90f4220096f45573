package calicoipam

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Paths of the API groups the double speaks to.
const (
	crdAPI  = "/apis/crd.projectcalico.org/v1"
	coreAPI = "/api/v1"
)

// Typed failures of one API request (errors.Is on an *APIError).
var (
	ErrNotFound      = errors.New("not found")
	ErrConflict      = errors.New("conflict")       // 409 on an update, a patch or a delete precondition
	ErrAlreadyExists = errors.New("already exists") // 409 on a create
)

// APIError is a non-2xx answer of the apiserver.
type APIError struct {
	Method, Path string
	Code         int
	Reason       string // the Status object's reason (NotFound, Conflict, AlreadyExists...)
	Message      string // the Status object's message
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.Code, e.Reason, e.Message)
}

// Is maps the status to ErrNotFound, ErrConflict or ErrAlreadyExists.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Code == http.StatusNotFound
	case ErrAlreadyExists:
		return e.Code == http.StatusConflict && e.Reason == "AlreadyExists"
	case ErrConflict:
		return e.Code == http.StatusConflict && e.Reason != "AlreadyExists"
	}
	return false
}

// Conn is how the double reaches a kube-apiserver: its URL, a bearer token
// and an HTTP client that trusts its CA.
type Conn struct {
	URL    string // https://127.0.0.1:PORT
	Token  string
	Client *http.Client
}

// request is one API call: method, path (with its query), body and the
// Content-Type of the body.
type request struct {
	method, path, contentType string
	body                      any
}

// do sends r and decodes a 2xx answer into out (when out is not nil). A
// 429 (an apiserver starting a resource's storage, or its priority and
// fairness) is retried after its Retry-After, as client-go does.
func (c Conn) do(ctx context.Context, r request, out any) error {
	var body []byte
	if r.body != nil {
		b, err := json.Marshal(r.body)
		if err != nil {
			return fmt.Errorf("%s %s: %w", r.method, r.path, err)
		}
		body = b
	}
	for tries := 1; ; tries++ {
		code, retryAfter, answer, err := c.send(ctx, r, body)
		if err != nil {
			return fmt.Errorf("%s %s: %w", r.method, r.path, err)
		}
		if code == http.StatusTooManyRequests && tries < maxAttempts {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(retryAfter):
			}
			continue
		}
		if code/100 != 2 {
			return statusError(r, code, answer)
		}
		if out == nil {
			return nil
		}
		if err := json.Unmarshal(answer, out); err != nil {
			return fmt.Errorf("%s %s: decoding the answer: %w", r.method, r.path, err)
		}
		return nil
	}
}

// send makes one HTTP request and returns the status, the Retry-After
// (default one second) and the body of the answer.
func (c Conn) send(ctx context.Context, r request, body []byte) (int, time.Duration, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, strings.TrimSuffix(c.URL, "/")+r.path, rd)
	if err != nil {
		return 0, 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		ct := r.contentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	resp, err := c.Client.Do(req)
	if err != nil {
		return 0, 0, nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	retryAfter := time.Second
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 && s < 10 {
		retryAfter = time.Duration(s) * time.Second
	}
	return resp.StatusCode, retryAfter, answer, err
}

// statusError is the APIError of a non-2xx answer.
func statusError(r request, code int, answer []byte) error {
	var st struct{ Reason, Message string }
	_ = json.Unmarshal(answer, &st)
	if st.Message == "" {
		st.Message = string(bytes.TrimSpace(answer))
	}
	return &APIError{Method: r.method, Path: r.path, Code: code, Reason: st.Reason, Message: st.Message}
}

func (c Conn) get(ctx context.Context, path string, out any) error {
	return c.do(ctx, request{method: http.MethodGet, path: path}, out)
}

// list reads a collection the way Calico's clients do: in pages of 500,
// following the continue token. out is decoded from {"items": [...]}.
func (c Conn) list(ctx context.Context, path string, query url.Values, out any) error {
	if query == nil {
		query = url.Values{}
	}
	query.Set("limit", "500")
	var items []json.RawMessage
	for {
		var page struct {
			Metadata struct{ Continue string }
			Items    []json.RawMessage
		}
		if err := c.get(ctx, path+"?"+query.Encode(), &page); err != nil {
			return err
		}
		items = append(items, page.Items...)
		if page.Metadata.Continue == "" {
			break
		}
		query.Set("continue", page.Metadata.Continue)
	}
	if out == nil {
		return nil
	}
	b, err := json.Marshal(map[string]any{"items": items})
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("GET %s: decoding the items: %w", path, err)
	}
	return nil
}

func (c Conn) create(ctx context.Context, collection string, obj, out any) error {
	return c.do(ctx, request{method: http.MethodPost, path: collection, body: obj}, out)
}

func (c Conn) update(ctx context.Context, path string, obj, out any) error {
	return c.do(ctx, request{method: http.MethodPut, path: path, body: obj}, out)
}

// deleteUID deletes path on the condition that its uid is still uid.
func (c Conn) deleteUID(ctx context.Context, path, uid string) error {
	opts := map[string]any{"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": map[string]string{"uid": uid}}
	return c.do(ctx, request{method: http.MethodDelete, path: path, body: opts}, nil)
}

// patchStatus sends a strategic-merge patch of a pod's status.
func (c Conn) patchStatus(ctx context.Context, podPath string, patch []byte) error {
	return c.do(ctx, request{method: http.MethodPatch, path: podPath + "/status",
		contentType: "application/strategic-merge-patch+json", body: json.RawMessage(patch)}, nil)
}
