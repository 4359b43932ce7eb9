package cli

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/alecthomas/kingpin/v2"
	"github.com/google/go-cmp/cmp"
)

// This file holds README.md and docs/*.md to what the binary does: every
// kvwatch command they show parses with kvwatch's own command line
// (TestDocsCommands), and every relative link and anchor resolves
// (TestDocsLinks).
//
// A command in the docs is written as a user types it, with these
// conventions, which the tests follow:
//
//   - Commands are found in inline code and in code blocks (untagged, sh,
//     bash, shell, console; in yaml blocks the values of run: keys). A block
//     fenced ```text holds output, not commands. In a block with "$ "
//     prompts, only the prompt lines are commands.
//   - Shell is read as the shell reads it: quotes, \ line continuations,
//     comments, pipes, &&, ;, redirections, VAR=value prefixes, sudo, and
//     the commands inside $(...) and <(...). A pipe has spaces around it:
//     a|b|c without spaces is a choice, and each is checked.
//   - Placeholders are upper-case words (FILE, URL), <words> and shell
//     variables ($NAME); the test puts docPlaceholders' realistic value for
//     each, and a placeholder it lacks fails the test: add it there.
//   - [--flag VALUE], [ROLE=] and [URL...] are optional parts, checked as if
//     given; [flags] stands for any flags and is dropped. WORD... and WORD…
//     are repeatable, checked once; "..." alone is dropped.
//   - Inline code may name a command without its required arguments
//     (`kvwatch check config`), a command that has subcommands
//     (`kvwatch stack`), or a flag without its value
//     (`kvwatch serve --remote-write.url`): the missing values are
//     flagCases' (flags_test.go). A code block's command is complete.

// docPlaceholders are the values put for the placeholders of the docs'
// commands: upper-case words and shell variables by name, <words> with
// their brackets.
var docPlaceholders = map[string]string{
	"FILE":               "examples/kvwatch.yml",
	"URL":                "http://127.0.0.1:30000",
	"ROLE":               "decode",
	"NAME":               "gpu-box-7",
	"PORT":               "31000",
	"N":                  "1", // --shard N/M
	"M":                  "2",
	"WORDS":              "status",
	"STAGING_PROMETHEUS": "https://prometheus.staging.example:9090",
	"<url>":              "http://127.0.0.1:30000",
	"<time>":             "2026-11-29T21:45:00Z",
	"<name>":             "kube-prometheus-stack", // release=<name>
}

// docsRoot is the repository's root, from this package.
var docsRoot = filepath.Join("..", "..")

