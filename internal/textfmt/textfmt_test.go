package textfmt

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/kvwatch/kvwatch/internal/kv"
)

var (
	partial     = func(x float64) kv.Value { return kv.Value{V: x, Prov: kv.Partial} }
	implausible = func(x float64) kv.Value { return kv.Value{V: x, Prov: kv.Implausible} }
)

func TestCount(t *testing.T) {
	for _, c := range []struct {
		in   kv.Value
		want string
	}{
		{kv.Value{}, "--"},
		{kv.Of(0), "0"},
		{kv.Of(999), "999"},
		{kv.Of(4011), "4,011"},
		{kv.Of(9999), "9,999"},
		{kv.Of(9999.4), "9,999"},
		{kv.Of(9999.5), "10.0k"}, // rounds to 10,000: past the exact range
		{kv.Of(12034), "12.0k"},
		{kv.Of(77528), "77.5k"},
		{kv.Of(310112), "310k"},
		{kv.Of(999499), "999k"},
		{kv.Of(999500), "1.00M"}, // never "1000k"
		{kv.Of(2581504), "2.58M"},
		{kv.Of(1.5e9), "1.50G"},
		{kv.Of(999.6e9), "1e+12"}, // past any KV cache: exponent form
		{kv.Of(0.4), "0"},
		{kv.Of(-5000), "-5,000"},
		{kv.Of(-100000), "-100k"},
		{kv.DerivedOf(25815.04), "25.8k"},
		{kv.ReservedOf(20480), "20.5k"},
		{partial(900), "~900?"},
		{partial(396832), "~397k?"},
		{implausible(-5000), "!-5,000"},
		{implausible(1e30), "!1e+30"},
	} {
		if got := Count(c.in); got != c.want {
			t.Errorf("Count(%v %s) = %q, want %q", c.in.V, c.in.Prov, got, c.want)
		}
	}
}

func TestSigned(t *testing.T) {
	for _, c := range []struct {
		in   kv.Value
		want string
	}{{kv.Of(1234), "+1,234"}, {kv.Of(0), "0"}, {kv.Of(-1e6), "-1.00M"}, {kv.Value{}, "--"}} {
		if got := Signed(c.in); got != c.want {
			t.Errorf("Signed(%v) = %q, want %q", c.in.V, got, c.want)
		}
	}
}

func TestPercent(t *testing.T) {
	for _, c := range []struct {
		in   kv.Value
		want string
	}{
		{kv.Value{}, "--"},
		{kv.Of(0), "0.0%"},
		{kv.DerivedOf(0.12012), "12.0%"},
		{kv.DerivedOf(0.9995), "100.0%"},
		{kv.DerivedOf(2.578), "257.8%"}, // a drain that overfills the rest
		{kv.ReservedOf(0.256), "25.6%*"},
		{partial(0.812), "~81.2%?"},
		{implausible(0.05), "implausible"}, // never a plausible 5.0%
		{kv.DerivedOf(3e7), "3e+09%"},
	} {
		if got := Percent(c.in); got != c.want {
			t.Errorf("Percent(%v %s) = %q, want %q", c.in.V, c.in.Prov, got, c.want)
		}
	}
	if got := PercentOf(0.9); got != "90.0%" {
		t.Errorf("PercentOf(0.9) = %q, want 90.0%%", got)
	}
}

func TestTimes(t *testing.T) {
	for _, c := range []struct {
		in   kv.Value
		want string
	}{
		{kv.Value{}, "--"},
		{kv.DerivedOf(0.01), "0.01×"},
		{kv.DerivedOf(9.994), "9.99×"},
		{kv.DerivedOf(9.996), "10.0×"},
		{kv.DerivedOf(17.6), "17.6×"},
		{kv.DerivedOf(99.96), "100×"},
		{kv.DerivedOf(250.4), "250×"},
		{kv.DerivedOf(1500), "1,500×"},
		{kv.DerivedOf(15000), "15.0k×"},
		{partial(11.6), "~11.6×?"},
	} {
		if got := Times(c.in); got != c.want {
			t.Errorf("Times(%v) = %q, want %q", c.in.V, got, c.want)
		}
	}
}

