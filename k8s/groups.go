package k8s

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
)

// APIGroups are the names of the API groups the server serves (its
// discovery document /apis, as client-go's ServerGroups reads it): the
// built-in ones, the CRDs' and the aggregated API servers'.
func (c *Client) APIGroups(ctx context.Context) ([]string, error) {
	cfg := rest.CopyConfig(c.cfg)
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(runtime.NewScheme()).WithoutConversion()
	rc, err := rest.UnversionedRESTClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client for %s: %w", cfg.Host, err)
	}
	body, err := rc.Get().AbsPath("/apis").SetHeader("Accept", "application/json").DoRaw(ctx)
	if err != nil {
		return nil, c.classify("API discovery (/apis)", err)
	}
	var list struct {
		Groups []struct{ Name string }
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("API discovery (/apis): %w", err)
	}
	names := make([]string, len(list.Groups))
	for i, g := range list.Groups {
		names[i] = g.Name
	}
	return names, nil
}
