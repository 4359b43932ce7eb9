package fleet

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/stack"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// TestPushLayoutKVWatchAbsent (issue 28 item 7): in the push layout, serve
// remote-writing into victoria-metrics and vmalert evaluating the
// generated rules there, no collector scrapes serve, so nothing writes
// up{job="kvwatch"}. KVWatchAbsent must stay quiet while serve pushes (its
// own series arrive with job kvwatch) and fire once serve stops.
func TestPushLayoutKVWatchAbsent(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped with -short")
	}
	vmBin := testenv.VictoriaMetrics(t, "victoria-metrics")
	vmalertBin := testenv.VictoriaMetrics(t, "vmalert")
	amBin := testenv.Tool(t, "prometheus-alertmanager", "prometheus-alertmanager", "alertmanager")
	dir := t.TempDir()
	bin := buildKVWatch(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 170*time.Second)
	defer cancel()

	vmAddr := testenv.FreeAddr(t)
	vm := "http://" + vmAddr
	testenv.Start(t, filepath.Join(dir, "victoria-metrics.log"), vmBin,
		"-storageDataPath="+filepath.Join(dir, "vmdata"), "-httpListenAddr="+vmAddr,
		"-search.latencyOffset=0s", "-search.disableCache", "-loggerLevel=WARN", "-retentionPeriod=1d")
	testenv.WaitOK(ctx, t, vm+"/health")

	// serve watches nothing here: its own series are what the rule reads.
	cfg := filepath.Join(dir, "kvwatch.yml")
	if err := os.WriteFile(cfg, []byte("global: {scrape_interval: 1s, scrape_timeout: 1s}\ntargets: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	serveProc := testenv.Start(t, filepath.Join(dir, "serve.log"), bin, "serve", "--config.file", cfg,
		"--web.listen-address", testenv.FreeAddr(t), "--history", "0",
		"--remote-write.url", vm+"/api/v1/write", "--remote-write.send-interval", "1s")

	// The generated ruler on the generated rules, with a 1s for-duration
	// on the health alerts, and the Alertmanager.
	am := testenv.FreeAddr(t)
	stackCfg := config.Default()
	stackCfg.Alerts.TargetDownFor = model.Duration(time.Second)
	vmalertAddr := testenv.FreeAddr(t)
	files, err := stack.Generate(stack.Options{AlertmanagerAddress: am, GrafanaAdminPassword: "x",
		ScrapeInterval: model.Duration(time.Second), EvaluationInterval: model.Duration(time.Second), Config: stackCfg,
		Agent: stack.AgentOptions{Enabled: true, RemoteWriteURL: vm + "/api/v1/write",
			VMAlertAddress: vmalertAddr, VMAgentAddress: testenv.FreeAddr(t)}})
	if err != nil {
		t.Fatal(err)
	}
	st := filepath.Join(dir, "stack")
	if err := files.Write(st); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "serve's own series pushed with job kvwatch, and no up", func() (bool, error) {
		n, err := count(ctx, vm, `kvwatch_targets{job="kvwatch"}`)
		if err != nil || n != 1 {
			return false, err
		}
		up, err := count(ctx, vm, `up`)
		return up == 0, err
	})
	// The ruler starts once serve pushes (before, kvwatch is rightly
	// absent), with the generated flags, no evaluation delay (see
	// TestFleetEndToEnd) and a 10s lookback instead of 5m
	// (-datasource.queryStep: how long a series that stopped still
	// counts), so that the stop below shows within the test.
	testenv.StartIn(t, st, filepath.Join(dir, "alertmanager.log"), amBin, "--config.file=alertmanager.yml",
		"--storage.path="+filepath.Join(dir, "amdata"), "--web.listen-address="+am, "--cluster.listen-address=")
	testenv.StartIn(t, st, filepath.Join(dir, "vmalert.log"), vmalertBin,
		append(stack.ReadFlagsFile(files.Get(stack.AgentVMAlertFlags)), "-rule.evalDelay=0s", "-datasource.queryStep=10s")...)
	testenv.WaitOK(ctx, t, "http://"+am+"/-/ready")
	// The rules are evaluated and reach Alertmanager.
	eventually(ctx, t, "KVWatchWatchdog in Alertmanager", func() (bool, error) {
		as, err := activeAlerts(ctx, am, stack.AlertWatchdog)
		return len(as) == 1, err
	})
	// Ten evaluations (each one could make the 1s-for alert pending, the
	// next one firing): KVWatchAbsent is never active in vmalert.
	for i := 0; i < 10; i++ {
		if states := vmalertStates(ctx, t, vmalertAddr, stack.AlertExporterAbsent); len(states) > 0 {
			t.Fatalf("%s is %v in vmalert while serve pushes its series", stack.AlertExporterAbsent, states)
		}
		time.Sleep(time.Second)
	}
	if as, err := activeAlerts(ctx, am, stack.AlertExporterAbsent); err != nil || len(as) != 0 {
		t.Fatalf("%s in Alertmanager while serve pushes its series: %v (%v)", stack.AlertExporterAbsent, as, err)
	}

	// serve stops: once its series are stale in the store, the alert fires.
	stopped := time.Now()
	serveProc.Stop()
	eventually(ctx, t, "KVWatchAbsent in Alertmanager after serve stopped", func() (bool, error) {
		as, err := activeAlerts(ctx, am, stack.AlertExporterAbsent)
		return len(as) == 1 && as[0].Labels["job"] == "kvwatch" && as[0].Labels["severity"] == stack.SeverityCritical, err
	})
	t.Logf("KVWatchAbsent fired %s after serve stopped", time.Since(stopped).Round(time.Second))
}

// vmalertStates returns the states (pending, firing) of the active alerts
// named name in vmalert's API.
func vmalertStates(ctx context.Context, t *testing.T, addr, name string) []string {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/api/v1/alerts", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("vmalert alerts: %v", err)
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			Alerts []struct {
				Name  string `json:"name"`
				State string `json:"state"`
			} `json:"alerts"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("vmalert alerts: %v", err)
	}
	var out []string
	for _, a := range r.Data.Alerts {
		if a.Name == name {
			out = append(out, a.State)
		}
	}
	return out
}
