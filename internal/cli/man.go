package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/version"
)

// writeManPage writes kvwatch(1) in troff's man macros, from the same
// command and flag definitions as --help, so the page cannot drift from
// the binary: `kvwatch --help-man > kvwatch.1` (make package does this).
func writeManPage(w io.Writer, app *kingpin.Application) error {
	m := app.Model()
	var b bytes.Buffer
	ver := version.Version
	if ver == "" {
		ver = "dev"
	}
	fmt.Fprintf(&b, ".TH KVWATCH 1 \"\" \"kvwatch %s\" \"kvwatch manual\"\n", roffText(ver))
	b.WriteString(".SH NAME\nkvwatch \\- " + roffText(appSummary) + "\n")
	b.WriteString(".SH SYNOPSIS\n.B kvwatch\n[\\fIGLOBAL FLAGS\\fR] \\fICOMMAND\\fR [\\fIFLAGS\\fR] [\\fIARGS\\fR ...]\n")
	b.WriteString(".SH DESCRIPTION\n" + roffText(appSummary) + "\n.PP\n")
	b.WriteString("Run \\fBkvwatch demo\\fR to see every face of kvwatch on a simulated cluster, and \\fBkvwatch COMMAND \\-\\-help\\fR for one command.\n")
	b.WriteString(".SH GLOBAL FLAGS\n")
	manFlags(&b, m.Flags)
	b.WriteString(".SH COMMANDS\n")
	for _, c := range m.FlattenedCommands() {
		if c.Hidden {
			continue
		}
		fmt.Fprintf(&b, ".SS %s\n", roffText("kvwatch "+c.FullCommand+argSummary(c.Args)))
		b.WriteString(roffText(c.Help) + "\n")
		for _, a := range c.Args {
			if a.Hidden {
				continue
			}
			fmt.Fprintf(&b, ".TP\n\\fI%s\\fR\n%s\n", roffText(argName(a)), roffText(a.Help))
		}
		manFlags(&b, c.Flags)
	}
	b.WriteString(`.SH EXIT STATUS
.TP
0
everything worked
.TP
1
the command ran, but a target or a check failed
.TP
2
the command line or a config file is wrong (also when no command is given)
.SH SHELL COMPLETION
`)
	b.WriteString(roffText("kvwatch --completion-script-SHELL prints the completion script of bash, zsh or fish; the Debian package installs them. In bash: source <(kvwatch --completion-script-bash); in zsh, after compinit: source <(kvwatch --completion-script-zsh); in fish: kvwatch --completion-script-fish | source.") + "\n")
	b.WriteString(".SH FILES\n.TP\n/etc/kvwatch/kvwatch.yml\nconfiguration of the kvwatch.service unit of the Debian package\n")
	b.WriteString(".SH SEE ALSO\n" + roffText("prometheus(1), prometheus-alertmanager(1), systemctl(1); the documentation under docs/ of the source tree (installed under /usr/share/doc/kvwatch).") + "\n")
	_, err := w.Write(b.Bytes())
	return err
}

// manFlags writes one .TP entry per visible flag.
func manFlags(b *bytes.Buffer, flags []*kingpin.FlagModel) {
	for _, f := range flags {
		if f.Hidden {
			continue
		}
		name := "--" + f.Name
		if f.Short != 0 {
			name = "-" + string(f.Short) + ", " + name
		}
		b.WriteString(".TP\n\\fB" + roffText(name) + "\\fR")
		if !f.IsBoolFlag() {
			b.WriteString("=\\fI" + roffText(f.FormatPlaceHolder()) + "\\fR")
		}
		b.WriteString("\n" + roffText(f.HelpWithEnvar()) + "\n")
	}
}

func argName(a *kingpin.ArgModel) string {
	if a.PlaceHolder != "" {
		return a.PlaceHolder
	}
	return "<" + a.Name + ">"
}

func argSummary(args []*kingpin.ArgModel) string {
	var s string
	for _, a := range args {
		if a.Hidden {
			continue
		}
		n := argName(a)
		if !a.Required {
			n = "[" + n + "]"
		}
		s += " " + n
	}
	return s
}

// roffText escapes text for troff: backslashes, hyphens (which troff would
// otherwise typeset as non-ASCII dashes, breaking copy and paste), and
// lines that would start with a control character.
func roffText(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			l = `\&` + l
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}
