package querycheck

import (
	"slices"
	"strings"
	"testing"

	"github.com/kvwatch/kvwatch/internal/catalog"
	"github.com/kvwatch/kvwatch/internal/engine"
)

// TestNormalizedAsNames: every engine name of the mapping hint is one the
// catalog knows and an adapter reads, and every kvwatch name it points at
// is one kvwatch exports.
func TestNormalizedAsNames(t *testing.T) {
	cat := catalog.Default()
	var read []string
	reg := engine.NewRegistry()
	for _, n := range reg.Names() {
		a, err := reg.ByName(n)
		if err != nil {
			t.Fatal(err)
		}
		read = append(read, a.MetricNames()...)
	}
	var exported []string
	for _, m := range kvwatchFamilies() {
		exported = append(exported, m.Name)
	}
	for raw, as := range normalizedAs() {
		if len(cat.Lookup(raw)) == 0 && len(cat.RenamesOf(raw)) == 0 {
			t.Errorf("%s: not in the catalog", raw)
		}
		if !slices.Contains(read, raw) {
			t.Errorf("%s: no adapter reads it", raw)
		}
		name, _, _ := strings.Cut(as, "{")
		if !slices.Contains(exported, name) {
			t.Errorf("%s → %s: kvwatch exports no %s", raw, as, name)
		}
	}
}

// TestKVWatchConditionsNameExportedFamilies: every condition is on a
// family kvwatch exports, and reaches the catalog.
func TestKVWatchConditionsNameExportedFamilies(t *testing.T) {
	cat := KVWatchCatalog()
	for name, cond := range kvwatchConditions() {
		fam := cat.Family(name)
		if len(fam) != 1 || fam[0].Engine != "kvwatch" || fam[0].Conditional != cond {
			t.Errorf("%s: catalog entries %+v, want one kvwatch entry with condition %q", name, fam, cond)
		}
	}
}
