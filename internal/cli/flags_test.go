package cli

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"
)

// flagCase is one flag (or positional argument) on a command line, with
// realistic values, and what the flag's value reads after parsing.
type flagCase struct {
	args []string // as typed: the flag and its value, repeated for a repeatable flag; an argument's values
	want string   // the parsed value as its kingpin.Value prints it (repeated values joined by commas)
}

// flagCases holds every flag and argument of every command, keyed as
// "COMMAND --flag" or "COMMAND <arg>", global flags as "--flag". A flag
// the application has and this table lacks fails TestEveryFlagParses:
// give a new flag a value a user would type.
var flagCases = map[string]flagCase{
	"--log.level":  {[]string{"--log.level", "debug"}, "debug"},
	"--log.format": {[]string{"--log.format", "json"}, "json"},

	"status --config.file":    {[]string{"--config.file", "/etc/kvwatch/kvwatch.yml"}, "/etc/kvwatch/kvwatch.yml"},
	"status --engine":         {[]string{"--engine", "vllm"}, "vllm"},
	"status --headroom":       {[]string{"--headroom", "4096,8192,32768"}, "4096,8192,32768"},
	"status --scrape.timeout": {[]string{"--scrape.timeout", "2s"}, "2s"},
	"status --kv-unified":     {[]string{"--kv-unified", "true"}, "true"},
	"status --output":         {[]string{"--output", "line"}, "line"},
	"status --ranks":          {[]string{"--ranks"}, "true"},
	"status --watch":          {[]string{"--watch", "5s"}, "5s"},
	"status --trend":          {[]string{"--trend", "2m"}, "2m0s"},
	"status <target>": {[]string{"prefill=http://10.0.0.11:30001", "decode:d0=http://10.0.0.12:30002/metrics"},
		"prefill=http://10.0.0.11:30001,decode:d0=http://10.0.0.12:30002/metrics"},

	"top --config.file":    {[]string{"--config.file", "/etc/kvwatch/kvwatch.yml"}, "/etc/kvwatch/kvwatch.yml"},
	"top --engine":         {[]string{"--engine", "sglang"}, "sglang"},
	"top --headroom":       {[]string{"--headroom", "8192,131072"}, "8192,131072"},
	"top --scrape.timeout": {[]string{"--scrape.timeout", "3s"}, "3s"},
	"top --kv-unified":     {[]string{"--kv-unified", "false"}, "false"},
	"top --serve.url":      {[]string{"--serve.url", "http://127.0.0.1:9477"}, "http://127.0.0.1:9477"},
	"top --refresh":        {[]string{"--refresh", "5s"}, "5s"},
	"top --once":           {[]string{"--once"}, "true"},
	"top --no-color":       {[]string{"--no-color"}, "true"},
	"top --width":          {[]string{"--width", "120"}, "120"},
	"top <target>":         {[]string{"http://127.0.0.1:30000", "decode=http://127.0.0.1:30002"}, "http://127.0.0.1:30000,decode=http://127.0.0.1:30002"},

	"serve --config.file": {[]string{"--config.file", "/etc/kvwatch/kvwatch.yml"}, "/etc/kvwatch/kvwatch.yml"},
	// Given twice, the default is not kept besides them.
	"serve --web.listen-address":                    {[]string{"--web.listen-address", "127.0.0.1:9477", "--web.listen-address", "[::1]:9477"}, "127.0.0.1:9477,[::1]:9477"},
	"serve --web.config.file":                       {[]string{"--web.config.file", "/etc/kvwatch/web.yml"}, "/etc/kvwatch/web.yml"},
	"serve --web.insecure-listen":                   {[]string{"--web.insecure-listen"}, "true"},
	"serve --web.allowed-hosts":                     {[]string{"--web.allowed-hosts", "kvwatch.monitoring.svc", "--web.allowed-hosts", "kvwatch.example.internal"}, "kvwatch.monitoring.svc,kvwatch.example.internal"},
	"serve --web.max-connections":                   {[]string{"--web.max-connections", "1024"}, "1024"},
	"serve --scrape.max-concurrent":                 {[]string{"--scrape.max-concurrent", "512"}, "512"},
	"serve --history":                               {[]string{"--history", "6h"}, "6h"},
	"serve --history.full-resolution":               {[]string{"--history.full-resolution", "2h"}, "2h"},
	"serve --history.downsample-step":               {[]string{"--history.downsample-step", "30s"}, "30s"},
	"serve --history.snapshot-file":                 {[]string{"--history.snapshot-file", "/var/lib/kvwatch/history.snap"}, "/var/lib/kvwatch/history.snap"},
	"serve --rules.file":                            {[]string{"--rules.file", "/etc/kvwatch/rules/kvwatch-alerts.yml", "--rules.file", "/etc/kvwatch/rules/team.yml"}, "/etc/kvwatch/rules/kvwatch-alerts.yml,/etc/kvwatch/rules/team.yml"},
	"serve --alertmanager.url":                      {[]string{"--alertmanager.url", "http://127.0.0.1:9093", "--alertmanager.url", "http://10.0.0.8:9093"}, "http://127.0.0.1:9093,http://10.0.0.8:9093"},
	"serve --query.timeout":                         {[]string{"--query.timeout", "1m"}, "1m0s"},
	"serve --query.max-samples":                     {[]string{"--query.max-samples", "20000000"}, "20000000"},
	"serve --query.max-concurrency":                 {[]string{"--query.max-concurrency", "8"}, "8"},
	"serve --query.max-queued":                      {[]string{"--query.max-queued", "32"}, "32"},
	"serve --query.max-length":                      {[]string{"--query.max-length", "65536"}, "65536"},
	"serve --query.max-label-bytes":                 {[]string{"--query.max-label-bytes", "536870912"}, "536870912"},
	"serve --shard":                                 {[]string{"--shard", "1/3"}, "1/3"},
	"serve --remote-write.url":                      {[]string{"--remote-write.url", "http://10.0.0.9:8428/api/v1/write", "--remote-write.url", "https://mimir.example.com/api/v1/push"}, "http://10.0.0.9:8428/api/v1/write,https://mimir.example.com/api/v1/push"},
	"serve --remote-write.external-label":           {[]string{"--remote-write.external-label", "cluster=eu-west-1", "--remote-write.external-label", "replica=a"}, "cluster=eu-west-1,replica=a"},
	"serve --remote-write.bearer-token-file":        {[]string{"--remote-write.bearer-token-file", "/etc/kvwatch/remote-write.token"}, "/etc/kvwatch/remote-write.token"},
	"serve --remote-write.basic-auth.username":      {[]string{"--remote-write.basic-auth.username", "kvwatch"}, "kvwatch"},
	"serve --remote-write.basic-auth.password-file": {[]string{"--remote-write.basic-auth.password-file", "/etc/kvwatch/remote-write.password"}, "/etc/kvwatch/remote-write.password"},
	"serve --remote-write.tls.ca-file":              {[]string{"--remote-write.tls.ca-file", "/etc/kvwatch/tls/ca.pem"}, "/etc/kvwatch/tls/ca.pem"},
	"serve --remote-write.tls.cert-file":            {[]string{"--remote-write.tls.cert-file", "/etc/kvwatch/tls/client.pem"}, "/etc/kvwatch/tls/client.pem"},
	"serve --remote-write.tls.key-file":             {[]string{"--remote-write.tls.key-file", "/etc/kvwatch/tls/client-key.pem"}, "/etc/kvwatch/tls/client-key.pem"},
	"serve --remote-write.tls.insecure-skip-verify": {[]string{"--remote-write.tls.insecure-skip-verify"}, "true"},
	"serve --remote-write.queue-capacity":           {[]string{"--remote-write.queue-capacity", "500000"}, "500000"},
	"serve --remote-write.send-interval":            {[]string{"--remote-write.send-interval", "15s"}, "15s"},
	"serve --remote-write.timeout":                  {[]string{"--remote-write.timeout", "10s"}, "10s"},
	"serve --remote-write.job":                      {[]string{"--remote-write.job", "kvwatch-eu"}, "kvwatch-eu"},
	"serve --remote-write.instance":                 {[]string{"--remote-write.instance", "gpu-box-7:9477"}, "gpu-box-7:9477"},
	"serve <target>":                                {[]string{"prefill=http://127.0.0.1:30001", "decode=http://127.0.0.1:30002"}, "prefill=http://127.0.0.1:30001,decode=http://127.0.0.1:30002"},

	"check config <file>": {[]string{"/etc/kvwatch/kvwatch.yml", "examples/kvwatch.yml"}, "/etc/kvwatch/kvwatch.yml,examples/kvwatch.yml"},

	"check queries --against":             {[]string{"--against", "http://127.0.0.1:9090", "--against", "http://127.0.0.1:30000/metrics"}, "http://127.0.0.1:9090,http://127.0.0.1:30000/metrics"},
	"check queries --against.http-config": {[]string{"--against.http-config", "/etc/kvwatch/against.yml"}, "/etc/kvwatch/against.yml"},
	"check queries --against.window":      {[]string{"--against.window", "6h"}, "6h0m0s"},
	"check queries --against.limit":       {[]string{"--against.limit", "50000"}, "50000"},
	"check queries --against.timeout":     {[]string{"--against.timeout", "1m"}, "1m0s"},
	"check queries --output":              {[]string{"--output", "json"}, "json"},
	"check queries --fix":                 {[]string{"--fix"}, "true"},
	"check queries --verbose":             {[]string{"--verbose"}, "true"},
	"check queries --strict":              {[]string{"--strict"}, "true"},
	"check queries <file>":                {[]string{"stack/grafana/dashboards/kvwatch-fleet.json", "stack/rules/kvwatch-alerts.yml"}, "stack/grafana/dashboards/kvwatch-fleet.json,stack/rules/kvwatch-alerts.yml"},

	"plan --against":             {[]string{"--against", "http://10.0.0.9:8428"}, "http://10.0.0.9:8428"},
	"plan --against.http-config": {[]string{"--against.http-config", "/etc/kvwatch/against.yml"}, "/etc/kvwatch/against.yml"},
	"plan --against.timeout":     {[]string{"--against.timeout", "5m"}, "5m0s"},
	"plan --config.file":         {[]string{"--config.file", "/etc/kvwatch/kvwatch.yml"}, "/etc/kvwatch/kvwatch.yml"},
	"plan --window":              {[]string{"--window", "28d"}, "28d"},
	"plan --period":              {[]string{"--period", "7d"}, "7d"},
	"plan --horizon":             {[]string{"--horizon", "180d"}, "180d"},
	"plan --resolution":          {[]string{"--resolution", "1m"}, "1m"},
	"plan --at":                  {[]string{"--at", "2026-03-15T12:00:00Z"}, "2026-03-15T12:00:00Z"},
	"plan --output":              {[]string{"--output", "json"}, "json"},

	"simulate --scenario":    {[]string{"--scenario", "vllm-dp"}, "vllm-dp"},
	"simulate --servers":     {[]string{"--servers", "200"}, "200"},
	"simulate --engine":      {[]string{"--engine", "vllm"}, "vllm"},
	"simulate --tp":          {[]string{"--tp", "8"}, "8"},
	"simulate --seed":        {[]string{"--seed", "42"}, "42"},
	"simulate --speed":       {[]string{"--speed", "2.5"}, "2.5"},
	"simulate --tick":        {[]string{"--tick", "500ms"}, "500ms"},
	"simulate --listen-host": {[]string{"--listen-host", "127.0.0.2"}, "127.0.0.2"},
	"simulate --base-port":   {[]string{"--base-port", "30000"}, "30000"},

	"demo --scenario":                {[]string{"--scenario", "mixed"}, "mixed"},
	"demo --web.listen-address":      {[]string{"--web.listen-address", "127.0.0.1:9478"}, "127.0.0.1:9478"},
	"demo --speed":                   {[]string{"--speed", "10"}, "10"},
	"demo --base-port":               {[]string{"--base-port", "31000"}, "31000"},
	"demo --history":                 {[]string{"--history", "2h"}, "2h"},
	"demo --history.full-resolution": {[]string{"--history.full-resolution", "30m"}, "30m"},
	"demo --history.downsample-step": {[]string{"--history.downsample-step", "15s"}, "15s"},
	"demo --history.snapshot-file":   {[]string{"--history.snapshot-file", "/tmp/kvwatch-demo.snap"}, "/tmp/kvwatch-demo.snap"},
	"demo --rules.file":              {[]string{"--rules.file", "./stack/rules/kvwatch-alerts.yml"}, "./stack/rules/kvwatch-alerts.yml"},
	"demo --alertmanager.url":        {[]string{"--alertmanager.url", "http://127.0.0.1:9093"}, "http://127.0.0.1:9093"},
	"demo --query.timeout":           {[]string{"--query.timeout", "45s"}, "45s"},
	"demo --query.max-samples":       {[]string{"--query.max-samples", "1000000"}, "1000000"},
	"demo --query.max-concurrency":   {[]string{"--query.max-concurrency", "2"}, "2"},
	"demo --query.max-queued":        {[]string{"--query.max-queued", "0"}, "0"},
	"demo --query.max-length":        {[]string{"--query.max-length", "4096"}, "4096"},
	"demo --query.max-label-bytes":   {[]string{"--query.max-label-bytes", "67108864"}, "67108864"},

	"stack generate --config.file":                    {[]string{"--config.file", "examples/kvwatch.yml"}, "examples/kvwatch.yml"},
	"stack generate --out":                            {[]string{"--out", "./deploy/stack"}, "./deploy/stack"},
	"stack generate --kvwatch.address":                {[]string{"--kvwatch.address", "10.0.0.5:9477"}, "10.0.0.5:9477"},
	"stack generate --prometheus.listen-address":      {[]string{"--prometheus.listen-address", "0.0.0.0:9090"}, "0.0.0.0:9090"},
	"stack generate --alertmanager.listen-address":    {[]string{"--alertmanager.listen-address", "127.0.0.1:9094"}, "127.0.0.1:9094"},
	"stack generate --grafana.listen-address":         {[]string{"--grafana.listen-address", "127.0.0.1:3001"}, "127.0.0.1:3001"},
	"stack generate --storage.tsdb.retention.time":    {[]string{"--storage.tsdb.retention.time", "30d"}, "30d"},
	"stack generate --storage.tsdb.retention.size":    {[]string{"--storage.tsdb.retention.size", "50GB"}, "50GB"},
	"stack generate --remote-write.url":               {[]string{"--remote-write.url", "http://10.0.0.9:8428/api/v1/write"}, "http://10.0.0.9:8428/api/v1/write"},
	"stack generate --alertmanager.webhook-url":       {[]string{"--alertmanager.webhook-url", "http://127.0.0.1:5001/hook", "--alertmanager.webhook-url", "https://alerts.example.com/kvwatch"}, "http://127.0.0.1:5001/hook,https://alerts.example.com/kvwatch"},
	"stack generate --alertmanager.email-to":          {[]string{"--alertmanager.email-to", "oncall@example.com"}, "oncall@example.com"},
	"stack generate --alertmanager.email-from":        {[]string{"--alertmanager.email-from", "kvwatch@example.com"}, "kvwatch@example.com"},
	"stack generate --alertmanager.email-smarthost":   {[]string{"--alertmanager.email-smarthost", "smtp.example.com:587"}, "smtp.example.com:587"},
	"stack generate --alertmanager.slack-webhook-url": {[]string{"--alertmanager.slack-webhook-url", "https://slack.example.com/services/T000/B000/XXXX"}, "https://slack.example.com/services/T000/B000/XXXX"},
	"stack generate --alertmanager.slack-channel":     {[]string{"--alertmanager.slack-channel", "#inference"}, "#inference"},
	"stack generate --alertmanager.watchdog-url":      {[]string{"--alertmanager.watchdog-url", "https://watchdog.example.com/ping/kvwatch"}, "https://watchdog.example.com/ping/kvwatch"},
	"stack generate --ha":                             {[]string{"--ha"}, "true"},
	"stack generate --ha.cluster-name":                {[]string{"--ha.cluster-name", "kvwatch-eu1"}, "kvwatch-eu1"},
	"stack generate --probe":                          {[]string{"--probe"}, "true"},
	"stack generate --install.dir":                    {[]string{"--install.dir", "/opt/kvwatch/stack"}, "/opt/kvwatch/stack"},
	"stack generate --runbook.url":                    {[]string{"--runbook.url", "https://wiki.example.com/kvwatch/runbook"}, "https://wiki.example.com/kvwatch/runbook"},
	"stack generate --kubernetes.namespace":           {[]string{"--kubernetes.namespace", "observability"}, "observability"},
	"stack generate --kubernetes.labels":              {[]string{"--kubernetes.labels", "release=kube-prometheus-stack", "--kubernetes.labels", "app.kubernetes.io/part-of=inference"}, "app.kubernetes.io/part-of=inference,release=kube-prometheus-stack"},
	"stack generate --kubernetes.image":               {[]string{"--kubernetes.image", "registry.example.com/kvwatch:v0.9.0"}, "registry.example.com/kvwatch:v0.9.0"},
	"stack generate --mode":                           {[]string{"--mode", "agent"}, "agent"},
	"stack generate --store.url":                      {[]string{"--store.url", "http://10.0.0.9:8428"}, "http://10.0.0.9:8428"},
	"stack generate --external-label":                 {[]string{"--external-label", "collector=gpu-box-7", "--external-label", "region=eu-west-1"}, "collector=gpu-box-7,region=eu-west-1"},

	"stack up --dir": {[]string{"--dir", "/opt/kvwatch/stack"}, "/opt/kvwatch/stack"},

	"stack install --dir":     {[]string{"--dir", "./deploy/stack"}, "./deploy/stack"},
	"stack install --dry-run": {[]string{"--dry-run"}, "true"},
	"stack install --root":    {[]string{"--root", "./image-root"}, "./image-root"},
}

