package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// Objects written by other Calico versions carry fields our types do not
// model. Decode remembers every such JSON member, wherever it is (top level,
// metadata, spec, status, nested objects), and Marshal writes it back, so a
// read-modify-write keeps what it does not understand exactly as stored.
//
// The rules:
//   - What is unmodelled is decided by walking the Go type alongside the
//     JSON: a struct models the members its json tags (or field names, or
//     embedded structs) name, matched as encoding/json matches them; a map
//     models every key; a type with its own JSON methods models its whole
//     value (it is opaque: it keeps or refuses what it reads itself).
//   - Modelled fields win: an unmodelled member is emitted only beside the
//     modelled members of the same object, and never when the object
//     holding it is no longer encoded (a cleared spec.bgp drops the unknown
//     fields that were inside it).
//   - Arrays (policy rules, ports, ...) are matched by position, and only
//     when the encoded array has the same length as the decoded one: a
//     rule's unknown fields stay with the rule at the same index. When the
//     length changed, which element is which is unknowable, and the
//     unknown fields inside that array are dropped.
//   - Unmodelled members are written after the modelled ones, sorted by
//     name, with their values verbatim (compacted).

// unmodelled is what one decoded JSON value held beyond its Go type.
type unmodelled struct {
	fields map[string]json.RawMessage // members the type has no field for
	inner  map[string]*unmodelled     // modelled members with unmodelled content, by the name we encode
	items  []*unmodelled              // array elements by position; len is the decoded length
}

// Marshal encodes r as JSON with the unmodelled fields it was decoded with.
// Use it, not json.Marshal, wherever a resource is written or shown.
func Marshal(r Resource) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	u := r.GetTypeMeta().unmodelled
	if u == nil {
		return b, nil
	}
	return u.restore(b, reflect.TypeOf(r))
}

// KeepUnmodelled gives dst the unmodelled fields src was decoded with,
// where dst has none of its own at the same place: a writer that builds a
// fresh object for a stored one keeps what the stored one held.
func KeepUnmodelled(dst, src Resource) {
	dt := dst.GetTypeMeta()
	dt.unmodelled = mergeUnmodelled(dt.unmodelled, src.GetTypeMeta().unmodelled)
}

// HasUnmodelled says whether r was decoded with fields its type does not
// model.
func HasUnmodelled(r Resource) bool { return r.GetTypeMeta().unmodelled != nil }

// rememberUnmodelled records what data holds beyond r's type.
func rememberUnmodelled(r Resource, data []byte) error {
	u, err := collectUnmodelled(data, reflect.TypeOf(r))
	if err != nil {
		return err
	}
	r.GetTypeMeta().unmodelled = u
	return nil
}

// opaque says whether t encodes and decodes itself.
func opaque(t reflect.Type) bool {
	m, um := reflect.TypeFor[json.Marshaler](), reflect.TypeFor[json.Unmarshaler]()
	pt := reflect.PointerTo(t)
	return t.Implements(m) || t.Implements(um) || pt.Implements(m) || pt.Implements(um)
}

// deref strips pointers.
func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// jsonFields maps the member names a struct type encodes to their types,
// including the fields of embedded structs without a name of their own.
func jsonFields(t reflect.Type, out map[string]reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			if et := deref(f.Type); et.Kind() == reflect.Struct {
				jsonFields(et, out)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, dup := out[name]; !dup {
			out[name] = f.Type
		}
	}
}

// fieldFor finds the member a JSON key decodes into: an exact name first,
// then a case-insensitive one, as encoding/json does. It returns the name
// the member is encoded under.
func fieldFor(fields map[string]reflect.Type, key string) (string, reflect.Type, bool) {
	if t, ok := fields[key]; ok {
		return key, t, true
	}
	for name, t := range fields {
		if strings.EqualFold(name, key) {
			return name, t, true
		}
	}
	return "", nil, false
}

