package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDocsFlagDefaults compares the default column of every flag table in
// docs/*.md with the flags' defaults, so that a default changed in code
// (most read a constant of the package that owns the value) without the
// docs fails. A row may name several flags, with their defaults in the
// same order ("`info`, `logfmt`"); a flag without a default in code
// (its default comes from the config, the host, ...) is not compared.
func TestDocsFlagDefaults(t *testing.T) {
	app, _, _ := newApp()
	m := app.Model()
	defaults := map[string][]string{} // flag name: its defaults in the commands that have it
	for _, f := range m.Flags {
		defaults[f.Name] = append(defaults[f.Name], strings.Join(f.Default, ","))
	}
	for _, c := range m.FlattenedCommands() {
		for _, f := range c.Flags {
			defaults[f.Name] = append(defaults[f.Name], strings.Join(f.Default, ","))
		}
	}
	files, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	flagRE := regexp.MustCompile("`--([a-z0-9.-]+)[^`]*`")
	literalRE := regexp.MustCompile("^`([^`]*)`$")
	compared := 0
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		col := -1 // the default column of the table being read, -1 outside one
		for i, line := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(line, "|") {
				col = -1
				continue
			}
			cells := strings.Split(strings.Trim(line, "|"), "|")
			if col < 0 {
				col = slices.IndexFunc(cells, func(c string) bool { return strings.TrimSpace(c) == "default" })
				if col < 0 {
					col = len(cells) + 1 // a table without defaults: skip its rows
				}
				continue
			}
			if col >= len(cells) {
				continue
			}
			var flags []string
			for _, f := range flagRE.FindAllStringSubmatch(cells[0], -1) {
				flags = append(flags, f[1])
			}
			parts := strings.Split(strings.TrimSpace(cells[col]), ", ")
			if len(flags) == 0 || (len(flags) > 1 && len(parts) != len(flags)) {
				continue
			}
			for j, f := range flags {
				in, ok := defaults[f]
				if !ok {
					t.Errorf("%s:%d: --%s is not a flag of any command", file, i+1, f)
					continue
				}
				if slices.Equal(slices.Compact(slices.Clone(in)), []string{""}) {
					continue // no default in code
				}
				part := parts[min(j, len(parts)-1)]
				if g := literalRE.FindStringSubmatch(part); g != nil {
					part = g[1]
				}
				compared++
				if !slices.Contains(in, part) {
					t.Errorf("%s:%d: --%s: the docs say default %q, the flag's is %q", file, i+1, f, part, in)
				}
			}
		}
	}
	if compared < 20 {
		t.Errorf("compared %d flag defaults; the docs' flag tables were not found", compared)
	}
}
