package cli

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/alecthomas/kingpin/v2"

	"github.com/kvwatch/kvwatch/internal/stack"
)

// modeValue parses `stack generate --mode`: server (one Prometheus, the
// default) or agent (also collector and ruler files under agent/).
type modeValue struct{ a *stack.AgentOptions }

func (v modeValue) Set(s string) error {
	switch s {
	case "server":
		v.a.Enabled = false
	case "agent":
		v.a.Enabled = true
	default:
		return fmt.Errorf("--mode %q: want server (one Prometheus) or agent (collectors remote-writing to a central store, vmalert as ruler)", s)
	}
	return nil
}

func (v modeValue) String() string {
	if v.a.Enabled {
		return "agent"
	}
	return "server"
}

// labelsValue parses repeated NAME=VALUE flags into a map it makes on
// first use (kingpin's StringMapVar writes into the map it is given, and
// panics on a nil one). flag and example (a valid NAME=VALUE) are for the
// error text.
type labelsValue struct {
	m             *map[string]string
	flag, example string
}

func (v labelsValue) Set(s string) error {
	k, val, ok := strings.Cut(s, "=")
	if !ok || k == "" || val == "" {
		return fmt.Errorf("--%s %q: want NAME=VALUE, e.g. %s", v.flag, s, v.example)
	}
	if *v.m == nil {
		*v.m = map[string]string{}
	}
	(*v.m)[k] = val
	return nil
}

// String is the labels as NAME=VALUE,NAME=VALUE, sorted by name.
func (v labelsValue) String() string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(*v.m)) {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k + "=" + (*v.m)[k])
	}
	return b.String()
}

func (v labelsValue) IsCumulative() bool { return true }

// addStackAgentFlags adds the agent-mode flags of stack generate.
func addStackAgentFlags(gc *kingpin.CmdClause, o *stack.Options) {
	gc.Flag("mode", "server: one Prometheus scrapes serve and evaluates the rules; agent: also write agent/ with collector configs (Prometheus --agent and vmagent) remote-writing to a central store and a vmalert ruler on the same rule files (see docs/stack.md, \"Past one machine\").").Default("server").SetValue(modeValue{&o.Agent})
	gc.Flag("store.url", "Agent mode: the central store's query API base for vmalert; default the --remote-write.url's scheme and host (VictoriaMetrics single-node).").PlaceHolder("URL").StringVar(&o.Agent.StoreURL)
	gc.Flag("external-label", "Agent mode: label the collector adds to every series, NAME=VALUE (repeat for several); give each box its own, e.g. collector=gpu-box-7. Default collector="+stack.DefaultAgentCollectorLabel+".").PlaceHolder("NAME=VALUE").SetValue(labelsValue{m: &o.Agent.ExternalLabels, flag: "external-label", example: "collector=gpu-box-7"})
}