// collectUnmodelled walks data along t and returns what t does not model
// (nil when it models everything).
func collectUnmodelled(data []byte, t reflect.Type) (*unmodelled, error) {
	if opaque(t) {
		return nil, nil
	}
	t = deref(t)
	if opaque(t) {
		return nil, nil
	}
	switch {
	case t.Kind() == reflect.Struct:
		return collectObject(data, t)
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
		return collectObject(data, t)
	case (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && t.Elem().Kind() != reflect.Uint8:
		var elems []json.RawMessage
		if json.Unmarshal(data, &elems) != nil {
			return nil, nil // not an array (null): nothing to keep inside
		}
		u := &unmodelled{items: make([]*unmodelled, len(elems))}
		found := false
		for i, e := range elems {
			sub, err := collectUnmodelled(e, t.Elem())
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			u.items[i], found = sub, found || sub != nil
		}
		if !found {
			return nil, nil
		}
		return u, nil
	}
	return nil, nil
}

// collectObject handles a struct (some members modelled) or a map (every
// key modelled) type.
func collectObject(data []byte, t reflect.Type) (*unmodelled, error) {
	var members map[string]json.RawMessage
	if json.Unmarshal(data, &members) != nil || members == nil {
		return nil, nil
	}
	var fields map[string]reflect.Type
	if t.Kind() == reflect.Struct {
		fields = map[string]reflect.Type{}
		jsonFields(t, fields)
	}
	u := &unmodelled{}
	for key, val := range members {
		name, ft := key, t
		if fields != nil {
			var ok bool
			if name, ft, ok = fieldFor(fields, key); !ok {
				var c bytes.Buffer
				if err := json.Compact(&c, val); err != nil {
					return nil, fmt.Errorf("%s: %w", key, err)
				}
				if u.fields == nil {
					u.fields = map[string]json.RawMessage{}
				}
				u.fields[key] = c.Bytes()
				continue
			}
		} else {
			ft = t.Elem()
		}
		sub, err := collectUnmodelled(val, ft)
		if err != nil {
			return nil, fmt.Errorf("%s.%w", key, err)
		}
		if sub != nil {
			if u.inner == nil {
				u.inner = map[string]*unmodelled{}
			}
			u.inner[name] = sub
		}
	}
	if u.fields == nil && u.inner == nil {
		return nil, nil
	}
	return u, nil
}

// member is one JSON object member, in encoded order.
type member struct {
	key string
	val json.RawMessage
}

// objectMembers reads a JSON object's members in order (ok false when data
// is not an object).
func objectMembers(data []byte) ([]member, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, _ := tok.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, false
		}
		out = append(out, member{key, val})
	}
	return out, true
}

// restore adds u's content to enc, the encoding of a value of type t.
func (u *unmodelled) restore(enc []byte, t reflect.Type) ([]byte, error) {
	if u == nil || opaque(t) {
		return enc, nil
	}
	t = deref(t)
	if u.items != nil {
		var elems []json.RawMessage
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array || json.Unmarshal(enc, &elems) != nil || len(elems) != len(u.items) {
			return enc, nil // not the array that was decoded: positions mean nothing
		}
		for i := range elems {
			b, err := u.items[i].restore(elems[i], t.Elem())
			if err != nil {
				return nil, err
			}
			elems[i] = b
		}
		return json.Marshal(elems)
	}
	members, ok := objectMembers(enc)
	if !ok {
		return enc, nil // cleared (null): what was inside goes with it
	}
	var fields map[string]reflect.Type
	if t.Kind() == reflect.Struct {
		fields = map[string]reflect.Type{}
		jsonFields(t, fields)
	}
	var b bytes.Buffer
	b.WriteByte('{')
	seen := map[string]bool{}
	write := func(key string, val []byte) {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(val)
	}
	for _, m := range members {
		seen[m.key] = true
		val := []byte(m.val)
		if sub := u.inner[m.key]; sub != nil {
			ft := reflect.Type(nil)
			switch {
			case fields != nil:
				ft = fields[m.key]
			case t.Kind() == reflect.Map:
				ft = t.Elem()
			}
			if ft != nil {
				var err error
				if val, err = sub.restore(val, ft); err != nil {
					return nil, err
				}
			}
		}
		write(m.key, val)
	}
	keys := make([]string, 0, len(u.fields))
	for k := range u.fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !seen[k] {
			write(k, u.fields[k])
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// mergeUnmodelled combines two records of the same place; a's content wins.
func mergeUnmodelled(a, b *unmodelled) *unmodelled {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	out := &unmodelled{}
	if len(a.fields)+len(b.fields) > 0 {
		out.fields = map[string]json.RawMessage{}
		for k, v := range b.fields {
			out.fields[k] = v
		}
		for k, v := range a.fields {
			out.fields[k] = v
		}
	}
	if len(a.inner)+len(b.inner) > 0 {
		out.inner = map[string]*unmodelled{}
		for k, v := range b.inner {
			out.inner[k] = v
		}
		for k, v := range a.inner {
			out.inner[k] = mergeUnmodelled(v, out.inner[k])
		}
	}
	switch {
	case a.items != nil && len(a.items) == len(b.items):
		out.items = make([]*unmodelled, len(a.items))
		for i := range a.items {
			out.items[i] = mergeUnmodelled(a.items[i], b.items[i])
		}
	case a.items != nil:
		out.items = a.items
	default:
		out.items = b.items
	}
	return out
}
