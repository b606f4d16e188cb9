// Package deploy holds the deployment kit (Prometheus alerts, Grafana
// dashboard, Kubernetes manifests); its tests check them against the code.
package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/burnpoller/burnpoller/config"
	"github.com/burnpoller/burnpoller/internal/markdown"
	"github.com/burnpoller/burnpoller/poller"
	"github.com/burnpoller/burnpoller/webhooks"
)

// observe gives m's labelled metrics a series each: label sets appear
// once observed.
func observe(m *poller.Metrics) {
	m.RPC("e", "m", "transient", 0)
	m.Lagging("e", 1)
	m.RangeLimit("e", 1)
	m.Active("e")
	m.NodeFault("e", "hidden_burn", 1)
	m.Disagreement("e")
	m.ContractBackfill.WithLabelValues("0x").Set(0)
}

// knownMetrics are the names burnpoller exports.
func knownMetrics(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	observe(poller.NewMetrics(reg, "test", "test", "test"))
	reg.MustRegister(poller.NewQueueUsageCollector(func(context.Context) (float64, error) { return 0, nil }, time.Second))
	// The webhook metrics, with one endpoint so that their series exist.
	eps, err := webhooks.ParseEndpoints("https://hooks.example.com/in")
	if err != nil {
		t.Fatal(err)
	}
	webhooks.New(webhooks.Config{Endpoints: eps}, nil, reg, nil)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	// burnpoller_ready and burnpoller_needs_operator are the service's.
	known := map[string]bool{"burnpoller_ready": true, "burnpoller_needs_operator": true, "up": true}
	for _, f := range fams {
		known[f.GetName()] = true
	}
	return known
}

var metricName = regexp.MustCompile(`\b(burnpoller_[a-z_]+)`)

func checkExprs(t *testing.T, where string, exprs []string, known map[string]bool) {
	t.Helper()
	if len(exprs) == 0 {
		t.Fatalf("%s: no expressions found", where)
	}
	for _, e := range exprs {
		for _, m := range metricName.FindAllStringSubmatch(e, -1) {
			name := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m[1], "_bucket"), "_sum"), "_count")
			if !known[name] {
				t.Errorf("%s: %q uses %s, which burnpoller does not export", where, e, m[1])
			}
		}
	}
}

