package config

import (
	"strings"
	"testing"
)

func TestMaxRunningRequests(t *testing.T) {
	c, err := Parse([]byte(`
targets:
  - url: http://127.0.0.1:8000
    max_running_requests: 256
  - url: http://127.0.0.1:8001
`), "kvwatch.yml")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Targets[0].MaxRunningRequests; got != 256 {
		t.Errorf("targets[0].max_running_requests = %d, want 256", got)
	}
	if got := c.Targets[1].MaxRunningRequests; got != 0 {
		t.Errorf("targets[1].max_running_requests = %d, want 0 (the engine's)", got)
	}
	_, err = Parse([]byte(`
targets:
  - url: http://127.0.0.1:8000
    max_running_requests: -4
`), "kvwatch.yml")
	want := "line 4: targets[0].max_running_requests: -4 must be a positive number of requests"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error = %v, want it to contain %q", err, want)
	}
}
