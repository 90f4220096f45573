package k8s

import "k8s.io/client-go/dynamic"

// Dynamic is the client's dynamic client, whose requests time out after
// RequestTimeout: for other packages' resources (store/kube's custom
// resources) on the same kubeconfig and connection settings.
func (c *Client) Dynamic() dynamic.Interface { return c.dyn }

// WatchDynamic is the dynamic client without the request timeout, for
// watches (made on first use).
func (c *Client) WatchDynamic() (dynamic.Interface, error) { return c.watchClient() }

// WatchTimeout is how long the server should keep one watch open (what
// WatchChanges asks for), randomised so a client's watches do not all
// restart together.
func WatchTimeout() *int64 { return watchTimeout() }
