package api

import (
	"strconv"
	"strings"
)

// ClusterInformation ("default") identifies the cluster and says whether the
// datastore is ready for use.
type ClusterInformation struct {
	TypeMeta
	Metadata ObjectMeta             `json:"metadata"`
	Spec     ClusterInformationSpec `json:"spec"`
}

// ClusterInformationSpec is projectcalico.org/v3 ClusterInformation.spec.
type ClusterInformationSpec struct {
	ClusterGUID    string `json:"clusterGUID,omitempty"`
	ClusterType    string `json:"clusterType,omitempty"`
	CalicoVersion  string `json:"calicoVersion,omitempty"`
	DatastoreReady *bool  `json:"datastoreReady,omitempty"`
	Variant        string `json:"variant,omitempty"`
}

func init() {
	register(KindInfo{
		Kind: "ClusterInformation", Plural: "clusterinformations",
		Aliases: []string{"clusterinformation", "clusterinfo", "clusterinfos"},
		New:     func() Resource { return &ClusterInformation{} },
	})
}

func (c *ClusterInformation) GetObjectMeta() *ObjectMeta { return &c.Metadata }

// Default does nothing: the writer chooses every field.
func (c *ClusterInformation) Default() {}

// Validate checks the metadata; the spec is free-form.
func (c *ClusterInformation) Validate() error {
	var f fieldErrs
	f.unsupported(c)
	f.meta(&c.Metadata, false, subdomainProblem)
	return f.join()
}

// CalicoAPIVersion is the Calico release whose projectcalico.org/v3 API and
// datastore layout we implement (the recorded compatibility data is from
// it). It, not our own build version, goes into ClusterInformation
// spec.calicoVersion: Calico's calicoctl refuses to work when that field's
// version differs from its own.
const CalicoAPIVersion = "v3.32.1"

// IsCalicoRelease says whether v names a Calico release that speaks the v3
// API: "v3.32.1" or "3.31.0-0.dev-12-gabc" (a leading v is optional, and so
// is a suffix after "-"). A git hash or "dev", which our old builds wrote
// into spec.calicoVersion, is not one; neither is a version below 3.
func IsCalicoRelease(v string) bool {
	core, _, _ := strings.Cut(strings.TrimPrefix(v, "v"), "-")
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || strconv.Itoa(n) != p || (i == 0 && n < 3) {
			return false
		}
	}
	return true
}