// docPaths lists README.md and docs/*.md.
func docPaths(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(docsRoot, "docs", "*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	return append([]string{filepath.Join(docsRoot, "README.md")}, files...)
}

// mdCode is a fenced code block.
type mdCode struct {
	lang  string // the first word of the fence's info string; "" for none
	line  int    // the line of its first content line, from 1
	lines []string
}

// mdText is prose outside code blocks: a paragraph, a heading or a table
// row.
type mdText struct {
	line    int    // its first line, from 1
	text    string // its lines joined by "\n"
	row     bool   // a table row, where "\|" stands for "|"
	heading string // a heading's text; "" for other prose
}

// mdDoc is a markdown file split into code blocks and prose.
type mdDoc struct {
	code []mdCode
	text []mdText
}

var (
	fenceRE   = regexp.MustCompile("^\\s*(`{3,}|~{3,})\\s*([^\\s`]*)")
	headingRE = regexp.MustCompile(`^ {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
)

// parseMarkdown splits src into fenced code blocks and prose.
func parseMarkdown(src string) mdDoc {
	var d mdDoc
	lines := strings.Split(src, "\n")
	var para *mdText
	flush := func() {
		if para != nil {
			d.text = append(d.text, *para)
			para = nil
		}
	}
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if m := fenceRE.FindStringSubmatch(l); m != nil {
			flush()
			c := mdCode{lang: m[2], line: i + 2}
			for i++; i < len(lines); i++ {
				t := strings.TrimSpace(lines[i])
				if len(t) >= len(m[1]) && strings.Trim(t, m[1][:1]) == "" {
					break
				}
				c.lines = append(c.lines, lines[i])
			}
			d.code = append(d.code, c)
			continue
		}
		switch {
		case strings.TrimSpace(l) == "":
			flush()
		case headingRE.MatchString(l):
			flush()
			d.text = append(d.text, mdText{line: i + 1, text: l, heading: headingRE.FindStringSubmatch(l)[1]})
		case strings.HasPrefix(strings.TrimSpace(l), "|"):
			flush()
			d.text = append(d.text, mdText{line: i + 1, text: l, row: true})
		case para == nil:
			para = &mdText{line: i + 1, text: l}
		default:
			para.text += "\n" + l
		}
	}
	flush()
	return d
}

// codeSpan is an inline code span of a text.
type codeSpan struct {
	off  int // its opening backticks' offset in the text
	code string
}

// codeSpans returns the inline code spans of text, and text with each
// span blanked (newlines kept), for reading the prose around them.
func codeSpans(text string) (spans []codeSpan, blanked string) {
	b := []byte(text)
	run := func(i int) int {
		n := 0
		for i+n < len(text) && text[i+n] == '`' {
			n++
		}
		return n
	}
	for i := 0; i < len(text); {
		if text[i] != '`' {
			i++
			continue
		}
		n := run(i)
		end := -1
		for j := i + n; j < len(text); {
			if text[j] != '`' {
				j++
				continue
			}
			m := run(j)
			if m == n {
				end = j
				break
			}
			j += m
		}
		if end < 0 { // no closing run: the backticks are text
			i += n
			continue
		}
		code := strings.ReplaceAll(text[i+n:end], "\n", " ")
		if len(code) > 2 && code[0] == ' ' && code[len(code)-1] == ' ' && strings.Trim(code, " ") != "" {
			code = code[1 : len(code)-1]
		}
		spans = append(spans, codeSpan{i, code})
		for k := i; k < end+n; k++ {
			if b[k] != '\n' {
				b[k] = ' '
			}
		}
		i = end + n
	}
	return spans, string(b)
}

// docScript is shell text from the docs, and where it is.
type docScript struct {
	line   int // the line of its first character
	text   string
	inline bool // inline code, which may name a command (see the conventions)
}

