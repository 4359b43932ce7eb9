package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// fakeDNS resolves names from a table.
func fakeDNS(table map[string][]string) func(context.Context, string) ([]net.IPAddr, error) {
	return func(_ context.Context, host string) ([]net.IPAddr, error) {
		ips, ok := table[host]
		if !ok {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		var out []net.IPAddr
		for _, s := range ips {
			out = append(out, net.IPAddr{IP: net.ParseIP(s)})
		}
		return out, nil
	}
}

func TestAllowlistCheck(t *testing.T) {
	dns := fakeDNS(map[string][]string{
		"gpu-1.lab":  {"10.1.0.5"},
		"split.lab":  {"10.1.0.6", "192.168.9.9"},
		"meta.lab":   {"169.254.169.254"},
		"decode.lab": {"10.1.0.7"},
	})
	a, err := NewAllowlist([]string{"10.1.0.0/16", "gpu-*.farm", "api.example"})
	if err != nil {
		t.Fatal(err)
	}
	a.lookup = dns
	for _, c := range []struct {
		host  string
		allow bool
		pin   string
	}{
		{"10.1.2.3", true, "10.1.2.3"},
		{"10.2.0.1", false, ""},
		{"gpu-1.lab", true, "10.1.0.5"},         // resolves into the CIDR
		{"split.lab", false, ""},                // one address outside: refused
		{"meta.lab", false, ""},                 // cloud metadata address
		{"gpu-17.farm", true, ""},               // glob
		{"GPU-17.FARM", true, ""},               // case-insensitive
		{"gpu-17.farm.evil.example", false, ""}, // glob matches the whole host
		{"api.example", true, ""},
		{"unknown.lab", false, ""}, // does not resolve
	} {
		ips, err := a.Check(context.Background(), c.host)
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
	if _, err := empty.Check(context.Background(), "127.0.0.1"); err == nil || !strings.Contains(err.Error(), "probe.allow in the config file is empty") {
		t.Errorf("empty allowlist: err = %v, want one saying probe.allow is empty", err)
	}
}

func TestProbe(t *testing.T) {
	good := testenv.EngineServer(t, "", page(t, "sglang-dp2.prom"))
	u, _ := url.Parse(good.URL)
	dir := t.TempDir()
	cfg := writeFile(t, dir, "kvwatch.yml", "global:\n  headroom_tokens: [100]\nprobe:\n  allow: [127.0.0.0/8, localhost]\n")
	d := start(t, Options{ConfigFile: cfg})
	d.probeLookup = fakeDNS(map[string][]string{"sneaky.lab": {"127.0.0.1", "10.9.9.9"}, "engine.lab": {"127.0.0.1"}})

	probe := func(q string) (int, string) { return get(t, nil, d.base+PathProbe+"?"+q) }

	code, body := probe("target=" + url.QueryEscape(good.URL) + "&role=decode")
	if code != 200 {
		t.Fatalf("probe of an allowed target = %d %s", code, body)
	}
	for _, want := range []string{
		fmt.Sprintf(`%s{cluster="",pool="",role="decode",server="%s"} 750`, signal.KVUsedTokens.Name, u.Host),
		fmt.Sprintf(`%s{cluster="",pool="",request_tokens="100",role="decode",server="%s"} 12`, signal.KVHeadroomRequests.Name, u.Host),
		fmt.Sprintf(`%s{cluster="",pool="",role="decode",server="%s"} 1`, signal.TargetUp.Name, u.Host),
	} {
		if !strings.Contains(body, want) {
			t.Errorf("probe body lacks %q", want)
		}
	}
	if strings.Contains(body, "go_goroutines") {
		t.Errorf("probe body has kvwatch's own metrics; want only the target's")
	}

	// A name resolving into the CIDR is scraped at the checked address.
	code, body = probe("target=" + url.QueryEscape("http://engine.lab:"+u.Port()) + "&engine=sglang")
	if code != 200 || !strings.Contains(body, fmt.Sprintf(`%s{cluster="",pool="",role="unified",server="engine.lab:%s"} 2000`, signal.KVCapacityTokens.Name, u.Port())) {
		t.Errorf("probe of engine.lab = %d, body lacks its capacity:\n%s", code, body)
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
		{"target=" + url.QueryEscape("http://10.0.0.1:9100/metrics"), 403, "which is in no CIDR of probe.allow"},
		{"target=" + url.QueryEscape("http://169.254.169.254/latest/meta-data"), 403, "refuses to scrape"},
		{"target=" + url.QueryEscape("http://sneaky.lab:"+u.Port()), 403, "10.9.9.9"},
		{"target=" + url.QueryEscape("http://nowhere.lab/"), 403, "cannot resolve"},
	} {
		code, body := probe(c.query)
		if code != c.code || !strings.Contains(body, c.msg) {
			t.Errorf("probe?%s = %d %q, want %d with %q", c.query, code, body, c.code, c.msg)
		}
	}

	// A failing target answers 200 with up 0 and the reason, like blackbox_exporter.
	dead := testenv.FreeAddr(t)
	code, body = probe("target=" + url.QueryEscape("http://"+dead))
	if code != 200 || !strings.Contains(body, fmt.Sprintf(`%s{cluster="",pool="",reason="refused",role="unified",server="%s"} 1`, signal.TargetScrapeError.Name, dead)) {
		t.Errorf("probe of a dead target = %d:\n%s", code, body)
	}
}
