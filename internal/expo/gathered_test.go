package expo

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

func TestGathered(t *testing.T) {
	lp := func(n, v string) *dto.LabelPair { return &dto.LabelPair{Name: proto.String(n), Value: proto.String(v)} }
	mfs := []*dto.MetricFamily{
		{Name: proto.String("g"), Type: dto.MetricType_GAUGE.Enum(), Metric: []*dto.Metric{
			{Label: []*dto.LabelPair{lp("server", "a"), lp("role", "decode")}, Gauge: &dto.Gauge{Value: proto.Float64(0.5)}},
			{Gauge: &dto.Gauge{Value: proto.Float64(2)}},
		}},
		{Name: proto.String("c_total"), Type: dto.MetricType_COUNTER.Enum(), Metric: []*dto.Metric{
			{Label: []*dto.LabelPair{lp("server", "b")}, Counter: &dto.Counter{Value: proto.Float64(7)}},
		}},
		{Name: proto.String("h"), Type: dto.MetricType_HISTOGRAM.Enum(), Metric: []*dto.Metric{
			{Histogram: &dto.Histogram{SampleCount: proto.Uint64(1)}},
		}},
		{Name: proto.String("u"), Type: dto.MetricType_UNTYPED.Enum(), Metric: []*dto.Metric{
			{Label: []*dto.LabelPair{lp("x", "1")}, Untyped: &dto.Untyped{Value: proto.Float64(-1)}},
		}},
	}
	var got []string
	Gathered(mfs, func(name string, counter bool, v float64, pairs []string) {
		got = append(got, fmt.Sprintf("%s %v %g %v", name, counter, v, pairs))
	})
	want := []string{
		"g false 0.5 [server a role decode]",
		"g false 2 []",
		"c_total true 7 [server b]",
		"u false -1 [x 1]",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Gathered (-want +got):\n%s", d)
	}
}