// docScripts lists the shell text of a markdown file: its inline code and
// the commands of its code blocks.
func docScripts(d mdDoc) []docScript {
	var out []docScript
	for _, p := range d.text {
		spans, _ := codeSpans(p.text)
		for _, s := range spans {
			code := s.code
			if p.row {
				code = strings.ReplaceAll(code, `\|`, "|")
			}
			out = append(out, docScript{p.line + strings.Count(p.text[:s.off], "\n"), code, true})
		}
	}
	for _, c := range d.code {
		switch c.lang {
		case "", "sh", "bash", "shell", "console":
		case "yaml", "yml":
			out = append(out, yamlRunScripts(c)...)
			continue
		default:
			continue
		}
		if !slices.ContainsFunc(c.lines, func(l string) bool { return strings.HasPrefix(l, "$ ") }) {
			out = append(out, docScript{line: c.line, text: strings.Join(c.lines, "\n")})
			continue
		}
		// A transcript: the prompt lines, with their continuation lines.
		for i := 0; i < len(c.lines); i++ {
			cmd, ok := strings.CutPrefix(c.lines[i], "$ ")
			if !ok {
				continue
			}
			s := docScript{line: c.line + i, text: cmd}
			for strings.HasSuffix(c.lines[i], `\`) && i+1 < len(c.lines) {
				i++
				s.text += "\n" + c.lines[i]
			}
			out = append(out, s)
		}
	}
	return out
}

var yamlRunRE = regexp.MustCompile(`^(\s*)(?:-\s+)?run:\s*(.*)$`)

// yamlRunScripts returns the values of the run: keys of a yaml block (CI
// steps), a block scalar (run: |) as its lines.
func yamlRunScripts(c mdCode) []docScript {
	var out []docScript
	for i := 0; i < len(c.lines); i++ {
		m := yamlRunRE.FindStringSubmatch(c.lines[i])
		if m == nil {
			continue
		}
		if v := m[2]; v != "|" && v != ">" && !strings.HasPrefix(v, "|") && !strings.HasPrefix(v, ">") {
			out = append(out, docScript{line: c.line + i, text: v})
			continue
		}
		s := docScript{line: c.line + i + 1}
		for i+1 < len(c.lines) && (strings.TrimSpace(c.lines[i+1]) == "" || indent(c.lines[i+1]) > len(m[1])) {
			i++
			s.text += strings.TrimSpace(c.lines[i]) + "\n"
		}
		out = append(out, s)
	}
	return out
}

func indent(s string) int { return len(s) - len(strings.TrimLeft(s, " ")) }

// docCommand is one kvwatch command line of the docs.
type docCommand struct {
	line int      // its line
	args []string // the words after the binary, placeholders put
	err  error    // a placeholder without a value
}

var (
	// optionalRE is an optional part of a synopsis: [--flag VALUE], [ROLE=],
	// [URL...], [flags].
	optionalRE = regexp.MustCompile(`\[(-[^\[\]]*|[A-Z][A-Z_]*=?(?:\.\.\.|…)?|flags)\]`)
	// choiceRE is a choice of words: generate|up|install.
	choiceRE     = regexp.MustCompile(`[A-Za-z0-9_.-]+(?:\|[A-Za-z0-9_.-]+)+`)
	binaryRE     = regexp.MustCompile(`^(?:\S*/)?kvwatch$`)
	assignmentRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
	variableRE   = regexp.MustCompile(`\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))`)
	capsRE       = regexp.MustCompile(`\b[A-Z][A-Z_]*\b`)
)

// kvwatchCommands returns the kvwatch commands of s, with the docs'
// conventions applied.
func kvwatchCommands(s docScript) []docCommand {
	text := optionalRE.ReplaceAllStringFunc(s.text, func(m string) string {
		if m == "[flags]" {
			return ""
		}
		return m[1 : len(m)-1]
	})
	var out []docCommand
	for _, variant := range choices(text) {
		for _, c := range shellCommands(variant) {
			words := c.words
			for len(words) > 0 && (assignmentRE.MatchString(words[0]) || words[0] == "sudo") {
				words = words[1:]
			}
			if len(words) == 0 || !binaryRE.MatchString(words[0]) {
				continue
			}
			args, err := putPlaceholders(words[1:])
			out = append(out, docCommand{line: s.line + c.line, args: args, err: err})
		}
	}
	return out
}

// choices returns text once for each choice of its first a|b|c, the
// other choices in turn expanded.
func choices(text string) []string {
	loc := choiceRE.FindStringIndex(text)
	if loc == nil {
		return []string{text}
	}
	var out []string
	for _, c := range strings.Split(text[loc[0]:loc[1]], "|") {
		for _, rest := range choices(text[loc[1]:]) {
			out = append(out, text[:loc[0]]+c+rest)
		}
	}
	return out
}

// putPlaceholders drops the repetition marks of args and puts
// docPlaceholders' values for their placeholders.
func putPlaceholders(args []string) ([]string, error) {
	var out []string
	var missing []string
	value := func(name string) string {
		v, ok := docPlaceholders[name]
		if !ok {
			missing = append(missing, name)
		}
		return v
	}
	for _, a := range args {
		a = strings.TrimSuffix(strings.TrimSuffix(a, "..."), "…")
		if a == "" {
			continue
		}
		a = angleRE.ReplaceAllStringFunc(a, value)
		if strings.Contains(a, "$(") || strings.Contains(a, "<(") {
			return nil, fmt.Errorf("%s: a command's output as an argument cannot be checked; show a value", a)
		}
		a = variableRE.ReplaceAllStringFunc(a, func(m string) string {
			g := variableRE.FindStringSubmatch(m)
			return value(g[1] + g[2])
		})
		a = capsRE.ReplaceAllStringFunc(a, value)
		out = append(out, a)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("placeholders %s have no value: add a realistic one to docPlaceholders (internal/cli/docs_test.go)", strings.Join(missing, ", "))
	}
	return out, nil
}

// shellCommand is one simple command of a shell text.
type shellCommand struct {
	line  int // lines from the start of the text
	words []string
}

var (
	angleRE     = regexp.MustCompile(`<[a-z][a-z _-]*>`)
	angleWordRE = regexp.MustCompile(`^` + angleRE.String())
)

// shellCommands splits shell text into simple commands, as sh does: on
// newlines (not after \), ;, |, &&, ||; without comments and redirections;
// quotes removed; the commands inside $(...) and <(...) as commands of
// their own, the substitution kept in its word as written. A <word> is a
// placeholder, not a redirection. A quote or a parenthesis without its end
// is text (prose and output in code: "the target's engine").
func shellCommands(s string) []shellCommand {
	var cmds []shellCommand
	var words []string
	var w strings.Builder
	inWord, redirect := false, false
	line, cmdLine := 0, -1
	endWord := func() {
		if !inWord {
			return
		}
		if redirect {
			redirect = false
		} else {
			words = append(words, w.String())
		}
		w.Reset()
		inWord = false
	}
	endCmd := func() {
		endWord()
		if len(words) > 0 {
			cmds = append(cmds, shellCommand{cmdLine, words})
		}
		words, cmdLine = nil, -1
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if cmdLine < 0 && c != ' ' && c != '\t' && c != '\n' {
			cmdLine = line
		}
		switch {
		case c == '\\' && i+1 < len(s):
			i++
			if s[i] == '\n' {
				line++
				endWord()
				continue
			}
			w.WriteByte(s[i])
			inWord = true
		case c == '\'' || c == '"':
			end := strings.IndexByte(s[i+1:], c)
			if end < 0 {
				w.WriteByte(c)
				inWord = true
				continue
			}
			w.WriteString(s[i+1 : i+1+end])
			line += strings.Count(s[i+1:i+1+end], "\n")
			inWord = true
			i += end + 1
		case (c == '$' || c == '<' && !inWord) && closingParen(s, i+1) > 0:
			end := closingParen(s, i+1)
			for _, ic := range shellCommands(s[i+2 : end]) {
				ic.line += line
				cmds = append(cmds, ic)
			}
			w.WriteString(s[i : end+1])
			inWord = true
			i = end
		case c == '<' && angleWordRE.MatchString(s[i:]):
			m := angleWordRE.FindString(s[i:])
			w.WriteString(m)
			inWord = true
			i += len(m) - 1
		case c == '>' || c == '<':
			if inWord && strings.Trim(w.String(), "0123456789") == "" { // 2>
				w.Reset()
				inWord = false
			}
			endWord()
			for i+1 < len(s) && (s[i+1] == '>' || s[i+1] == '&') {
				i++
			}
			if s[i] == '&' { // >&2: the target is a descriptor
				for i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9' {
					i++
				}
				continue
			}
			redirect = true
		case c == '#' && !inWord:
			for i+1 < len(s) && s[i+1] != '\n' {
				i++
			}
		case c == '\n' || c == ';' || c == '|' || c == '&':
			endCmd()
			if c == '\n' {
				line++
			}
		case c == ' ' || c == '\t':
			endWord()
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	endCmd()
	return cmds
}

// closingParen is the index of the ) closing the ( at s[open], or -1.
func closingParen(s string, open int) int {
	if open >= len(s) || s[open] != '(' {
		return -1
	}
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// completeMention completes an inline mention of a command (see the
// conventions): a last flag's missing value and missing required
// arguments come from flagCases. group is true when args name a command
// that has subcommands, and no more.
func completeMention(m *kingpin.ApplicationModel, args []string) (out []string, group bool) {
	out = slices.Clone(args)
	var cmd *kingpin.CmdModel
	cmds := m.Commands
	flags := slices.Clone(m.Flags) // the flags valid here: global, then each command's
	positional := 0
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			if strings.Contains(a, "=") {
				continue
			}
			f := findFlag(flags, a)
			if f == nil || f.IsBoolFlag() {
				continue
			}
			if i+1 < len(args) {
				i++ // its value
				continue
			}
			key := "--" + f.Name
			if cmd != nil && !slices.Contains(m.Flags, f) {
				key = cmd.FullCommand + " " + key
			}
			if c := flagCases[key]; len(c.args) > 1 {
				out = append(out, c.args[1])
			}
			continue
		}
		if positional == 0 {
			if c := subcommand(cmds, a); c != nil {
				cmd, cmds = c, c.Commands
				flags = append(flags, c.Flags...)
				continue
			}
		}
		positional++
	}
	if cmd == nil || positional > 0 {
		return out, false
	}
	if len(cmd.Commands) > 0 {
		return out, true
	}
	for _, a := range cmd.Args {
		if a.Required {
			out = append(out, flagCases[cmd.FullCommand+" <"+a.Name+">"].args...)
		}
	}
	return out, false
}

func findFlag(flags []*kingpin.FlagModel, a string) *kingpin.FlagModel {
	for _, f := range slices.Backward(flags) {
		if a == "--"+f.Name || f.Short != 0 && a == "-"+string(f.Short) {
			return f
		}
	}
	return nil
}

func subcommand(cmds []*kingpin.CmdModel, name string) *kingpin.CmdModel {
	for _, c := range cmds {
		if c.Name == name || slices.Contains(c.Aliases, name) {
			return c
		}
	}
	return nil
}

// checkDocCommand parses args with kvwatch's command line, stopped before
// the command runs. An inline mention is completed first.
func checkDocCommand(t *testing.T, args []string, inline bool) error {
	t.Helper()
	if slices.ContainsFunc(args, func(a string) bool { return toOSStdout[a] }) {
		// kingpin writes these to os.Stdout itself; TestEveryFlagParses
		// runs them on the built binary.
		return nil
	}
	if inline {
		app, _, _ := newApp()
		var group bool
		if args, group = completeMention(app.Model(), args); group {
			return nil
		}
	}
	_, code, _, stderr := parseOnly(t, args)
	if code != exitOK || stderr != "" {
		return fmt.Errorf("exit %d: %s", code, strings.TrimSpace(stderr))
	}
	return nil
}

// TestDocsCommands parses every kvwatch command of README.md and
// docs/*.md (see the conventions at the top of this file).
func TestDocsCommands(t *testing.T) {
	checked := 0
	for _, path := range docPaths(t) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(docsRoot, path)
		for _, s := range docScripts(parseMarkdown(string(b))) {
			for _, c := range kvwatchCommands(s) {
				if c.err == nil && s.inline && len(c.args) == 0 {
					continue // `kvwatch`: the program's name
				}
				if c.err == nil {
					c.err = checkDocCommand(t, c.args, s.inline)
				}
				checked++
				if c.err != nil {
					written := strings.TrimSpace(strings.Split(s.text, "\n")[c.line-s.line])
					t.Errorf("%s:%d: %s\n\tkvwatch %s: %v\n\tfix the docs; if this is program output, fence its block as ```text",
						name, c.line, written, strings.Join(c.args, " "), c.err)
				}
			}
		}
	}
	t.Logf("%d kvwatch commands of the docs checked", checked)
	if checked == 0 {
		t.Errorf("no kvwatch command found in the docs: the reading of them is broken")
	}
}

