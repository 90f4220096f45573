package main

import (
	"bytes"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/calico-aio/calico-aio/store/api/calicoschema"
)

// CRD is an apiextensions.k8s.io/v1 CustomResourceDefinition, with the
// members we write.
type CRD struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   Metadata `json:"metadata"`
	Spec       CRDSpec  `json:"spec"`
}

type Metadata struct {
	Name        string            `json:"name"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type CRDSpec struct {
	Group    string    `json:"group"`
	Names    Names     `json:"names"`
	Scope    string    `json:"scope"`
	Versions []Version `json:"versions"`
}

type Names struct {
	Kind       string   `json:"kind"`
	ListKind   string   `json:"listKind"`
	Plural     string   `json:"plural"`
	Singular   string   `json:"singular"`
	ShortNames []string `json:"shortNames,omitempty"`
}

type Version struct {
	Name                     string          `json:"name"`
	Served                   bool            `json:"served"`
	Storage                  bool            `json:"storage"`
	AdditionalPrinterColumns []PrinterColumn `json:"additionalPrinterColumns,omitempty"`
	Schema                   VersionSchema   `json:"schema"`
	Subresources             *Subresources   `json:"subresources,omitempty"`
}

type PrinterColumn struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	JSONPath string `json:"jsonPath"`
}

type VersionSchema struct {
	OpenAPIV3Schema *Schema `json:"openAPIV3Schema"`
}

type Subresources struct {
	Status *struct{} `json:"status,omitempty"`
}

// header opens the generated file.
const header = `# Calico v3.32.1's CRDs (crd.projectcalico.org/v1 and the
# policy.networking.k8s.io ClusterNetworkPolicy Calico installs), generated
# by build/crdgen from store/api/calicoschema/crd-fields-v3.32.1.tsv.
# Do not edit: run "make crds".
`

// Generate renders every CRD of the field list as one YAML stream.
func Generate() ([]byte, error) {
	return generate(header, calicoschema.CRDs())
}

func generate(head string, crds []calicoschema.CRD) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(head)
	for _, c := range crds {
		crd, err := build(c)
		if err != nil {
			return nil, err
		}
		y, err := yaml.Marshal(crd)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.Kind, err)
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return b.Bytes(), nil
}

// build makes one kind's CRD from its field list entry and the facts the
// field list does not carry (facts.go).
func build(c calicoschema.CRD) (*CRD, error) {
	group, version, ok := strings.Cut(c.GroupVersion, "/")
	if !ok {
		return nil, fmt.Errorf("%s: group/version %q has no version", c.Kind, c.GroupVersion)
	}
	root, err := objectSchema(calicoschema.Fields(c.Kind))
	if err != nil {
		return nil, err
	}
	x := crdFacts[c.Kind]
	root.Description = description(c.Kind)
	root.Required = append(x.required, root.Required...)
	if err := addExtras(root, c.Kind); err != nil {
		return nil, err
	}
	v := Version{Name: version, Served: true, Storage: true, AdditionalPrinterColumns: x.columns,
		Schema: VersionSchema{OpenAPIV3Schema: root}}
	if x.status {
		v.Subresources = &Subresources{Status: &struct{}{}}
	}
	return &CRD{
		APIVersion: "apiextensions.k8s.io/v1",
		Kind:       "CustomResourceDefinition",
		Metadata:   Metadata{Name: c.Plural + "." + group, Annotations: x.annotations},
		Spec: CRDSpec{
			Group: group,
			Names: Names{Kind: c.Kind, ListKind: c.Kind + "List", Plural: c.Plural,
				Singular: strings.ToLower(c.Kind), ShortNames: x.shortNames},
			Scope:    c.Scope,
			Versions: []Version{v},
		},
	}, nil
}
