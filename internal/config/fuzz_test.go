package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
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
	f.Add([]byte("remote_write:\n  - url: http://a:1/w\n    queue_config: {capacity: 0, max_samples_per_send: 5}\n  - ~\n"))
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
		for i, rw := range c.RemoteWrite {
			q := rw.QueueConfig
			if rw.Name == "" || rw.RemoteTimeout <= 0 || rw.SendInterval < model.Duration(100*time.Millisecond) ||
				q.Capacity <= 0 || q.MaxSamplesPerSend <= 0 || q.MaxSamplesPerSend > q.Capacity || q.MinBackoff <= 0 || q.MinBackoff > q.MaxBackoff {
				t.Fatalf("remote_write[%d] accepted with a value no sender can use: %+v", i, rw)
			}
		}
	})
}
