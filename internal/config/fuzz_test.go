package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Any bytes either parse into a config whose targets all have a name and a
// valid URL, or give an error that names the file; never a panic.
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile(filepath.Join("..", "..", "examples", "kvwatch.yml"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)
	f.Add([]byte("targets:\n  - url: http://a:1\n    basic_auth: {username: u, password: p}\nfile_sd_configs:\n  - files: [x.json]\n    scheme: https\n"))
	f.Add([]byte("global: {scrape_interval: 5s, scrape_timeout: 6s}\n"))
	f.Add([]byte("targets: ["))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b, "kvwatch.yml")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "kvwatch.yml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for i, tg := range c.Targets {
			if tg.Name == "" {
				t.Fatalf("targets[%d] has no name after a successful parse", i)
			}
			if _, err := ParseTargetURL(tg.URL); err != nil {
				t.Fatalf("targets[%d] has a bad URL after a successful parse: %v", i, err)
			}
		}
		for i, sd := range c.FileSD {
			if sd.Scheme != "" && sd.Scheme != "http" && sd.Scheme != "https" {
				t.Fatalf("file_sd_configs[%d].scheme %q accepted", i, sd.Scheme)
			}
		}
	})
}
