package cli

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/term"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/tui"
)

// topOpts are the flags of kvwatch top.
type topOpts struct {
	targets  targetFlags
	serveURL string
	refresh  string
	once     bool
	noColor  bool
	width    int
}

func addTop(app *kingpin.Application, r registry) {
	o := &topOpts{}
	c := app.Command("top", "Live terminal view of the fleet's KV cache: usage bars, headroom, queues, hit ratio, drill-down to ranks. Reads the targets directly, or a kvwatch serve daemon with --serve.url.")
	o.targets.register(c)
	c.Flag("serve.url", "Read the report of this running kvwatch serve (its /api/kvwatch/v1/report) instead of scraping targets, e.g. http://"+signal.DefaultListenAddress+".").PlaceHolder("URL").StringVar(&o.serveURL)
	c.Flag("refresh", "Time between refreshes.").Default("2s").StringVar(&o.refresh)
	c.Flag("once", "Print one frame and exit (exit code 1 if a target is down).").BoolVar(&o.once)
	c.Flag("no-color", "Print without colours or text attributes.").BoolVar(&o.noColor)
	c.Flag("width", "Width of printed frames when stdout is not a terminal (default: $COLUMNS, else 160).").PlaceHolder("COLUMNS").IntVar(&o.width)
	r.add(c, func(ctx context.Context, e *env) int { return runTop(ctx, e, o) })
}

func runTop(ctx context.Context, e *env, o *topOpts) int {
	refresh, err := parseDuration(o.refresh)
	if err != nil || refresh <= 0 {
		return exitCode(e, usageError{fmt.Errorf("--refresh: %q is not a positive duration; write e.g. 2s", o.refresh)})
	}
	var (
		cfg   *config.Config
		src   tui.Source
		title string
	)
	if o.serveURL != "" {
		if len(o.targets.args) > 0 {
			return exitCode(e, usageError{fmt.Errorf("--serve.url reads serve's targets; drop the target arguments %v or --serve.url", o.targets.args)})
		}
		cfg = config.Default()
		if o.targets.configFile != "" { // for the alert thresholds
			if cfg, err = config.LoadWithoutFiles(o.targets.configFile); err != nil { // thresholds only: serve scrapes
				return exitCode(e, usageError{err})
			}
		}
		rs, err := tui.NewRemoteSource(o.serveURL, nil)
		if err != nil {
			return exitCode(e, usageError{fmt.Errorf("--serve.url: %w", err)})
		}
		src, title = rs, "serve "+o.serveURL
	} else {
		p, err := o.targets.load(ctx, e.Logger)
		if err != nil {
			return exitCode(e, err)
		}
		cfg = p.Config
		src = tui.NewScrapeSource(p)
		title = fmt.Sprintf("%d targets", len(p.Targets))
		if len(p.Targets) == 1 {
			title = "1 target"
		}
	}
	opts := tui.Options{Source: src, Refresh: time.Duration(refresh), Title: title,
		Warn: cfg.Alerts.KVUsageWarning, Crit: cfg.Alerts.KVUsageCritical, FullWithin: time.Duration(cfg.Alerts.KVFullWithin)}
	if e.Interactive && !o.noColor {
		opts.Renderer = lipgloss.NewRenderer(e.Stdout)
	}
	m := tui.New(opts)
	if e.Interactive && !o.once {
		return exitCode(e, tui.Run(ctx, m, e.Stdin, e.Stdout))
	}
	rep, err := tui.Frames(ctx, m, e.Stdout, frameWidth(e, o.width), o.once)
	if err != nil {
		return exitCode(e, err)
	}
	if o.once {
		for _, s := range rep.Servers {
			if !s.OK {
				return exitFailed
			}
		}
	}
	return exitOK
}

// frameWidth is the width of printed frames: the flag, the terminal's, $COLUMNS, else 160.
func frameWidth(e *env, flag int) int {
	if flag > 0 {
		return flag
	}
	return termWidth(e, 160)
}

// termWidth is the width of the terminal when stdout is one, else
// $COLUMNS, else def.
func termWidth(e *env, def int) int {
	if f, ok := e.Stdout.(*os.File); ok && e.Interactive {
		if w, _, err := term.GetSize(f.Fd()); err == nil && w > 0 {
			return w
		}
	}
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return def
}