// TestDocsCommandsFound: the docs' conventions, on markdown written for
// the purpose; the args are worked out by hand.
func TestDocsCommandsFound(t *testing.T) {
	tests := []struct {
		name string
		md   string
		want [][]string // each command's args; nil for none
		errs int        // commands with a placeholder without a value
	}{
		{"inline", "Run `kvwatch status --ranks` and\n`kvwatch top\n--once`.", [][]string{{"status", "--ranks"}, {"top", "--once"}}, 0},
		{"not a command", "`kvwatch.yml`, `kvwatch_kv_used_tokens`, `make demo`, `sudo ln -s /usr/bin/kvwatch /usr/local/bin/kvwatch`", nil, 0},
		{"binary paths", "`bin/kvwatch demo` `/usr/bin/kvwatch serve --config.file=/etc/kvwatch/kvwatch.yml`",
			[][]string{{"demo"}, {"serve", "--config.file=/etc/kvwatch/kvwatch.yml"}}, 0},
		{"synopsis", "`kvwatch status [flags] [ROLE=]URL...` `kvwatch check queries FILE... [--against URL]`",
			[][]string{{"status", "decode=http://127.0.0.1:30000"}, {"check", "queries", "examples/kvwatch.yml", "--against", "http://127.0.0.1:30000"}}, 0},
		{"choice", "| a | `kvwatch stack generate\\|up` |", [][]string{{"stack", "generate"}, {"stack", "up"}}, 0},
		{"pipe in a table", "| a | `kvwatch --completion-script-fish \\| source` |", [][]string{{"--completion-script-fish"}}, 0},
		{"substitution", "`source <(kvwatch --completion-script-bash)`", [][]string{{"--completion-script-bash"}}, 0},
		{"redirection", "`kvwatch --completion-script-zsh > \"${fpath[1]}/_kvwatch\"`", [][]string{{"--completion-script-zsh"}}, 0},
		{"angle placeholder", "`kvwatch status <url>`", [][]string{{"status", "http://127.0.0.1:30000"}}, 0},
		{"unknown placeholder", "`kvwatch status HOST:PORT`", [][]string{nil}, 1},
		{"block", "```\nmake demo    # then kvwatch serve\nkvwatch simulate \\\n  --scenario mixed   # every engine\ncd stack && KVWATCH_BINARY=/path/to/kvwatch docker compose up\n```",
			[][]string{{"simulate", "--scenario", "mixed"}}, 0},
		{"transcript", "```console\n$ kvwatch check config kvwatch.yml\nkvwatch top 7 targets\n$ echo $?\n```", [][]string{{"check", "config", "kvwatch.yml"}}, 0},
		{"output", "```text\nkvwatch demo: 3 simulated servers\n```", nil, 0},
		{"ci step", "```yaml\nsteps:\n  - run: kvwatch check queries a.yml\n  - run: |\n      kvwatch check queries b.yml \\\n        --against \"$STAGING_PROMETHEUS\" -o json > out.json\n```",
			[][]string{{"check", "queries", "a.yml"}, {"check", "queries", "b.yml", "--against", "https://prometheus.staging.example:9090", "-o", "json"}}, 0},
		{"promql", "```promql\nsum(kvwatch_kv_used_tokens)\n```", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got [][]string
			errs := 0
			for _, s := range docScripts(parseMarkdown(tt.md)) {
				for _, c := range kvwatchCommands(s) {
					got = append(got, c.args)
					if c.err != nil {
						errs++
					}
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" || errs != tt.errs {
				t.Errorf("commands (-want +got):\n%s\nplaceholder errors %d, want %d", diff, errs, tt.errs)
			}
		})
	}
}

