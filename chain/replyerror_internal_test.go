package chain

import (
	"fmt"
	"reflect"
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
