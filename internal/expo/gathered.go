package expo

import dto "github.com/prometheus/client_model/go"

// Gathered calls fn for every gauge, counter and untyped sample of mfs (what
// a prometheus.Gatherer returns), with the sample's labels as name, value
// pairs; pairs is reused from one call to the next. Histograms and summaries
// are skipped: kvwatch exports none. The history (its own feed) and the
// remote writer (serve's own metrics) both walk gathered families this way.
func Gathered(mfs []*dto.MetricFamily, fn func(name string, counter bool, v float64, pairs []string)) {
	var pairs []string
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			counter := false
			var v float64
			switch mf.GetType() {
			case dto.MetricType_GAUGE:
				v = m.GetGauge().GetValue()
			case dto.MetricType_COUNTER:
				v = m.GetCounter().GetValue()
				counter = true
			case dto.MetricType_UNTYPED:
				v = m.GetUntyped().GetValue()
			default:
				continue
			}
			pairs = pairs[:0]
			for _, lp := range m.GetLabel() {
				pairs = append(pairs, lp.GetName(), lp.GetValue())
			}
			fn(mf.GetName(), counter, v, pairs)
		}
	}
}
