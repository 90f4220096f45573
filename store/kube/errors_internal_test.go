package kube

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store/model"
)

// TestAPIErrors: the API server's answers map to the contract's typed
// errors; a 404 about the resource type (no CRD) is not "not found".
func TestAPIErrors(t *testing.T) {
	c, err := k8s.NewClient(writeKubeconfig(t))
	if err != nil {
		t.Fatal(err)
	}
	b := NewWithClient(c)
	gr := schema.GroupResource{Group: "crd.projectcalico.org", Resource: "ippools"}
	key := model.Key{Kind: "IPPool", Name: "p"}
	cases := []struct {
		err  error
		want error
		text string
	}{
		{apierrors.NewNotFound(gr, "p"), model.ErrNotFound, ""},
		{apierrors.NewGenericServerResponse(404, "get", gr, "", "", 0, false), nil, "are Calico's CRDs installed?"},
		{apierrors.NewAlreadyExists(gr, "p"), model.ErrAlreadyExists, ""},
		{apierrors.NewConflict(gr, "p", errors.New("the object has been modified")), model.ErrConflict, ""},
		{apierrors.NewResourceExpired("too old resource version"), model.ErrRevisionGone, ""},
		{apierrors.NewGone("gone"), model.ErrRevisionGone, ""},
		{apierrors.NewForbidden(gr, "p", errors.New("no")), nil, "forbidden"},
	}
	for _, c := range cases {
		got := b.apiError("get", key, "7", c.err)
		if c.want != nil && !errors.Is(got, c.want) || c.want == nil && (errors.Is(got, model.ErrNotFound) || !strings.Contains(got.Error(), c.text)) {
			t.Errorf("%v: mapped to %v, want %v %q", c.err, got, c.want, c.text)
		}
	}
}

func writeKubeconfig(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u
  user: {token: t}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
