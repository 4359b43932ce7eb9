package config

import (
	"strings"
	"testing"
)

func TestLimitsResolve(t *testing.T) {
	c, err := Parse([]byte(`
global:
  sample_limit: 100
  rank_limit: 0
targets:
  - url: http://a:1
  - url: http://b:1
    sample_limit: 7
    label_value_length_limit: 64
`), "kvwatch.yml")
	if err != nil {
		t.Fatal(err)
	}
	// By hand: a takes the global sample_limit and rank_limit (0: off),
	// the rest are defaults; b overrides two.
	want := []TargetLimits{
		{Samples: 100, Labels: 128, LabelNameLength: 256, LabelValueLength: 2048, Ranks: 0},
		{Samples: 7, Labels: 128, LabelNameLength: 256, LabelValueLength: 64, Ranks: 0},
	}
	for i, w := range want {
		if got := c.TargetLimits(i); got != w {
			t.Errorf("targets[%d] limits = %+v, want %+v", i, got, w)
		}
	}
	if got := (Limits{}).Resolve(Limits{}); got != DefaultLimits() {
		t.Errorf("no limits set = %+v, want the defaults", got)
	}
}

func TestLimitsNegative(t *testing.T) {
	_, err := Parse([]byte("global:\n  label_limit: -1\ntargets:\n  - url: http://a:1\n    rank_limit: -5\n"), "kvwatch.yml")
	want := "kvwatch.yml: 2 problems:\n  line 2: global.label_limit: -1 is negative; use a positive number, or 0 for no limit\n  line 5: targets[0].rank_limit: -5 is negative; use a positive number, or 0 for no limit"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
}

func TestWarningsAddressGlob(t *testing.T) {
	c, err := Parse([]byte("probe:\n  allow: [\"10.0.0.*\", \"gpu-*.example.com\", \"10.1.0.0/16\", \"192.168.1.?\", \"fd00::*\", \"*.internal\"]\n"), "kvwatch.yml")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(c.Warnings(), "\n")
	want := strings.Join([]string{
		`probe.allow[0]: "10.0.0.*" looks like an address but is a host name glob, which matches no IP address; write a CIDR such as 10.0.0.0/24`,
		`probe.allow[3]: "192.168.1.?" looks like an address but is a host name glob, which matches no IP address; write a CIDR such as 192.168.1.0/24`,
		`probe.allow[4]: "fd00::*" looks like an address but is a host name glob, which matches no IP address; write a CIDR such as fd00::/64`,
	}, "\n")
	if got != want {
		t.Errorf("warnings:\n%s\nwant:\n%s", got, want)
	}
}

func TestBadURLRedacted(t *testing.T) {
	_, err := Parse([]byte("targets:\n  - url: \"http://bob:hunter2@host:bad/metrics?token=tk\"\n"), "kvwatch.yml")
	if err == nil {
		t.Fatal("a bad port was accepted")
	}
	for _, s := range []string{"hunter2", "tk\""} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("the error shows a secret (%s): %v", s, err)
		}
	}
	if !strings.Contains(err.Error(), "bob:xxxxx@host:bad") {
		t.Errorf("the error does not show the redacted URL: %v", err)
	}
}
