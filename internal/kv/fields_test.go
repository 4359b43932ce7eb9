package kv

import (
	"reflect"
	"testing"
)

// valueFields returns the address and path of every Value inside v (a
// pointer to a struct), found by reflection: the list fieldsOf must keep.
func valueFields(v reflect.Value, path string, out map[*Value]string) {
	e := v.Elem()
	for i := 0; i < e.NumField(); i++ {
		f, sf := e.Field(i), e.Type().Field(i)
		name := path + sf.Name
		switch {
		case sf.Type == reflect.TypeOf(Value{}):
			out[f.Addr().Interface().(*Value)] = name
		case sf.Type.Kind() == reflect.Struct:
			valueFields(f.Addr(), name+".", out)
		}
	}
}

// TestFieldsOfCoversSignals fails when a Value field of Signals (or of a
// struct inside it) is missing from fieldsOf, which DPGroups and Rollup
// walk: a new signal not listed there would silently not roll up.
func TestFieldsOfCoversSignals(t *testing.T) {
	var s Signals
	want := map[*Value]string{}
	valueFields(reflect.ValueOf(&s), "Signals.", want)
	got := map[*Value]bool{}
	for _, p := range fieldsOf(&s) {
		if got[p] {
			t.Errorf("fieldsOf lists %s twice", want[p])
		}
		got[p] = true
		if _, ok := want[p]; !ok {
			t.Errorf("fieldsOf lists a pointer outside Signals")
		}
	}
	for p, name := range want {
		if !got[p] {
			t.Errorf("fieldsOf misses %s: add it, or it will not roll up over ranks", name)
		}
	}
	if len(want) < 16 {
		t.Errorf("reflection found %d Value fields in Signals, want at least the 16 known", len(want))
	}
}

// TestFieldsOfRatios: the named places of the ratios are theirs.
func TestFieldsOfRatios(t *testing.T) {
	var s Signals
	f := fieldsOf(&s)
	for _, c := range []struct {
		name string
		j    int
		want *Value
	}{{"usage ratio", fieldUsageRatio, &s.UsageRatio}, {"reserved ratio", fieldReservedRatio, &s.ReservedRatio},
		{"demand ratio", fieldDemandRatio, &s.DemandRatio}} {
		if f[c.j] != c.want {
			t.Errorf("fieldsOf(s)[%d] is not the %s", c.j, c.name)
		}
	}
}
