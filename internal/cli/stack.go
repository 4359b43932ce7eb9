package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/model"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/stack"
)

// stackGenerateOpts are the flags of kvwatch stack generate.
type stackGenerateOpts struct {
	configFile    string
	out           string
	o             stack.Options
	retentionTime string
}

func addStack(app *kingpin.Application, r registry) {
	s := app.Command("stack", "Generate, start and install a Prometheus + Alertmanager + Grafana stack for kvwatch; see docs/stack.md.")

	g := &stackGenerateOpts{}
	gc := s.Command("generate", "Write prometheus.yml, rules with promtool tests, alertmanager.yml, Grafana provisioning and dashboards, systemd units, Kubernetes manifests and docker-compose.yml.")
	gc.Flag("config.file", "kvwatch config file: alert thresholds (alerts:), webhooks (alerting.webhooks), targets for --probe; copied into the stack as kvwatch.yml.").PlaceHolder("FILE").StringVar(&g.configFile)
	gc.Flag("out", "Directory to write the stack into (created if missing; existing files are replaced, the Grafana admin password is kept).").Default("./stack").StringVar(&g.out)
	gc.Flag("kvwatch.address", "host:port where `kvwatch serve` listens (its --web.listen-address).").Default(stack.DefaultKVWatchAddress).StringVar(&g.o.KVWatchAddress)
	gc.Flag("prometheus.listen-address", "Prometheus's --web.listen-address.").Default(stack.DefaultPrometheusAddress).StringVar(&g.o.PrometheusAddress)
	gc.Flag("alertmanager.listen-address", "Alertmanager's --web.listen-address.").Default(stack.DefaultAlertmanagerAddress).StringVar(&g.o.AlertmanagerAddress)
	gc.Flag("grafana.listen-address", "Grafana's http_addr:http_port.").Default(stack.DefaultGrafanaAddress).StringVar(&g.o.GrafanaAddress)
	gc.Flag("storage.tsdb.retention.time", "How long Prometheus keeps data.").Default(model.Duration(stack.DefaultRetentionTime).String()).StringVar(&g.retentionTime)
	gc.Flag("storage.tsdb.retention.size", "Most disk Prometheus uses for data, e.g. 10GB.").Default(stack.DefaultRetentionSize).StringVar(&g.o.RetentionSize)
	gc.Flag("remote-write.url", "Also send every sample to this remote-write URL (Mimir, Thanos Receive, VictoriaMetrics).").PlaceHolder("URL").StringVar(&g.o.RemoteWriteURL)
	gc.Flag("alertmanager.webhook-url", "Send alerts to this webhook; repeat for several (added to the config file's alerting.webhooks).").PlaceHolder("URL").StringsVar(&g.o.Receivers.WebhookURLs)
	gc.Flag("alertmanager.email-to", "Send alerts by e-mail to this address (needs --alertmanager.email-from and --alertmanager.email-smarthost).").StringVar(&g.o.Receivers.EmailTo)
	gc.Flag("alertmanager.email-from", "Sender address of alert e-mails.").StringVar(&g.o.Receivers.EmailFrom)
	gc.Flag("alertmanager.email-smarthost", "SMTP server of alert e-mails, host:port.").StringVar(&g.o.Receivers.EmailSmarthost)
	gc.Flag("alertmanager.slack-webhook-url", "Send alerts to this Slack incoming-webhook URL.").PlaceHolder("URL").StringVar(&g.o.Receivers.SlackWebhookURL)
	gc.Flag("alertmanager.slack-channel", "Slack channel, e.g. #inference.").StringVar(&g.o.Receivers.SlackChannel)
	gc.Flag("alertmanager.watchdog-url", "Send the always-firing KVWatchWatchdog alert to this webhook every minute: a dead man's switch that pages when the pings stop.").PlaceHolder("URL").StringVar(&g.o.Receivers.WatchdogURL)
	gc.Flag("ha", "Also write ha/: two Prometheus replicas (external label replica) and two clustered Alertmanagers.").BoolVar(&g.o.HA)
	gc.Flag("ha.cluster-name", "With --ha: the replicas' ha_cluster external label, the pair's name for Mimir's HA tracker (ha_cluster_label: ha_cluster).").Default(stack.DefaultHAClusterName).StringVar(&g.o.HAClusterName)
	gc.Flag("probe", "Add a Prometheus job scraping discovered engines through kvwatch's /probe (targets in probe-targets/targets.yml).").BoolVar(&g.o.Probe)
	gc.Flag("install.dir", "Absolute directory the systemd units read the stack from.").Default(stack.DefaultInstallDir).StringVar(&g.o.InstallDir)
	gc.Flag("runbook.url", "Base URL of docs/runbook.md for the alerts' runbook_url.").Default(stack.DefaultRunbookURL).StringVar(&g.o.RunbookURL)
	gc.Flag("kubernetes.namespace", "Namespace of the Kubernetes manifests.").Default(stack.DefaultNamespace).StringVar(&g.o.Namespace)
	gc.Flag("kubernetes.labels", "Label of every Kubernetes object, as key=value; repeat for several, e.g. release=kube-prometheus-stack for the Prometheus Operator's default selectors.").PlaceHolder("KEY=VALUE").SetValue(labelsValue{m: &g.o.KubernetesLabels, flag: "kubernetes.labels", example: "release=kube-prometheus-stack"})
	gc.Flag("kubernetes.image", "kvwatch container image of the Kubernetes manifests, by default at the tag of this binary's version; none is published: build one with `make image` (docs/kubernetes.md).").Default(stack.DefaultImage()).StringVar(&g.o.Image)
	addStackAgentFlags(gc, &g.o) // stack_agent.go
	r.add(gc, func(ctx context.Context, e *env) int { return exitCode(e, runStackGenerate(e, g)) })

	upDir := ""
	uc := s.Command("up", "Run the generated stack's Prometheus, Alertmanager and (if installed) Grafana on loopback, restarting them if they crash, until Ctrl-C; logs in DIR/logs.")
	uc.Flag("dir", "The generated stack directory.").Default("./stack").StringVar(&upDir)
	r.add(uc, func(ctx context.Context, e *env) int {
		err := stack.Up(ctx, stack.UpOptions{Dir: upDir, Logger: e.Logger, Out: e.Stdout})
		var me *stack.MissingError
		if errors.As(err, &me) {
			return exitCode(e, usageError{err})
		}
		return exitCode(e, err)
	})

	in := stack.InstallOptions{}
	ic := s.Command("install", "Copy the generated stack to its --install.dir and its systemd units to /etc/systemd/system (run as root); prints the systemctl command that starts them.")
	ic.Flag("dir", "The generated stack directory.").Default("./stack").StringVar(&in.Dir)
	ic.Flag("dry-run", "Print what would be written, with the units, and change nothing.").BoolVar(&in.DryRun)
	ic.Flag("root", "Install under this root instead of / (image builds).").Default("/").StringVar(&in.Root)
	r.add(ic, func(ctx context.Context, e *env) int {
		in.Out = e.Stdout
		return exitCode(e, stack.Install(in))
	})
}

