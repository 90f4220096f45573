package k8s

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// RequestTimeout bounds each request to the API server.
const RequestTimeout = 5 * time.Second

// Errors a Client's reads wrap (test with errors.Is).
var (
	// ErrNotFound: the API server answered that the object does not exist.
	ErrNotFound = errors.New("not found")
	// ErrUnreachable: no answer from the API server (connection, TLS,
	// timeout) or an answer saying it cannot serve now (5xx, 429).
	ErrUnreachable = errors.New("Kubernetes API server unreachable")
	// ErrDenied: the server refused the credentials or the request (401, 403).
	ErrDenied = errors.New("Kubernetes API server denied access")
)

var (
	podsResource            = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	namespacesResource      = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	serviceAccountsResource = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	nodesResource           = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
)

// Client reads core/v1 objects from the Kubernetes API into this package's
// minimal types. It uses client-go's dynamic client, not the typed
// clientset: the clientset and k8s.io/api would double the start-up time
// and the size of the binary, and the CNI plugin starts once per pod.
type Client struct {
	server string
	cfg    *rest.Config
	dyn    dynamic.Interface

	watchOnce sync.Once
	watchDyn  dynamic.Interface // without the request timeout (watch.go)
	watchErr  error
}

// NewClient loads a kubeconfig (kubeconfigPath when set, else the usual
// $KUBECONFIG, ~/.kube/config and in-cluster rules) and returns a client
// whose requests time out after RequestTimeout. It does not contact the
// server.
func NewClient(kubeconfigPath string) (*Client, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfigPath
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err) // err names the file
	}
	return NewClientFromConfig(cfg)
}

// NewClientFromConfig is NewClient for a config already built (a copy of
// cfg gets the client's timeout, user agent, unless cfg sets one its rate
// limit, and cacheFallback). It does not contact the server.
func NewClientFromConfig(in *rest.Config) (*Client, error) {
	cfg := rest.CopyConfig(in)
	cfg.Timeout = RequestTimeout
	// client-go's default limit (5 requests/s, bursts of 10) would delay
	// the controller's reconciliations after a burst of changes by 200 ms
	// per list.
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	cfg.UserAgent = "calico-aio"
	cfg.WarningHandler = rest.NoWarnings{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return cacheFallback{rt} })
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client for %s: %w", cfg.Host, err)
	}
	return &Client{server: cfg.Host, cfg: cfg, dyn: dyn}, nil
}

// Server is the API server's address from the kubeconfig.
func (c *Client) Server() string { return c.server }

// GetPod reads pod ns/name.
func (c *Client) GetPod(ctx context.Context, ns, name string) (*Pod, error) {
	var p Pod
	if err := c.get(ctx, podsResource, "pod", ns, name, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// GetNamespace reads namespace name.
func (c *Client) GetNamespace(ctx context.Context, name string) (*Namespace, error) {
	var n Namespace
	if err := c.get(ctx, namespacesResource, "namespace", "", name, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// GetServiceAccount reads service account ns/name.
func (c *Client) GetServiceAccount(ctx context.Context, ns, name string) (*ServiceAccount, error) {
	var sa ServiceAccount
	if err := c.get(ctx, serviceAccountsResource, "service account", ns, name, &sa); err != nil {
		return nil, err
	}
	return &sa, nil
}

// GetNode reads node name (for its spec.podCIDR).
func (c *Client) GetNode(ctx context.Context, name string) (*Node, error) {
	var n Node
	if err := c.get(ctx, nodesResource, "node", "", name, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// get reads one object and converts it, through JSON, into out.
func (c *Client) get(ctx context.Context, res schema.GroupVersionResource, kind, ns, name string, out any) error {
	what := kind + " " + name
	if ns != "" {
		what = kind + " " + ns + "/" + name
	}
	u, err := GetRecent(ctx, func(o metav1.GetOptions) (*unstructured.Unstructured, error) {
		if ns != "" {
			return c.dyn.Resource(res).Namespace(ns).Get(ctx, name, o)
		}
		return c.dyn.Resource(res).Get(ctx, name, o)
	})
	if err != nil {
		return c.classify(what, err)
	}
	b, err := u.MarshalJSON()
	if err != nil {
		return fmt.Errorf("encoding %s: %w", what, err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("decoding %s: %w", what, err)
	}
	return nil
}

// classify wraps err with ErrNotFound, ErrDenied or ErrUnreachable.
func (c *Client) classify(what string, err error) error {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		// No answer at all: connection, TLS, DNS or the request timeout.
		return fmt.Errorf("%s: %w at %s: %w", what, ErrUnreachable, c.server, err)
	}
	switch code := status.Status().Code; {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s %w", what, ErrNotFound)
	case apierrors.IsUnauthorized(err), apierrors.IsForbidden(err):
		return fmt.Errorf("%s: %w: %w", what, ErrDenied, err)
	case code >= 500, apierrors.IsTooManyRequests(err), apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
		return fmt.Errorf("%s: %w at %s: %w", what, ErrUnreachable, c.server, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
