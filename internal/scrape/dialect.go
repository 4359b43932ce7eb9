package scrape

import (
	"fmt"
	"mime"
	"slices"
	"strings"
	"time"

	"github.com/kvwatch/kvwatch/internal/engine"
	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// acceptHeader is the Accept header of Prometheus 3's default scrape
// (scrape_protocols OpenMetricsText1.0.0, OpenMetricsText0.0.1,
// PrometheusText1.0.0, PrometheusText0.0.4, names in UTF-8 allowed), so
// that an engine answers kvwatch the way it answers the Prometheus that
// stores its series. TestAcceptHeaderIsPrometheus3s compares it with what
// Prometheus 3 sends.
const acceptHeader = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.7,application/openmetrics-text;version=0.0.1;q=0.6,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.3"

// Dialect is how a target's page is written: the drift sentinel compares
// it from one scrape of the target to the next.
type Dialect struct {
	Engine string
	// Version is the engine's version where it says it (kv.Server's
	// EngineVersion), "" when it does not.
	Version string
	// Fingerprint is a stable hash (16 hex digits) of the family names
	// the page declares among those kvwatch reads (canonical names, a
	// counter's _total suffix dropped, so that both formats and both
	// escapings give one fingerprint); a page without TYPE lines hashes
	// its sample names.
	Fingerprint string
	// Format is the exposition format by Prometheus' scrape_protocols
	// names: PrometheusText0.0.4, PrometheusText1.0.0,
	// OpenMetricsText0.0.1, OpenMetricsText1.0.0 (a Content-Type kvwatch
	// does not know is read as the text format: PrometheusText0.0.4).
	Format string
	// Escaping is how the engine's colon names arrived: "underscores"
	// when they came as sglang_x ("mixed" when some came as sglang:x on
	// the same page), else the Content-Type's escaping parameter
	// (allow-utf-8, ...), else "none".
	Escaping string
	// families are the names behind Fingerprint, sorted, for what
	// changed; the hash is the fingerprint's.
	families []string
	hash     uint64
}

// DialectWarnFor is how long a target's pages carry the kv.WarnDialect
// warning after its dialect changed: long enough for every face to show
// it, shorter than the hold of the stack's EngineValuesImplausible alert
// (10 minutes on kvwatch_target_warnings), so that one upgrade warns on
// every face and pages nobody; a target whose dialect keeps changing
// (two versions behind one address) keeps the warning and does.
const DialectWarnFor = 5 * time.Minute

// dialectState is a target's last dialect and its last change.
type dialectState struct {
	d Dialect
	// contentType is the Content-Type d.Format and the declared escaping
	// were read from (the next page's is usually the same string).
	contentType string
	declared    string
	// changed is when the dialect last changed (zero: never) and warning
	// the warning's text.
	changed time.Time
	warning string
}

// formatOf names the exposition format of a Content-Type and the escaping
// it declares ("" when none).
func formatOf(contentType string) (format, escaping string) {
	media, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return "PrometheusText0.0.4", ""
	}
	switch media {
	case "application/openmetrics-text":
		v := params["version"]
		if v == "" {
			v = "0.0.1"
		}
		format = "OpenMetricsText" + v
	case "text/plain":
		format = "PrometheusText0.0.4"
		if params["version"] == "1.0.0" {
			format = "PrometheusText1.0.0"
		}
	default:
		format = "PrometheusText0.0.4"
	}
	return format, params["escaping"]
}

// FNV-1a's 64-bit parameters.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// familyKey is a declared family's name as the fingerprint counts it.
func familyKey(name string) string { return strings.TrimSuffix(name, "_total") }

// fingerprint hashes the family names page declares (or, without TYPE
// lines, its sample names): an order-free sum of FNV-1a hashes, computed
// without allocating; names is filled only when want is true.
func fingerprint(page *expo.Page, want bool) (uint64, []string) {
	var (
		sum   uint64
		n     int
		names []string
	)
	add := func(name string) {
		k := familyKey(name)
		// FNV-1a, written out: hash/fnv's would allocate per name.
		h := uint64(fnvOffset)
		for i := 0; i < len(k); i++ {
			h = (h ^ uint64(k[i])) * fnvPrime
		}
		sum += h
		n++
		if want {
			names = append(names, k)
		}
	}
	page.EachType(add)
	if n == 0 {
		for _, name := range page.Names() {
			add(name)
		}
	}
	if want {
		slices.Sort(names)
		names = slices.Compact(names)
	}
	return sum, names
}

