package safetext

import (
	"bytes"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTerminal(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain text, ünïcode ✓", "plain text, ünïcode ✓"},
		{"\x1b[2J\x1b[Hfake: all targets OK", `\x1b[2J\x1b[Hfake: all targets OK`},
		{"a\r\nb\tc\x07", `a\x0d\x0ab\x09c\x07`},
		{"title\x1b]0;owned\x07", `title\x1b]0;owned\x07`},
		{"c1 \u009b31m", `c1 \u009b31m`},
		{"rtl \u202egnp.exe", `rtl \u202egnp.exe`},
		{"bad \xff utf8", `bad \xff utf8`},
		{`back\slash`, `back\slash`},
		{"del\x7f", `del\x7f`},
	} {
		if got := Terminal(c.in); got != c.want {
			t.Errorf("Terminal(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	// An escaped text holds no byte below 0x20 and no ESC at all.
	if got := Terminal("\x1b\x00\x9b"); strings.ContainsAny(got, "\x1b\x00") {
		t.Errorf("Terminal left a control byte: %q", got)
	}
}

func TestURL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"http://host:1/metrics", "http://host:1/metrics"},
		{"http://bob:hunter2@host/metrics", "http://bob:xxxxx@host/metrics"},
		{"http://host/metrics?token=abc&x=1", "http://host/metrics?token=xxxxx&x=1"},
		{"http://host/m?api_key=abc&Access_Token=d&sig=e&password=f", "http://host/m?api_key=xxxxx&Access_Token=xxxxx&sig=xxxxx&password=xxxxx"},
	} {
		u, err := url.Parse(c.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := URL(u, "sig"); got != c.want {
			t.Errorf("URL(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`bad URL "http://bob:hunter2@host:x/": invalid port`, `bad URL "http://bob:xxxxx@host:x/": invalid port`},
		{"scrape http://h/m?a=1&secret=s3&b=2: refused", "scrape http://h/m?a=1&secret=xxxxx&b=2: refused"},
		{"no url here & no = secret", "no url here & no = secret"},
		{"mail bob@example.com", "mail bob@example.com"},
		{"get http://h/?mysig=zz", "get http://h/?mysig=xxxxx"},
	} {
		if got := Text(c.in, "mysig"); got != c.want {
			t.Errorf("Text(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestHandler(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(Handler(slog.NewTextHandler(&buf, nil)))
	u, _ := url.Parse("http://u:pw1@h/?token=tk1")
	log.With("from", "http://u:pw2@h/").Warn("target \x1b[31mdown",
		"url", u, "err", errors.New("scrape http://h/?password=pw3: \x1b[2J"), "s", "x?key=pw4")
	out := buf.String()
	for _, secret := range []string{"pw1", "pw2", "tk1", "pw3", "pw4", "\x1b"} {
		if strings.Contains(out, secret) {
			t.Errorf("log line holds %q:\n%s", secret, out)
		}
	}
	if !strings.Contains(out, `\\x1b[31mdown`) && !strings.Contains(out, `\x1b[31mdown`) {
		t.Errorf("log line lost the escaped message:\n%s", out)
	}
}

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"a longer text", 8, "a longer…"},
		{"naïve", 3, "na…"}, // ï is two bytes: not cut in half
		{"日本語", 4, "日…"},
	} {
		got := Clip(tc.s, tc.n)
		if got != tc.want || !utf8.ValidString(got) {
			t.Errorf("Clip(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}
