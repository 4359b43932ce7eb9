package stack

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/testenv"
)

func TestSuperviseRestartsKilledProcess(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	ctx, cancel := context.WithCancel(context.Background())
	pids := make(chan int, 4)
	done := make(chan error, 1)
	logPath := filepath.Join(t.TempDir(), "sleep.log")
	go func() {
		done <- Supervise(ctx, Spec{Name: "sleep", Path: sleep, Args: []string{"600"}, Log: logPath},
			SuperviseOptions{MinBackoff: time.Millisecond, OnStart: func(_ string, pid int) { pids <- pid }})
	}()
	first := <-pids
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	second := <-pids
	if second == first {
		t.Fatalf("restarted process has the killed one's pid %d", first)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Supervise after cancel = %v, want nil", err)
	}
	// The restarted process must be gone after a clean stop.
	if err := syscall.Kill(second, 0); err == nil {
		t.Errorf("process %d still runs after Supervise returned", second)
	}
}

func TestUpReportsMissingBinaries(t *testing.T) {
	_, dir := generateDir(t, Options{GrafanaAdminPassword: "x"})
	notFound := func(string) (string, error) { return "", exec.ErrNotFound }
	err := Up(context.Background(), UpOptions{Dir: dir, LookPath: notFound})
	var me *MissingError
	if !errors.As(err, &me) {
		t.Fatalf("Up with nothing installed = %v, want a MissingError", err)
	}
	for _, want := range []string{
		"prometheus not found on PATH (looked for prometheus): apt-get install prometheus",
		"alertmanager not found on PATH (looked for prometheus-alertmanager, alertmanager): apt-get install prometheus-alertmanager",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "grafana") {
		t.Errorf("error %q names optional Grafana as missing", err)
	}
}

func TestUpRunsPrometheusAndAlertmanager(t *testing.T) {
	testenv.Tool(t, "prometheus", "prometheus")
	testenv.Tool(t, "prometheus-alertmanager", "prometheus-alertmanager", "alertmanager")
	o := Options{PrometheusAddress: testenv.FreeAddr(t), AlertmanagerAddress: testenv.FreeAddr(t), GrafanaAddress: testenv.FreeAddr(t),
		KVWatchAddress: testenv.FreeAddr(t), GrafanaAdminPassword: "x"}
	_, dir := generateDir(t, o)
	noGrafana := func(name string) (string, error) {
		if strings.HasPrefix(name, "grafana") {
			return "", exec.ErrNotFound
		}
		return exec.LookPath(name)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var out testenv.Buffer
	go func() { done <- Up(ctx, UpOptions{Dir: dir, LookPath: noGrafana, Out: &out}) }()
	wctx, wcancel := context.WithTimeout(context.Background(), time.Minute)
	defer wcancel()
	testenv.WaitOK(wctx, t, "http://"+o.PrometheusAddress+"/-/ready")
	testenv.WaitOK(wctx, t, "http://"+o.AlertmanagerAddress+"/-/ready")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Up after cancel = %v, want nil", err)
	}
	// It says where Prometheus and Alertmanager listen, and, Grafana
	// missing, where the dashboards are and that the web UI needs none.
	printed := out.String()
	for _, want := range []string{
		"prometheus   http://" + o.PrometheusAddress + "/",
		"alertmanager http://" + o.AlertmanagerAddress + "/",
		"grafana      not installed",
		filepath.Join(dir, "grafana", "dashboards") + "/*.json",
		"import them into an existing Grafana",
		"kvwatch serve's web UI at http://" + o.KVWatchAddress + "/",
	} {
		if !strings.Contains(printed, want) {
			t.Errorf("stack up printed no %q:\n%s", want, printed)
		}
	}
	for _, name := range []string{"prometheus", "alertmanager"} {
		b, err := os.ReadFile(filepath.Join(dir, LogDir, name+".log"))
		if err != nil || len(b) == 0 {
			t.Errorf("log of %s: %v, %d bytes", name, err, len(b))
		}
	}
	if _, err := os.Stat(filepath.Join(dir, DataDir, "prometheus")); err != nil {
		t.Errorf("prometheus data dir: %v", err)
	}
}

func TestInstall(t *testing.T) {
	files, dir := generateDir(t, Options{GrafanaAdminPassword: "x"})
	root := t.TempDir()
	var out bytes.Buffer
	if err := Install(InstallOptions{Dir: dir, Root: root, DryRun: true, Out: &out}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "etc")); !os.IsNotExist(err) {
		t.Errorf("dry run wrote into %s: %v", root, err)
	}
	for _, want := range []string{"# would write " + filepath.Join(root, SystemdDir, UnitPrometheus), "ProtectSystem=strict",
		"systemctl enable --now kvwatch-alertmanager.service kvwatch-grafana.service kvwatch-prometheus.service kvwatch.service"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("dry run output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := Install(InstallOptions{Dir: dir, Root: root, Out: &out}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{SystemdDir + "/" + UnitKVWatch, SystemdDir + "/" + UnitGrafana,
		DefaultInstallDir + "/prometheus.yml", DefaultInstallDir + "/" + AlertRulesFile} {
		got, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Errorf("%s not installed: %v", p, err)
			continue
		}
		rel := strings.TrimPrefix(p, DefaultInstallDir+"/")
		if want := files.Get(rel); strings.HasPrefix(p, DefaultInstallDir) && !bytes.Equal(got, want) {
			t.Errorf("%s differs from the generated file", p)
		}
	}
	st, err := os.Stat(filepath.Join(root, DefaultInstallDir, GrafanaPasswordFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("installed admin password: %v, mode %v, want 0600", err, st.Mode().Perm())
	}
}
