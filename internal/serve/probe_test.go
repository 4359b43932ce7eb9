package serve

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

func TestAllowlistCheck(t *testing.T) {
	a, err := NewAllowlist([]string{"10.1.0.0/16", "gpu-*.farm", "api.example", "192.168.7.7", "10.0.0.*", "fd00::/64", "*.pool.lab"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		host  string
		allow bool
		pin   string
	}{
		{"10.1.2.3", true, "10.1.2.3"},
		{"10.2.0.1", false, ""},
		{"192.168.7.7", true, "192.168.7.7"}, // an IP entry is a /32
		{"192.168.7.8", false, ""},
		{"fd00::5", true, "fd00::5"},
		{"::ffff:10.1.0.9", true, "10.1.0.9"},    // IPv4-mapped spelling of an allowed address
		{"169.254.169.254", false, ""},           // cloud metadata address
		{"gpu-17.farm", true, ""},                // glob
		{"GPU-17.FARM.", true, ""},               // case-insensitive, trailing dot
		{"gpu-17.farm.evil.example", false, ""},  // glob matches the whole host
		{"gpu-1.evil.farm", false, ""},           // '*' does not cross a dot
		{"a.pool.lab", true, ""},                 // one label for '*'
		{"a.b.pool.lab", false, ""},              // not two
		{"10.0.0.5.attacker.example", false, ""}, // an address-like glob matches no name...
		{"10.0.0.5", false, ""},                  // ...and no address
		{"gpu-1.lab", false, ""},                 // a name is never matched by a CIDR
		{"api.example", true, ""},
		{"api.example.attacker.example", false, ""},
	} {
		ips, err := a.Check(c.host)
		if (err == nil) != c.allow {
			t.Errorf("Check(%q) err = %v, want allowed=%v", c.host, err, c.allow)
			continue
		}
		if err != nil && !errors.Is(err, errRefused) {
			t.Errorf("Check(%q) err = %v, want errRefused", c.host, err)
		}
		got := ""
		if len(ips) > 0 {
			got = ips[0].String()
		}
		if got != c.pin {
			t.Errorf("Check(%q) pins %q, want %q", c.host, got, c.pin)
		}
	}
	empty, _ := NewAllowlist(nil)
	if _, err := empty.Check("127.0.0.1"); err == nil || !strings.Contains(err.Error(), "probe.allow in the config file is empty") {
		t.Errorf("empty allowlist: err = %v, want one saying probe.allow is empty", err)
	}
}

func TestProbe(t *testing.T) {
	good := testenv.EngineServer(t, "", page(t, "sglang-dp2.prom"))
	u, _ := url.Parse(good.URL)
	dir := t.TempDir()
	cfg := writeFile(t, dir, "kvwatch.yml", "global:\n  headroom_tokens: [100]\nprobe:\n  allow: [127.0.0.0/8, localhost]\n")
	d := start(t, Options{Pipeline: pipe(t, config.Sources{File: cfg})})

	probe := func(q string) (int, string) { return get(t, nil, d.base+PathProbe+"?"+q) }

	code, body := probe("target=" + url.QueryEscape(good.URL) + "&role=decode")
	if code != 200 {
		t.Fatalf("probe of an allowed target = %d %s", code, body)
	}
	for _, want := range []string{
		fmt.Sprintf(`%s{kv_cluster="",pool="",role="decode",server="%s"} 750`, signal.KVUsedTokens.Name, u.Host),
		fmt.Sprintf(`%s{kv_cluster="",pool="",request_tokens="100",role="decode",server="%s"} 12`, signal.KVHeadroomRequests.Name, u.Host),
		fmt.Sprintf(`%s{kv_cluster="",pool="",role="decode",server="%s"} 1`, signal.TargetUp.Name, u.Host),
	} {
		if !strings.Contains(body, want) {
			t.Errorf("probe body lacks %q", want)
		}
	}
	if strings.Contains(body, "go_goroutines") {
		t.Errorf("probe body has kvwatch's own metrics; want only the target's")
	}

	// The target labels, as a configured or discovered target has them.
	code, body = probe("target=" + url.QueryEscape(good.URL) + "&role=decode&cluster=east&pool=pd-a&model=probe-model")
	if want := fmt.Sprintf(`%s{kv_cluster="east",pool="pd-a",role="decode",server="%s"} 750`, signal.KVUsedTokens.Name, u.Host); code != 200 || !strings.Contains(body, want) {
		t.Errorf("probe with cluster and pool = %d, body lacks %q:\n%s", code, want, body)
	}
	if want := `model="test-model"`; !strings.Contains(body, want) { // the page names its model: it wins, as for a configured target
		t.Errorf("probe with model: body lacks the page's %q:\n%s", want, body)
	}

	// A name is scraped when a name entry allows it.
	code, body = probe("target=" + url.QueryEscape("http://localhost:"+u.Port()) + "&engine=sglang")
	if code != 200 || !strings.Contains(body, fmt.Sprintf(`%s{kv_cluster="",pool="",role="unified",server="localhost:%s"} 2000`, signal.KVCapacityTokens.Name, u.Port())) {
		t.Errorf("probe of localhost = %d, body lacks its capacity:\n%s", code, body)
	}

	for _, c := range []struct {
		query string
		code  int
		msg   string
	}{
		{"", 400, "?target="},
		{"target=" + url.QueryEscape("ftp://127.0.0.1/"), 400, "scheme must be http or https"},
		{"target=" + url.QueryEscape(good.URL) + "&engine=nope", 400, "unknown engine"},
		{"target=" + url.QueryEscape(good.URL) + "&role=chef", 400, "unknown role"},
		{"target=" + url.QueryEscape("http://10.0.0.1:9100/metrics"), 403, "is in no IP or CIDR of probe.allow"},
		{"target=" + url.QueryEscape("http://169.254.169.254/latest/meta-data"), 403, "refuses to scrape"},
		{"target=" + url.QueryEscape("http://127.0.0.1.nip.example:"+u.Port()), 403, "matches no host or glob"},
		{"target=" + url.QueryEscape("http://u:pw-planted@10.0.0.1/?token=tk-planted"), 403, "u:xxxxx@10.0.0.1/?token=xxxxx"},
	} {
		code, body := probe(c.query)
		if code != c.code || !strings.Contains(body, c.msg) {
			t.Errorf("probe?%s = %d %q, want %d with %q", c.query, code, body, c.code, c.msg)
		}
	}

	// A failing target answers 200 with up 0 and the reason, like blackbox_exporter.
	dead := testenv.FreeAddr(t)
	code, body = probe("target=" + url.QueryEscape("http://"+dead))
	if code != 200 || !strings.Contains(body, fmt.Sprintf(`%s{kv_cluster="",pool="",reason="refused",role="unified",server="%s"} 1`, signal.TargetScrapeError.Name, dead)) {
		t.Errorf("probe of a dead target = %d:\n%s", code, body)
	}
}
