package ctl_test

import (
	"os"
	"strings"
	"testing"
)

// recordedUnknownField reads real calicoctl's lines for unknown fields.
func recordedUnknownField(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("testdata/unknown-field.txt")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			out[l[strings.LastIndex(l, " ")+1:]] = l + "\n"
		}
	}
	return out
}

const typoFelix = `apiVersion: projectcalico.org/v3
kind: FelixConfiguration
metadata:
  name: default
spec:
  logSeverityScren: Debug
`

const typoPool = `{"apiVersion":"projectcalico.org/v3","kind":"IPPool","metadata":{"name":"p"},
 "spec":{"cidr":"10.9.0.0/16","natOutgoin":true}}`

// A typo is refused by every command that reads -f, with real calicoctl's
// line on stderr and exit 1, and nothing is stored.
func TestUnknownFieldRefusedLikeCalicoctl(t *testing.T) {
	want := recordedUnknownField(t)
	h := newHarness(t)
	for _, cmd := range []string{"create", "apply", "replace", "validate"} {
		for name, doc := range map[string]string{"logSeverityScren": typoFelix, "natOutgoin": typoPool} {
			out, errs, code := h.run(doc, cmd, "-f", "-")
			if code != 1 || errs != want[name] || out != "" {
				t.Errorf("%s of %s: exit %d\nstdout %q\nstderr %q\nwant stderr %q", cmd, name, code, out, errs, want[name])
			}
		}
	}
	if keys := h.resourceKeys(); len(keys) != 0 {
		t.Errorf("stored %v", keys)
	}
}

// Nested members print their own name only; the first in sorted order wins;
// Calico fields our types do not model and metadata bookkeeping are known;
// patch -p is checked too, but a null (deletion) is not.
func TestUnknownFieldNestedAndPatch(t *testing.T) {
	h := newHarness(t)
	for doc, wantErr := range map[string]string{
		`{"kind":"BGPPeer","apiVersion":"projectcalico.org/v3","metadata":{"name":"a"},"spec":{"zz":1,"password":{"secretKeyRef":{"nam":"x"}}}}`: "nam",
		`{"kind":"NetworkPolicy","metadata":{"name":"a"},"spec":{"ingress":[{"action":"Allow","source":{"net":"10.0.0.0/8"}}]}}`:                 "net",
		`{"kind":"Node","metadata":{"name":"n","finalizers":["x"]},"spec":{"bgp":{"ipv4Adress":"10.0.0.1/24"}}}`:                                 "ipv4Adress",
		`{"kind":"IPPool","metadata":{"name":"p","generation":3},"spec":{"cidr":"10.8.0.0/16","disableBGPExport":false}}`:                        "",
	} {
		_, errs, code := h.run(doc, "validate", "-f", "-")
		switch {
		case wantErr == "" && code != 0:
			t.Errorf("%s: exit %d %s", doc, code, errs)
		case wantErr != "" && errs != "field in document is not recognized or is in the wrong location: "+wantErr+"\n":
			t.Errorf("%s: stderr %q, want the unknown %s", doc, errs, wantErr)
		}
	}
	h.mustRun(`{"kind":"IPPool","apiVersion":"projectcalico.org/v3","metadata":{"name":"p"},"spec":{"cidr":"10.7.0.0/16"}}`, "create", "-f", "-")
	_, errs, code := h.run("", "patch", "ippool", "p", "-p", `{"spec":{"natOutgoin":true}}`)
	if code != 1 || errs != recordedUnknownField(t)["natOutgoin"] {
		t.Errorf("patch with a typo: exit %d, stderr %q", code, errs)
	}
	h.mustRun("", "patch", "ippool", "p", "-p", `{"spec":{"natOutgoing":true,"natOutgoin":null}}`)
}

// Calico fields nothing here honours are refused unless at Calico's
// default; nftablesMode Auto (what real calicoctl stores) passes; a
// LoadBalancer pool is refused naming the field; a kind we do not serve is
// refused whole.
func TestCalicoFieldsOnlyAtDefault(t *testing.T) {
	h := newHarness(t)
	for doc, want := range map[string]string{
		`{"kind":"FelixConfiguration","apiVersion":"projectcalico.org/v3","metadata":{"name":"default"},"spec":{"nftablesMode":"Auto","bpfMapSizeRoute":262144,"bpfKubeProxyMinSyncPeriod":"1000ms"}}`: "",
		`{"kind":"FelixConfiguration","apiVersion":"projectcalico.org/v3","metadata":{"name":"node.a"},"spec":{"bpfMapSizeRoute":1}}`:                                                                  `spec.bpfMapSizeRoute: "1" is not supported by this agent`,
		`{"kind":"IPPool","apiVersion":"projectcalico.org/v3","metadata":{"name":"lb"},"spec":{"cidr":"10.5.0.0/16","allowedUses":["LoadBalancer"]}}`:                                                  `spec.allowedUses[0]: "LoadBalancer" is not supported by this agent`,
		`{"kind":"BGPFilter","apiVersion":"projectcalico.org/v3","metadata":{"name":"f"},"spec":{}}`:                                                                                                   `kind "BGPFilter" is not supported by this agent`,
	} {
		out, errs, code := h.run(doc, "apply", "-f", "-")
		switch {
		case want == "" && code != 0:
			t.Errorf("%s: exit %d\n%s%s", doc, code, out, errs)
		case want != "" && (code != 1 || !strings.Contains(errs, want)):
			t.Errorf("%s: exit %d, stderr %q, want %q", doc, code, errs, want)
		}
	}
}
