// Package safetext makes text that came from elsewhere safe to show: it
// escapes control characters before text from a target reaches a terminal
// (Terminal), and it redacts secrets in URLs and in free text (URL, Text)
// before they reach any output: errors, logs, the report, the web UI and
// `check config`. Handler wraps a log/slog handler so that every log line
// gets both. It imports no kvwatch package.
package safetext

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Clip returns s cut to at most n bytes, at a character's start, with "…"
// where it was cut: a quote of someone else's text in a message.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Mask replaces every redacted secret.
const Mask = "xxxxx"

// Terminal returns s with every control character escaped: C0 and C1
// controls (ESC, CR, BEL, newline...), DEL, the bidirectional overrides
// that reorder what a terminal shows, and invalid UTF-8. A text printed
// with it is one line and cannot move the cursor, clear the screen, change
// colours or set the window title. Printable text is unchanged.
func Terminal(s string) string {
	clean := true
	for _, r := range s {
		if unsafeRune(r) {
			clean = false
			break
		}
	}
	if clean && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafeRune(r):
			if r < 0x80 {
				fmt.Fprintf(&b, `\x%02x`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// unsafeRune reports a rune a terminal may act on instead of showing.
func unsafeRune(r rune) bool {
	switch {
	case r < 0x20 || r == 0x7f:
		return true
	case r >= 0x80 && r < 0xa0:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
		return true
	case r == utf8.RuneError:
		return true
	}
	return !unicode.IsPrint(r)
}

// secretWords are substrings that mark a query parameter as a secret,
// whatever else its name holds (access_token, api_key, X-Amz-Signature...).
var secretWords = []string{"token", "key", "secret", "passw", "pwd", "auth", "signature", "credential", "session"}

// IsSecretParam reports whether a query parameter's value is redacted: its
// name holds one of the secret words, or it is one of extra (the config's
// global.secret_query_params), case-insensitively.
func IsSecretParam(name string, extra ...string) bool {
	n := strings.ToLower(name)
	for _, w := range secretWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	for _, e := range extra {
		if strings.EqualFold(e, name) {
			return true
		}
	}
	return false
}

// URL returns u as a string with its password and the values of its
// secret query parameters (IsSecretParam) replaced by Mask. The user name
// is kept, as url.URL.Redacted keeps it. u is not changed.
func URL(u *url.URL, extra ...string) string {
	if u == nil {
		return ""
	}
	c := *u
	if _, has := c.User.Password(); has {
		c.User = url.UserPassword(c.User.Username(), Mask)
	}
	if c.RawQuery != "" {
		c.RawQuery = redactQuery(c.RawQuery, extra)
	}
	return c.String()
}

// URLString redacts a URL given as text, parseable or not (a URL that
// failed to parse still has its password masked).
func URLString(s string, extra ...string) string {
	if u, err := url.Parse(s); err == nil {
		return URL(u, extra...)
	}
	return Text(s, extra...)
}

// redactQuery masks the secret parameters of a raw query, keeping the
// order and encoding of everything else.
func redactQuery(q string, extra []string) string {
	parts := strings.Split(q, "&")
	for i, p := range parts {
		k, _, has := strings.Cut(p, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			name = k
		}
		if has && IsSecretParam(name, extra...) {
			parts[i] = k + "=" + Mask
		}
	}
	return strings.Join(parts, "&")
}

var (
	// userinfoRE finds the password of a URL's userinfo in free text.
	userinfoRE = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.\-]*://[^/?#@\s:"'<>]*):[^/?#@\s"'<>]*@`)
	// paramRE finds name=value pairs after ? or & (or ;) in free text.
	paramRE = regexp.MustCompile(`([?&;])([^=&?;#\s"'<>]+)=([^&;#\s"'<>]*)`)
)

// Text returns s with the secrets of every URL inside it masked: the
// passwords of userinfo and the values of secret query parameters. It
// works on text that is not a URL (an error message, a log line, a URL
// that does not parse).
func Text(s string, extra ...string) string {
	if !strings.Contains(s, "@") && !strings.ContainsAny(s, "?&;") {
		return s
	}
	s = userinfoRE.ReplaceAllString(s, "${1}:"+Mask+"@")
	return paramRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := paramRE.FindStringSubmatch(m)
		name, err := url.QueryUnescape(sub[2])
		if err != nil {
			name = sub[2]
		}
		if !IsSecretParam(name, extra...) || sub[3] == Mask {
			return m
		}
		return sub[1] + sub[2] + "=" + Mask
	})
}

// Line is Text then Terminal: a text from elsewhere made safe for one
// line of output.
func Line(s string, extra ...string) string { return Terminal(Text(s, extra...)) }

// Handler wraps h so that the message and every string, error and
// Stringer attribute of a record are redacted (Text) and their control
// characters escaped (Terminal) before h sees them.
func Handler(h slog.Handler) slog.Handler { return handler{h} }

type handler struct{ h slog.Handler }

func (w handler) Enabled(ctx context.Context, l slog.Level) bool { return w.h.Enabled(ctx, l) }

func (w handler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, Line(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(cleanAttr(a))
		return true
	})
	return w.h.Handle(ctx, out)
}

func (w handler) WithAttrs(as []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(as))
	for i, a := range as {
		clean[i] = cleanAttr(a)
	}
	return handler{w.h.WithAttrs(clean)}
}

func (w handler) WithGroup(name string) slog.Handler { return handler{w.h.WithGroup(name)} }

func cleanAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, Line(v.String()))
	case slog.KindGroup:
		g := v.Group()
		out := make([]any, len(g))
		for i, x := range g {
			out[i] = cleanAttr(x)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case *url.URL:
			return slog.String(a.Key, Terminal(URL(x)))
		case error:
			return slog.String(a.Key, Line(x.Error()))
		case fmt.Stringer:
			return slog.String(a.Key, Line(x.String()))
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
