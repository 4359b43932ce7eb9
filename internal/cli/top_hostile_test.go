package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvwatch/kvwatch/internal/testenv"
)

// TestTopOnceHostileTargets: top beside a healthy target, against targets
// that send terminal escapes (in an error body and in a model label) or
// carry secrets in their URL: no raw escape and no secret reaches the
// frame, and each hostile target is shown as failed with its reason.
func TestTopOnceHostileTargets(t *testing.T) {
	good := testenv.EngineFileServer(t, "/metrics", filepath.Join("testdata", "sglang-docs-production_metrics.prom"))
	h := hostileServers(t)
	secretURL := strings.Replace(h["secret"], "http://", "http://bob:pw-planted@", 1) + "/metrics?token=tk-planted&sig=sg-planted&page=1"
	cfg := writeConfig(t, fmt.Sprintf(`global:
  secret_query_params: [sig]
targets:
  - {name: good, url: %s}
  - {name: ansi, url: %s}
  - {name: secret, url: %q}
  - {name: bomb, url: %s}
  - {name: escmodel, url: %s}
`, good.URL, h["ansi"], secretURL, h["bomb"], h["escmodel"]))
	code, out, errOut := run(t, "top", "--once", "--no-color", "--width", "200", "--config.file", cfg, "--log.level=debug")
	if code != exitFailed {
		t.Errorf("exit %d, want %d (targets failed)", code, exitFailed)
	}
	t.Log("\n" + out)
	for _, bad := range []string{"\x1b", "\x07", "planted"} {
		if strings.Contains(out+errOut, bad) {
			t.Errorf("top output or log holds %q:\n%q\n%s", bad, out, errOut)
		}
	}
	for _, want := range []string{"good ", "ansi ", "secret ", "bomb ", "escmodel "} {
		if !strings.Contains(out, want) {
			t.Errorf("frame lacks a row for %q:\n%s", want, out)
		}
	}
}