// dashboardJSON is what the checks read of the dashboard.
type dashboardJSON struct {
	UID    string `json:"uid"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name     string `json:"name"`
			AllValue string `json:"allValue"`
		} `json:"list"`
	} `json:"templating"`
}

func dashboard(t *testing.T) dashboardJSON {
	t.Helper()
	b, err := os.ReadFile("grafana/dashboards/burnpoller.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash dashboardJSON
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("dashboard is not valid JSON: %v", err)
	}
	return dash
}

// alertRule is one rule of alerts.yml.
type alertRule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	Annotations map[string]string `yaml:"annotations"`
}

func alertRules(t *testing.T) []alertRule {
	t.Helper()
	b, err := os.ReadFile("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	var out []alertRule
	for _, g := range rules.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

func TestDashboardUsesRealMetrics(t *testing.T) {
	dash := dashboard(t)
	if dash.UID == "" || len(dash.Panels) < 8 {
		t.Fatalf("dashboard has uid %q and %d panels", dash.UID, len(dash.Panels))
	}
	var exprs []string
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	checkExprs(t, "dashboard", exprs, knownMetrics(t))
}

// groupMetrics are the metrics of a group: with GROUPS each carries a
// group label (the process's own, burnpoller_build_info, the webhooks' and
// the notification queue's, do not).
func groupMetrics(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	observe(poller.NewGroupMetrics(reg))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{"burnpoller_ready": true, "burnpoller_needs_operator": true}
	for _, f := range fams {
		out[f.GetName()] = true
	}
	return out
}

// aggregation is a PromQL aggregation and its by clause, if any.
var aggregation = regexp.MustCompile(`\b(sum|min|max|avg|count|topk|bottomk|quantile)\s*(by\s*\(([^)]*)\))?\s*\(`)

// keepsTheGroup says what in expr would merge groups: an aggregation
// without group in its by clause, in an expression over a group's metric;
// and, when selector is set, a group's metric not filtered by it.
func keepsTheGroup(expr string, groups map[string]bool, selector string) []string {
	var problems []string
	grouped := false
	for _, m := range metricName.FindAllStringSubmatchIndex(expr, -1) {
		name := expr[m[2]:m[3]]
		name = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
		if !groups[name] {
			continue
		}
		grouped = true
		if selector != "" && !strings.HasPrefix(expr[m[3]:], "{"+selector) {
			problems = append(problems, name+" is not filtered by "+selector)
		}
	}
	if !grouped {
		return problems
	}
	for _, a := range aggregation.FindAllStringSubmatch(expr, -1) {
		if !slices.Contains(strings.Fields(strings.ReplaceAll(a[3], ",", " ")), "group") {
			problems = append(problems, fmt.Sprintf("%q merges the groups", strings.TrimSpace(a[0])))
		}
	}
	return problems
}

// TestAlertsAndDashboardAreByGroup: every alert and dashboard query over a
// group's metrics keeps the group apart (by (…, group)), and the
// dashboard's follow its group variable, so that they read the same for a
// replica set of one group (no group label) as before and per group for
// one serving several. The alerts' tests (alerts_test.yml, promtool) run
// both.
func TestAlertsAndDashboardAreByGroup(t *testing.T) {
	groups := groupMetrics(t)
	for _, r := range alertRules(t) {
		for _, p := range keepsTheGroup(r.Expr, groups, "") {
			t.Errorf("alert %s: %s", r.Alert, p)
		}
	}
	dash := dashboard(t)
	// "All" must match series without a group label too (one group).
	if len(dash.Templating.List) != 1 || dash.Templating.List[0].Name != "group" || dash.Templating.List[0].AllValue != ".*" {
		t.Fatalf("the dashboard's variables are %+v, want group with All = .*", dash.Templating.List)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, problem := range keepsTheGroup(tg.Expr, groups, `group=~"$group"`) {
				t.Errorf("panel %q: %s", p.Title, problem)
			}
		}
	}
	if problems := keepsTheGroup(`max(burnpoller_cursor_block)`, groups, ""); len(problems) != 1 {
		t.Fatalf("the check does not see an aggregation that merges groups: %v", problems)
	}
}

// runbook is where the alerts' runbook annotations point, from the
// repository's root.
const runbook = "docs/operations/runbook.md"

func TestAlertsUseRealMetrics(t *testing.T) {
	var exprs []string
	for _, r := range alertRules(t) {
		exprs = append(exprs, r.Expr)
		// Every alert points at a section of the runbook that exists.
		link := r.Annotations["runbook"]
		file, anchor, _ := strings.Cut(link, "#")
		if file != runbook || anchor == "" {
			t.Errorf("alert %s: runbook %q is not a section of %s", r.Alert, link, runbook)
			continue
		}
		src, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(file)))
		if err != nil {
			t.Fatal(err)
		}
		if !markdown.Anchors(src)[anchor] {
			t.Errorf("alert %s: runbook %q has no section in %s", r.Alert, link, file)
		}
	}
	checkExprs(t, "alerts", exprs, knownMetrics(t))
}

// manifest is the part of a Kubernetes object the checks read.
type manifest struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name      string `yaml:"name"`
		Namespace string `yaml:"namespace"`
	} `yaml:"metadata"`
	// Data is a ConfigMap's, StringData a Secret's.
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
	Spec       struct {
		Replicas     int `yaml:"replicas"`
		MinAvailable int `yaml:"minAvailable"`
		Template     struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
		// A NetworkPolicy's.
		PodSelector selector      `yaml:"podSelector"`
		PolicyTypes []string      `yaml:"policyTypes"`
		Ingress     []ingressRule `yaml:"ingress"`
	} `yaml:"spec"`
}

type selector struct {
	MatchLabels      map[string]string `yaml:"matchLabels"`
	MatchExpressions []any             `yaml:"matchExpressions"`
}

type ingressRule struct {
	From []struct {
		PodSelector       *selector `yaml:"podSelector"`
		NamespaceSelector *selector `yaml:"namespaceSelector"`
		IPBlock           any       `yaml:"ipBlock"`
	} `yaml:"from"`
	Ports []struct {
		Protocol string `yaml:"protocol"`
		Port     any    `yaml:"port"`
	} `yaml:"ports"`
}

type podSpec struct {
	SecurityContext struct {
		RunAsNonRoot bool `yaml:"runAsNonRoot"`
	} `yaml:"securityContext"`
	Volumes []struct {
		Name      string `yaml:"name"`
		ConfigMap *struct {
			Name string `yaml:"name"`
		} `yaml:"configMap"`
	} `yaml:"volumes"`
	Containers []container `yaml:"containers"`
}

type container struct {
	Name  string   `yaml:"name"`
	Args  []string `yaml:"args"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Env []struct {
		Name      string `yaml:"name"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext struct {
		ReadOnlyRootFilesystem   bool `yaml:"readOnlyRootFilesystem"`
		AllowPrivilegeEscalation bool `yaml:"allowPrivilegeEscalation"`
	} `yaml:"securityContext"`
}

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
	} `yaml:"httpGet"`
}

func manifests(t *testing.T) map[string]manifest {
	t.Helper()
	files, err := filepath.Glob("k8s/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	out := map[string]manifest{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var m manifest
			err := dec.Decode(&m)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if m.Kind == "" || m.Metadata.Name == "" {
				t.Fatalf("%s: an object without kind or name", f)
			}
			if m.Kind != "Namespace" && m.Metadata.Namespace != "burnpoller" {
				t.Errorf("%s: %s %s is not in namespace burnpoller", f, m.Kind, m.Metadata.Name)
			}
			out[m.Kind+"/"+m.Metadata.Name] = m
		}
	}
	return out
}

func TestKubernetesManifests(t *testing.T) {
	ms := manifests(t)
	for _, want := range []string{"Deployment/burnpoller", "Job/burnpoller-migrate", "Job/burnpoller-backfill-18000000",
		"PodDisruptionBudget/burnpoller", "Secret/burnpoller", "ConfigMap/burnpoller", "Service/burnpoller",
		"ConfigMap/burnpoller-postgres-ca", "NetworkPolicy/burnpoller"} {
		if _, ok := ms[want]; !ok {
			t.Errorf("no %s", want)
		}
	}
	d := ms["Deployment/burnpoller"]
	if d.Spec.Replicas != 2 {
		t.Errorf("deployment runs %d replicas, want 2", d.Spec.Replicas)
	}
	if ms["PodDisruptionBudget/burnpoller"].Spec.MinAvailable < 1 {
		t.Error("the disruption budget lets every replica go")
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/livez" || c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Error("the deployment does not probe /livez and /readyz")
	}
	for name, m := range ms {
		if m.Kind != "Deployment" && m.Kind != "Job" {
			continue
		}
		ps := m.Spec.Template.Spec
		if !ps.SecurityContext.RunAsNonRoot {
			t.Errorf("%s may run as root", name)
		}
		for _, c := range ps.Containers {
			if !c.SecurityContext.ReadOnlyRootFilesystem || c.SecurityContext.AllowPrivilegeEscalation {
				t.Errorf("%s/%s: root filesystem writable or privilege escalation allowed", name, c.Name)
			}
			if c.Resources.Requests["memory"] == "" || c.Resources.Limits["memory"] == "" {
				t.Errorf("%s/%s: no memory request and limit", name, c.Name)
			}
		}
	}
}

// TestKubernetesPostgresURLsVerifyTheServer: every Postgres URL of the kit
// verifies the server's certificate and host name (verify-full) against a
// CA file, and every container given such a URL mounts that file from an
// object of the kit: with require, or prefer (the default), anyone on the
// path could pose as the server and be sent the password.
func TestKubernetesPostgresURLsVerifyTheServer(t *testing.T) {
	ms := manifests(t)
	roots := map[string]string{} // Secret key -> the CA file its URL names
	for key, v := range ms["Secret/burnpoller"].StringData {
		if !strings.HasPrefix(v, "postgres://") && !strings.HasPrefix(v, "postgresql://") {
			continue
		}
		u, err := url.Parse(v)
		if err != nil {
			t.Fatalf("Secret %s: %v", key, err)
		}
		q := u.Query()
		if q.Get("sslmode") != "verify-full" || !path.IsAbs(q.Get("sslrootcert")) {
			t.Errorf("Secret %s: sslmode=%q sslrootcert=%q, want verify-full and a CA file", key, q.Get("sslmode"), q.Get("sslrootcert"))
			continue
		}
		roots[key] = q.Get("sslrootcert")
	}
	if len(roots) < 2 {
		t.Fatalf("Postgres URLs in the Secret: %v, want the runtime and the migration one", roots)
	}
	given := 0
	for name, m := range ms {
		ps := m.Spec.Template.Spec
		for _, c := range ps.Containers {
			for _, e := range c.Env {
				if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || roots[e.ValueFrom.SecretKeyRef.Key] == "" {
					continue
				}
				given++
				if err := mountsFile(ms, ps, c, roots[e.ValueFrom.SecretKeyRef.Key]); err != nil {
					t.Errorf("%s/%s, %s: %v", name, c.Name, e.Name, err)
				}
			}
		}
	}
	if given < 3 {
		t.Fatalf("%d containers are given a Postgres URL, want the Deployment's and both Jobs'", given)
	}
}

// mountsFile says whether container c of pod spec ps has file, mounted
// from a ConfigMap of the kit that holds it.
func mountsFile(ms map[string]manifest, ps podSpec, c container, file string) error {
	dir, base := path.Split(file)
	for _, vm := range c.VolumeMounts {
		if path.Clean(vm.MountPath) != path.Clean(dir) {
			continue
		}
		for _, v := range ps.Volumes {
			if v.Name != vm.Name || v.ConfigMap == nil {
				continue
			}
			if _, ok := ms["ConfigMap/"+v.ConfigMap.Name].Data[base]; !ok {
				return fmt.Errorf("ConfigMap %s, mounted at %s, has no %s", v.ConfigMap.Name, dir, base)
			}
			return nil
		}
		return fmt.Errorf("volume %s at %s is not a ConfigMap", vm.Name, dir)
	}
	return fmt.Errorf("nothing mounted at %s for %s", dir, file)
}

// TestKubernetesNetworkPolicy: a NetworkPolicy selects every burnpoller
// pod and admits only a named scraper, to :8080 only: /readyz runs
// database queries, and nothing else in the cluster needs the replicas.
// (The kubelet's probes come from the pod's node, which NetworkPolicy
// always admits.)
func TestKubernetesNetworkPolicy(t *testing.T) {
	ms := manifests(t)
	np := ms["NetworkPolicy/burnpoller"]
	if !slices.Contains(np.Spec.PolicyTypes, "Ingress") {
		t.Fatalf("policyTypes %v: ingress is not restricted", np.Spec.PolicyTypes)
	}
	if len(np.Spec.PodSelector.MatchLabels) == 0 || len(np.Spec.PodSelector.MatchExpressions) > 0 {
		t.Fatalf("podSelector %+v, want labels every burnpoller pod has", np.Spec.PodSelector)
	}
	pods := 0
	for name, m := range ms {
		if m.Kind != "Deployment" && m.Kind != "Job" {
			continue
		}
		pods++
		for k, v := range np.Spec.PodSelector.MatchLabels {
			if m.Spec.Template.Metadata.Labels[k] != v {
				t.Errorf("the NetworkPolicy does not select %s's pods (%s=%s)", name, k, v)
			}
		}
	}
	if pods < 3 {
		t.Fatalf("%d pod templates, want the Deployment's and both Jobs'", pods)
	}
	if len(np.Spec.Ingress) == 0 {
		t.Fatal("no ingress rule: not even the scraper is admitted")
	}
	for i, r := range np.Spec.Ingress {
		if len(r.Ports) != 1 || r.Ports[0].Protocol != "TCP" || fmt.Sprint(r.Ports[0].Port) != "8080" {
			t.Errorf("ingress rule %d: ports %+v, want TCP 8080 alone", i, r.Ports)
		}
		if len(r.From) == 0 {
			t.Errorf("ingress rule %d admits every source", i)
		}
		for _, f := range r.From {
			if f.IPBlock != nil || f.PodSelector == nil || len(f.PodSelector.MatchLabels) == 0 || f.NamespaceSelector == nil {
				t.Errorf("ingress rule %d: a source %+v that is not a named scraper in a named namespace", i, f)
			}
		}
	}
	port := 0
	for _, p := range ms["Deployment/burnpoller"].Spec.Template.Spec.Containers[0].Ports {
		if p.Name == "http" {
			port = p.ContainerPort
		}
	}
	if port != 8080 {
		t.Fatalf("the replicas serve on %d, not the port the NetworkPolicy admits", port)
	}
}

// TestComposeContainersAreHardened: the images we build (pollers, devchain)
// run as non-root with a read-only root filesystem, no capabilities and no
// privilege escalation, as the README says.
func TestComposeContainersAreHardened(t *testing.T) {
	raw, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Image       string   `yaml:"image"`
			ReadOnly    bool     `yaml:"read_only"`
			User        string   `yaml:"user"`
			CapDrop     []string `yaml:"cap_drop"`
			SecurityOpt []string `yaml:"security_opt"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &compose); err != nil {
		t.Fatal(err)
	}
	ours := 0
	for name, svc := range compose.Services {
		if svc.Image != "burnpoller:dev" {
			continue
		}
		ours++
		if !svc.ReadOnly || svc.User == "" || strings.HasPrefix(svc.User, "0") || strings.HasPrefix(svc.User, "root") ||
			!slices.Contains(svc.CapDrop, "ALL") || !slices.Contains(svc.SecurityOpt, "no-new-privileges:true") {
			t.Errorf("service %s: read_only=%v user=%q cap_drop=%v security_opt=%v", name, svc.ReadOnly, svc.User, svc.CapDrop, svc.SecurityOpt)
		}
	}
	if ours != 5 {
		t.Fatalf("%d services run burnpoller:dev, want 5 (devchain, sidechain, webhook-receiver, poller-1, poller-2)", ours)
	}
}

