package querycheck

import (
	"slices"
	"sort"
	"strings"
)

// Fixes collects, per file, the renames the findings suggest.
func (r *Report) Fixes() map[string][]Fix {
	out := map[string][]Fix{}
	for _, f := range r.Findings {
		if f.Fix == nil || f.Severity != Error && f.Kind != KindDeprecated {
			continue
		}
		dup := false
		for _, x := range out[f.File] {
			dup = dup || x == *f.Fix
		}
		if !dup {
			out[f.File] = append(out[f.File], *f.Fix)
		}
	}
	return out
}

// Unfixed lists, per file, the kinds of the findings about a changed name
// that --fix leaves to a person: a removal, a replacement that is not the
// same series, a name whose meaning changed, a file of mixed spellings
// offline, and a deprecation without a one-to-one successor.
func (r *Report) Unfixed() map[string][]Kind {
	out := map[string][]Kind{}
	for _, f := range r.Findings {
		switch f.Kind {
		case KindRenamed, KindRemoved, KindDeprecated, KindMeaningChanged, KindMixedEscaping:
		default:
			continue
		}
		if f.Fix == nil && f.Severity != Info && !slices.Contains(out[f.File], f.Kind) {
			out[f.File] = append(out[f.File], f.Kind)
		}
	}
	return out
}

// ApplyFixes replaces every occurrence of each fix's old name in data that
// stands as a whole metric name (not part of a longer name), and returns
// the new text and the number of replacements. Longer old names are
// replaced first.
func ApplyFixes(data string, fixes []Fix) (string, int) {
	fs := append([]Fix(nil), fixes...)
	sort.SliceStable(fs, func(i, j int) bool { return len(fs[i].Old) > len(fs[j].Old) })
	n := 0
	for _, f := range fs {
		var b strings.Builder
		rest := data
		for {
			i := strings.Index(rest, f.Old)
			if i < 0 {
				b.WriteString(rest)
				break
			}
			j := i + len(f.Old)
			before := i > 0 && isNameByte(rest[i-1]) || i == 0 && b.Len() > 0 && isNameByte(lastByte(&b))
			after := j < len(rest) && isNameByte(rest[j])
			b.WriteString(rest[:i])
			if before || after {
				b.WriteString(f.Old)
			} else {
				b.WriteString(f.New)
				n++
			}
			rest = rest[j:]
		}
		data = b.String()
	}
	return data, n
}

func lastByte(b *strings.Builder) byte {
	s := b.String()
	return s[len(s)-1]
}
