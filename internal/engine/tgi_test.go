package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvwatch/kvwatch/internal/kv"
)

// tgiPage is TGI's exposition as metrics_exporter_prometheus writes it: no
// labels on the batch gauges, counters without _total, histograms with _sum.
const tgiPage = `# TYPE tgi_request_count counter
tgi_request_count 40
# TYPE tgi_batch_current_max_tokens gauge
tgi_batch_current_max_tokens 20480
# TYPE tgi_batch_max_total_tokens gauge
tgi_batch_max_total_tokens 81920
# TYPE tgi_batch_current_size gauge
tgi_batch_current_size 5
# TYPE tgi_queue_size gauge
tgi_queue_size 2
# TYPE tgi_request_generated_tokens histogram
tgi_request_generated_tokens_bucket{le="1"} 0
tgi_request_generated_tokens_bucket{le="64"} 10
tgi_request_generated_tokens_bucket{le="+Inf"} 40
tgi_request_generated_tokens_sum 5120
tgi_request_generated_tokens_count 40
# TYPE tgi_request_input_length histogram
tgi_request_input_length_bucket{le="+Inf"} 40
tgi_request_input_length_sum 12000
tgi_request_input_length_count 40
`

func TestTGI(t *testing.T) {
	tests := []struct {
		name, body, contentType string
		want                    summary
	}{
		{
			name: "busy", body: tgiPage,
			want: summary{Engine: "tgi", Generation: "current", Role: kv.RoleUnified, Signals: kv.Signals{
				Capacity: dir(81920),
				// 20,480 reserved at admission out of 81,920: 0.25, a reservation.
				Used: res(20480), UsageRatio: res(0.25), ReservedRatio: res(0.25),
				Running: dir(5), Queued: kv.Queues{Waiting: dir(2)},
				Counters: kv.Counters{GenerationTokens: dir(5120), PromptTokens: dir(12000)},
			}},
		},
		{
			name: "openmetrics", contentType: "application/openmetrics-text; version=1.0.0",
			body: "# TYPE tgi_batch_max_total_tokens gauge\ntgi_batch_max_total_tokens 1000\n# TYPE tgi_batch_current_max_tokens gauge\ntgi_batch_current_max_tokens 999\n# TYPE tgi_request_generated_tokens histogram\ntgi_request_generated_tokens_bucket{le=\"+Inf\"} 1\ntgi_request_generated_tokens_sum 7\ntgi_request_generated_tokens_count 1\n# EOF\n",
			want: summary{Engine: "tgi", Generation: "current", Role: kv.RoleUnified, Signals: kv.Signals{
				Capacity: dir(1000), Used: res(999), UsageRatio: res(0.999), ReservedRatio: res(0.999),
				Counters: kv.Counters{GenerationTokens: dir(7)},
			}},
		},
		{
			name: "before warmup: no capacity yet",
			body: "tgi_queue_size 3\ntgi_batch_current_size 0\ntgi_batch_current_max_tokens NaN\n",
			want: summary{Engine: "tgi", Generation: "current", Role: kv.RoleUnified, Signals: kv.Signals{
				Running: dir(0), Queued: kv.Queues{Waiting: dir(3)},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := summarize(normalizeBody(t, tt.body, tt.contentType, nil))
			if diff := cmp.Diff(tt.want, got, valueCmp); diff != "" {
				t.Errorf("Normalize(%s) (-want +got):\n%s", tt.name, diff)
			}
		})
	}
}

func TestTGIHeadroomIsAReservation(t *testing.T) {
	s := normalizeBody(t, tgiPage, "", nil)
	// (81,920 − 20,480) / 4,096 = 15 requests, counted against reservations.
	if got, want := s.Headroom(4096), res(15); !cmp.Equal(got, want, valueCmp) {
		t.Errorf("Headroom(4096) = %+v, want %+v", got, want)
	}
}
