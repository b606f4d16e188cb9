package chain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestBoundedData: an error's data is kept only in the shapes classify
// reads, and never past its bounds.
func TestBoundedData(t *testing.T) {
	t.Parallel()
	manyFields := make([]string, 20)
	wantFields := map[string]any{}
	for i := range manyFields {
		k := fmt.Sprintf("k%02d", i)
		manyFields[i] = fmt.Sprintf("%q:%q", k, "v")
		if i < maxDataFields {
			wantFields[k] = "v"
		}
	}
	reversed := slices.Clone(manyFields)
	slices.Reverse(reversed)
	tests := []struct {
		name string
		give string
		want any
	}{
		{"a string", `"Receipt not available for From block 1"`, "Receipt not available for From block 1"},
		{"Infura's suggested range", `{"from":"0x1","to":"0x2","n":3}`, map[string]any{"from": "0x1", "to": "0x2"}},
		{"Infura's back-off", `{"rate":{"allowed_rps":1,"backoff_seconds":30,"current_rps":1.1}}`, map[string]any{"rate": map[string]any{"backoff_seconds": 30.0}}},
		{"nested objects and arrays are left out", `{"a":{"b":"c"},"d":[1,2],"e":"f"}`, map[string]any{"e": "f"}},
		{"an array", `[{},{},{}]`, nil},
		{"a number", `42`, nil},
		{"not JSON", `{"a":`, nil},
		{"longer than maxErrorData", `"` + strings.Repeat("a", maxErrorData) + `"`, nil},
		{"a long string is cut", `"` + strings.Repeat("é", maxErrorText) + `"`, strings.Repeat("é", maxErrorText/2) + fmt.Sprintf("… (%d bytes cut)", maxErrorText)},
		{"the first maxDataFields fields", "{" + strings.Join(manyFields, ",") + "}", wantFields},
		{"the first maxDataFields fields, given in reverse", "{" + strings.Join(reversed, ",") + "}", wantFields},
		{"a key over maxKey bytes is left out", `{"` + strings.Repeat("k", maxKey+1) + `":"v","b":"w"}`, map[string]any{"b": "w"}},
		{"a key given again: the last value stands", `{"a":"1","b":"2","a":"3"}`, map[string]any{"a": "3", "b": "2"}},
		{"a key given again, last not a string", `{"a":"1","b":"2","a":3}`, map[string]any{"b": "2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := boundedData([]byte(tt.give)); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("boundedData(%.80s) = %#v, want %#v", tt.give, got, tt.want)
			}
		})
	}
}

// FuzzBoundedDataIsTheMapsFirstFields: an error's data read member by
// member (boundedData) keeps what decoding it whole into a map and taking
// the first maxDataFields fields classify reads, in key order, keeps. A
// key given twice is left out: its last value decides, and one that is not
// kept may leave fewer fields than the map would give (the fields after
// the first maxDataFields are not held); so is a key over maxKey bytes.
func FuzzBoundedDataIsTheMapsFirstFields(f *testing.F) {
	for _, seed := range []string{
		`{"from":"0x1","to":"0x2","n":3}`, `{"rate":{"backoff_seconds":30}}`, `{"rate":"x"}`, `{"rate":{"backoff_seconds":"x"}}`,
		`"a string"`, `{"a":{"b":"c"},"d":[1,2],"e":"f"}`, `{"\u00e9":"x","é":"y"}`, `{"z":"1","y":"2","x":"3"}`,
		`{"k00":"v","k01":"v","k02":"v","k03":"v","k04":"v","k05":"v","k06":"v","k07":"v","k08":"v","k09":"v","k10":"v","k11":"v","k12":"v","k13":"v","k14":"v","k15":"v","k16":"v"}`,
		`{"k16":"v","k15":"v","k14":"v","k13":"v","k12":"v","k11":"v","k10":"v","k09":"v","k08":"v","k07":"v","k06":"v","k05":"v","k04":"v","k03":"v","k02":"v","k01":"v","k00":"v"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) || len(raw) > maxErrorData || oddKeys(raw) {
			return
		}
		if got, want := boundedData(raw), mapsFirstFields(raw); !reflect.DeepEqual(got, want) {
			t.Fatalf("boundedData(%q) = %#v, the map's first fields %#v", raw, got, want)
		}
	})
}

// mapsFirstFields is an error's data as classify read it when it was
// decoded whole: a string, or the first maxDataFields keys of the object's
// map whose value is a string or Infura's rate with its backoff_seconds.
func mapsFirstFields(raw []byte) any {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s errorText
		if s.UnmarshalJSON(raw) != nil {
			return nil
		}
		return string(s)
	}
	var fields map[string]json.RawMessage
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &fields) != nil {
		return nil
	}
	out := map[string]any{}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if len(out) == maxDataFields {
			break
		}
		v := bytes.TrimSpace(fields[k])
		switch {
		case len(v) > 0 && v[0] == '"':
			var s errorText
			if s.UnmarshalJSON(v) == nil {
				out[k] = string(s)
			}
		case k == "rate":
			var rate struct {
				Backoff *float64 `json:"backoff_seconds"`
			}
			if json.Unmarshal(v, &rate) == nil && rate.Backoff != nil {
				out[k] = map[string]any{"backoff_seconds": *rate.Backoff}
			}
		}
	}
	return out
}

// oddKeys says raw is an object that gives one of its keys twice, or a
// key over maxKey bytes, which boundedData leaves out.
func oddKeys(raw []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		k, ok := tok.(string)
		if err != nil || !ok {
			return false
		}
		if seen[k] || len(k) > maxKey {
			return true
		}
		seen[k] = true
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return false
		}
	}
	return false
}
