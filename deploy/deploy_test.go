// Package deploy holds the deployment kit (Prometheus alerts, Grafana
// dashboard, Kubernetes manifests); its tests check them against the code.
package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/burnpoller/burnpoller/internal/markdown"
	"github.com/burnpoller/burnpoller/poller"
	"github.com/burnpoller/burnpoller/webhooks"
)

// knownMetrics are the names burnpoller exports.
func knownMetrics(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	m := poller.NewMetrics(reg, "test", "test", "test")
	// Label sets appear once observed.
	m.RPC("e", "m", "transient", 0)
	m.Lagging("e", 1)
	m.RangeLimit("e", 1)
	m.Active("e")
	m.NodeFault("e", "hidden_burn", 1)
	m.Disagreement("e")
	m.ContractBackfill.WithLabelValues("0x").Set(0)
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
	known := map[string]bool{"burnpoller_ready": true, "up": true} // burnpoller_ready is served by cmd/poller
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

func TestDashboardUsesRealMetrics(t *testing.T) {
	b, err := os.ReadFile("grafana/dashboards/burnpoller.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("dashboard is not valid JSON: %v", err)
	}
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

// runbook is where the alerts' runbook annotations point, from the
// repository's root.
const runbook = "docs/operations/runbook.md"

func TestAlertsUseRealMetrics(t *testing.T) {
	b, err := os.ReadFile("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	var exprs []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
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
	Spec struct {
		Replicas     int `yaml:"replicas"`
		MinAvailable int `yaml:"minAvailable"`
		Template     struct {
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type podSpec struct {
	SecurityContext struct {
		RunAsNonRoot bool `yaml:"runAsNonRoot"`
	} `yaml:"securityContext"`
	Containers []struct {
		Name           string   `yaml:"name"`
		Args           []string `yaml:"args"`
		LivenessProbe  *probe   `yaml:"livenessProbe"`
		ReadinessProbe *probe   `yaml:"readinessProbe"`
		Resources      struct {
			Requests map[string]string `yaml:"requests"`
			Limits   map[string]string `yaml:"limits"`
		} `yaml:"resources"`
		SecurityContext struct {
			ReadOnlyRootFilesystem   bool `yaml:"readOnlyRootFilesystem"`
			AllowPrivilegeEscalation bool `yaml:"allowPrivilegeEscalation"`
		} `yaml:"securityContext"`
	} `yaml:"containers"`
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
		"PodDisruptionBudget/burnpoller", "Secret/burnpoller", "ConfigMap/burnpoller", "Service/burnpoller"} {
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
	if ours != 4 {
		t.Fatalf("%d services run burnpoller:dev, want 4 (devchain, webhook-receiver, poller-1, poller-2)", ours)
	}
}