// printFlags are the global flags that print something and exit 0, with
// the start of what they print. --completion-script-fish is Run's alone:
// kingpin knows only its bash and zsh scripts.
var printFlags = map[string]string{
	"--help":                   "usage: kvwatch [<flags>] <command>",
	"--help-long":              "usage: kvwatch [<flags>] <command>",
	"--help-man":               ".TH KVWATCH 1 ",
	"--version":                "kvwatch, version ",
	"--completion-bash":        "help\nstatus\ntop\n",
	"--completion-script-bash": "# bash completion for kvwatch",
	"--completion-script-zsh":  "#compdef kvwatch\n",
	"--completion-script-fish": "# fish completion for kvwatch",
}

// toOSStdout are the print flags whose text kingpin writes to os.Stdout
// rather than to Run's Streams; they are checked on the built binary.
var toOSStdout = map[string]bool{"--help-long": true, "--completion-bash": true}

// parsed is what Run parsed when stopped before running the command.
type parsed struct {
	app *kingpin.Application
	cmd string
}

// parseOnly runs Run on args without running the command (see
// parseOnlyKey).
func parseOnly(t *testing.T, args []string) (p *parsed, code int, stdout, stderr string) {
	t.Helper()
	ctx := context.WithValue(context.Background(), parseOnlyKey{}, func(app *kingpin.Application, cmd string) {
		p = &parsed{app, cmd}
	})
	code, stdout, stderr = runCaught(t, ctx, args)
	return p, code, stdout, stderr
}

