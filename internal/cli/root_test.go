package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/common/version"

	"github.com/kvwatch/kvwatch/internal/testenv"
)

func TestBareKVWatchIsAUsageError(t *testing.T) {
	for _, args := range [][]string{nil, {"--log.level=debug"}} {
		code, stdout, stderr := run(t, args...)
		if code != exitUsage || stdout != "" || !strings.HasPrefix(stderr, "usage: kvwatch [<flags>] <command>") || !strings.Contains(stderr, "\ndemo [<flags>]\n") {
			t.Errorf("kvwatch %q: exit %d, stdout %q, stderr %.120q; want 2, nothing on stdout, the usage on stderr", args, code, stdout, stderr)
		}
	}
	code, stdout, stderr := run(t, "stack")
	if code != exitUsage || stdout != "" || !strings.Contains(stderr, "must select a subcommand of 'stack'") {
		t.Errorf("kvwatch stack: exit %d, stdout %q, stderr %q; want 2", code, stdout, stderr)
	}
}

func TestHelpGoesToStdoutAndExits0(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"help", "demo"}, {"demo", "--help"}, {"stack", "generate", "-h"}} {
		code, stdout, stderr := run(t, args...)
		if code != exitOK || stderr != "" || !strings.HasPrefix(stdout, "usage: kvwatch") {
			t.Errorf("kvwatch %q: exit %d, stdout %.80q, stderr %q; want 0 and the usage on stdout", args, code, stdout, stderr)
		}
	}
	_, stdout, _ := run(t, "demo", "--help")
	if !strings.Contains(stdout, "--base-port=0") {
		t.Errorf("demo --help lacks --base-port:\n%s", stdout)
	}
}

func TestVersionFields(t *testing.T) {
	saved := []string{version.Version, version.Revision, version.Branch, version.BuildUser, version.BuildDate}
	defer func() {
		version.Version, version.Revision, version.Branch, version.BuildUser, version.BuildDate = saved[0], saved[1], saved[2], saved[3], saved[4]
	}()
	version.Version, version.Revision, version.Branch, version.BuildUser, version.BuildDate = "v1.2.3", "abc1234", "main", "alice@build1", "20261201-09:30:00"
	code, stdout, stderr := run(t, "--version")
	for _, want := range []string{"kvwatch, version v1.2.3 (branch: main, revision: abc1234)\n", "  build user:       alice@build1\n", "  build date:       20261201-09:30:00\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("--version lacks %q:\n%s", want, stdout)
		}
	}
	if code != exitOK || stderr != "" {
		t.Errorf("--version: exit %d, stderr %q", code, stderr)
	}
	version.BuildUser, version.BuildDate = "", ""
	_, stdout, _ = run(t, "--version")
	if !strings.Contains(stdout, "  build user:       unknown (built without make)\n") || !strings.Contains(stdout, "  build date:       unknown (built without make)\n") {
		t.Errorf("--version without build user and date:\n%s", stdout)
	}
	if version.BuildUser != "" {
		t.Errorf("--version left version.BuildUser = %q", version.BuildUser)
	}
}

var (
	builtOnce sync.Once
	builtDir  string
	builtErr  string
)

// kvwatchOnPath builds ./cmd/kvwatch once per test binary and returns a
// PATH with it first, as an installed kvwatch would be.
func kvwatchOnPath(t *testing.T) string {
	t.Helper()
	builtOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kvwatch-bin-")
		if err != nil {
			builtErr = err.Error()
			return
		}
		builtDir = dir
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "kvwatch"), "../../cmd/kvwatch")
		if b, err := cmd.CombinedOutput(); err != nil {
			builtErr = "go build ./cmd/kvwatch: " + err.Error() + "\n" + string(b)
		}
	})
	if builtErr != "" {
		t.Fatal(builtErr)
	}
	return builtDir + string(os.PathListSeparator) + os.Getenv("PATH")
}

