package signal

import (
	"regexp"
	"strings"
	"testing"
)

var nameRE = regexp.MustCompile(`^kvwatch_[a-z0-9_]+$`)

// TestFamilies checks the Prometheus naming conventions on every exported
// family: one name each, no colons (reserved for recording rules), counters
// end in _total, units in the name, help text present.
func TestFamilies(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range All() {
		if seen[m.Name] {
			t.Errorf("%s listed twice", m.Name)
		}
		seen[m.Name] = true
		if !nameRE.MatchString(m.Name) {
			t.Errorf("%s: not a kvwatch_ snake_case name", m.Name)
		}
		if m.Help == "" || !strings.HasSuffix(m.Help, ".") {
			t.Errorf("%s: help %q must be a sentence", m.Name, m.Help)
		}
		switch m.Type {
		case Counter:
			if !strings.HasSuffix(m.Name, "_total") {
				t.Errorf("%s: a counter's name ends in _total", m.Name)
			}
		case Gauge:
			if strings.HasSuffix(m.Name, "_total") {
				t.Errorf("%s: a gauge's name must not end in _total", m.Name)
			}
		default:
			t.Errorf("%s: type %q", m.Name, m.Type)
		}
		switch m.Unit {
		case "tokens", "seconds", "bytes", "ratio":
			if !strings.Contains(m.Name, "_"+m.Unit) {
				t.Errorf("%s: unit %s is not in the name", m.Name, m.Unit)
			}
		case "requests":
			if !strings.Contains(m.Name, "requests") && !strings.Contains(m.Name, "preemptions") {
				t.Errorf("%s: unit requests is not in the name", m.Name)
			}
		}
		for _, l := range m.Labels {
			for _, id := range ServerLabels() {
				if l == id {
					t.Errorf("%s: label %s is already an identity label", m.Name, l)
				}
			}
		}
	}
	for _, m := range Server() {
		if m.Target {
			t.Errorf("%s is in Server() but marked Target", m.Name)
		}
	}
	for _, m := range Target() {
		if !m.Target {
			t.Errorf("%s is in Target() but not marked Target", m.Name)
		}
	}
}

func TestQueues(t *testing.T) {
	if got := strings.Join(Queues(), ","); got != "waiting,prealloc,bootstrap,transfer,inflight" {
		t.Errorf("Queues() = %s", got)
	}
}

// TestRankFamiliesPerDPRank checks that the rank families carry the DP rank
// only: TP and PP ranks of one DP rank hold the same KV, so labelling them
// would export identical copies.
func TestRankFamiliesPerDPRank(t *testing.T) {
	for _, m := range []Metric{RankKVUsageRatio, RankKVUsedTokens, RankKVCapacityTokens} {
		if got := strings.Join(m.Labels, ","); got != LabelDPRank {
			t.Errorf("%s labels = %s, want %s", m.Name, got, LabelDPRank)
		}
		if !strings.HasSuffix(m.Help, " per DP rank (TP and PP ranks collapsed by maximum).") {
			t.Errorf("%s help %q does not say it is per DP rank, TP and PP collapsed by maximum", m.Name, m.Help)
		}
	}
}

// TestReasons: each failure reason once, other last (serve counts an
// unknown reason as the last one).
func TestReasons(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range Reasons {
		if seen[r] || !regexp.MustCompile(`^[a-z0-9_]+$`).MatchString(r) {
			t.Errorf("reason %q repeated or not snake_case", r)
		}
		seen[r] = true
	}
	if Reasons[len(Reasons)-1] != ReasonOther {
		t.Errorf("last reason %q, want %q", Reasons[len(Reasons)-1], ReasonOther)
	}
}
