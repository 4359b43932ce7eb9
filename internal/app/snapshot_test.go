package app

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// stateEnv gives the test environment variables of its own for serve's
// state directory (config.DefaultSnapshotFile): the default snapshot file
// is then in a directory of the test's, never the user's.
func stateEnv(t *testing.T, state, xdg, home string) {
	t.Setenv("STATE_DIRECTORY", state)
	t.Setenv("XDG_STATE_HOME", xdg)
	t.Setenv("HOME", home)
}

// newServe assembles serve from the config text yml, logging into logs.
func newServe(t *testing.T, yml string, logs *bytes.Buffer, snapshotFlag *string) (*Serve, error) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "kvwatch.yml")
	writeFile(t, f, yml)
	return New(Options{Sources: config.Sources{File: f}, ListenAddresses: []string{"127.0.0.1:0"},
		Registry: prometheus.NewRegistry(), Logger: slog.New(slog.NewTextHandler(logs, nil)), SnapshotFile: snapshotFlag})
}

// runFor runs s until stop reports true, then stops it and returns Run's
// error.
func runFor(t *testing.T, s *Serve, what string, stop func() bool) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	waitFor(t, what, stop)
	cancel()
	return <-done
}

// serve snapshots its history by default, into history.snapshot in its
// state directory; a config or flag that names a file wins, and an
// explicit "" turns snapshots off.
func TestSnapshotByDefault(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name             string
		state, xdg, home string
		yml              string
		flag             *string
		want             string // the snapshot file; "" none
		log              string // part of the logs
	}{
		{name: "systemd's STATE_DIRECTORY", state: dir + "/state", home: dir + "/home",
			want: dir + "/state/history.snapshot", log: "msg=\"history snapshots\" file=" + dir + "/state/history.snapshot"},
		{name: "several state directories: the first", state: dir + "/a:" + dir + "/b",
			want: dir + "/a/history.snapshot"},
		{name: "XDG_STATE_HOME", xdg: dir + "/xdg", home: dir + "/home",
			want: dir + "/xdg/kvwatch/history.snapshot"},
		{name: "a relative XDG_STATE_HOME is ignored", xdg: "relative", home: dir + "/home",
			want: dir + "/home/.local/state/kvwatch/history.snapshot"},
		{name: "HOME", home: dir + "/home2",
			want: dir + "/home2/.local/state/kvwatch/history.snapshot"},
		{name: "no state directory: off, with a warning",
			want: "", log: "level=WARN msg=\"history snapshots are off, so a restart loses the history's window"},
		{name: "the config's file", state: dir + "/state3", yml: "history: {snapshot_file: " + dir + "/named.snap}\n",
			want: dir + "/named.snap"},
		{name: "written empty: off", state: dir + "/state4", yml: "history: {snapshot_file: \"\"}\n",
			want: "", log: "msg=\"history snapshots are off (history.snapshot_file: \\\"\\\"): a restart loses the history's window\""},
		{name: "written null: the default", state: dir + "/state5", yml: "history: {snapshot_file: }\n",
			want: dir + "/state5/history.snapshot"},
		{name: "--history.snapshot-file wins over the config", state: dir + "/state6", yml: "history: {snapshot_file: \"\"}\n",
			flag: ptr(dir + "/flag.snap"), want: dir + "/flag.snap"},
		{name: "--history.snapshot-file \"\" turns the default off", state: dir + "/state7", flag: ptr(""), want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stateEnv(t, tc.state, tc.xdg, tc.home)
			var logs bytes.Buffer
			s, err := newServe(t, "targets: [{name: a, url: 'http://127.0.0.1:1'}]\n"+tc.yml, &logs, tc.flag)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.History().Settings().SnapshotFile; got != tc.want {
				t.Errorf("snapshot file = %q, want %q", got, tc.want)
			}
			if err := runFor(t, s, "serve to start", func() bool { return true }); err != nil {
				t.Errorf("Run: %v", err)
			}
			if tc.want != "" {
				if _, err := os.Stat(tc.want); err != nil {
					t.Errorf("no snapshot after Run: %v", err)
				}
			}
			if !strings.Contains(logs.String(), tc.log) {
				t.Errorf("logs:\n%s\nwant %s", logs.String(), tc.log)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// A restart of serve on the same state directory keeps the history's
// window: the second serve starts with every sample the first one held.
func TestRestartKeepsTheWindow(t *testing.T) {
	testenv.StateDir(t)
	eng := testenv.EngineServer(t, "", page(t))
	yml := "global: {scrape_interval: 1s, scrape_timeout: 1s}\ntargets: [{name: a, url: '" + eng.URL + "'}]\n"
	var logs bytes.Buffer
	first, err := newServe(t, yml, &logs, nil)
	if err != nil {
		t.Fatal(err)
	}
	up := func(s *Serve) []int64 { return samplesOf(t, s, signal.TargetUp.Name, "a") }
	if err := runFor(t, first, "3 gathers of target a", func() bool { return len(up(first)) >= 3 }); err != nil {
		t.Fatalf("first run: %v", err)
	}
	held, want := first.History().Stats(), up(first)
	second, err := newServe(t, yml, &logs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Daemon().Close()
	defer second.History().Close()
	if got := second.History().Stats(); got.Series != held.Series || got.Samples != held.Samples {
		t.Errorf("after the restart: %d series, %d samples; the first serve held %d and %d", got.Series, got.Samples, held.Series, held.Samples)
	}
	if got := up(second); !slicesEqual(got, want) {
		t.Errorf("kvwatch_target_up{server=a} after the restart at %v, before at %v", got, want)
	}
}

// samplesOf returns the times of the samples of name{server=server} in s's
// history.
func samplesOf(t *testing.T, s *Serve, name, server string) []int64 {
	t.Helper()
	q, err := s.History().Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	set := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", name),
		labels.MustNewMatcher(labels.MatchEqual, signal.LabelServer, server))
	var ts []int64
	for set.Next() {
		it := set.At().Iterator(nil)
		for it.Next() == chunkenc.ValFloat {
			tm, _ := it.At()
			ts = append(ts, tm)
		}
	}
	return ts
}

func slicesEqual(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Two serves never share a snapshot file: a second one on the same
// default runs without snapshots and says why; one told to use a file
// that another serve holds does not start.
func TestSnapshotFileInUse(t *testing.T) {
	testenv.StateDir(t)
	var logs bytes.Buffer
	first, err := newServe(t, "targets: [{name: a, url: 'http://127.0.0.1:1'}]\n", &logs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Daemon().Close()
	defer first.History().Close()
	file := first.History().Settings().SnapshotFile
	if file == "" {
		t.Fatal("the first serve has no snapshot file")
	}
	second, err := newServe(t, "targets: [{name: b, url: 'http://127.0.0.1:1'}]\n", &logs, nil)
	if err != nil {
		t.Fatalf("a second serve on the default file: %v, want it to start without snapshots", err)
	}
	defer second.Daemon().Close()
	if got := second.History().Settings().SnapshotFile; got != "" {
		t.Errorf("second serve's snapshot file = %q, want none", got)
	}
	if want := "level=WARN msg=\"history snapshots are off, so a restart loses the history's window"; !strings.Contains(logs.String(), want) ||
		!strings.Contains(logs.String(), "is in use by another kvwatch serve") {
		t.Errorf("logs:\n%s\nwant the warning, saying the file is in use", logs.String())
	}
	_, err = newServe(t, "targets: [{name: c, url: 'http://127.0.0.1:1'}]\nhistory: {snapshot_file: '"+file+"'}\n", &logs, nil)
	if err == nil || !strings.Contains(err.Error(), "history snapshot "+file+" is in use by another kvwatch serve") {
		t.Errorf("a third serve naming the file: %v, want an error saying it is in use", err)
	}
	// A reload onto the file is refused, and changes nothing.
	f := filepath.Join(t.TempDir(), "kvwatch.yml")
	writeFile(t, f, "targets: [{name: d, url: 'http://127.0.0.1:1'}]\nhistory: {snapshot_file: \"\"}\n")
	fourth, err := New(Options{Sources: config.Sources{File: f}, ListenAddresses: []string{"127.0.0.1:0"}, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer fourth.Daemon().Close()
	writeFile(t, f, "targets: [{name: d, url: 'http://127.0.0.1:1'}]\nhistory: {snapshot_file: '"+file+"'}\n")
	err = fourth.Reload(context.Background())
	if want := "history: history.snapshot_file: history snapshot " + file + " is in use by another kvwatch serve"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("reload onto the file: %v, want %s...", err, want)
	}
	if got := fourth.History().Settings().SnapshotFile; got != "" {
		t.Errorf("snapshot file after the refused reload = %q, want none", got)
	}
}
