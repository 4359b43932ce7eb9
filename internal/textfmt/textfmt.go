// Package textfmt writes kvwatch's values the way people read them: whole
// numbers (tokens, requests) exact below 10,000 and with k, M, G beyond,
// ratios as percentages, demand as a multiple (17.6×), rates, bytes,
// request sizes (8k), durations (12m, 2h05m), the time to full, the
// window of the prefix-cache hit ratio, the servers that limit a pool and
// alert counts ("2 firing, 3 pending"). It is the one form of `status`,
// `top` and, through the report's text (package report), the web UI, so that
// the three faces print a value alike.
//
// An unavailable value is NA ("--"), never 0; a partial sum is marked ~…?,
// an implausible value ! (or "implausible" for a ratio, which is never
// shown as a plausible-looking percentage); kv.Mark holds those marks.
// Layout (columns, colours, labels) belongs to each face, not here.
package textfmt

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/kvwatch/kvwatch/internal/kv"
)

// NA is how an unavailable value is shown: never as 0.
const NA = "--"

// Engine is an engine with its version where the engine says it:
// "vllm 0.26.0"; "sglang" when it does not.
func Engine(engine, version string) string {
	if version == "" {
		return engine
	}
	return engine + " " + version
}

// Count writes a whole quantity (tokens, requests, workers): exact with
// thousands separators below 10,000 ("9,999"), then three significant
// digits with k, M or G ("12.0k", "2.58M"; k is 1,000 here, unlike a
// request Size), and in exponent form from 10^12, beyond any KV cache
// ("1e+30"). Partial and implausible values carry their marks.
func Count(v kv.Value) string {
	if !v.OK() {
		return NA
	}
	return kv.Mark(v, number(v.V))
}

// Signed is Count with a + before a positive value: a margin.
func Signed(v kv.Value) string {
	if v.OK() && v.V > 0 {
		return "+" + Count(v)
	}
	return Count(v)
}

// number is Count's form of x, without marks.
func number(x float64) string {
	if math.Abs(x) < 9999.5 {
		return thousands(int64(math.Round(x)))
	}
	return compact(x)
}

// compact writes x with three significant digits and k, M or G; from 10^12
// in exponent form.
func compact(x float64) string {
	// The 'e' form rounds once, to three digits: 999,950 is 1.00e+06,
	// never "1000k".
	e := strconv.FormatFloat(x, 'e', 2, 64)
	mant, exp, _ := strings.Cut(e, "e")
	n, _ := strconv.Atoi(exp)
	if n < 3 || n >= 12 {
		if n >= 12 {
			return strconv.FormatFloat(x, 'g', 3, 64)
		}
		return strconv.FormatFloat(x, 'f', 0, 64)
	}
	sign := ""
	if strings.HasPrefix(mant, "-") {
		sign, mant = "-", mant[1:]
	}
	digits := strings.Replace(mant, ".", "", 1) // three digits
	whole := n%3 + 1
	out := digits[:whole]
	if whole < 3 {
		out += "." + digits[whole:]
	}
	return sign + out + "kMG"[n/3-1:n/3]
}

func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Percent writes a 0–1 ratio as "12.0%": ~12.0%? when partial,
// "implausible" when implausible (never a plausible-looking percentage;
// the server's warnings say why), 12.0%* when it is a reservation made at
// admission rather than KV written (TGI). A ratio beyond 10^6 is written
// in exponent form.
func Percent(v kv.Value) string {
	if !v.OK() {
		return NA
	}
	if v.Prov == kv.Implausible {
		return "implausible"
	}
	s := PercentOf(v.V)
	if v.Prov == kv.Reserved {
		s += ReservedMark
	}
	return kv.Mark(v, s)
}

// ReservedMark follows a ratio that is a reservation, not KV written;
// ReservedNote says so.
const (
	ReservedMark = "*"
	ReservedNote = "a reservation made at admission, not KV written"
)

// PercentOf writes a ratio that is known and plausible (a threshold) as
// "90.0%".
func PercentOf(r float64) string {
	if math.Abs(r) > 1e6 {
		return strconv.FormatFloat(r*100, 'g', 3, 64) + "%"
	}
	return fmt.Sprintf("%.1f%%", r*100)
}

// Times writes a demand ratio, unbounded above, as a multiple of the
// capacity: "0.01×", "17.6×", "250×", "1,500×", "15.0k×".
func Times(v kv.Value) string {
	if !v.OK() {
		return NA
	}
	var s string
	switch a := math.Abs(v.V); {
	case a < 9.995:
		s = fmt.Sprintf("%.2f", v.V)
	case a < 99.95:
		s = fmt.Sprintf("%.1f", v.V)
	default:
		s = number(v.V)
	}
	return kv.Mark(v, s+"×")
}