// TestDocsCommandMentions: inline mentions are completed from flagCases,
// code blocks are not; wrong commands and flags fail either way.
func TestDocsCommandMentions(t *testing.T) {
	tests := []struct {
		args   []string
		inline bool
		ok     bool
	}{
		{[]string{"stack"}, true, true},
		{[]string{"check", "config"}, true, true},
		{[]string{"check", "config"}, false, false},
		{[]string{"serve", "--remote-write.url"}, true, true},
		{[]string{"serve", "--remote-write.url"}, false, false},
		{[]string{"status", "-o", "json"}, false, true},
		{[]string{"status", "--output", "yaml"}, true, false},
		{[]string{"serve", "--no-such-flag"}, true, false},
		{[]string{"stack", "generate", "--history", "1h"}, true, false},
		{[]string{"stats"}, true, false},
		{[]string{"--version"}, false, true},
	}
	for _, tt := range tests {
		err := checkDocCommand(t, tt.args, tt.inline)
		if (err == nil) != tt.ok {
			t.Errorf("kvwatch %s (inline %v): error %v, want ok %v", strings.Join(tt.args, " "), tt.inline, err, tt.ok)
		}
	}
}

// githubSlugger gives headings their anchors as GitHub does
// (github-slugger): lower case; every character but letters, marks,
// digits, connector punctuation (_), spaces and hyphens removed; each
// space a hyphen; a repeated slug gets -1, -2, ...
type githubSlugger map[string]int

