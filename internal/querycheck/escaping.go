package querycheck

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// A Python engine's colon names (sglang:x) reach a store in one of two
// spellings, sglang:x or sglang_x, depending on how its pages were scraped
// (escapingNote). Offline, a file that spells one engine's names both ways
// is reported (one of the spellings selects nothing on any one store);
// against a Prometheus API, each file gets a note saying which spelling the
// store holds when the file uses the other.

// nameUse is one selector's name under a Python engine's colon prefix.
type nameUse struct {
	at     Finding // the selector: file, where, expression, position
	name   string  // as written
	alt    string  // in the other spelling
	prefix string  // the engine's colon prefix, e.g. "sglang:"
	engine string  // the engine's display name
	colon  bool    // spelt with the colon
}

// recordUse notes name when it is a catalogued name of a Python engine's
// colon prefix, in either spelling.
func (c *Checker) recordUse(at Finding, name string) {
	for _, e := range c.Catalog.Engines() {
		if !e.PythonClient {
			continue
		}
		for _, p := range e.Prefixes {
			under := strings.Replace(p, ":", "_", 1)
			if under == p {
				continue
			}
			u := nameUse{at: at, name: name, prefix: p, engine: displayName(e)}
			canonical := name
			switch {
			case strings.HasPrefix(name, p):
				u.colon, u.alt = true, under+name[len(p):]
			case strings.HasPrefix(name, under):
				canonical = p + name[len(under):]
				u.alt = canonical
			default:
				continue
			}
			if c.catalogKnows(canonical) {
				c.uses = append(c.uses, u)
			}
			return
		}
	}
}

// spelling is "sglang:x" or "sglang_x" for prefix "sglang:".
func spelling(prefix string, colon bool) string {
	if colon {
		return prefix + "x"
	}
	return strings.Replace(prefix, ":", "_", 1) + "x"
}

// byFilePrefix groups the recorded uses by file and prefix, in the order
// they were first seen.
func (c *Checker) byFilePrefix() [][]nameUse {
	var groups [][]nameUse
	for _, u := range c.uses {
		i := slices.IndexFunc(groups, func(g []nameUse) bool { return g[0].at.File == u.at.File && g[0].prefix == u.prefix })
		if i < 0 {
			groups = append(groups, nil)
			i = len(groups) - 1
		}
		groups[i] = append(groups[i], u)
	}
	return groups
}

func countColon(g []nameUse) (colon, under int) {
	for _, u := range g {
		if u.colon {
			colon++
		} else {
			under++
		}
	}
	return colon, under
}

// mixedFindings reports, offline, the selectors of the less used spelling
// in each file that spells one engine's names both ways (on a tie, the
// underscore ones: the engine's own spelling has the colon).
func (c *Checker) mixedFindings() []Finding {
	var out []Finding
	for _, g := range c.byFilePrefix() {
		colon, under := countColon(g)
		if colon == 0 || under == 0 {
			continue
		}
		flagColon := colon < under
		for _, u := range g {
			if u.colon != flagColon {
				continue
			}
			f := u.at
			f.Kind, f.Severity, f.Suggestion = KindMixedEscaping, Warning, u.alt
			f.Message = fmt.Sprintf("%s: this file spells %s names both ways (%d selectors as %s, %d as %s) while a store holds one spelling, so one of them selects nothing; "+
				"check the file --against your store, which says which spelling it holds (--fix then rewrites the other)",
				u.name, u.engine, colon, spelling(u.prefix, true), under, spelling(u.prefix, false))
			out = append(out, f)
		}
	}
	return out
}

// spellingStore is a store that can say which spelling it holds.
type spellingStore interface {
	// NameForms counts the store's metric names spelt prefix+x and with
	// the prefix's ':' as '_'.
	NameForms(ctx context.Context, prefix string) (colon, underscore int, err error)
	// BuildVersion is the store's version ("" when it does not say).
	BuildVersion(ctx context.Context) string
}

// spellingNotes says, for each file using a spelling the store does not
// hold while it holds the other, which spelling the file needs.
func (c *Checker) spellingNotes(ctx context.Context) ([]Note, error) {
	st, ok := c.Store.(spellingStore)
	if !ok || len(c.uses) == 0 {
		return nil, nil
	}
	type count struct{ colon, under int }
	counts := map[string]count{}
	var notes []Note
	version := ""
	for _, g := range c.byFilePrefix() {
		p := g[0].prefix
		n, ok := counts[p]
		if !ok {
			var err error
			if n.colon, n.under, err = st.NameForms(ctx, p); err != nil {
				return nil, err
			}
			counts[p] = n
			if version == "" {
				version = st.BuildVersion(ctx)
			}
		}
		if (n.colon == 0) == (n.under == 0) {
			continue // both spellings, or none: each selector is checked as spelt
		}
		needColon := n.colon > 0
		colon, under := countColon(g)
		wrong := under
		if !needColon {
			wrong = colon
		}
		if wrong == 0 {
			continue
		}
		store := "this store"
		if version != "" {
			store += " (version " + version + ")"
		}
		have, lack := n.colon, spelling(p, false)
		if !needColon {
			have, lack = n.under, spelling(p, true)
		}
		notes = append(notes, Note{File: g[0].at.File, Message: fmt.Sprintf(
			"needs the %s spelling of %s names: %s holds %d names spelt %s and none spelt %s (%s); %d selectors here use the other spelling, reported as %s, and --fix rewrites them",
			spelling(p, needColon), strings.TrimSuffix(p, ":"), store, have, spelling(p, needColon), lack, escapingNote(), wrong, KindWrongPrefix)})
	}
	return notes, nil
}
