package cli

import (
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/kvwatch/kvwatch/internal/promapi"
)

func TestQueryFlags(t *testing.T) {
	parse := func(args ...string) promapi.Options {
		t.Helper()
		app := kingpin.New("kvwatch", "")
		var f queryFlags
		f.register(app.Command("serve", ""))
		if _, err := app.Parse(append([]string{"serve"}, args...)); err != nil {
			t.Fatal(err)
		}
		var o promapi.Options
		f.apply(&o)
		return o
	}
	o := parse()
	if o.Timeout != 30*time.Second || o.MaxSamples != 5000000 || o.MaxConcurrency != 4 || o.MaxQueued != 16 || o.MaxQueryLength != 16384 || o.MaxLabelBytes != 268435456 {
		t.Errorf("defaults = %+v", o)
	}
	o = parse("--query.timeout=5s", "--query.max-samples=100", "--query.max-concurrency=2", "--query.max-queued=0", "--query.max-length=50", "--query.max-label-bytes=1000")
	if o.Timeout != 5*time.Second || o.MaxSamples != 100 || o.MaxConcurrency != 2 || o.MaxQueued != -1 || o.MaxQueryLength != 50 || o.MaxLabelBytes != 1000 {
		t.Errorf("set = %+v", o)
	}
	// A queryFlags nobody parsed (demo's serve built in code, tests) gets
	// the defaults, not "no queue".
	var zero queryFlags
	var z promapi.Options
	zero.apply(&z)
	if z.MaxQueued != 0 {
		t.Errorf("zero flags: MaxQueued = %d, want 0 (promapi's default)", z.MaxQueued)
	}
}
