package stack

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// InstallOptions configure Install.
type InstallOptions struct {
	// Dir is the generated stack directory.
	Dir string
	// Root is prefixed to every destination path (default "/"); tests and
	// image builds install into another tree.
	Root string
	// DryRun prints what would be done, and the units, without writing.
	DryRun bool
	// Out receives the report (and the units on a dry run).
	Out io.Writer
}

// SystemdDir is where Install puts the units.
const SystemdDir = "/etc/systemd/system"

// configFileFlag finds the install directory in kvwatch.service: in
// --config.file, or in the LoadCredential= of a kvwatch.yml that holds
// secrets (--config.file is then %d/kvwatch.yml).
var configFileFlag = regexp.MustCompile(`(?m)(?:--config\.file=|^LoadCredential=kvwatch\.yml:)(/\S*)/kvwatch\.yml`)

// Install copies the stack's files to the directory its units were
// generated for (--install.dir; found in kvwatch.service) and its units to
// /etc/systemd/system. It does not start anything: it prints the systemctl
// command that does.
func Install(o InstallOptions) error {
	if o.Root == "" {
		o.Root = "/"
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	unitDir := filepath.Join(o.Dir, "systemd")
	entries, err := os.ReadDir(unitDir)
	if err != nil {
		return fmt.Errorf("stack install: %w; generate the stack first with `kvwatch stack generate --out %s`", err, o.Dir)
	}
	units := map[string][]byte{}
	var names []string
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".service") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(unitDir, e.Name()))
		if err != nil {
			return fmt.Errorf("stack install: %w", err)
		}
		units[e.Name()] = b
		names = append(names, e.Name())
	}
	sort.Strings(names)
	m := configFileFlag.FindSubmatch(units[UnitKVWatch])
	if m == nil {
		return fmt.Errorf("stack install: %s has no --config.file=<dir>/kvwatch.yml; regenerate the stack", filepath.Join(unitDir, UnitKVWatch))
	}
	installDir := string(m[1])
	src, err := filepath.Abs(o.Dir)
	if err != nil {
		return fmt.Errorf("stack install: %w", err)
	}
	dst := filepath.Join(o.Root, installDir)
	var files []string
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			if rel == DataDir || rel == LogDir {
				return filepath.SkipDir
			}
			return nil
		}
		files = append(files, rel)
		return nil
	})
	if err != nil {
		return fmt.Errorf("stack install: %w", err)
	}
	same := filepath.Clean(src) == filepath.Clean(dst)
	if o.DryRun {
		if !same {
			fmt.Fprintf(o.Out, "# would copy %d files from %s to %s\n", len(files), src, dst)
		}
		for _, n := range names {
			fmt.Fprintf(o.Out, "# would write %s\n%s\n", filepath.Join(o.Root, SystemdDir, n), units[n])
		}
		fmt.Fprintf(o.Out, "# then: systemctl daemon-reload && systemctl enable --now %s\n", strings.Join(names, " "))
		return nil
	}
	if !same {
		for _, rel := range files {
			if err := copyFile(filepath.Join(src, rel), filepath.Join(dst, rel)); err != nil {
				return fmt.Errorf("stack install: %w", err)
			}
		}
		fmt.Fprintf(o.Out, "copied %d files to %s\n", len(files), dst)
	}
	sd := filepath.Join(o.Root, SystemdDir)
	if err := os.MkdirAll(sd, 0o755); err != nil {
		return fmt.Errorf("stack install: %w (run as root)", err)
	}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(sd, n), units[n], 0o644); err != nil {
			return fmt.Errorf("stack install: %w (run as root)", err)
		}
		fmt.Fprintf(o.Out, "wrote %s\n", filepath.Join(sd, n))
	}
	fmt.Fprintf(o.Out, "now run: systemctl daemon-reload && systemctl enable --now %s\n", strings.Join(names, " "))
	return nil
}

// copyFile copies src to dst with its permission bits.
func copyFile(src, dst string) error {
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	// An existing file takes the mode first: a secret never lands in a
	// file others can read.
	if err := os.Chmod(dst, st.Mode().Perm()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if old, err := os.ReadFile(dst); err == nil && bytes.Equal(old, b) {
		return nil
	}
	return os.WriteFile(dst, b, st.Mode().Perm())
}