// loadKit loads the configuration of env (as the binary would from the
// environment), with every variable of burnpoller the machine has set
// cleared first.
func loadKit(t *testing.T, env map[string]string) (config.Set, []string) {
	t.Helper()
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := env[k]; !ok && (strings.Contains(k, "RPC_URL") || strings.Contains(k, "CHAIN_ID") ||
			strings.Contains(k, "BURN_CONTRACT") || k == "GROUPS" || strings.HasPrefix(k, "DATABASE_")) {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	return config.Load(config.ScopeServe)
}

// TestTheKitServesTwoChainsFromOneReplicaSet: the Kubernetes kit and the
// compose file configure two groups, one per chain, for one replica set:
// their variables load without a problem or a warning, the Deployment
// gives each group its RPC URL from the Secret, and the compose file's
// groups point at its two dev chains with their chain ids.
func TestTheKitServesTwoChainsFromOneReplicaSet(t *testing.T) {
	ms := manifests(t)
	env := map[string]string{}
	for k, v := range ms["ConfigMap/burnpoller"].Data {
		env[k] = v
	}
	given := map[string]bool{}
	for _, e := range ms["Deployment/burnpoller"].Spec.Template.Spec.Containers[0].Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			env[e.Name] = ms["Secret/burnpoller"].StringData[e.ValueFrom.SecretKeyRef.Key]
			given[e.Name] = true
		}
	}
	// The Secret's URLs name a CA file of the cluster's; the check of
	// the URLs themselves is TestKubernetesPostgresURLsVerifyTheServer.
	env["DATABASE_URL"] = "postgres://burnpoller_runtime@postgres.db.svc:5432/burnpoller"
	delete(env, "DATABASE_DIRECT_URL")
	for i, contract := range []string{"ETH_BURN_CONTRACT", "BASE_BURN_CONTRACT"} {
		env[contract] = fmt.Sprintf("0x%040x", i+1) // the kit's are placeholders
	}
	t.Run("kubernetes", func(t *testing.T) {
		set, problems := loadKit(t, env)
		if len(problems) > 0 || len(set.Warnings) > 0 {
			t.Fatalf("problems %q, warnings %q", problems, set.Warnings)
		}
		if len(set.Groups) != 2 || set.Groups[0].ChainID == set.Groups[1].ChainID {
			t.Fatalf("groups %+v, want two chains", set.Groups)
		}
		for _, g := range set.Groups {
			if !given[g.Var("RPC_URL")] {
				t.Errorf("the Deployment does not give %s", g.Var("RPC_URL"))
			}
		}
	})

	raw, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Command     []string          `yaml:"command"`
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &compose); err != nil {
		t.Fatal(err)
	}
	t.Run("compose", func(t *testing.T) {
		set, problems := loadKit(t, compose.Services["poller-1"].Environment)
		if len(problems) > 0 || len(set.Warnings) > 0 {
			t.Fatalf("problems %q, warnings %q", problems, set.Warnings)
		}
		if len(set.Groups) != 2 {
			t.Fatalf("groups %+v, want two", set.Groups)
		}
		for _, g := range set.Groups {
			u, err := url.Parse(g.RPCURL)
			if err != nil {
				t.Fatal(err)
			}
			chain := compose.Services[u.Hostname()]
			i := slices.Index(chain.Command, "--chain-id")
			id := "1337" // devchain's default
			if i >= 0 {
				id = chain.Command[i+1]
			}
			if chain.Command == nil || fmt.Sprint(g.ChainID) != id {
				t.Errorf("group %s reaches service %q, whose chain id is %s, as chain %d", g.Name, u.Hostname(), id, g.ChainID)
			}
		}
	})
}
