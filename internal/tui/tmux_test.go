package tui

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/sim"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// tmuxSession is one detached tmux server running a command in a pane.
type tmuxSession struct {
	t    *testing.T
	tmux string
	sock string
}

func (s tmuxSession) cmd(args ...string) (string, error) {
	c := exec.Command(s.tmux, append([]string{"-u", "-f", "/dev/null", "-S", s.sock}, args...)...)
	c.Env = append(os.Environ(), "LANG=C.UTF-8", "LC_ALL=C.UTF-8")
	out, err := c.CombinedOutput()
	return string(out), err
}

func (s tmuxSession) keys(keys ...string) {
	s.t.Helper()
	if out, err := s.cmd(append([]string{"send-keys", "-t", "top"}, keys...)...); err != nil {
		s.t.Fatalf("tmux send-keys %v: %v: %s", keys, err, out)
	}
}

func (s tmuxSession) screen() string {
	out, _ := s.cmd("capture-pane", "-p", "-t", "top")
	return out
}

// waitFor polls the screen until ok holds; the deadline only bounds a
// hang, it asserts no speed.
func (s tmuxSession) waitFor(what string, ok func(screen string) bool) string {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		sc := s.screen()
		if ok(sc) {
			return sc
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("screen never showed %s; last screen:\n%s", what, sc)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func contains(subs ...string) func(string) bool {
	return func(sc string) bool {
		for _, s := range subs {
			if !strings.Contains(sc, s) {
				return false
			}
		}
		return true
	}
}

// TestTopInTmux runs the built kvwatch top in a real terminal (tmux)
// against the simulator's PD SGLang cluster, presses keys and reads the
// screen back.
func TestTopInTmux(t *testing.T) {
	tmux := testenv.Tool(t, "tmux", "tmux")
	goBin := testenv.Tool(t, "golang", "go")
	dir := t.TempDir()
	bin := filepath.Join(dir, "kvwatch")
	if out, err := exec.Command(goBin, "build", "-o", bin, "github.com/kvwatch/kvwatch/cmd/kvwatch").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	c := testenv.Builtin(t, "pd-sglang", sim.Options{Seed: 1, Speed: 10, Tick: 100 * time.Millisecond})
	args := []string{bin, "top", "--refresh", "500ms"}
	for _, ep := range c.Endpoints() {
		args = append(args, ep.Role+"="+ep.URL+ep.MetricsPath)
	}

	s := tmuxSession{t: t, tmux: tmux, sock: filepath.Join(dir, "tmux.sock")}
	if out, err := s.cmd(append([]string{"new-session", "-d", "-s", "top", "-x", "160", "-y", "40"}, args...)...); err != nil {
		t.Fatalf("tmux new-session: %v: %s", err, out)
	}
	t.Cleanup(func() { s.cmd("kill-server") })

	// The fleet, with rates once two scrapes are in.
	s.waitFor("the fleet table", contains("kvwatch top 3 targets", "FLEET  2 up", "limit: ", "SERVER▲", " decode ", " prefill ", " router ", "workers 2/2", "trend after "))

	s.keys("4") // sort by KV, fullest first
	s.waitFor("the KV sort", contains("KV▼"))

	s.keys("/", "d", "e", "c", "o", "d", "e", "Enter")
	sc1 := s.waitFor("the filter", contains("filter /decode"))
	// The pool lines above the table are the whole fleet's; the rows below
	// the header are filtered.
	if _, rows, _ := strings.Cut(sc1, "SERVER"); strings.Contains(rows, " prefill ") {
		t.Errorf("filter /decode still shows the prefill server:\n%s", sc1)
	}

	s.keys("Enter") // the decode server's ranks: SGLang TP 4
	s.waitFor("the rank view", contains("engine sglang", "DP   TP   PP", "usage history", "esc back"))
	s.keys("Escape")
	s.waitFor("the fleet again", contains("SERVER"))
	s.keys("Escape") // clear the filter
	s.waitFor("every server again", func(sc string) bool {
		return !strings.Contains(sc, "filter /") && strings.Contains(sc, " prefill ")
	})

	// A slow decode server (3s a scrape, refresh 500ms): its row is late,
	// and the header says so instead of only "every 500ms".
	c.SetFault("decode", sim.Fault{Kind: sim.FaultSlow, Delay: 3 * time.Second})
	s.waitFor("the late target in the header", func(sc string) bool {
		head, _, _ := strings.Cut(sc, "\n")
		return strings.Contains(head, "1 of 3 late, oldest ") && strings.Contains(sc, "s…")
	})
	c.SetFault("decode", sim.Fault{Kind: sim.FaultNone})
	s.waitFor("no late target", func(sc string) bool {
		head, _, _ := strings.Cut(sc, "\n")
		return strings.Contains(head, "every 500ms") && !strings.Contains(head, "late")
	})

	// The pools' time to full from top's own trend: 3 samples over 30 s
	// of every server (the fleet table showed "trend after" until then).
	s.waitFor("the pools' time to full", func(sc string) bool {
		_, pools, _ := strings.Cut(sc, "FLEET")
		pools, _, _ = strings.Cut(pools, "SERVER")
		return strings.Contains(pools, "decode") && (strings.Contains(pools, "full in ") ||
			strings.Contains(pools, "not filling") || strings.Contains(pools, "full now"))
	})

	s.keys("?")
	s.waitFor("the help", contains("this help", "HEADROOM"))
	s.keys("?")
	s.keys("p")
	s.waitFor("the pause", contains("PAUSED", "SERVER"))

	s.keys("q")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := s.cmd("has-session", "-t", "top"); err != nil {
			break // kvwatch top exited and the session with it
		}
		if time.Now().After(deadline) {
			t.Fatalf("kvwatch top did not quit on q; screen:\n%s", s.screen())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