// runCaught is Run, with a panic failing the test instead of the test
// binary (exit code -1).
func runCaught(t *testing.T, ctx context.Context, args []string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	func() {
		defer func() {
			if v := recover(); v != nil {
				t.Errorf("kvwatch %q panicked: %v", args, v)
				code = -1
			}
		}()
		code = Run(ctx, args, Streams{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb})
	}()
	return code, out.String(), errb.String()
}

// value is the parsed value of a flag ("--name") or argument ("<name>") of
// the command cmd ("" for a global flag).
func (p *parsed) value(cmd, name string) (string, bool) {
	m := p.app.Model()
	flags := m.Flags
	var args []*kingpin.ArgModel
	if cmd != "" {
		c := findCommand(m.Commands, cmd)
		if c == nil {
			return "", false
		}
		flags, args = c.Flags, c.Args
	}
	if n, ok := strings.CutPrefix(name, "--"); ok {
		for _, f := range flags {
			if f.Name == n {
				return f.String(), true
			}
		}
	}
	for _, a := range args {
		if "<"+a.Name+">" == name {
			return a.String(), true
		}
	}
	return "", false
}

func findCommand(cs []*kingpin.CmdModel, full string) *kingpin.CmdModel {
	for _, c := range cs {
		if c.FullCommand == full {
			return c
		}
		if sub := findCommand(c.Commands, full); sub != nil {
			return sub
		}
	}
	return nil
}

