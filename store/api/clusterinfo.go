package api

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
	f.meta(&c.Metadata, false, subdomainProblem)
	return f.join()
}
