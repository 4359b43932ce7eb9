package cli

import (
	"context"
	"fmt"

	"github.com/alecthomas/kingpin/v2"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/pipeline"
)

func addCheck(app *kingpin.Application, r registry) {
	c := app.Command("check", "Check kvwatch files without running anything.")
	var files []string
	cc := c.Command("config", "Check config files exactly as serve, status and top read them (file_sd files included): prints FILE: OK (N targets), or every problem with its line; exit code 2 on problems.")
	cc.Arg("file", "Config files to check.").Required().StringsVar(&files)
	r.add(cc, func(ctx context.Context, e *env) int { return runCheckConfig(e, files) })
	addCheckQueries(c, r)
}

func runCheckConfig(e *env, files []string) int {
	code := exitOK
	for _, f := range files {
		s, err := pipeline.Load(config.Sources{File: f}, nil)
		if err != nil {
			fmt.Fprintf(e.Stderr, "%v\n", err)
			code = exitUsage
			continue
		}
		fmt.Fprintf(e.Stdout, "%s: OK (%d targets)\n", f, len(s.Targets))
		for _, w := range s.Config.Warnings() {
			fmt.Fprintf(e.Stderr, "%s: warning: %s\n", f, w)
		}
	}
	return code
}
