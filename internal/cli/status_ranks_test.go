package cli

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestStatusRanksAligned: the rank rows and the imbalance line under a
// server keep the table's columns, so that the next server row starts each
// column where the first one does (issue 17: the imbalance line broke the
// decode row's columns).
func TestStatusRanksAligned(t *testing.T) {
	cfg := writeConfig(t, pdCluster(t))
	t.Setenv("COLUMNS", "1000") // every column
	code, out, errs := run(t, "status", "--config.file", cfg, "--ranks")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errs)
	}
	col := func(line, cell string) int {
		i := strings.Index(line, cell)
		if i < 0 {
			return -1
		}
		return utf8.RuneCountInString(line[:i])
	}
	rows := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasSuffix(l, " ") {
			t.Errorf("trailing spaces: %q", l)
		}
		for _, r := range []string{"prefill  ", "decode  "} {
			if strings.HasPrefix(l, r) {
				rows[r] = l
			}
		}
		if strings.Contains(l, "imbalance") && strings.Count(l, "DP") == 0 {
			t.Errorf("imbalance line does not name the DP ranks: %q", l)
		}
	}
	if len(rows) != 2 {
		t.Fatalf("no prefill and decode rows in:\n%s", out)
	}
	for _, cell := range []string{"sglang", "KV ", "headroom ", "run=", "queued=", "hit ", "demand "} {
		p, d := col(rows["prefill  "], cell), col(rows["decode  "], cell)
		if p < 0 || p != d {
			t.Errorf("%q starts at column %d on the prefill row, %d on the decode row:\n%s", cell, p, d, out)
		}
	}
	// Each rank row's KV cell starts under the server's KV cell.
	kvCol := col(rows["prefill  "], "KV ")
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, " tp0 pp0 ") || strings.Contains(l, "imbalance") {
			if c := col(l, "KV "); c >= 0 && c != kvCol {
				t.Errorf("rank row KV at column %d, server KV at %d: %q", c, kvCol, l)
			}
		}
	}
}