var (
	mdLinkTextRE = regexp.MustCompile(`!?\[([^\[\]]*)\]\([^)]*\)`)
	htmlTagRE    = regexp.MustCompile(`<[^>]*>`)
)

func (g githubSlugger) slug(heading string) string {
	// The heading's text as rendered: code spans' text, links' text,
	// without tags and emphasis.
	text := mdLinkTextRE.ReplaceAllString(heading, "$1")
	text = htmlTagRE.ReplaceAllString(text, "")
	text = strings.NewReplacer("`", "", "*", "").Replace(text)
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.Pc):
			b.WriteRune(r)
		}
	}
	s, orig := b.String(), b.String()
	for {
		if _, seen := g[s]; !seen {
			break
		}
		g[orig]++
		s = fmt.Sprintf("%s-%d", orig, g[orig])
	}
	g[s] = 0
	return s
}

// TestDocsSlug: anchors of headings, worked out by hand with GitHub's
// rules (the first two are headings the docs link to).
func TestDocsSlug(t *testing.T) {
	g := githubSlugger{}
	for _, tt := range []struct{ heading, want string }{
		{"JSON schema (`--output json`)", "json-schema---output-json"},
		{"serve CPU per scrape (issue 19)", "serve-cpu-per-scrape-issue-19"},
		{"What `make demo` prints", "what-make-demo-prints"},
		{"`remote_write[]`", "remote_write"},
		{"Fleet path: remote write and shards", "fleet-path-remote-write-and-shards"},
		{"KV cache — 90 %", "kv-cache--90-"},
		{"[Linked](other.md) **heading**", "linked-heading"},
		{"Limits", "limits"},
		{"Limits", "limits-1"},
		{"limits-1", "limits-1-1"},
		{"Limits", "limits-2"},
	} {
		if got := g.slug(tt.heading); got != tt.want {
			t.Errorf("slug(%q) = %q, want %q", tt.heading, got, tt.want)
		}
	}
}

