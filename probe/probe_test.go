package probe_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/burnpoller/burnpoller/probe"
)

func serve(t *testing.T, live func() error, checks []probe.Check) string {
	t.Helper()
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "burnpoller_up 1\n") })
	return "http://" + serveHandler(t, probe.Handler(live, checks, metrics))
}

func get(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestReadyzNamesEachFailingCheck(t *testing.T) {
	t.Parallel()
	ok := func(context.Context) error { return nil }
	base := serve(t, func() error { return nil }, []probe.Check{
		{Name: "database", Func: ok},
		{Name: "node", Func: func(context.Context) error { return errors.New("unreachable") }},
		{Name: "migrations", Func: func(context.Context) error { return errors.New("pending") }},
	})
	code, body := get(t, http.MethodGet, base+"/readyz")
	if code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz = %d, want 503", code)
	}
	var st probe.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"database": "ok", "node": "unreachable", "migrations": "pending"}
	for k, v := range want {
		if st.Checks[k] != v {
			t.Errorf("check %s = %q, want %q (body %s)", k, st.Checks[k], v, body)
		}
	}
	if st.Status != "not ready" {
		t.Fatalf("status = %q", st.Status)
	}
}

func TestReadyAndLive(t *testing.T) {
	t.Parallel()
	live := errors.New("no progress for 2m0s")
	base := serve(t, func() error { return live }, []probe.Check{{Name: "database", Func: func(context.Context) error { return nil }}})
	if code, body := get(t, http.MethodGet, base+"/readyz"); code != http.StatusOK || !strings.Contains(body, `"ready"`) {
		t.Fatalf("/readyz = %d %s", code, body)
	}
	if code, body := get(t, http.MethodGet, base+"/livez"); code != http.StatusServiceUnavailable || !strings.Contains(body, "no progress") {
		t.Fatalf("/livez = %d %s", code, body)
	}
	if code, body := get(t, http.MethodGet, base+"/metrics"); code != http.StatusOK || !strings.Contains(body, "burnpoller_up") {
		t.Fatalf("/metrics = %d %s", code, body)
	}
}

func TestOnlyGetOnKnownPaths(t *testing.T) {
	t.Parallel()
	base := serve(t, func() error { return nil }, nil)
	tests := []struct {
		method, path string
		want         int
	}{
		{http.MethodPost, "/readyz", http.StatusMethodNotAllowed},
		{http.MethodDelete, "/metrics", http.StatusMethodNotAllowed},
		{http.MethodPut, "/livez", http.StatusMethodNotAllowed},
		{http.MethodGet, "/", http.StatusNotFound},
		{http.MethodGet, "/debug/pprof/", http.StatusNotFound},
		{http.MethodHead, "/livez", http.StatusOK},
	}
	for _, tt := range tests {
		if code, _ := get(t, tt.method, base+tt.path); code != tt.want {
			t.Errorf("%s %s = %d, want %d", tt.method, tt.path, code, tt.want)
		}
	}
}

// TestSlowCheckTimesOut: a check that never answers is ended by
// CheckTimeout and reported as "timeout". The check waits for ever unless its
// context ends, so Run can only return because the timeout fired; the guard,
// 20 times CheckTimeout, only keeps a broken Run from hanging the test.
func TestSlowCheckTimesOut(t *testing.T) {
	t.Parallel()
	ended := make(chan error, 1)
	done := make(chan probe.Status, 1)
	go func() {
		done <- probe.Run(context.Background(), []probe.Check{{Name: "node", Func: func(ctx context.Context) error {
			<-ctx.Done()
			ended <- ctx.Err()
			return ctx.Err()
		}}})
	}()
	var st probe.Status
	select {
	case st = <-done:
	case <-time.After(20 * probe.CheckTimeout):
		t.Fatalf("Run still waiting %s into a %s check timeout", 20*probe.CheckTimeout, probe.CheckTimeout)
	}
	if err := <-ended; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the check's context ended with %v, want its deadline", err)
	}
	if st.Checks["node"] != "timeout" || st.Status != "not ready" {
		t.Fatalf("status = %+v", st)
	}
}

// TestReadyzOfGroups: with named groups, the process is ready while its
// own checks pass and one group is ready; each group's state is in the
// body, and a group that needs an operator is named so.
func TestReadyzOfGroups(t *testing.T) {
	t.Parallel()
	ok := func(context.Context) error { return nil }
	failing := func(state string) func(context.Context) error {
		return func(context.Context) error { return errors.New(state) }
	}
	group := func(name string, needsOperator bool, poller func(context.Context) error) probe.Group {
		return probe.Group{Name: name, Checks: []probe.Check{{Name: "node", Func: ok}, {Name: "poller", Func: poller}},
			NeedsOperator: func() bool { return needsOperator }}
	}
	tests := []struct {
		name       string
		process    func(context.Context) error
		groups     []probe.Group
		wantCode   int
		wantGroups map[string]probe.GroupStatus
	}{
		{
			name: "one group of two ready", process: ok,
			groups:   []probe.Group{group("eth", false, ok), group("base", true, failing("finality violation at block 7"))},
			wantCode: http.StatusOK,
			wantGroups: map[string]probe.GroupStatus{
				"eth":  {Status: "ready", Checks: map[string]string{"node": "ok", "poller": "ok"}},
				"base": {Status: "needs operator", Checks: map[string]string{"node": "ok", "poller": "finality violation at block 7"}},
			},
		},
		{
			name: "no group ready", process: ok,
			groups:   []probe.Group{group("eth", false, failing("starting")), group("base", true, failing("wrong chain id"))},
			wantCode: http.StatusServiceUnavailable,
			wantGroups: map[string]probe.GroupStatus{
				"eth":  {Status: "not ready", Checks: map[string]string{"node": "ok", "poller": "starting"}},
				"base": {Status: "needs operator", Checks: map[string]string{"node": "ok", "poller": "wrong chain id"}},
			},
		},
		{
			name: "the database down", process: failing("unreachable"),
			groups:   []probe.Group{group("eth", false, ok)},
			wantCode: http.StatusServiceUnavailable,
			wantGroups: map[string]probe.GroupStatus{
				"eth": {Status: "ready", Checks: map[string]string{"node": "ok", "poller": "ok"}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := probe.HandlerFor(func() error { return nil },
				probe.Readiness{Checks: []probe.Check{{Name: "database", Func: tt.process}}, Groups: tt.groups}, http.NotFoundHandler())
			code, body := get(t, http.MethodGet, "http://"+serveHandler(t, h)+"/readyz")
			var st probe.Status
			if err := json.Unmarshal([]byte(body), &st); err != nil {
				t.Fatal(err)
			}
			if code != tt.wantCode || !reflect.DeepEqual(st.Groups, tt.wantGroups) {
				t.Fatalf("/readyz = %d %s, want %d with groups %+v", code, body, tt.wantCode, tt.wantGroups)
			}
		})
	}
}