// shell runs script in sh with kvwatch on PATH and returns its output.
func shell(t *testing.T, path string, sh string, args ...string) string {
	t.Helper()
	cmd := exec.Command(sh, args...)
	cmd.Env = append(os.Environ(), "PATH="+path, "HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir(), "XDG_DATA_HOME="+t.TempDir())
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil || errb.Len() > 0 {
		t.Fatalf("%s %q: %v\nstdout:\n%s\nstderr:\n%s", sh, args, err, out.String(), errb.String())
	}
	return out.String()
}

func lines(s string) []string {
	var out []string
	for l := range strings.SplitSeq(strings.TrimSpace(s), "\n") {
		out = append(out, strings.TrimSpace(l))
	}
	slices.Sort(out)
	return out
}

// The completion scripts are loaded the way the docs say, each in its real
// shell, and must register the completion and complete commands and flags.
func TestCompletionScriptsSource(t *testing.T) {
	t.Run("bash", func(t *testing.T) {
		bash := testenv.Tool(t, "bash", "bash")
		path := kvwatchOnPath(t)
		out := shell(t, path, bash, "--norc", "--noprofile", "-euo", "pipefail", "-c", `
source <(kvwatch --completion-script-bash)
complete -p kvwatch
COMP_WORDS=(kvwatch sta); COMP_CWORD=1; _kvwatch_complete; echo "commands: ${COMPREPLY[*]}"
COMP_WORDS=(kvwatch demo --base); COMP_CWORD=2; _kvwatch_complete; echo "flags: ${COMPREPLY[*]}"
COMP_WORDS=(kvwatch stack ""); COMP_CWORD=2; _kvwatch_complete; echo "stack: ${COMPREPLY[*]}"
`)
		want := "complete -o default -F _kvwatch_complete kvwatch\ncommands: status stack\nflags: --base-port\nstack: generate up install\n"
		if out != want {
			t.Errorf("bash:\n%s\nwant:\n%s", out, want)
		}
	})
	t.Run("zsh", func(t *testing.T) {
		zsh := testenv.Tool(t, "zsh", "zsh")
		path := kvwatchOnPath(t)
		// compadd only works inside a completion widget; outside one, a
		// function of that name records what the script would add.
		out := shell(t, path, zsh, "-f", "-c", `
autoload -Uz compinit && compinit -u -D
source <(kvwatch --completion-script-zsh)
print -r -- "registered: $_comps[kvwatch]"
compadd() { print -r -- "added: ${(P)2}" }
words=(kvwatch sta); CURRENT=2; _kvwatch
words=(kvwatch demo --base); CURRENT=3; _kvwatch
`)
		// The script hands zsh every candidate; compadd filters by prefix.
		got := strings.Split(strings.TrimSpace(out), "\n")
		if len(got) != 3 || got[0] != "registered: _kvwatch" || got[1] != "added: help status top serve check plan simulate demo stack" || !strings.Contains(" "+got[2]+" ", " --base-port ") {
			t.Errorf("zsh:\n%s\nwant registered: _kvwatch, added: every command, then a list with --base-port", out)
		}
	})
	t.Run("fish", func(t *testing.T) {
		fish := testenv.Tool(t, "fish", "fish")
		path := kvwatchOnPath(t)
		out := shell(t, path, fish, "--no-config", "-c", `
kvwatch --completion-script-fish | source
complete -C'kvwatch sta'
echo SEP
complete -C'kvwatch demo --base'
`)
		parts := strings.SplitN(out, "SEP\n", 2)
		if len(parts) != 2 || !slices.Equal(lines(parts[0]), []string{"stack", "status"}) || !slices.Equal(lines(parts[1]), []string{"--base-port"}) {
			t.Errorf("fish:\n%s\nwant stack and status, then --base-port", out)
		}
	})
	code, _, stderr := run(t, "--completion-script-tcsh")
	if code != exitUsage || !strings.Contains(stderr, `no completion script for "tcsh"; use --completion-script-bash, --completion-script-zsh, --completion-script-fish`) {
		t.Errorf("--completion-script-tcsh: exit %d, stderr %q", code, stderr)
	}
}

// The man page is valid troff (groff warns about nothing) and documents
// every visible flag of every command.
func TestManPage(t *testing.T) {
	groff := testenv.Tool(t, "groff-base", "groff")
	code, page, stderr := run(t, "--help-man")
	if code != exitOK || stderr != "" {
		t.Fatalf("--help-man: exit %d, stderr %q", code, stderr)
	}
	cmd := exec.Command(groff, "-man", "-ww", "-z")
	cmd.Stdin = strings.NewReader(page)
	if b, err := cmd.CombinedOutput(); err != nil || len(b) > 0 {
		t.Errorf("groff -man -ww: %v\n%s", err, b)
	}
	cmd = exec.Command(groff, "-man", "-Tascii", "-P-cbou")
	cmd.Stdin = strings.NewReader(page)
	text, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NAME\n       kvwatch - KV-cache observability", "   kvwatch demo\n", "   kvwatch stack generate\n",
		"--base-port=0\n", "--web.listen-address=127.0.0.1:9477\n", "EXIT STATUS", "--completion-script-bash"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("rendered man page lacks %q", want)
		}
	}
	if regexp.MustCompile(`(?m)^\s*--(help|version)$`).FindString(string(text)) == "" {
		t.Errorf("man page lacks the global flags:\n%.2000s", text)
	}
}