// Rate writes a rate without its unit: two decimals below 10 ("0.25"),
// then as Count ("42", "11.5k").
func Rate(v kv.Value) string {
	if !v.OK() {
		return NA
	}
	if math.Abs(v.V) < 9.995 {
		return kv.Mark(v, fmt.Sprintf("%.2f", v.V))
	}
	return kv.Mark(v, number(v.V))
}

// Size writes a request size in tokens: a multiple of 1,024 in k (8192 is
// "8k", 524288 "512k", as context lengths are named), any other size as
// it is ("4000").
func Size(n int) string {
	if n >= 1024 && n%1024 == 0 {
		return strconv.Itoa(n/1024) + "k"
	}
	return strconv.Itoa(n)
}

// Headroom writes how many more requests of size tokens fit: "276×8k".
func Headroom(requests kv.Value, size int) string {
	return Count(requests) + "×" + Size(size)
}

// UsedOf writes used over capacity tokens: "310k / 2.58M tok".
func UsedOf(used, capacity kv.Value) string {
	return Count(used) + " / " + Count(capacity) + " tok"
}

// Bytes writes bytes in binary units: "512 B", "2.8 GiB".
func Bytes(v kv.Value) string {
	if !v.OK() {
		return NA
	}
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	x, i := v.V, 0
	for math.Abs(x) >= 1024 && i < len(units)-1 {
		x /= 1024
		i++
	}
	if i == 0 {
		return kv.Mark(v, fmt.Sprintf("%.0f B", x))
	}
	return kv.Mark(v, fmt.Sprintf("%.1f %s", x, units[i]))
}

// Duration writes a time span of seconds in at most two units, rounded
// down: "45s", "12m", "2h05m", "3d04h", "1200d"; a negative span is "0s".
func Duration(s float64) string {
	switch {
	case !(s > 0): // negative, 0 or NaN
		return "0s"
	case s < 100:
		return fmt.Sprintf("%.0fs", math.Floor(s))
	case s < 100*60:
		return fmt.Sprintf("%.0fm", math.Floor(s/60))
	case s < 48*3600:
		h := math.Floor(s / 3600)
		return fmt.Sprintf("%.0fh%02.0fm", h, math.Floor((s-h*3600)/60))
	}
	d := math.Floor(s / 86400)
	if d >= 1000 {
		return fmt.Sprintf("%.0fd", d)
	}
	return fmt.Sprintf("%.0fd%02.0fh", d, math.Floor((s-d*86400)/3600))
}

// Window names the time a rate is over: "over the last 5s" (one
// significant digit below a second, where Duration would say 0s).
func Window(seconds float64) string {
	if seconds > 0 && seconds < 1 {
		return "over the last " + strconv.FormatFloat(seconds, 'g', 1, 64) + "s"
	}
	return "over the last " + Duration(seconds)
}

// SinceStartMark follows a prefix-cache hit ratio over the engine's whole
// life rather than a window: before a second scrape, or when the window
// saw no prefix-cache traffic.
const SinceStartMark = "†"

// SinceStart is the window of such a ratio.
const SinceStart = "since engine start"

// Hit writes a prefix-cache hit ratio: as Percent, marked † when it is
// since the engine started.
func Hit(v kv.Value, sinceStart bool) string {
	if sinceStart && v.OK() {
		return Percent(v) + SinceStartMark
	}
	return Percent(v)
}

// HitWindows says once for a table what its prefix-cache hit ratios are
// over, from each row's HitWindow ("" for a row without a ratio): "hit
// ratio over the last 5s", "† hit ratio since engine start", or both
// ("hit ratio over the last 5s; † since engine start"); "" when no row
// has a ratio.
func HitWindows(windows []string) string {
	var over []string
	since := false
	for _, w := range windows {
		switch {
		case w == SinceStart:
			since = true
		case w != "" && !slices.Contains(over, w):
			over = append(over, w)
		}
	}
	switch {
	case len(over) > 0 && since:
		return "hit ratio " + strings.Join(over, ", ") + "; " + SinceStartMark + " " + SinceStart
	case len(over) > 0:
		return "hit ratio " + strings.Join(over, ", ")
	case since:
		return SinceStartMark + " hit ratio " + SinceStart
	}
	return ""
}

// HitWindow says what a prefix-cache hit ratio is over: "over the last
// 5s", or "since engine start".
func HitWindow(windowSeconds float64, sinceStart bool) string {
	if sinceStart {
		return SinceStart
	}
	return Window(windowSeconds)
}

// AlertCounts writes how many alerts fire and how many are pending (their
// condition holds, not yet for their hold time), both always: "2 firing,
// 3 pending". Every face counts alerts in these words, so that a server's
// counts add up with the fleet's.
func AlertCounts(firing, pending int) string {
	return thousands(int64(firing)) + " firing, " + thousands(int64(pending)) + " pending"
}
