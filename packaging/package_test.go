package packaging

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// tool returns the path of an external binary, skipping the test when it is
// missing, or failing it when KVWATCH_REQUIRE_TOOLS=1 (as in CI).
func tool(t *testing.T, name, pkg string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	msg := name + " not on PATH; install the Debian package " + pkg
	if os.Getenv("KVWATCH_REQUIRE_TOOLS") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// cmd runs name args in dir (the repo root when empty) and returns stdout;
// a failure or any stderr fails the test unless allowStderr.
func cmd(t *testing.T, dir string, allowStderr bool, name string, args ...string) string {
	t.Helper()
	c := exec.Command(name, args...)
	c.Dir = dir
	if dir == "" {
		c.Dir = ".."
	}
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil || (!allowStderr && errb.Len() > 0) {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String()
}

// The package's files, written out by hand from packaging/nfpm.yaml.
var wantFiles = []string{
	"/etc/kvwatch/kvwatch.yml",
	"/usr/bin/kvwatch",
	"/usr/lib/systemd/system/kvwatch.service",
	"/usr/share/bash-completion/completions/kvwatch",
	"/usr/share/doc/kvwatch/README.md",
	"/usr/share/doc/kvwatch/docs/installation.md",
	"/usr/share/fish/vendor_completions.d/kvwatch.fish",
	"/usr/share/man/man1/kvwatch.1.gz",
	"/usr/share/zsh/vendor-completions/_kvwatch",
}

var (
	debOnce sync.Once
	debPath string
	debErr  string
)

// buildDeb runs `make package` (once per test binary) and returns the path
// of the one .deb in dist/.
func buildDeb(t *testing.T) string {
	t.Helper()
	mk := tool(t, "make", "make")
	debOnce.Do(func() {
		c := exec.Command(mk, "package")
		c.Dir = ".."
		if out, err := c.CombinedOutput(); err != nil {
			debErr = "make package: " + err.Error() + "\n" + string(out)
			return
		}
		debs, _ := filepath.Glob("../dist/kvwatch_*.deb")
		if len(debs) != 1 {
			debErr = fmt.Sprintf("make package left %d packages in dist/ (%q), want 1", len(debs), debs)
			return
		}
		p, err := filepath.Abs(debs[0])
		if err != nil {
			debErr = err.Error()
		}
		debPath = p
	})
	if debErr != "" {
		t.Fatal(debErr)
	}
	return debPath
}

// TestDebianPackage builds the .deb and checks it unpacked into a directory
// (any user); TestDebianPackageInstall installs it for real.
func TestDebianPackage(t *testing.T) {
	dpkgDeb := tool(t, "dpkg-deb", "dpkg")
	bash := tool(t, "bash", "bash")
	sa := tool(t, "systemd-analyze", "systemd")
	deb := buildDeb(t)

	fields := cmd(t, "", false, dpkgDeb, "--field", deb, "Package", "Architecture", "Version")
	if !regexp.MustCompile(`(?m)^Package: kvwatch\nArchitecture: \w+\nVersion: [0-9][A-Za-z0-9.+~]*\n$`).MatchString(fields) {
		t.Errorf("control fields:\n%s", fields)
	}
	var files []string
	for _, l := range strings.Split(cmd(t, "", false, dpkgDeb, "--contents", deb), "\n") {
		f := strings.Fields(l)
		if len(f) == 6 && !strings.HasSuffix(f[5], "/") {
			files = append(files, strings.TrimPrefix(f[5], "."))
		}
	}
	for _, w := range wantFiles {
		if !slices.Contains(files, w) {
			t.Errorf("package lacks %s; it has %q", w, files)
		}
	}
	conffiles := cmd(t, "", false, dpkgDeb, "--info", deb, "conffiles")
	if strings.TrimSpace(conffiles) != "/etc/kvwatch/kvwatch.yml" {
		t.Errorf("conffiles = %q, want /etc/kvwatch/kvwatch.yml", conffiles)
	}

	root := t.TempDir()
	cmd(t, "", false, dpkgDeb, "-x", deb, root)
	bin := filepath.Join(root, "usr/bin/kvwatch")

	// --version carries the Makefile's build user and date.
	v := cmd(t, "", false, bin, "--version")
	user := regexp.MustCompile(`(?m)^  build user:\s+(\S+)$`).FindStringSubmatch(v)
	date := regexp.MustCompile(`(?m)^  build date:\s+(\d{8}-\d\d:\d\d:\d\d)$`).FindStringSubmatch(v)
	if user == nil || !strings.Contains(user[1], "@") || date == nil {
		t.Errorf("--version of the packaged binary lacks a build user (user@host) or date (YYYYMMDD-hh:mm:ss):\n%s", v)
	} else if d, err := time.Parse("20060102-15:04:05", date[1]); err != nil || time.Since(d) > time.Hour || time.Since(d) < -time.Minute {
		t.Errorf("build date %s is not the time of this build", date[1])
	}

	// The unit is the one `kvwatch stack generate` writes for
	// --install.dir /etc/kvwatch, run from /usr/bin: every other line equal.
	unit, err := os.ReadFile(filepath.Join(root, "usr/lib/systemd/system/kvwatch.service"))
	if err != nil {
		t.Fatal(err)
	}
	gen := t.TempDir()
	cmd(t, "", false, bin, "stack", "generate", "--out", gen, "--install.dir", "/etc/kvwatch")
	stackUnit, err := os.ReadFile(filepath.Join(gen, "systemd/kvwatch.service"))
	if err != nil {
		t.Fatal(err)
	}
	got, want := strings.Split(string(unit), "\n"), strings.Split(string(stackUnit), "\n")
	if len(got) != len(want) {
		t.Fatalf("packaged unit has %d lines, the stack's %d:\n%s", len(got), len(want), unit)
	}
	for i := 1; i < len(got); i++ {
		w := strings.Replace(want[i], "ExecStart=/usr/local/bin/kvwatch ", "ExecStart=/usr/bin/kvwatch ", 1)
		if got[i] != w {
			t.Errorf("unit line %d = %q, want %q", i+1, got[i], w)
		}
	}
	for _, w := range []string{"\nExecStart=/usr/bin/kvwatch serve --config.file=/etc/kvwatch/kvwatch.yml --web.listen-address=127.0.0.1:9477\n",
		"\nDynamicUser=yes\n", "\nNoNewPrivileges=yes\n", "\nProtectSystem=strict\n", "\nCapabilityBoundingSet=\n"} {
		if !strings.Contains(string(unit), w) {
			t.Errorf("packaged unit lacks %q", strings.TrimSpace(w))
		}
	}
	// Not installed, the binary is the only thing systemd may miss.
	out, _ := exec.Command(sa, "verify", filepath.Join(root, "usr/lib/systemd/system/kvwatch.service")).CombinedOutput()
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" && !strings.Contains(l, "Command /usr/bin/kvwatch is not executable") {
			t.Errorf("systemd-analyze verify: %s", l)
		}
	}

	// The shipped config is what the unit reads, and it is valid.
	if c := cmd(t, "", false, bin, "check", "config", filepath.Join(root, "etc/kvwatch/kvwatch.yml")); !strings.Contains(c, "OK") {
		t.Errorf("check config of the packaged kvwatch.yml: %s", c)
	}

	// The bash completion loads from where bash-completion looks.
	comp := cmd(t, "", false, bash, "--norc", "--noprofile", "-euc",
		`PATH="$1:$PATH"; source "$2"; complete -p kvwatch; COMP_WORDS=(kvwatch dem); COMP_CWORD=1; _kvwatch_complete; echo "${COMPREPLY[*]}"`,
		"bash", filepath.Dir(bin), filepath.Join(root, "usr/share/bash-completion/completions/kvwatch"))
	if comp != "complete -o default -F _kvwatch_complete kvwatch\ndemo\n" {
		t.Errorf("packaged bash completion:\n%s", comp)
	}

	// zsh autoloads _kvwatch from its vendor-completions directory (on
	// $fpath), fish finds kvwatch.fish under $XDG_DATA_DIRS: both complete.
	usrBin, share := filepath.Dir(bin), filepath.Join(root, "usr/share")
	if zsh, err := exec.LookPath("zsh"); err == nil {
		out := cmd(t, "", false, zsh, "-f", "-c", `PATH="$1:$PATH"; fpath=("$2" $fpath); autoload -Uz compinit && compinit -u -D
print -r -- "registered: $_comps[kvwatch]"
compadd() { print -r -- "added: ${(P)2}" }
words=(kvwatch sta); CURRENT=2; _kvwatch`, "zsh", usrBin, filepath.Join(share, "zsh/vendor-completions"))
		if out != "registered: _kvwatch\nadded: help status top serve check plan simulate demo stack\n" {
			t.Errorf("packaged zsh completion:\n%s", out)
		}
	}
	if fish, err := exec.LookPath("fish"); err == nil {
		c := exec.Command(fish, "-c", "complete -C'kvwatch sta'")
		c.Env = append(os.Environ(), "PATH="+usrBin+":"+os.Getenv("PATH"), "XDG_DATA_DIRS="+share, "HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir())
		if out, err := c.Output(); err != nil || string(out) != "stack\nstatus\n" {
			t.Errorf("packaged fish completion: %v\n%s", err, out)
		}
	}

	// The man page is the binary's own --help-man, gzipped.
	f, err := os.Open(filepath.Join(root, "usr/share/man/man1/kvwatch.1.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	page, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if string(page) != cmd(t, "", false, bin, "--help-man") || !strings.HasPrefix(string(page), ".TH KVWATCH 1 ") {
		t.Errorf("kvwatch.1.gz is not the binary's --help-man:\n%.300s", page)
	}
}

// TestDebianPackageInstall installs the .deb with dpkg -i into this machine,
// checks it, verifies the unit (and starts and stops it where systemd runs),
// and purges it. It needs root and refuses to touch an existing kvwatch.
func TestDebianPackageInstall(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("installing the .deb needs root (CI runs as root); TestDebianPackage checks it unpacked")
	}
	dpkg := tool(t, "dpkg", "dpkg")
	dpkgQuery := tool(t, "dpkg-query", "dpkg")
	sa := tool(t, "systemd-analyze", "systemd")
	if out, err := exec.Command(dpkgQuery, "-W", "-f", "${Status}", "kvwatch").Output(); err == nil && strings.Contains(string(out), "installed") {
		t.Skip("a kvwatch package is installed on this machine already; not touching it")
	}
	for _, f := range wantFiles {
		if _, err := os.Lstat(f); err == nil {
			t.Skipf("%s exists already; not touching it", f)
		}
	}
	deb := buildDeb(t)
	purge := func() { cmd(t, "", true, dpkg, "--purge", "kvwatch") }
	cmd(t, "", true, dpkg, "-i", deb)
	purged := false
	t.Cleanup(func() {
		if !purged {
			exec.Command(dpkg, "--purge", "kvwatch").Run()
		}
	})

	if st := cmd(t, "", false, dpkgQuery, "-W", "-f", "${Status}", "kvwatch"); st != "install ok installed" {
		t.Errorf("dpkg status after dpkg -i: %q", st)
	}
	listed := strings.Split(strings.TrimSpace(cmd(t, "", false, dpkgQuery, "-L", "kvwatch")), "\n")
	for _, f := range wantFiles {
		if _, err := os.Stat(f); err != nil || !slices.Contains(listed, f) {
			t.Errorf("%s after dpkg -i: %v (in dpkg -L: %v)", f, err, slices.Contains(listed, f))
		}
	}
	if v := cmd(t, "", false, "/usr/bin/kvwatch", "--version"); !strings.HasPrefix(v, "kvwatch, version ") {
		t.Errorf("/usr/bin/kvwatch --version: %s", v)
	}
	// Installed, systemd finds everything the unit names.
	if out, err := exec.Command(sa, "verify", "/usr/lib/systemd/system/kvwatch.service").CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify kvwatch.service: %v\n%s", err, out)
	}
	if _, err := os.Stat("/run/systemd/system"); err == nil {
		systemdStartStop(t)
	} else {
		t.Log("systemd is not PID 1 here: kvwatch.service verified, not started")
	}

	purge()
	purged = true
	if out, err := exec.Command(dpkgQuery, "-W", "-f", "${Status}", "kvwatch").Output(); err == nil && strings.Contains(string(out), "installed") {
		t.Errorf("dpkg status after purge: %q", out)
	}
	for _, f := range append(wantFiles, "/etc/kvwatch", "/usr/share/doc/kvwatch") {
		if _, err := os.Lstat(f); err == nil {
			t.Errorf("%s is still there after dpkg --purge", f)
		}
	}
}

// systemdStartStop starts kvwatch.service, waits for its /metrics and stops it.
func systemdStartStop(t *testing.T) {
	t.Helper()
	systemctl := tool(t, "systemctl", "systemd")
	cmd(t, "", true, systemctl, "start", "kvwatch.service")
	defer exec.Command(systemctl, "stop", "kvwatch.service").Run()
	deadline := time.Now().Add(15 * time.Second)
	for {
		out, _ := exec.Command(systemctl, "is-active", "kvwatch.service").Output()
		if strings.TrimSpace(string(out)) == "active" {
			break
		}
		if time.Now().After(deadline) {
			st, _ := exec.Command(systemctl, "status", "--no-pager", "kvwatch.service").CombinedOutput()
			t.Fatalf("kvwatch.service did not become active:\n%s", st)
		}
		time.Sleep(200 * time.Millisecond)
	}
	cmd(t, "", true, systemctl, "stop", "kvwatch.service")
	if out, _ := exec.Command(systemctl, "is-active", "kvwatch.service").Output(); strings.TrimSpace(string(out)) != "inactive" {
		t.Errorf("kvwatch.service after stop: %s", out)
	}
}
