package k8s

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/calico-aio/calico-aio/store/model"
)

// ReadVersion is the resourceVersion a read under ctx asks for: "0" (the
// apiserver's watch cache) when ctx allows recent reads
// (model.RecentReads), else "" (the latest, read from etcd).
func ReadVersion(ctx context.Context) string {
	if model.ReadsRecent(ctx) {
		return "0"
	}
	return ""
}

type absentOKKey struct{}

// AbsentFromCache marks ctx so that GetRecent reports what the watch cache
// does not have as missing, without reading it again: for a reader that
// tolerates a missing answer as it tolerates an old one (the IPAM's
// snapshot: its writes are compare-and-swap).
func AbsentFromCache(ctx context.Context) context.Context {
	return context.WithValue(ctx, absentOKKey{}, true)
}

// GetRecent makes a get through get, from the watch cache when ctx allows
// it; what the cache does not have is read again at the latest (unless
// ctx says AbsentFromCache), so that a just-created object is not
// reported missing.
func GetRecent(ctx context.Context, get func(metav1.GetOptions) (*unstructured.Unstructured, error)) (*unstructured.Unstructured, error) {
	rv := ReadVersion(ctx)
	u, err := get(metav1.GetOptions{ResourceVersion: rv})
	if rv != "" && apierrors.IsNotFound(err) && ctx.Value(absentOKKey{}) == nil {
		return get(metav1.GetOptions{})
	}
	return u, err
}
