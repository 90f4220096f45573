package ctl

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"

	"sigs.k8s.io/yaml"

	"github.com/calico-aio/calico-aio/store/api"
)

// document is one resource read from input, with where it came from.
type document struct {
	index int // 1-based position in the input
	res   api.Resource
}

func readInput(file string, stdin io.Reader) ([]byte, error) {
	if file == "-" {
		return io.ReadAll(stdin)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	return data, nil
}

var docSeparator = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^---(\s.*)?$`) })

// splitYAML splits a multi-document YAML stream on "---" lines.
func splitYAML(data []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if docSeparator().MatchString(line) {
			docs = append(docs, bytes.Clone(cur.Bytes()))
			cur.Reset()
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
	}
	return append(docs, cur.Bytes())
}

// jsonValues splits a stream of JSON values (objects or arrays of objects).
func jsonValues(data []byte) ([]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var out []json.RawMessage
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: invalid JSON: %w", len(out)+1, err)
		}
		if bytes.HasPrefix(bytes.TrimSpace(raw), []byte("[")) {
			var items []json.RawMessage
			if err := json.Unmarshal(raw, &items); err != nil {
				return nil, fmt.Errorf("document %d: %w", len(out)+1, err)
			}
			out = append(out, items...)
			continue
		}
		out = append(out, raw)
	}
}

// parseDocuments turns YAML or JSON input into JSON objects, one per
// document, expanding List kinds into their items.
func parseDocuments(data []byte) ([]json.RawMessage, error) {
	trimmed := bytes.TrimSpace(data)
	var objs []json.RawMessage
	if bytes.HasPrefix(trimmed, []byte("{")) || bytes.HasPrefix(trimmed, []byte("[")) {
		var err error
		if objs, err = jsonValues(trimmed); err != nil {
			return nil, err
		}
	} else {
		for i, doc := range splitYAML(data) {
			if len(bytes.TrimSpace(stripComments(doc))) == 0 {
				continue
			}
			j, err := yaml.YAMLToJSON(doc)
			if err != nil {
				return nil, fmt.Errorf("document %d: invalid YAML: %w", i+1, err)
			}
			if bytes.HasPrefix(bytes.TrimSpace(j), []byte("[")) {
				var items []json.RawMessage
				if err := json.Unmarshal(j, &items); err != nil {
					return nil, fmt.Errorf("document %d: %w", i+1, err)
				}
				objs = append(objs, items...)
				continue
			}
			objs = append(objs, j)
		}
	}
	var out []json.RawMessage
	for _, o := range objs {
		items, isList, err := listItems(o)
		if err != nil {
			return nil, err
		}
		if isList {
			out = append(out, items...)
		} else {
			out = append(out, o)
		}
	}
	if len(out) == 0 {
		return nil, errNoResources
	}
	return out, nil
}

func stripComments(doc []byte) []byte {
	var b bytes.Buffer
	for _, l := range strings.Split(string(doc), "\n") {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// listItems expands {"kind":"List"|"<Kind>List","items":[...]}.
func listItems(o json.RawMessage) ([]json.RawMessage, bool, error) {
	var l struct {
		Kind  string            `json:"kind"`
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(o, &l); err != nil {
		return nil, false, fmt.Errorf("resource is not an object: %w", err)
	}
	if !strings.HasSuffix(l.Kind, "List") {
		return nil, false, nil
	}
	return l.Items, true, nil
}

// loadResources decodes every document strictly (a member the kind does not
// know is refused) and fills in the namespace; it validates nothing yet.
func loadResources(data []byte, namespace string) ([]document, error) {
	raws, err := parseDocuments(data)
	if err != nil {
		return nil, err
	}
	docs := make([]document, 0, len(raws))
	for i, raw := range raws {
		r, err := api.Decode(raw)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if err := api.CheckKnownFields(raw); err != nil {
			return nil, err // calicoctl's message alone (api.UnknownFieldError)
		}
		if err := setNamespace(r, namespace); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		docs = append(docs, document{index: i + 1, res: r})
	}
	return docs, nil
}

// setNamespace applies -n (or "default") to namespaced kinds.
// kindNamespace is the namespace a command addresses for kind k: the
// --namespace given, "default" when none is given for a namespaced kind,
// and "" for a kind that has none.
func kindNamespace(k api.KindInfo, given string) string {
	switch {
	case !k.Namespaced:
		return ""
	case given == "":
		return "default"
	}
	return given
}

func setNamespace(r api.Resource, ns string) error {
	k, ok := api.LookupKind(r.GetTypeMeta().Kind)
	if !ok || !k.Namespaced {
		return nil
	}
	m := r.GetObjectMeta()
	switch {
	case m.Namespace == "" && ns == "":
		m.Namespace = "default"
	case m.Namespace == "":
		m.Namespace = ns
	case ns != "" && m.Namespace != ns:
		return fmt.Errorf("%s %q is in namespace %q but --namespace is %q", k.Kind, m.Name, m.Namespace, ns)
	}
	return nil
}
