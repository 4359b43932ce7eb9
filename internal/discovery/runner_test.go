package discovery

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/discovery/http"
	"github.com/prometheus/prometheus/discovery/targetgroup"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/pipeline"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// Discovered adds an entry's targets after the config's; an update over
// target_limit keeps the targets the entry had; a name the config already
// has is left out; each is a log line and a metric, logged once.
func TestDiscovered(t *testing.T) {
	sd := http.DefaultSDConfig
	sd.URL = "http://127.0.0.1:1/sd"
	c := config.Default()
	c.Targets = []config.Target{{Name: "static", URL: "http://127.0.0.1:2"}}
	c.HTTPSD = []config.HTTPSD{{Config: sd, SDTargets: config.SDTargets{TargetLimit: 2}}}
	p, err := pipeline.Load(config.Sources{Config: c}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	r, err := New(Options{Registry: reg, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, p.Config)
	if err != nil {
		t.Fatal(err)
	}
	const set = "http_sd_configs[0]"
	update := func(addrs ...string) {
		g := &targetgroup.Group{Source: "sd"}
		for _, a := range addrs {
			g.Targets = append(g.Targets, model.LabelSet{"__address__": model.LabelValue(a)})
		}
		r.mu.Lock()
		r.groups = map[string][]*targetgroup.Group{set: {g}}
		r.mu.Unlock()
		r.seen.sent(set)
	}
	names := func(p *pipeline.Pipeline) []string {
		var out []string
		for _, t := range p.Targets {
			out = append(out, t.Name)
		}
		return out
	}
	metric := func(m signal.Metric, labels ...string) float64 {
		t.Helper()
		switch m.Type {
		case signal.Counter:
			return testutil.ToFloat64(r.m.apiFailures.WithLabelValues(labels...))
		}
		for _, v := range []*prometheus.GaugeVec{r.m.targets, r.m.dropped} {
			if d, err := v.GetMetricWithLabelValues(labels...); err == nil && strings.Contains(d.Desc().String(), `"`+m.Name+`"`) {
				return testutil.ToFloat64(d)
			}
		}
		t.Fatalf("no %s%v", m.Name, labels)
		return 0
	}
	for _, step := range []struct {
		name              string
		addrs             []string
		want              []string
		targets           float64
		overLimit, taken  float64
		log               string // a line the step logs; "": nothing
		discoveredTargets int
	}{
		{"two targets", []string{"127.0.0.1:10", "127.0.0.1:11"}, []string{"static", "127.0.0.1:10", "127.0.0.1:11"}, 2, 0, 0,
			"http_sd_configs[0]: 2 targets (0 dropped by relabel_configs)", 2},
		{"the same again logs nothing", []string{"127.0.0.1:11", "127.0.0.1:10"}, []string{"static", "127.0.0.1:10", "127.0.0.1:11"}, 2, 0, 0, "", 2},
		{"over target_limit keeps what it had", []string{"127.0.0.1:10", "127.0.0.1:11", "127.0.0.1:12"}, []string{"static", "127.0.0.1:10", "127.0.0.1:11"}, 2, 3, 0,
			"http_sd_configs[0]: found 3 targets, over its target_limit 2: kvwatch keeps the 2 targets it had and scrapes none of the new ones", 2},
		{"back within the limit", []string{"127.0.0.1:12"}, []string{"static", "127.0.0.1:12"}, 1, 0, 0, "", 1},
		{"a name the config has", []string{"127.0.0.1:12", "static"}, []string{"static", "127.0.0.1:12"}, 1, 0, 1,
			"http_sd_configs[0]: 1 targets have the name of another target and are left out: static", 1},
	} {
		t.Run(step.name, func(t *testing.T) {
			update(step.addrs...)
			before := logs.Len()
			np := r.Discovered(p)
			if got := names(np); !slices.Equal(got, step.want) {
				t.Errorf("targets = %v, want %v", got, step.want)
			}
			if np.DiscoveredTargets != step.discoveredTargets {
				t.Errorf("DiscoveredTargets = %d, want %d", np.DiscoveredTargets, step.discoveredTargets)
			}
			if got := metric(signal.DiscoveryTargets, set); got != step.targets {
				t.Errorf("%s = %g, want %g", signal.DiscoveryTargets.Name, got, step.targets)
			}
			if got := metric(signal.DiscoveryDroppedTargets, set, ReasonOverLimit); got != step.overLimit {
				t.Errorf("dropped over_limit = %g, want %g", got, step.overLimit)
			}
			if got := metric(signal.DiscoveryDroppedTargets, set, ReasonDuplicate); got != step.taken {
				t.Errorf("dropped duplicate = %g, want %g", got, step.taken)
			}
			logged := logs.String()[before:]
			if step.log != "" && !strings.Contains(logged, step.log) {
				t.Errorf("log = %q, want a line with %q", logged, step.log)
			}
			if step.log == "" && logged != "" {
				t.Errorf("log = %q, want nothing", logged)
			}
		})
	}
	// The config without the entry: its targets and series go.
	apply, err := r.Prepare(config.Default())
	if err != nil {
		t.Fatal(err)
	}
	apply()
	if n, err := testutil.GatherAndCount(reg, signal.DiscoveryTargets.Name); err != nil || n != 0 {
		t.Errorf("%s series after the entry went = %d (%v), want 0", signal.DiscoveryTargets.Name, n, err)
	}
}

// An entry that cannot have a client refuses the config, saying how to fix it.
func TestKubernetesEntryWithoutClient(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	c, err := config.Parse([]byte("kubernetes_sd_configs: [{role: pod}]\n"), "kvwatch.yml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(Options{Registry: prometheus.NewRegistry()}, c)
	want := "kubernetes_sd_configs[0]: no kubeconfig_file or api_server, and kvwatch is not in a Kubernetes pod (KUBERNETES_SERVICE_HOST is unset), so it has no service account to discover with; set kubeconfig_file"
	if err == nil || err.Error() != want {
		t.Errorf("New = %v, want %q", err, want)
	}
	c.KubernetesSD[0].Config.KubeConfig = kubeconfig(t)
	if _, err := New(Options{Registry: prometheus.NewRegistry()}, c); err != nil {
		t.Errorf("New with a kubeconfig_file = %v", err)
	}
}

// A reload (serve's SIGHUP) may land while Run is returning (serve
// stopping): the checks it would start are not added to the WaitGroup Run
// is waiting on (a race under -race), and Run still returns. 30 rounds
// with a reload loop running across the end of Run.
func TestReloadWhileRunEnds(t *testing.T) {
	c, err := config.Parse([]byte("kubernetes_sd_configs: [{role: pod, kubeconfig_file: "+kubeconfig(t)+"}]\n"), "kvwatch.yml")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		r, err := New(Options{Registry: prometheus.NewRegistry(), CheckInterval: time.Hour}, c)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() { ran <- r.Run(ctx) }()
		stop, first, stopped := make(chan struct{}), make(chan struct{}), make(chan struct{})
		go func() {
			defer close(stopped)
			n := 0
			for {
				select {
				case <-stop:
					return
				default:
				}
				apply, err := r.Prepare(c)
				if err != nil {
					t.Error(err)
					close(first)
					return
				}
				apply()
				if n++; n == 1 {
					close(first)
				}
			}
		}()
		<-first // reloads run from before the end of Run to after it
		time.Sleep(time.Duration(i%3) * time.Millisecond)
		cancel()
		select {
		case err := <-ran:
			if err != nil {
				t.Fatalf("round %d: Run = %v", i, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("round %d: Run did not return within a minute of its context's end", i)
		}
		close(stop)
		<-stopped
	}
}