func TestRate(t *testing.T) {
	for _, c := range []struct {
		in   kv.Value
		want string
	}{
		{kv.Value{}, "--"}, {kv.DerivedOf(0), "0.00"}, {kv.DerivedOf(0.25), "0.25"}, {kv.DerivedOf(2), "2.00"},
		{kv.DerivedOf(9.996), "10"}, {kv.DerivedOf(42.4), "42"}, {kv.DerivedOf(4500), "4,500"}, {kv.DerivedOf(11500), "11.5k"},
		{kv.DerivedOf(-892.1), "-892"},
	} {
		if got := Rate(c.in); got != c.want {
			t.Errorf("Rate(%v) = %q, want %q", c.in.V, got, c.want)
		}
	}
}

func TestSizeAndHeadroom(t *testing.T) {
	for _, c := range []struct {
		in   int
		want string
	}{{8192, "8k"}, {131072, "128k"}, {524288, "512k"}, {4000, "4000"}, {100, "100"}, {1024, "1k"}} {
		if got := Size(c.in); got != c.want {
			t.Errorf("Size(%d) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := Headroom(kv.DerivedOf(276), 8192); got != "276×8k" {
		t.Errorf("Headroom(276, 8192) = %q, want 276×8k", got)
	}
	if got := Headroom(kv.Value{}, 8192); got != "--×8k" {
		t.Errorf("Headroom(unknown, 8192) = %q, want --×8k", got)
	}
	if got := UsedOf(kv.Of(310112), kv.Value{}); got != "310k / -- tok" {
		t.Errorf("UsedOf(310112, unknown) = %q", got)
	}
}

func TestBytes(t *testing.T) {
	for _, c := range []struct {
		in   kv.Value
		want string
	}{{kv.Value{}, "--"}, {kv.Of(512), "512 B"}, {kv.Of(1536), "1.5 KiB"}, {kv.Of(3 << 30), "3.0 GiB"}, {kv.Of(2 << 50), "2.0 PiB"}, {kv.Of(4 << 60), "4096.0 PiB"}} {
		if got := Bytes(c.in); got != c.want {
			t.Errorf("Bytes(%v) = %q, want %q", c.in.V, got, c.want)
		}
	}
}

// sharedCases are testdata/shared.json: the duration and time-to-full
// texts that textfmt and the web UI's script must both write.
type sharedCases struct {
	Duration []struct {
		Seconds float64 `json:"seconds"`
		Text    string  `json:"text"`
	} `json:"duration"`
	TimeToFull []struct {
		State       kv.FillState `json:"state"`
		Seconds     float64      `json:"seconds"`
		FullByQueue bool         `json:"full_by_queue"`
		Text        string       `json:"text"`
	} `json:"time_to_full"`
}

func readSharedCases(t *testing.T) sharedCases {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "shared.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c sharedCases
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Duration) == 0 || len(c.TimeToFull) == 0 {
		t.Fatal("testdata/shared.json holds no cases")
	}
	return c
}

func TestDuration(t *testing.T) {
	for _, c := range readSharedCases(t).Duration {
		if got := Duration(c.Seconds); got != c.Text {
			t.Errorf("Duration(%v) = %q, want %q", c.Seconds, got, c.Text)
		}
	}
	if got := Duration(math.NaN()); got != "0s" {
		t.Errorf("Duration(NaN) = %q, want 0s", got)
	}
}

// TestTimeToFullShared: the states the web UI can tell from the recording
// rules, written as status and top write them.
func TestTimeToFullShared(t *testing.T) {
	for _, c := range readSharedCases(t).TimeToFull {
		f := &kv.FillForecast{TimeToFullState: c.State, FullByQueue: c.FullByQueue}
		if c.State == kv.FillFilling || c.State == kv.FillFull {
			f.TimeToFullSeconds = kv.DerivedOf(c.Seconds)
		}
		if got := TimeToFull(f, kv.TrendMinTop); got != c.Text {
			t.Errorf("TimeToFull(%+v) = %q, want %q", f, got, c.Text)
		}
	}
}

func TestHit(t *testing.T) {
	for _, c := range []struct {
		v          kv.Value
		window     float64
		sinceStart bool
		want, over string
	}{
		{kv.DerivedOf(0.3), 2, false, "30.0%", "over the last 2s"},
		{kv.DerivedOf(0.413), 0, true, "41.3%†", "since engine start"},
		{kv.DerivedOf(0.25), 0.2, false, "25.0%", "over the last 0.2s"},
		{kv.DerivedOf(0.25), 300, false, "25.0%", "over the last 5m"},
		{kv.Value{}, 0, false, "--", "over the last 0s"},
	} {
		if got := Hit(c.v, c.sinceStart); got != c.want {
			t.Errorf("Hit(%v, %v) = %q, want %q", c.v.V, c.sinceStart, got, c.want)
		}
		if got := HitWindow(c.window, c.sinceStart); got != c.over {
			t.Errorf("HitWindow(%v, %v) = %q, want %q", c.window, c.sinceStart, got, c.over)
		}
	}
}

func TestTiers(t *testing.T) {
	s := &kv.Server{CachePools: []kv.CachePool{
		{Type: kv.PoolFull, Tier: kv.TierLMCacheL1, Unit: kv.UnitBytes, UsageRatio: kv.DerivedOf(0.41)},
		{Type: kv.PoolFull, Tier: kv.TierLMCacheL2, Name: "fs\x1b[2J", Unit: kv.UnitBytes, Used: kv.Of(2 << 30)},
		{Type: kv.PoolMamba, Tier: kv.TierHost, Unit: kv.UnitSlots, Used: kv.Of(12)},
		{Type: kv.PoolFull, Tier: kv.TierDisk, Unit: kv.UnitTokens, HitRate: kv.Of(0.18)},
		{Type: kv.PoolFull, Tier: kv.TierRemote, Unit: kv.UnitTokens},
	}}
	// The escape sequence from the page never reaches a terminal.
	want := "lmcache-l1 41.0%, lmcache-l2 fs??2J 2.0 GiB, mamba pool (host) 12 slots, disk hit rate 18.0%, remote --"
	if got := Tiers(s); got != want {
		t.Errorf("Tiers = %q\nwant    %q", got, want)
	}
	if got := Tiers(&kv.Server{}); got != "--" {
		t.Errorf("Tiers(none) = %q", got)
	}
}

func TestTraffic(t *testing.T) {
	tests := []struct {
		load, store kv.Value
		want        string
	}{
		{kv.Of(256 << 20), kv.Of(768 << 20), "loaded 256.0 MiB, stored 768.0 MiB"},
		// A tier stored to and never read: its loads are 0, not unknown.
		{kv.Of(0), kv.Of(3 << 30), "loaded 0 B, stored 3.0 GiB"},
		{kv.Value{}, kv.Of(1024), "loaded --, stored 1.0 KiB"},
		{kv.Value{}, kv.Value{}, ""},
	}
	for _, tt := range tests {
		p := kv.CachePool{Type: kv.PoolFull, Tier: kv.TierHost, Unit: kv.UnitTokens, LoadBytes: tt.load, StoreBytes: tt.store}
		if got := Traffic(p); got != tt.want {
			t.Errorf("Traffic(%v, %v) = %q, want %q", tt.load, tt.store, got, tt.want)
		}
	}
}

func TestTimeToFull(t *testing.T) {
	tests := []struct {
		f    *kv.FillForecast
		want string
	}{
		{nil, "time to full --"},
		{&kv.FillForecast{TimeToFullState: kv.FillFilling, TimeToFullSeconds: kv.DerivedOf(45)}, "full in 45s"},
		{&kv.FillForecast{TimeToFullState: kv.FillFilling, TimeToFullSeconds: kv.DerivedOf(59.9)}, "full in 59s"}, // rounded down: sooner, never later
		{&kv.FillForecast{TimeToFullState: kv.FillFilling, TimeToFullSeconds: kv.DerivedOf(750)}, "full in 12m"},
		{&kv.FillForecast{TimeToFullState: kv.FillFilling, TimeToFullSeconds: kv.DerivedOf(7530)}, "full in 2h05m"},
		{&kv.FillForecast{TimeToFullState: kv.FillFilling, TimeToFullSeconds: kv.DerivedOf(3*86400 + 4*3600 + 59)}, "full in 3d04h"},
		{&kv.FillForecast{TimeToFullState: kv.FillFilling, TimeToFullSeconds: partial(750)}, "~full in 12m?"},
		{&kv.FillForecast{TimeToFullState: kv.FillFull, TimeToFullSeconds: kv.DerivedOf(0), FullByQueue: true}, "full now (queue)"},
		{&kv.FillForecast{TimeToFullState: kv.FillFull, TimeToFullSeconds: kv.DerivedOf(0)}, "full now"},
		{&kv.FillForecast{TimeToFullState: kv.FillNotFilling}, "not filling"},
		// 30 s of trend asked (top's), 9.5 s held: 20.5 s to go.
		{&kv.FillForecast{TimeToFullState: kv.FillUnknown, TrendWarming: true, TrendSeconds: 9.5}, "trend after 21s"},
		{&kv.FillForecast{TimeToFullState: kv.FillUnknown, TrendWarming: true, TrendSeconds: 40}, "trend after the next sample"},
		{&kv.FillForecast{TimeToFullState: kv.FillUnknown}, "time to full --"},
	}
	for _, tt := range tests {
		if got := TimeToFull(tt.f, kv.TrendMinTop); got != tt.want {
			t.Errorf("TimeToFull(%+v) = %q, want %q", tt.f, got, tt.want)
		}
	}
}

func TestState(t *testing.T) {
	for st, want := range map[kv.State]string{kv.StateLeak: "leak suspected", kv.StateStuck: "stuck", kv.StateFull: "full",
		kv.StatePressure: "pressure", kv.StateOK: "ok", kv.StateIdle: "idle", kv.StateUnknown: "--"} {
		if got := State(st); got != want {
			t.Errorf("State(%q) = %q, want %q", st, got, want)
		}
	}
}

func TestAlertCounts(t *testing.T) {
	for _, c := range []struct {
		firing, pending int
		want            string
	}{{0, 0, "0 firing, 0 pending"}, {2, 3, "2 firing, 3 pending"}, {0, 4, "0 firing, 4 pending"}, {12000, 1, "12,000 firing, 1 pending"}} {
		if got := AlertCounts(c.firing, c.pending); got != c.want {
			t.Errorf("AlertCounts(%d, %d) = %q, want %q", c.firing, c.pending, got, c.want)
		}
	}
}

func TestHitWindows(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{"", ""}, ""},
		{[]string{"over the last 5s", "", "over the last 5s"}, "hit ratio over the last 5s"},
		{[]string{SinceStart, ""}, "† hit ratio since engine start"},
		{[]string{"over the last 5s", SinceStart, "over the last 4s"}, "hit ratio over the last 5s, over the last 4s; † since engine start"},
	} {
		if got := HitWindows(c.in); got != c.want {
			t.Errorf("HitWindows(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestEngine(t *testing.T) {
	for _, tc := range []struct{ engine, version, want string }{
		{"vllm", "0.26.0", "vllm 0.26.0"},
		{"llamacpp", "b10587-3f545be", "llamacpp b10587-3f545be"},
		{"sglang", "", "sglang"},
	} {
		if got := Engine(tc.engine, tc.version); got != tc.want {
			t.Errorf("Engine(%q, %q) = %q, want %q", tc.engine, tc.version, got, tc.want)
		}
	}
}
