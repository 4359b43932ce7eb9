package crosscheck

import (
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kvwatch/kvwatch/internal/sim"
)

// TestEscapingsReadAlike: the simulator's SGLang 0.5.16 answers each
// scraper in the format and escaping it asks for (prometheus_client's
// negotiation);
// kvwatch reads the page it gets as Prometheus 3 asks (OpenMetrics, names
// as written), as a scraper that names no escaping gets it (OpenMetrics,
// sample names sglang_*) and as a text-only scraper gets it (the text
// format) into the same server, and tells the three apart only by format
// and escaping. A proxy in front of the simulator sets the other
// scrapers' Accept header.
func TestEscapingsReadAlike(t *testing.T) {
	c := startCluster(t, "pd-sglang-dp")
	c.Advance(2 * time.Minute)
	asks := []struct {
		name, accept, format, escaping string
	}{
		{"Prometheus 3 (kvwatch's own)", "", "OpenMetricsText1.0.0", "allow-utf-8"},
		{"OpenMetrics, no escaping", "application/openmetrics-text;version=1.0.0;q=0.5,*/*;q=0.1", "OpenMetricsText1.0.0", "underscores"},
		{"text only", "text/plain;version=0.0.4", "PrometheusText0.0.4", "none"},
	}
	checked := 0
	for _, ep := range c.Endpoints() {
		if ep.Engine != sim.EngineSGLang {
			continue
		}
		checked++
		if err := c.SetVersion(ep.Name, sim.VersionSGLang0516); err != nil {
			t.Fatal(err)
		}
		first := scrapeEndpoint(t, ep)
		if !first.OK() {
			t.Fatalf("%s: %v", ep.Name, first.Err)
		}
		for _, a := range asks {
			res := first
			if a.accept != "" {
				u, err := url.Parse(ep.URL)
				if err != nil {
					t.Fatal(err)
				}
				accept := a.accept
				proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
					r.SetURL(u)
					r.Out.Header.Set("Accept", accept)
				}}
				ps := httptest.NewServer(proxy)
				defer ps.Close()
				via := ep
				via.URL = ps.URL
				res = scrapeEndpoint(t, via)
				if !res.OK() {
					t.Fatalf("%s via %s: %v", ep.Name, a.name, res.Err)
				}
			}
			if d := res.Dialect; d.Format != a.format || d.Escaping != a.escaping || d.Fingerprint != first.Dialect.Fingerprint {
				t.Errorf("%s, %s: dialect %+v; want %s, %s, fingerprint %s", ep.Name, a.name, d, a.format, a.escaping, first.Dialect.Fingerprint)
			}
			if diff := cmp.Diff(first.Server, res.Server); diff != "" {
				t.Errorf("%s, %s: read otherwise than kvwatch's own scrape (-own +this):\n%s", ep.Name, a.name, diff)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no SGLang server in the scenario: nothing was compared")
	}
}