var (
	// linkTargetRE is a link's or image's target: ](target) or
	// ](target "title"); the text before it may hold brackets itself.
	linkTargetRE = regexp.MustCompile(`\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	refDefRE     = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)`)
	schemeRE     = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
)

// TestDocsLinks: every relative link and image of README.md and docs/*.md
// names a file of the repository, and an #anchor into a markdown file
// names one of its headings (GitHub's anchors, githubSlugger). Links in
// code are not links; links to other sites are not fetched.
func TestDocsLinks(t *testing.T) {
	anchorsOf := anchorReader()
	checked := 0
	for _, path := range docPaths(t) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(docsRoot, path)
		for _, p := range parseMarkdown(string(b)).text {
			_, prose := codeSpans(p.text)
			var targets [][]int
			targets = append(targets, linkTargetRE.FindAllStringSubmatchIndex(prose, -1)...)
			targets = append(targets, refDefRE.FindAllStringSubmatchIndex(prose, -1)...)
			for _, m := range targets {
				target := prose[m[2]:m[3]]
				if schemeRE.MatchString(target) || strings.HasPrefix(target, "//") {
					continue
				}
				checked++
				where := fmt.Sprintf("%s:%d: link %s", name, p.line+strings.Count(prose[:m[0]], "\n"), target)
				if err := checkLink(docsRoot, path, target, anchorsOf); err != nil {
					t.Errorf("%s: %v", where, err)
				}
			}
		}
	}
	t.Logf("%d relative links of the docs checked", checked)
	if checked == 0 {
		t.Errorf("no relative link found in the docs: the reading of them is broken")
	}
}

