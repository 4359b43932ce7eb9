package forecast

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kvwatch/kvwatch/internal/kv"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// reportPools are the pools of the golden report: one of each kind.
func reportPools() []History {
	growing := history(line(700, 10), fourServers, quarter...)
	growing.Key = kv.PoolKey{Role: kv.RoleDecode, Cluster: "eu"}
	prefill := history(line(300, 0), func(int) (float64, float64) { return 1000, 2 }, 500, 500)
	prefill.Key = kv.PoolKey{Role: kv.RolePrefill, Cluster: "eu"}
	added := history(line(700, 10), func(i int) (float64, float64) {
		if i < 7 {
			return 750, 3
		}
		return 1000, 4
	}, quarter...)
	added.Key = kv.PoolKey{Role: kv.RoleDecode, Cluster: "us"}
	young := history(func(x float64) *float64 {
		if x < -2 {
			return nil
		}
		return ptr(200.0)
	}, fourServers, quarter...)
	young.Key = kv.PoolKey{Role: kv.RoleDecode, Cluster: "us", Pool: "new"}
	return []History{growing, prefill, added, young}
}

func goldenReport() *Report {
	r := Request{At: planAt, Window: 14 * day, Period: day, Resolution: 10 * time.Minute}
	return NewReport("http://127.0.0.1:9090", r, reportPools(), planOpts)
}

// TestReportText compares the text with testdata/report.txt; rewrite it
// with go test ./internal/forecast -run TestReportText -update and review
// the diff.
func TestReportText(t *testing.T) {
	var b bytes.Buffer
	if err := goldenReport().WriteText(&b); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.txt", b.Bytes())
}

// TestReportJSON compares the JSON with testdata/report.json.
func TestReportJSON(t *testing.T) {
	var b bytes.Buffer
	if err := goldenReport().WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatalf("the JSON does not read back: %v", err)
	}
	golden(t, "report.json", b.Bytes())
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v; write it with -update", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}