// modelEntry is one flag or argument of the application model.
type modelEntry struct {
	cmd   string // "" for a global flag
	name  string // "--flag" or "<arg>"
	short rune
	args  bool // a positional argument
	req   bool // a required argument
}

func (e modelEntry) key() string { return strings.TrimSpace(e.cmd + " " + e.name) }

// modelEntries lists every flag and argument of the application, and the
// leaf commands in the order --help lists them.
func modelEntries() (entries []modelEntry, leaves []string) {
	app, _, _ := newApp()
	m := app.Model()
	for _, f := range m.Flags {
		entries = append(entries, modelEntry{name: "--" + f.Name, short: f.Short})
	}
	var walk func([]*kingpin.CmdModel)
	walk = func(cs []*kingpin.CmdModel) {
		for _, c := range cs {
			if c.Name == "help" {
				continue // kingpin's help command: a command word, no flags
			}
			for _, f := range c.Flags {
				entries = append(entries, modelEntry{cmd: c.FullCommand, name: "--" + f.Name, short: f.Short})
			}
			for _, a := range c.Args {
				entries = append(entries, modelEntry{cmd: c.FullCommand, name: "<" + a.Name + ">", args: true, req: a.Required})
			}
			if len(c.Commands) == 0 {
				leaves = append(leaves, c.FullCommand)
			}
			walk(c.Commands)
		}
	}
	walk(m.Commands)
	return entries, leaves
}

