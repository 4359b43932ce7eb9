package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"
)

// DataDir is where `stack up` keeps Prometheus, Alertmanager and Grafana
// data inside the stack directory; LogDir holds their logs.
const (
	DataDir = "data"
	LogDir  = "logs"
)

// UpOptions configure Up.
type UpOptions struct {
	// Dir is the generated stack directory.
	Dir    string
	Logger *slog.Logger
	// LookPath finds a binary; default exec.LookPath.
	LookPath func(string) (string, error)
	// MinBackoff and MaxBackoff bound the wait before restarting a process
	// that exited; the wait doubles on each quick crash. Defaults 1s and 1m.
	MinBackoff, MaxBackoff time.Duration
	// OnStart, if set, is called with each process's name and pid when it
	// (re)starts.
	OnStart func(name string, pid int)
	// Out, if set, receives one line per component saying where it
	// listens (or, for a missing Grafana, where the dashboards are).
	Out io.Writer
}

// LoadProcesses reads the stack's process table (stack-up.json) and
// resolves the stack directory placeholder to dir's absolute path.
func LoadProcesses(dir string) ([]Process, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("stack dir: %w", err)
	}
	b, err := os.ReadFile(filepath.Join(abs, UpFile))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w; generate the stack first with `kvwatch stack generate --out %s`", UpFile, err, dir)
	}
	var ps []Process
	if err := json.Unmarshal(b, &ps); err != nil {
		return nil, fmt.Errorf("read %s: %w; regenerate the stack", filepath.Join(dir, UpFile), err)
	}
	r := strings.NewReplacer("${"+StackDirEnv+"}", abs)
	for i := range ps {
		for j := range ps[i].Args {
			ps[i].Args[j] = r.Replace(ps[i].Args[j])
		}
		for j := range ps[i].Env {
			ps[i].Env[j] = r.Replace(ps[i].Env[j])
		}
	}
	return ps, nil
}

// MissingError lists the required binaries that are not on PATH.
type MissingError struct{ Missing []Process }

func (e *MissingError) Error() string {
	parts := make([]string, len(e.Missing))
	for i, p := range e.Missing {
		parts[i] = fmt.Sprintf("%s not found on PATH (looked for %s): %s", p.Name, strings.Join(p.Binaries, ", "), p.Install)
	}
	return strings.Join(parts, "; ")
}