// anchorReader returns a function returning the anchors of the headings
// of a markdown file, each file read once.
func anchorReader() func(path string) (map[string]bool, error) {
	anchors := map[string]map[string]bool{}
	return func(path string) (map[string]bool, error) {
		if a, ok := anchors[path]; ok {
			return a, nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		a := map[string]bool{}
		g := githubSlugger{}
		for _, p := range parseMarkdown(string(b)).text {
			if p.heading != "" {
				a[g.slug(p.heading)] = true
			}
		}
		anchors[path] = a
		return a, nil
	}
}

// checkLink resolves target, a relative link in the markdown file from, in
// the repository at root.
func checkLink(root, from, target string, anchorsOf func(string) (map[string]bool, error)) error {
	file, anchor, _ := strings.Cut(target, "#")
	file, err := url.PathUnescape(file)
	if err != nil {
		return err
	}
	path := filepath.Clean(from)
	if file != "" {
		if strings.HasPrefix(file, "/") { // GitHub: from the repository's root
			path = filepath.Join(root, file)
		} else {
			path = filepath.Join(filepath.Dir(from), file)
		}
		if rel, err := filepath.Rel(root, path); err != nil || strings.HasPrefix(rel, "..") {
			return fmt.Errorf("%s is outside the repository", file)
		}
		if _, err := os.Stat(path); err != nil {
			rel, _ := filepath.Rel(root, path)
			return fmt.Errorf("%s does not exist; fix the link or drop it", rel)
		}
	}
	if anchor == "" || !strings.HasSuffix(path, ".md") {
		return nil
	}
	a, err := anchorsOf(path)
	if err != nil {
		return err
	}
	if !a[anchor] {
		rel, _ := filepath.Rel(root, path)
		return fmt.Errorf("%s has no heading with the anchor #%s", rel, anchor)
	}
	return nil
}

// TestDocsLinkResolves: links in a repository written for the purpose.
func TestDocsLinkResolves(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"README.md":            "# kvwatch\n## Set up\n## Set up\n",
		"docs/stack.md":        "# Stack\n## Alerts and changing thresholds\n```\n# not a heading\n```\n",
		"docs/shot.png":        "png",
		"examples/kvwatch.yml": "global: {}\n",
	}
	for name, text := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	from := filepath.Join(root, "docs", "stack.md")
	for _, tt := range []struct {
		target string
		ok     bool
	}{
		{"#alerts-and-changing-thresholds", true},
		{"#alerts", false},
		{"#not-a-heading", false},
		{"../README.md#set-up-1", true},
		{"../README.md#set-up-2", false},
		{"/README.md#kvwatch", true},
		{"shot.png", true},
		{"shot%2Epng", true},
		{"screenshots/shot.png", false},
		{"../examples/kvwatch.yml", true},
		{"../examples/", true},
		{"kubernetes.md", false},
		{"kubernetes.md#install", false},
		{"../../outside.md", false},
	} {
		err := checkLink(root, from, tt.target, anchorReader())
		if (err == nil) != tt.ok {
			t.Errorf("link %s from docs/stack.md: error %v, want ok %v", tt.target, err, tt.ok)
		}
	}
}