// TestEveryFlagParses parses every flag and argument of every command with
// a realistic value through Run, stopped before the command runs, and
// checks that the value reached the flag's variable.
func TestEveryFlagParses(t *testing.T) {
	entries, leaves := modelEntries()
	inModel := map[string]bool{}
	for _, e := range entries {
		inModel[e.key()] = true
		if _, ok := flagCases[e.key()]; !ok && (e.cmd != "" || printFlags[e.name] == "") {
			t.Errorf("%s has no realistic value in flagCases (flags_test.go): add one", e.key())
		}
	}
	for _, k := range slices.Sorted(maps.Keys(flagCases)) {
		if !inModel[k] {
			t.Errorf("flagCases has %s, which kvwatch does not: remove it", k)
		}
	}
	// required are the command words and required arguments of a command,
	// without which no flag of it parses.
	required := func(cmd string) []string {
		words := strings.Fields(cmd)
		for _, e := range entries {
			if e.cmd == cmd && e.req {
				words = append(words, flagCases[e.key()].args...)
			}
		}
		return words
	}
	// check parses args, which must choose the command cmd, and compares
	// the value of e's flag or argument with want.
	check := func(t *testing.T, args []string, cmd string, e modelEntry, want string) {
		t.Helper()
		p, code, stdout, stderr := parseOnly(t, args)
		if code != exitOK || stdout != "" || stderr != "" || p == nil {
			t.Fatalf("kvwatch %q: exit %d, stdout %q, stderr %q; want it parsed", args, code, stdout, stderr)
		}
		if p.cmd != cmd {
			t.Errorf("kvwatch %q: parsed command %q, want %q", args, p.cmd, cmd)
		}
		if got, ok := p.value(e.cmd, e.name); !ok || got != want {
			t.Errorf("kvwatch %q: %s reads %q, want %q", args, e.key(), got, want)
		}
	}
	for _, e := range entries {
		c, ok := flagCases[e.key()]
		if !ok {
			continue
		}
		if e.cmd == "" {
			// A global flag, before and after every command.
			for _, leaf := range leaves {
				t.Run(e.key()+" before "+leaf, func(t *testing.T) {
					check(t, append(slices.Clone(c.args), required(leaf)...), leaf, e, c.want)
				})
				t.Run(e.key()+" after "+leaf, func(t *testing.T) {
					check(t, append(required(leaf), c.args...), leaf, e, c.want)
				})
			}
			continue
		}
		t.Run(e.key(), func(t *testing.T) {
			args := strings.Fields(e.cmd)
			if e.args {
				args = append(args, c.args...)
			} else {
				args = append(required(e.cmd), c.args...)
			}
			check(t, args, e.cmd, e, c.want)
		})
		if e.short != 0 {
			t.Run(fmt.Sprintf("%s -%c", e.cmd, e.short), func(t *testing.T) {
				args := append(required(e.cmd), c.args...)
				for i, a := range args {
					if a == e.name {
						args[i] = fmt.Sprintf("-%c", e.short)
					}
				}
				check(t, args, e.cmd, e, c.want)
			})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(printFlags)) {
		t.Run(name, func(t *testing.T) {
			var p *parsed
			var code int
			var stdout, stderr string
			if toOSStdout[name] {
				kvwatchOnPath(t)
				var out, errb strings.Builder
				cmd := exec.Command(filepath.Join(builtDir, "kvwatch"), name)
				cmd.Stdout, cmd.Stderr = &out, &errb
				if err := cmd.Run(); err != nil {
					t.Errorf("built kvwatch %s: %v", name, err)
					code = -1
				}
				stdout, stderr = out.String(), errb.String()
			} else {
				p, code, stdout, stderr = parseOnly(t, []string{name})
			}
			if code != exitOK || stderr != "" || p != nil || !strings.HasPrefix(stdout, printFlags[name]) {
				t.Errorf("kvwatch %s: exit %d, stdout %.80q, stderr %q, command run: %v; want 0 and stdout starting %q",
					name, code, stdout, stderr, p != nil, printFlags[name])
			}
		})
	}
}

// stack generate runs with every flag of the table at once: the values
// are not only parsed but accepted together.
func TestStackGenerateEveryFlag(t *testing.T) {
	dir := t.TempDir()
	args := []string{"stack", "generate"}
	for _, k := range slices.Sorted(maps.Keys(flagCases)) {
		if strings.HasPrefix(k, "stack generate --") {
			args = append(args, flagCases[k].args...)
		}
	}
	// The paths of the table are a user's; the test's are its own.
	for i := range args {
		switch args[i] {
		case "--out":
			args[i+1] = filepath.Join(dir, "stack")
		case "--config.file":
			args[i+1] = filepath.Join("..", "..", "examples", "kvwatch.yml")
		}
	}
	code, stdout, stderr := runCaught(t, context.Background(), args)
	// The example's engines with TLS settings or credentials are named in
	// the one note on stderr (prometheus.yml scrapes them only through
	// kvwatch).
	if code != exitOK || !strings.HasPrefix(stderr, "note: prometheus.yml scrapes these engines only through kvwatch") ||
		strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stdout, "wrote ") {
		t.Fatalf("kvwatch %q: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
	}
	// Each flag's value shows in a file it shapes.
	for file, want := range map[string][]string{
		"prometheus.yml":                     {"- 10.0.0.5:9477\n", "- 0.0.0.0:9090\n", "- 127.0.0.1:9094\n", "- url: http://10.0.0.9:8428/api/v1/write\n"},
		"systemd/kvwatch-prometheus.service": {"--config.file=/opt/kvwatch/stack/prometheus.yml", "--storage.tsdb.retention.time=30d", "--storage.tsdb.retention.size=50GB"},
		"grafana/grafana.ini":                {"http_port = 3001\n"},
		"alertmanager.yml": {"- url: http://127.0.0.1:5001/hook\n", "- url: https://alerts.example.com/kvwatch\n", "- to: oncall@example.com\n",
			"smtp_from: kvwatch@example.com\n", "smtp_smarthost: smtp.example.com:587\n", "api_url: https://slack.example.com/services/T000/B000/XXXX\n",
			"channel: '#inference'\n", "- url: https://watchdog.example.com/ping/kvwatch\n"},
		"rules/kvwatch-alerts.yml":   {"runbook_url: https://wiki.example.com/kvwatch/runbook#"},
		"ha/prometheus-1.yml":        {"ha_cluster: kvwatch-eu1\n"},
		"probe-targets/targets.yml":  {},
		"kubernetes/kvwatch.yaml":    {"namespace: observability\n", "image: registry.example.com/kvwatch:v0.9.0\n", "release: kube-prometheus-stack\n", "app.kubernetes.io/part-of: inference\n"},
		"agent/prometheus-agent.yml": {"collector: gpu-box-7\n", "region: eu-west-1\n"},
		"agent/vmalert.flags":        {"-datasource.url=http://10.0.0.9:8428\n"},
	} {
		b, err := os.ReadFile(filepath.Join(dir, "stack", file))
		if err != nil {
			t.Error(err)
			continue
		}
		for _, w := range want {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s lacks %q", file, w)
			}
		}
	}
}
