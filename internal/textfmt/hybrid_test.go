package textfmt

import (
	"testing"

	"github.com/kvwatch/kvwatch/internal/kv"
)

// TestBinding: what caps a server's concurrency and its state pool, in the
// words every face shows; unknown is "--", never 0.
func TestBinding(t *testing.T) {
	mamba := &kv.StatePlan{Type: kv.PoolMamba, Unit: kv.UnitSlots, Capacity: kv.DerivedOf(96), Used: kv.Of(56), UsageRatio: kv.Of(56.0 / 96),
		PerRequest: kv.DerivedOf(1), CapacityRequests: kv.DerivedOf(96), Headroom: kv.DerivedOf(40)}
	swaOnly := &kv.StatePlan{Type: kv.PoolSWA, Unit: kv.UnitTokens, UsageRatio: kv.Of(0.5)}
	tests := []struct {
		name     string
		plan     *kv.ServerPlan
		bind, st string
	}{
		{"Mamba slots bind", &kv.ServerPlan{Concurrency: kv.DerivedOf(96), Binding: kv.BindingMamba, StatePool: mamba},
			"concurrency 96, bound by state slots (mamba)", "state slots (mamba) 56 / 96 (58.3%), 40 more requests"},
		{"KV binds a hybrid", &kv.ServerPlan{Concurrency: kv.DerivedOf(57), Binding: kv.BindingKV, StatePool: mamba},
			"concurrency 57, bound by KV tokens", "state slots (mamba) 56 / 96 (58.3%), 40 more requests"},
		{"the running limit", &kv.ServerPlan{Concurrency: kv.Of(16), Binding: kv.BindingRunning},
			"concurrency 16, bound by running-request limit", ""},
		{"SWA with its usage alone: unknown", &kv.ServerPlan{StatePool: swaOnly},
			"concurrency --", "SWA tokens -- / -- (50.0%), -- more requests"},
		{"no plan", nil, "concurrency --", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Binding(tt.plan); got != tt.bind {
				t.Errorf("Binding = %q, want %q", got, tt.bind)
			}
			var st *kv.StatePlan
			if tt.plan != nil {
				st = tt.plan.StatePool
			}
			if got := StatePool(st); got != tt.st {
				t.Errorf("StatePool = %q, want %q", got, tt.st)
			}
		})
	}
}
