package derive

import (
	"encoding/json"
	"fmt"

	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/kdd"
)

// DefaultAllowProfile is the profile Calico serves in Kubernetes datastore
// mode besides the kns.* and ksa.* ones: allow all, revision "1".
const DefaultAllowProfile = "projectcalico-default-allow"

// metaTimestamp is the creationTimestamp of a Kubernetes object (JSON),
// which the k8s package's reduced types leave out.
func metaTimestamp(obj []byte) string {
	var m struct {
		Metadata struct {
			CreationTimestamp string `json:"creationTimestamp"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(obj, &m)
	return m.Metadata.CreationTimestamp
}

// profileRead finishes a derived profile: the source's uid reversed and
// its creationTimestamp, and the revision Calico gives it.
func profileRead(p *api.Profile, src k8s.ObjectMeta, created, revision string) (kdd.Read, error) {
	uid, err := kdd.ReverseUID(src.UID)
	if err != nil {
		return kdd.Read{}, fmt.Errorf("profile %s: %w", p.Metadata.Name, err)
	}
	p.Metadata.UID, p.Metadata.CreationTimestamp = uid, created
	model, err := api.Marshal(p)
	return kdd.Read{Kind: "Profile", Name: p.Metadata.Name, ResourceVersion: revision, UID: src.UID, Model: model}, err
}

// NamespaceProfile derives the kns.<namespace> profile of a Namespace
// (JSON): k8s.NamespaceToProfile's content, the namespace's uid reversed,
// revision "<namespace resourceVersion>/".
func NamespaceProfile(namespace []byte) (kdd.Read, error) {
	var ns k8s.Namespace
	if err := json.Unmarshal(namespace, &ns); err != nil {
		return kdd.Read{}, fmt.Errorf("namespace: %w", err)
	}
	return profileRead(k8s.NamespaceToProfile(ns), ns.Metadata, metaTimestamp(namespace), ns.Metadata.ResourceVersion+"/")
}

// ServiceAccountProfile derives the ksa.<namespace>.<name> profile of a
// ServiceAccount (JSON): k8s.ServiceAccountToProfile's content, the
// account's uid reversed, revision "/<account resourceVersion>".
func ServiceAccountProfile(account []byte) (kdd.Read, error) {
	var sa k8s.ServiceAccount
	if err := json.Unmarshal(account, &sa); err != nil {
		return kdd.Read{}, fmt.Errorf("service account: %w", err)
	}
	return profileRead(k8s.ServiceAccountToProfile(sa), sa.Metadata, metaTimestamp(account), "/"+sa.Metadata.ResourceVersion)
}

// DefaultAllow is the projectcalico-default-allow profile.
func DefaultAllow() (kdd.Read, error) {
	p := &api.Profile{TypeMeta: api.TypeMeta{Kind: "Profile", APIVersion: kdd.ModelAPIVersion}}
	p.Metadata.Name = DefaultAllowProfile
	p.Spec.Ingress = []api.Rule{{Action: api.ActionAllow}}
	p.Spec.Egress = []api.Rule{{Action: api.ActionAllow}}
	model, err := api.Marshal(p)
	return kdd.Read{Kind: "Profile", Name: DefaultAllowProfile, ResourceVersion: "1", Model: model}, err
}
