package history

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

func TestCollector(t *testing.T) {
	st := New(Options{Retention: 2 * time.Hour, FullResolution: time.Hour, DownsampleStep: time.Minute, Interval: 5 * time.Second})
	a := labels.FromStrings("__name__", "kvwatch_kv_used_tokens", "server", "a")
	b := labels.FromStrings("__name__", "kvwatch_kv_used_tokens", "server", "b")
	// 90 minutes at 5 s: the oldest half hour (and up to a chunk more)
	// moves to the downsampled tier.
	for ts := int64(0); ts < 90*60*1000; ts += 5000 {
		st.Append(a, ts, float64(ts/1000))
		st.Append(b, ts, 7)
	}
	st.Append(a, 0, 1) // out of order: refused
	// Count the samples by decoding every chunk, not from Stats (which
	// reads the chunks' headers): a pending downsampled sample counts in
	// the downsampled tier.
	raw, coarse := 0, 0
	count := func(cs []chunk) (n int) {
		for _, c := range cs {
			it := c.Iterator(nil)
			for it.Next() == chunkenc.ValFloat {
				n++
			}
		}
		return n
	}
	for _, list := range st.series {
		for _, ms := range list {
			raw += count(ms.raw.view(nil, minInt64, maxInt64))
			coarse += count(ms.coarse.view(nil, minInt64, maxInt64))
			if ms.ds.pending {
				coarse++
			}
		}
	}
	if raw == 0 || coarse == 0 {
		t.Fatalf("%d full and %d downsampled samples: want both tiers used", raw, coarse)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(st.Collector())
	want := `
# HELP kvwatch_history_samples Samples held in the in-memory history, by tier (full resolution or downsampled).
# TYPE kvwatch_history_samples gauge
kvwatch_history_samples{tier="downsampled"} ` + strconv.Itoa(coarse) + `
kvwatch_history_samples{tier="full"} ` + strconv.Itoa(raw) + `
# HELP kvwatch_history_samples_dropped_total Samples the history refused because they were not newer than the series' last one.
# TYPE kvwatch_history_samples_dropped_total counter
kvwatch_history_samples_dropped_total 1
# HELP kvwatch_history_series Series held in the in-memory history.
# TYPE kvwatch_history_series gauge
kvwatch_history_series 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kvwatch_history_samples", "kvwatch_history_series", "kvwatch_history_samples_dropped_total"); err != nil {
		t.Error(err)
	}
	// 2 series × 1,080 samples, minus the downsampled steps' dropped ones.
	if total := raw + coarse; total >= 2*1080 || total < 2*720 {
		t.Errorf("%d samples held, want fewer than the 2,160 appended (downsampled) and at least the last hour's 1,440", total)
	}
	if n, err := testutil.GatherAndCount(reg, "kvwatch_history_chunk_bytes", "kvwatch_history_off_heap_bytes"); err != nil || n != 3 {
		t.Errorf("chunk bytes and off-heap bytes: %d series (%v), want 3", n, err)
	}
}
