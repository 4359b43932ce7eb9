package stack

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/testenv"
)

// TestHealthyDemoIsQuiet (issue 17 item 4): `kvwatch demo`'s default
// scenario is a healthy cluster, so the generated rules it evaluates must
// leave every alert inactive, not even pending (PrefixCacheHitRateLow was
// pending 25 s after start with a simulated hit ratio of about 28 % against
// a 30 % threshold).
func TestHealthyDemoIsQuiet(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo for a minute; skipped with -short")
	}
	dir := t.TempDir()
	bin := buildKVWatch(t, dir)
	addr := testenv.FreeAddr(t)
	startProc(t, nil, filepath.Join(dir, "demo.log"), bin, "demo", "--web.listen-address", addr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	testenv.WaitOK(ctx, t, "http://"+addr+"/-/ready")
	type alerts struct {
		Status string
		Data   struct {
			Alerts []struct {
				Labels map[string]string
				State  string
				Value  string
			}
		}
	}
	// Alerts at a 15-minute for-duration would be pending within seconds
	// of a breach: watch for a minute of the demo.
	deadline := time.Now().Add(60 * time.Second)
	rounds := 0
	for time.Now().Before(deadline) {
		var a alerts
		if err := getJSON(ctx, "http://"+addr+"/api/v1/alerts", &a); err != nil {
			t.Fatalf("GET /api/v1/alerts: %v (see %s)", err, filepath.Join(dir, "demo.log"))
		}
		if a.Status != "success" {
			t.Fatalf("/api/v1/alerts status %q", a.Status)
		}
		var active []string
		for _, al := range a.Data.Alerts {
			active = append(active, fmt.Sprintf("%s %s on %s (value %s)", al.State, al.Labels["alertname"], al.Labels["server"], al.Value))
		}
		if len(active) > 0 {
			t.Fatalf("the healthy demo has active alerts after %d s:\n%s", rounds*5, strings.Join(active, "\n"))
		}
		rounds++
		time.Sleep(5 * time.Second)
	}
	if rounds < 10 {
		t.Fatalf("only %d checks in a minute", rounds)
	}
}
