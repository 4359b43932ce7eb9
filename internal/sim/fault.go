package sim

import (
	"fmt"
	"strings"
	"time"
)

// FaultKind is what goes wrong at a simulated endpoint.
type FaultKind int

// The faults. Only one is active per endpoint at a time; FaultRestart is an
// event that resets the server and then clears itself.
const (
	FaultNone       FaultKind = iota
	FaultLeak                 // finished requests keep their KV: used tokens only grow
	FaultSlow                 // /metrics answers after Fault.Delay
	FaultError                // /metrics answers 500 Internal Server Error
	FaultDrop                 // /metrics sends half the body, then the connection is closed
	FaultRestart              // the server restarts: requests lost, counters reset to 0
	FaultFreeze               // gauges stop changing (counters still grow)
	FaultMetricsOff           // metrics disabled: /metrics answers 404 (llama.cpp: 501)
)

var faultNames = []string{"none", "leak", "slow", "error", "drop", "restart", "freeze", "metrics-off"}

func (k FaultKind) String() string {
	if int(k) < len(faultNames) {
		return faultNames[k]
	}
	return fmt.Sprintf("FaultKind(%d)", int(k))
}

// ParseFaultKind parses a fault name (none, leak, slow, error, drop,
// restart, freeze, metrics-off).
func ParseFaultKind(s string) (FaultKind, error) {
	for i, n := range faultNames {
		if n == s {
			return FaultKind(i), nil
		}
	}
	return 0, fmt.Errorf("unknown fault %q; want one of %s", s, strings.Join(faultNames, ", "))
}

// Fault is a fault at one endpoint. Delay applies to FaultSlow (default 3s).
type Fault struct {
	Kind  FaultKind
	Delay time.Duration
}
