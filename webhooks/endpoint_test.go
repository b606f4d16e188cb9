package webhooks

import (
	"strings"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		attempt  int
		r        float64
		min, max time.Duration
	}{
		{1, 0, 500 * time.Millisecond, 500 * time.Millisecond},
		{1, 0.999, 500 * time.Millisecond, time.Second},
		{2, 0, time.Second, time.Second},
		{3, 0.5, 3 * time.Second, 3 * time.Second},
		{12, 0.999, 30 * time.Minute, time.Hour},
		{13, 0, 30 * time.Minute, 30 * time.Minute},
		{1000, 0.999, 30 * time.Minute, time.Hour},
		{0, 0, 500 * time.Millisecond, 500 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := Backoff(tt.attempt, tt.r); got < tt.min || got > tt.max {
			t.Errorf("Backoff(%d, %v) = %s, want within [%s, %s]", tt.attempt, tt.r, got, tt.min, tt.max)
		}
	}
}

func TestParseEndpoints(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, err string
		labels  []string
	}{
		{in: "https://hooks.example.com/t/SECRET", labels: []string{"https://hooks.example.com#"}},
		{in: "https://eoSECRET52mz68hy.m.pipedream.net:8443/", labels: []string{"https://xxxxx.m.pipedream.net:8443#"}},
		{in: "http://u:pw@127.0.0.1:9000/a?k=SECRET, https://h/b", labels: []string{"http://127.0.0.1:9000#", "https://h#"}},
		{in: "https://h/a,https://h/b", labels: []string{"https://h#", "https://h#"}},
		{in: "ftp://h/SECRET", err: "scheme"},
		{in: "https://h/a,", err: "empty"},
		{in: "https:///SECRET", err: "no host"},
		{in: "https://h/a,https://h/a", err: "repeats"},
		{in: "https://h/a#SECRET", err: "fragment"},
		{in: "%zz SECRET", err: "not a URL"},
	}
	for _, tt := range tests {
		eps, err := ParseEndpoints(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) || strings.Contains(err.Error(), "SECRET") {
				t.Errorf("ParseEndpoints(%q) error %v, want one about %q without the URL", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || len(eps) != len(tt.labels) {
			t.Fatalf("ParseEndpoints(%q) = %v, %v", tt.in, eps, err)
		}
		for i, e := range eps {
			if !strings.HasPrefix(e.Label, tt.labels[i]) || strings.Contains(e.Label, "SECRET") || strings.Contains(e.Label, "pw") {
				t.Errorf("label %q, want prefix %q and nothing secret", e.Label, tt.labels[i])
			}
		}
		if len(eps) == 2 && eps[0].Label == eps[1].Label {
			t.Errorf("two URLs share the label %q", eps[0].Label)
		}
	}
}

func TestParseEvents(t *testing.T) {
	t.Parallel()
	if got, err := ParseEvents("confirmed, seen,confirmed"); err != nil || strings.Join(got, ",") != "confirmed,seen" {
		t.Fatalf("ParseEvents = %v, %v", got, err)
	}
	for _, bad := range []string{"", "paid", "seen,"} {
		if _, err := ParseEvents(bad); err == nil {
			t.Errorf("ParseEvents(%q) accepted", bad)
		}
	}
}