// Up runs the stack's processes from dir until ctx is done, restarting any
// that exits, with logs in dir/logs/<name>.log and data in dir/data. It
// fails at once, naming every missing binary and how to install it, when a
// required one is not on PATH; optional ones (Grafana) are skipped with a
// warning. It returns nil after a clean stop.
func Up(ctx context.Context, o UpOptions) error {
	if o.LookPath == nil {
		o.LookPath = exec.LookPath
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	ps, err := LoadProcesses(o.Dir)
	if err != nil {
		return err
	}
	abs, _ := filepath.Abs(o.Dir)
	var run []Spec
	var missing []Process
	var listening, skipped []string
	for _, p := range ps {
		bin := ""
		for _, b := range p.Binaries {
			if path, err := o.LookPath(b); err == nil {
				bin = path
				break
			}
		}
		if bin == "" {
			if p.Optional {
				o.Logger.Warn("optional component not installed; skipping it", "component", p.Name, "looked_for", strings.Join(p.Binaries, ","), "install", p.Install)
				if p.Name == "grafana" {
					skipped = append(skipped, grafanaMissing(abs, p))
				}
				continue
			}
			missing = append(missing, p)
			continue
		}
		run = append(run, Spec{Name: p.Name, Path: bin, Args: p.Args, Env: p.Env,
			Log: filepath.Join(abs, LogDir, p.Name+".log")})
		listening = append(listening, fmt.Sprintf("%-12s http://%s/  (log %s)", p.Name, p.Address, filepath.Join(abs, LogDir, p.Name+".log")))
	}
	if len(missing) > 0 {
		return &MissingError{Missing: missing}
	}
	for _, d := range []string{DataDir + "/prometheus", DataDir + "/alertmanager", DataDir + "/grafana", LogDir} {
		if err := os.MkdirAll(filepath.Join(abs, d), 0o750); err != nil {
			return fmt.Errorf("stack up: %w", err)
		}
	}
	if o.Out != nil {
		for _, l := range append(listening, skipped...) {
			fmt.Fprintln(o.Out, l)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(run))
	for i, s := range run {
		o.Logger.Info("starting", "component", s.Name, "binary", s.Path, "log", s.Log)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = Supervise(ctx, s, SuperviseOptions{Logger: o.Logger, MinBackoff: o.MinBackoff, MaxBackoff: o.MaxBackoff, OnStart: o.OnStart})
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// grafanaMissing is what `stack up` says when Grafana is not installed:
// where the dashboards are for an existing Grafana, and that kvwatch's own
// web UI needs no Grafana.
func grafanaMissing(dir string, p Process) string {
	ui := "kvwatch serve's web UI"
	if b, err := os.ReadFile(filepath.Join(dir, "prometheus.yml")); err == nil {
		var c promConfig
		if yaml.Unmarshal(b, &c) == nil {
			for _, sc := range c.ScrapeConfigs {
				if sc.JobName == "kvwatch" && len(sc.StaticConfigs) > 0 && len(sc.StaticConfigs[0].Targets) > 0 {
					ui += " at http://" + sc.StaticConfigs[0].Targets[0] + "/"
				}
			}
		}
	}
	return fmt.Sprintf("%-12s not installed, not started. The dashboards are in %s/*.json: import them into an existing Grafana "+
		"(Dashboards > New > Import). Without Grafana, %s shows the same KV usage, headroom and alerts. To run Grafana here: %s",
		p.Name, filepath.Join(dir, filepath.FromSlash(GrafanaDashboardDir)), ui, p.Install)
}

// Spec is one supervised process.
type Spec struct {
	Name string
	Path string
	Args []string
	// Env is added to the current environment.
	Env []string
	// Log is the file stdout and stderr are appended to.
	Log string
}

// SuperviseOptions configure Supervise.
type SuperviseOptions struct {
	Logger                 *slog.Logger
	MinBackoff, MaxBackoff time.Duration
	OnStart                func(name string, pid int)
	// StopTimeout is how long a process gets after SIGTERM before SIGKILL. Default 10s.
	StopTimeout time.Duration
}

// Supervise runs s until ctx is done, restarting it whenever it exits,
// after a backoff that doubles while it keeps crashing within a minute of
// starting. On ctx's end the process gets SIGTERM (then SIGKILL after
// StopTimeout) and Supervise returns nil. It returns an error only when
// the process cannot be started at all.
func Supervise(ctx context.Context, s Spec, o SuperviseOptions) error {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(time.Minute, o.MinBackoff)
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = 10 * time.Second
	}
	logf, err := os.OpenFile(s.Log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o640)
	if err != nil {
		return fmt.Errorf("supervise %s: %w", s.Name, err)
	}
	defer logf.Close()
	backoff := o.MinBackoff
	for {
		cmd := exec.CommandContext(ctx, s.Path, s.Args...)
		cmd.Env = append(os.Environ(), s.Env...)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = o.StopTimeout
		start := time.Now()
		if err := cmd.Start(); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("supervise %s: start %s: %w", s.Name, s.Path, err)
		}
		if o.OnStart != nil {
			o.OnStart(s.Name, cmd.Process.Pid)
		}
		err := cmd.Wait()
		if ctx.Err() != nil {
			o.Logger.Info("stopped", "component", s.Name)
			return nil
		}
		if time.Since(start) > time.Minute {
			backoff = o.MinBackoff
		}
		o.Logger.Warn("exited; restarting", "component", s.Name, "err", err, "after", backoff, "log", s.Log)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, o.MaxBackoff)
	}
}