func runStackGenerate(e *env, g *stackGenerateOpts) error {
	o := g.o
	if g.configFile != "" {
		cfg, err := config.LoadWithoutFiles(g.configFile) // the stack runs elsewhere: its secrets may not be here
		if err != nil {
			return usageError{err}
		}
		raw, err := os.ReadFile(g.configFile)
		if err != nil {
			return usageError{err}
		}
		o.Config, o.ConfigFile = cfg, raw
		o.Receivers.WebhookURLs = append(o.Receivers.WebhookURLs, cfg.Alerting.Webhooks...)
	}
	rt, err := model.ParseDuration(g.retentionTime)
	if err != nil || time.Duration(rt) <= 0 {
		return usageError{fmt.Errorf("--storage.tsdb.retention.time %q: want a duration such as 15d", g.retentionTime)}
	}
	o.RetentionTime = rt
	files, err := stack.Generate(o)
	if err != nil {
		return usageError{err}
	}
	if w, err := stack.SecretWarning(o); err != nil {
		return usageError{err}
	} else if w != "" {
		fmt.Fprint(e.Stderr, w)
	}
	fmt.Fprint(e.Stderr, stack.EngineScrapeWarning(o))
	if err := files.Write(g.out); err != nil {
		return err
	}
	fmt.Fprintf(e.Stdout, "wrote %d files to %s; check them with `promtool test rules %s/%s %s/%s %s/%s`, start them with `kvwatch stack up --dir %s`\n",
		len(files), g.out, g.out, stack.AlertTestsFile, g.out, stack.AlertFastTestsFile, g.out, stack.AlertProjectionTestsFile, g.out)
	return nil
}
