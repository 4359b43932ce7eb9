package serve

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"
	"go.yaml.in/yaml/v3"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/pipeline"
)

func TestParseShard(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    Shard
		wantErr string
	}{
		{in: "0/2", want: Shard{0, 2}},
		{in: "1/2", want: Shard{1, 2}},
		{in: " 6/7 ", want: Shard{6, 7}},
		{in: "0/1", want: Shard{0, 1}},
		{in: "2/2", wantErr: "must be below M (here 0 to 1)"},
		{in: "-1/2", wantErr: "must be below M"},
		{in: "1/0", wantErr: "at least 1"},
		{in: "1", wantErr: "want N/M"},
		{in: "a/b", wantErr: "whole numbers"},
	} {
		got, err := ParseShard(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("ParseShard(%q) = %v, %v; want an error with %q", c.in, got, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseShard(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

// TestShardOfByHand checks addresses whose MD5 was worked out with md5sum:
// md5("127.0.0.1:30000") = 6018dc741d24ebd5 bd71122321240648, and
// 0xbd71122321240648 mod 2 = 0, mod 3 = 1, mod 7 = 0;
// md5("10.0.0.7:8000") = 8f04117747f79c50 9ddc470d58ea42f6, and
// 0x9ddc470d58ea42f6 mod 2 = 0, mod 3 = 0, mod 7 = 1.
func TestShardOfByHand(t *testing.T) {
	for _, c := range []struct {
		addr  string
		count int
		want  int
	}{
		{"127.0.0.1:30000", 2, 0}, {"127.0.0.1:30000", 3, 1}, {"127.0.0.1:30000", 7, 0},
		{"10.0.0.7:8000", 2, 0}, {"10.0.0.7:8000", 3, 0}, {"10.0.0.7:8000", 7, 1},
		{"10.0.0.7:8000", 1, 0}, {"10.0.0.7:8000", 0, 0},
	} {
		if got := ShardOf(c.addr, c.count); got != c.want {
			t.Errorf("ShardOf(%q, %d) = %d, want %d", c.addr, c.count, got, c.want)
		}
	}
}

// TestShardMatchesPrometheusHashmod runs Prometheus' own relabeling (the
// hashmod + keep pair the Shard doc names) on many addresses: it must keep
// exactly the addresses kvwatch's shard keeps.
func TestShardMatchesPrometheusHashmod(t *testing.T) {
	for _, count := range []int{2, 3, 7} {
		for idx := 0; idx < count; idx++ {
			var cfgs []*relabel.Config
			doc := fmt.Sprintf(`
- source_labels: [__address__]
  modulus: %d
  target_label: __tmp_hash
  action: hashmod
- source_labels: [__tmp_hash]
  regex: "%d"
  action: keep
`, count, idx)
			if err := yaml.Unmarshal([]byte(doc), &cfgs); err != nil {
				t.Fatal(err)
			}
			for _, c := range cfgs {
				if err := c.Validate(model.UTF8Validation); err != nil {
					t.Fatal(err)
				}
			}
			s := Shard{Index: idx, Count: count}
			for i := 0; i < 300; i++ {
				addr := fmt.Sprintf("gpu-%03d.example:%d", i, 30000+i%4)
				lb := labels.NewBuilder(labels.FromStrings("__address__", addr))
				prom := relabel.ProcessBuilder(lb, cfgs...)
				if got := ShardOf(addr, count) == idx; got != prom {
					t.Fatalf("%s in shard %v: kvwatch keeps %v, Prometheus hashmod keeps %v", addr, s, got, prom)
				}
			}
		}
	}
}

// TestShardUnionFileSD runs three sharded daemons on one config whose
// targets come from a file_sd file: their targets are disjoint and together
// are every target, also after the file changes.
func TestShardUnionFileSD(t *testing.T) {
	dir := t.TempDir()
	sd := func(n int) {
		var b strings.Builder
		b.WriteString("[{\"targets\": [")
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteString(", ")
			}
			// Nothing listens there: scrapes fail at once, which is fine.
			fmt.Fprintf(&b, "\"127.0.0.1:%d\"", 1+i)
		}
		b.WriteString("], \"labels\": {\"cluster\": \"c1\"}}]\n")
		tmp := filepath.Join(dir, "sd.json.tmp")
		if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "targets.json")); err != nil {
			t.Fatal(err)
		}
	}
	sd(40)
	cfg := writeFile(t, dir, "kvwatch.yml", `global: {scrape_interval: 1s, scrape_timeout: 1s}
targets:
  - {name: static, url: "http://127.0.0.1:9/metrics"}
file_sd_configs:
  - files: [targets.json]
    refresh_interval: 1s
`)
	const count = 3
	var ds []*running
	for i := 0; i < count; i++ {
		ds = append(ds, start(t, Options{Pipeline: pipe(t, config.Sources{File: cfg}), Shard: Shard{Index: i, Count: count}}))
	}
	check := func(want int) bool {
		seen := map[string]int{}
		total := 0
		for i, d := range ds {
			s := d.Setup()
			for _, tg := range s.Targets {
				if got := ShardOf(tg.URL.Host, count); got != i {
					t.Fatalf("daemon %d/%d keeps %s, whose shard is %d", i, count, tg.URL.Host, got)
				}
				seen[tg.Name]++
			}
			total += len(s.Targets)
			if got := one(t, d.own, "kvwatch_targets", nil); int(got) != len(s.Targets) {
				return false // the gauge follows the applied setup
			}
		}
		if total != want || len(seen) != want {
			return false
		}
		for name, n := range seen {
			if n != 1 {
				t.Fatalf("%s is scraped by %d shards, want 1", name, n)
			}
		}
		return true
	}
	waitFor(t, "three shards covering 41 targets once each", func() bool { return check(41) })
	// Every shard got some: 41 targets over 3 shards (a hash that put all
	// of them in one shard would be broken).
	for i, d := range ds {
		if n := len(d.Setup().Targets); n == 0 || n == 41 {
			t.Errorf("shard %d keeps %d of 41 targets", i, n)
		}
	}
	names := func() []string {
		var out []string
		for _, d := range ds {
			for _, tg := range d.Setup().Targets {
				out = append(out, tg.Name)
			}
		}
		slices.Sort(out)
		return out
	}
	before := names()
	sd(70)
	waitFor(t, "three shards covering 71 targets after the file_sd change", func() bool { return check(71) })
	after := names()
	for _, n := range before { // a target keeps its shard when others are added
		if !slices.Contains(after, n) {
			t.Errorf("%s vanished when targets were added", n)
		}
	}
}

func TestShardApplyUnsharded(t *testing.T) {
	s := &pipeline.Pipeline{}
	if got := (Shard{}).apply(s); got != s {
		t.Error("the zero Shard must keep the setup as it is")
	}
	if got := (Shard{Index: 0, Count: 1}).apply(s); got != s {
		t.Error("shard 0/1 must keep the setup as it is")
	}
}
