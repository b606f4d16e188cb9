package markdown_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/burnpoller/burnpoller/internal/markdown"
)

const doc = "# Title\n" +
	"\n" +
	"See [design](design.md#one-read) and [here](#a-b_c) and `[not](a link)`, [over\n" +
	"two lines](b.md).\n" +
	"\n" +
	"<!-- example: consume/example_test.go Example -->\n" +
	"```go\n" +
	"func f() {}\n" +
	"// # not a heading, [not](a-link)\n" +
	"```\n" +
	"\n" +
	"## A, b_c\n" +
	"\n" +
	"  ```sh\n" +
	"  make test\n" +
	"  ```\n" +
	"\n" +
	"### `poller events` (one line)\n" +
	"## A, b_c\n" +
	"```\n" +
	"plain\n" +
	"```\n"

func TestBlocks(t *testing.T) {
	t.Parallel()
	got := markdown.Blocks([]byte(doc))
	want := []markdown.Block{
		{Lang: "go", Line: 8, Code: "func f() {}\n// # not a heading, [not](a-link)\n", Directive: "example: consume/example_test.go Example"},
		{Lang: "sh", Line: 15, Code: "make test\n"},
		{Lang: "", Line: 21, Code: "plain\n"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Blocks = %+v\nwant %+v", got, want)
	}
}

func TestLinks(t *testing.T) {
	t.Parallel()
	got := markdown.Links([]byte(doc))
	want := []markdown.Link{{Target: "design.md#one-read", Line: 3}, {Target: "#a-b_c", Line: 3}, {Target: "b.md", Line: 3}}
	if !slices.Equal(got, want) {
		t.Errorf("Links = %+v, want %+v", got, want)
	}
}

func TestAnchors(t *testing.T) {
	t.Parallel()
	got := markdown.Anchors([]byte(doc))
	want := []string{"a-b_c", "a-b_c-1", "poller-events-one-line", "title"}
	keys := make([]string, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if fmt.Sprint(keys) != fmt.Sprint(want) {
		t.Errorf("Anchors = %v, want %v", keys, want)
	}
}

func TestSlug(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give, want string
	}{
		{"Many groups, one Postgres", "many-groups-one-postgres"},
		{"`PAYMENT_HOOK_SQL`: credit in the poller's transaction", "payment_hook_sql-credit-in-the-pollers-transaction"},
		{"Events by seq: [consume](consume.md)", "events-by-seq-consume"},
		{"Receipts contradict a node", "receipts-contradict-a-node"},
		{"Exactly once vs at least once", "exactly-once-vs-at-least-once"},
	}
	for _, tt := range tests {
		if got := markdown.Slug(tt.give); got != tt.want {
			t.Errorf("Slug(%q) = %q, want %q", tt.give, got, tt.want)
		}
	}
}
