package sim

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	plabels "github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
)

// Accept headers of real scrapers: Prometheus 3's default (its
// scrape_protocols default, names in UTF-8; the header kvwatch sends, see
// scrape.TestAcceptHeaderIsPrometheus3s), one asking OpenMetrics 1.0.0
// without an escaping (as a scraper from before escaping existed does),
// and a text-only one.
const (
	acceptProm3    = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.7,application/openmetrics-text;version=0.0.1;q=0.6,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.3"
	acceptOMNoEsc  = "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.3"
	acceptTextOnly = "text/plain;version=0.0.4;q=1,*/*;q=0.1"
)

// fetch GETs url with accept and returns the Content-Type and body.
func fetch(t *testing.T, url, accept string) (string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return resp.Header.Get("Content-Type"), string(b)
}

// omSamples reads an OpenMetrics body with Prometheus' parser and returns
// its sample names with their values.
func omSamples(t *testing.T, body string) map[string]float64 {
	t.Helper()
	p := textparse.NewOpenMetricsParser([]byte(body), plabels.NewSymbolTable())
	out := map[string]float64{}
	for {
		e, err := p.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("openmetrics parse: %v", err)
		}
		if e == textparse.EntrySeries {
			var ls plabels.Labels
			p.Labels(&ls)
			_, _, v := p.Series()
			out[ls.Get("__name__")] += v
		}
	}
}

// TestSGLangVersions: SGLang 0.5.16 answers each scraper as
// prometheus_client 0.23 does (OpenMetrics with colons for Prometheus 3's
// escaping=allow-utf-8, with underscores in the sample names when no
// escaping is asked, the text format for a text-only scraper); current
// and the version before sglang#24341 answer the text format, the latter
// with the prealloc queue's old name. A version change at run time
// (POST /-/sim/version) takes effect on the next page, and an unknown
// version is refused with the known ones.
func TestSGLangVersions(t *testing.T) {
	c := startCluster(t, "pd-sglang")
	c.Advance(time.Minute)
	var url string
	for _, ep := range c.Endpoints() {
		if ep.Name == "prefill" {
			url = ep.URL
		}
	}
	queue := float64(c.Truth("prefill").PrefillBootstrap)
	tests := []struct {
		name, version, accept, contentType string
		// sample is the bootstrap queue's sample name; absent, the other
		// names that must not be on the page.
		sample, absent string
	}{
		{"0.5.16, Prometheus 3", VersionSGLang0516, acceptProm3, "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=allow-utf-8",
			"sglang:num_prefill_bootstrap_queue_reqs", "sglang_num_prefill_bootstrap_queue_reqs"},
		{"0.5.16, OpenMetrics without escaping", VersionSGLang0516, acceptOMNoEsc, "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=underscores",
			"sglang_num_prefill_bootstrap_queue_reqs", "sglang:num_prefill_bootstrap_queue_reqs"},
		{"0.5.16, text only", VersionSGLang0516, acceptTextOnly, "text/plain; version=0.0.4; charset=utf-8",
			"sglang:num_prefill_bootstrap_queue_reqs", "sglang_num_prefill_bootstrap_queue_reqs"},
		{"current, Prometheus 3", VersionCurrent, acceptProm3, "text/plain; version=0.0.4; charset=utf-8",
			"sglang:num_prefill_bootstrap_queue_reqs", "sglang_num_prefill_bootstrap_queue_reqs"},
		{"before #24341, Prometheus 3", VersionSGLangBefore, acceptProm3, "text/plain; version=0.0.4; charset=utf-8",
			"sglang:num_prefill_prealloc_queue_reqs", "sglang:num_prefill_bootstrap_queue_reqs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(url+"/-/sim/version?version="+tc.version, "", nil)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("POST version %s: %v %v", tc.version, resp, err)
			}
			resp.Body.Close()
			if v := c.Truth("prefill").Version; v != tc.version {
				t.Errorf("truth version %q, want %q", v, tc.version)
			}
			ct, body := fetch(t, url+"/metrics", tc.accept)
			if ct != tc.contentType {
				t.Errorf("Content-Type %q, want %q", ct, tc.contentType)
			}
			var got map[string]float64
			if strings.HasPrefix(ct, "application/openmetrics-text") {
				got = omSamples(t, body)
				// prometheus_client keeps the colon in HELP and TYPE
				// lines and names a counter's family without _total.
				for _, line := range []string{"# TYPE sglang:num_running_reqs gauge", "# TYPE sglang:prompt_tokens counter"} {
					if !strings.Contains(body, "\n"+line+"\n") {
						t.Errorf("no line %q", line)
					}
				}
			} else {
				got = map[string]float64{}
				for name, f := range parse(t, []byte(body)) {
					for _, m := range f.Metric {
						got[name] += value(m)
					}
				}
			}
			// TP=4: every TP rank repeats the queue.
			if v, ok := got[tc.sample]; !ok || v != 4*queue {
				t.Errorf("%s = %v (present %v), want 4 × %v", tc.sample, v, ok, queue)
			}
			if _, ok := got[tc.absent]; ok {
				t.Errorf("%s is on the page", tc.absent)
			}
		})
	}
	resp, err := http.Post(url+"/-/sim/version?version=0.4", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := "version: set version prefill: unknown version \"0.4\" of engine sglang; want current, 0.5.16 or before-24341; use POST /-/sim/version?version=V\n"; resp.StatusCode != 400 || string(b) != want {
		t.Errorf("unknown version: %d %q, want 400 %q", resp.StatusCode, b, want)
	}
}
