package kdd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// member is one member of a JSON object being built, in output order.
type member struct {
	key string
	val json.RawMessage
}

// object is a JSON object whose members keep the order they were added in:
// Calico's metadata annotation is compared as a string, so order matters.
type object []member

// MarshalJSON writes the members in order.
func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(m.key)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		if err := json.Compact(&b, m.val); err != nil {
			return nil, fmt.Errorf("%s: %w", m.key, err)
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// add appends a member with a raw value.
func (o *object) add(key string, val json.RawMessage) { *o = append(*o, member{key, val}) }

// addValue appends a member encoding v.
func (o *object) addValue(key string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("kdd: encoding %s: %v", key, err)) // only plain values are passed
	}
	o.add(key, b)
}

// members parses a JSON object into its members by name; the values stay
// verbatim, so 64-bit integers are exact. what names the object in errors.
func members(data []byte, what string) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if m == nil {
		return nil, fmt.Errorf("%s: not a JSON object", what)
	}
	return m, nil
}

// isNull says whether a raw value is absent or JSON null.
func isNull(v json.RawMessage) bool {
	return len(bytes.TrimSpace(v)) == 0 || string(bytes.TrimSpace(v)) == "null"
}

// isEmptyObject says whether a raw value is absent, null or {}.
func isEmptyObject(v json.RawMessage) bool {
	if isNull(v) {
		return true
	}
	var m map[string]json.RawMessage
	return json.Unmarshal(v, &m) == nil && len(m) == 0
}

// stringOf decodes a JSON string member ("" when absent or null).
func stringOf(m map[string]json.RawMessage, key, what string) (string, error) {
	v, ok := m[key]
	if !ok || isNull(v) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", fmt.Errorf("%s.%s: %w", what, key, err)
	}
	return s, nil
}

// unknownMember returns the first key of m (sorted) not in known, so a
// field nothing here converts is refused by name rather than dropped.
func unknownMember(m map[string]json.RawMessage, known ...string) string {
	var bad string
	for k := range m {
		if !slices.Contains(known, k) && (bad == "" || k < bad) {
			bad = k
		}
	}
	return bad
}