// sentinel reads the dialect of the target's page (names: the hash of its
// names, fingerprint's), compares it with the target's last one and
// returns what changed (nil on the target's first page or when nothing
// did); while the last change is recent
// (DialectWarnFor), srv carries a kv.WarnDialect warning naming it and
// the signals whose meaning changed with it.
func (t *Target) sentinel(page *expo.Page, names uint64, contentType string, srv *kv.Server, now time.Time) (Dialect, []string) {
	prev := t.dialect.Load()
	var d Dialect
	d.Engine, d.Version = srv.Engine, srv.EngineVersion
	declared := ""
	if prev != nil && prev.contentType == contentType {
		d.Format, declared = prev.d.Format, prev.declared
	} else {
		d.Format, declared = formatOf(contentType)
	}
	switch {
	case page.Mixed:
		d.Escaping = "mixed"
		srv.Warn(kv.WarnMixedEscaping, "the page writes some names of one engine with a colon (sglang:x) and others with an underscore (sglang_x): two exporters on one page, or a relabelling of part of it? kvwatch reads both spellings as one name (a series written both ways is a duplicate_series); a store keeps them apart")
	case page.Escaped:
		d.Escaping = "underscores"
	case declared != "":
		d.Escaping = declared
	default:
		d.Escaping = "none"
	}
	d.hash = names
	if prev != nil && prev.d.hash == d.hash {
		d.families, d.Fingerprint = prev.d.families, prev.d.Fingerprint
	} else {
		_, d.families = fingerprint(page, true)
		d.Fingerprint = fmt.Sprintf("%016x", d.hash)
	}
	st := &dialectState{d: d, contentType: contentType, declared: declared}
	var changed []string
	if prev != nil {
		st.changed, st.warning = prev.changed, prev.warning
		p := prev.d
		for _, c := range [...]struct {
			what      string
			old, next string
		}{{signal.ChangeEngine, p.Engine, d.Engine}, {signal.ChangeVersion, known(p.Version, d.Version), known(d.Version, p.Version)}, {signal.ChangeFingerprint, p.Fingerprint, d.Fingerprint}, {signal.ChangeFormat, p.Format, d.Format}, {signal.ChangeEscaping, p.Escaping, d.Escaping}} {
			if c.old != c.next {
				changed = append(changed, c.what)
			}
		}
		if len(changed) > 0 {
			st.changed, st.warning = now, dialectWarning(p, d)
		}
	}
	if prev == nil || len(changed) > 0 || prev.contentType != contentType {
		t.dialect.Store(st)
	}
	if st.warning != "" && now.Sub(st.changed) < DialectWarnFor {
		srv.Warn(kv.WarnDialect, "%s", st.warning)
	}
	if d.Version != "" {
		for _, c := range engine.Contradictions(d.Engine, d.Version, d.families) {
			srv.Warn(kv.WarnVersionMismatch, "%s says it is %s, but %s: two processes behind one address, a version endpoint of another server, or an engine that backported the name? kvwatch reads the names as the page writes them", d.Engine, d.Version, c)
		}
	}
	return d, changed
}

// known is v, or other when v is unknown: a version that becomes known
// (or is not answered once) is no change; only two known versions that
// differ are.
func known(v, other string) string {
	if v == "" {
		return other
	}
	return v
}

// dialectWarning says what changed from p to d and which signals' meaning
// changed with it.
func dialectWarning(p, d Dialect) string {
	var parts []string
	if p.Engine != d.Engine {
		parts = append(parts, fmt.Sprintf("engine %s → %s", p.Engine, d.Engine))
	} else if p.Version != "" && d.Version != "" && p.Version != d.Version {
		parts = append(parts, fmt.Sprintf("version %s → %s", p.Version, d.Version))
	}
	if p.Format != d.Format {
		parts = append(parts, fmt.Sprintf("format %s → %s", p.Format, d.Format))
	}
	if p.Escaping != d.Escaping {
		parts = append(parts, fmt.Sprintf("escaping %s → %s", p.Escaping, d.Escaping))
	}
	if p.Fingerprint != d.Fingerprint {
		added, removed := diffSorted(p.families, d.families)
		s := fmt.Sprintf("metric names %s → %s", p.Fingerprint, d.Fingerprint)
		if len(added) > 0 {
			s += " (new: " + strings.Join(added, ", ")
			if len(removed) > 0 {
				s += "; gone: " + strings.Join(removed, ", ")
			}
			s += ")"
		} else if len(removed) > 0 {
			s += " (gone: " + strings.Join(removed, ", ") + ")"
		}
		parts = append(parts, s)
	}
	w := "the engine's page changed since the last scrape (an upgrade or a restart with other flags?): " + strings.Join(parts, "; ")
	if p.Engine == d.Engine {
		for _, m := range engine.Meanings(d.Engine, p.families, d.families) {
			w += ". " + m.Text
		}
		for _, m := range engine.VersionMeanings(d.Engine, p.Version, d.Version) {
			w += ". " + m.Text
		}
	}
	switch {
	case p.Escaping == d.Escaping:
	case p.Escaping == "underscores" || d.Escaping == "underscores":
		w += ". kvwatch reads both spellings alike, but a Prometheus scraping this engine now stores the other spelling (sglang_x or sglang:x): dashboards and rules on the old one go empty"
	case p.Escaping == "none":
		// prometheus_client 0.23 on: an OpenMetrics Accept without an
		// escaping gets underscores.
		w += ". The engine now negotiates name escaping: a Prometheus that asks for none (2.x, or 3.x with legacy name validation) stores sglang_x where it stored sglang:x, and dashboards and rules on the old names go empty there"
	}
	return w
}

// diffSorted returns the names of b not in a and those of a not in b
// (both sorted).
func diffSorted(a, b []string) (added, removed []string) {
	for _, n := range b {
		if _, ok := slices.BinarySearch(a, n); !ok {
			added = append(added, n)
		}
	}
	for _, n := range a {
		if _, ok := slices.BinarySearch(b, n); !ok {
			removed = append(removed, n)
		}
	}
	return added, removed
}
