package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/kvwatch/kvwatch/internal/catalog"
	"github.com/kvwatch/kvwatch/internal/safetext"
)

// An engine's version, where the engine says it. No engine puts its
// version on its /metrics page; some answer it on an endpoint beside it,
// which the scraper reads now and then (scrape's drift sentinel), and
// llama.cpp's /props, which its adapter reads anyway, carries its build.
// SGLang's only version endpoint (/get_server_info) also returns the
// server's arguments, its API key among them: kvwatch does not ask it.

// versionEndpoint is where an engine answers its version: a JSON object
// whose field Field is the version string.
type versionEndpoint struct {
	Path  string
	Field string
}

// versionEndpoints by engine, from the engines' sources (docs/engines.md,
// "Versions"): vLLM's show_version (vllm/entrypoints/openai/api_server.py,
// later vllm/entrypoints/serve/), trtllm-serve's version route
// (tensorrt_llm/serve/openai_server.py), TGI's /info (router/src/server.rs,
// Info.version).
var versionEndpoints = map[string]versionEndpoint{
	"vllm":         {Path: "/version", Field: "version"},
	"trtllm-serve": {Path: "/version", Field: "version"},
	"tgi":          {Path: "/info", Field: "version"},
}

// VersionPath is the path, beside the metrics path, where engine answers
// its version; "" when kvwatch reads no version endpoint of it.
func VersionPath(engine string) string { return versionEndpoints[engine].Path }

// MaxVersionBody bounds a version endpoint's answer that kvwatch reads.
const MaxVersionBody = 64 << 10

// versionRE is what kvwatch accepts as a version: a release (0.26.0), a
// pre-release or local build (0.25.1rc1.dev164+ga6183563b), a llama.cpp
// build (b5440-3f545be); anything else is not shown.
var versionRE = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}$`)

// ErrNoVersion is returned for an answer that holds no version kvwatch
// accepts.
var ErrNoVersion = errors.New("no version in the answer")

// ParseVersion reads engine's version endpoint's answer.
func ParseVersion(engine string, body []byte) (string, error) {
	ep, ok := versionEndpoints[engine]
	if !ok {
		return "", fmt.Errorf("engine %s has no version endpoint kvwatch reads", engine)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return "", fmt.Errorf("%s: not a JSON object: %w", ep.Path, ErrNoVersion)
	}
	var v string
	if err := json.Unmarshal(obj[ep.Field], &v); err != nil {
		return "", fmt.Errorf("%s: no string field %q: %w", ep.Path, ep.Field, ErrNoVersion)
	}
	return checkVersion(v)
}

// checkVersion returns v when it looks like a version.
func checkVersion(v string) (string, error) {
	if !versionRE.MatchString(v) {
		return "", fmt.Errorf("%q does not look like a version: %w", safetext.Clip(v, 40), ErrNoVersion)
	}
	return v, nil
}

// release is a version's numbers; dev is true for a pre-release or a
// build from a branch (rc, dev, a local +suffix), which may hold changes
// of the next release: kvwatch draws no conclusion from its number.
type release struct {
	n   [3]int
	dev bool
}

// releaseRE splits a version into its numbers and the rest.
var releaseRE = regexp.MustCompile(`^v?([0-9]+)\.([0-9]+)(?:\.([0-9]+))?(.*)$`)

// postRE is the rest of a release's version that is a post release.
var postRE = regexp.MustCompile(`^\.post[0-9]+$`)

// parseRelease reads "0.26.0", "v0.26.0", "0.9.2.post1" (a release) or
// "0.25.1rc1.dev164+ga6183563b" (dev); ok is false for anything else (a
// llama.cpp build, a commit hash).
func parseRelease(v string) (release, bool) {
	var r release
	m := releaseRE.FindStringSubmatch(v)
	if m == nil {
		return r, false
	}
	for i := 0; i < 3; i++ {
		if m[i+1] == "" {
			continue
		}
		n, err := strconv.Atoi(m[i+1])
		if err != nil {
			return r, false
		}
		r.n[i] = n
	}
	rest := m[4]
	if rest != "" && !postRE.MatchString(rest) {
		r.dev = true
	}
	return r, true
}

// less reports whether r comes before o.
func (r release) less(o release) bool { return slices.Compare(r.n[:], o.n[:]) < 0 }

// before reports whether version v is a release before since; ok is false
// when either is not a release kvwatch can compare (a development build
// included).
func before(v, since string) (is, ok bool) {
	r, ok1 := parseRelease(v)
	s, ok2 := parseRelease(since)
	if !ok1 || !ok2 || r.dev || s.dev {
		return false, false
	}
	return r.less(s), true
}

// versionMeanings are the known changes of meaning that come with a
// release and show in no metric name: told apart by the version only.
var versionMeanings = []Meaning{
	{Engine: "vllm", Since: "0.26.0",
		Text: "vLLM no longer counts a waiting request's prefix-cache lookup again on every scheduling retry (vllm#48860, first released in 0.26.0): the prefix hit ratio steps across the upgrade (up or down, by the workload); compare hit ratios within one version"},
}

// VersionMeanings returns the known changes of engine's meanings between
// versions from and to (a downgrade names them too): those whose release
// lies between the two. Nothing when either version is unknown or a
// development build.
func VersionMeanings(engine, from, to string) []Meaning {
	var out []Meaning
	for _, m := range versionMeanings {
		if m.Engine != engine {
			continue
		}
		b1, ok1 := before(from, m.Since)
		b2, ok2 := before(to, m.Since)
		if ok1 && ok2 && b1 != b2 {
			out = append(out, m)
		}
	}
	return out
}

// versionedName is a family an engine added (Since) or removed (Until) in
// a release: a page that claims a version on the other side contradicts
// its names. Name is canonical, without a counter's _total.
type versionedName struct {
	Engine, Name string
	Since        string // the first release that has it; "" when not known
	Until        string // the first release without it; "" when not known
	Source       string
}

// versionedNames are the catalog's renames whose releases are known: the
// new name from Since, the old one until Removed.
// It is worked out on first use (the first claimed version), not at start.
var versionedNames = sync.OnceValue(func() []versionedName {
	var out []versionedName
	for _, r := range catalog.Default().Renames() {
		if r.Since != "" && r.New != "" {
			out = append(out, versionedName{Engine: r.Engine, Name: strings.TrimSuffix(r.New, "_total"), Since: r.Since,
				Source: "the rename from " + r.Old})
		}
		if r.Removed != "" {
			out = append(out, versionedName{Engine: r.Engine, Name: strings.TrimSuffix(r.Old, "_total"), Until: r.Removed,
				Source: "renamed " + r.New + " in " + r.Since})
		}
	}
	return out
})

// Contradictions says which of the families a page of engine declares
// (canonical names without a counter's _total, sorted) the version it
// claims does not have, one sentence each; nothing when the version is
// unknown or a development build.
func Contradictions(engine, version string, families []string) []string {
	var out []string
	for _, n := range versionedNames() {
		if n.Engine != engine {
			continue
		}
		if _, ok := slices.BinarySearch(families, n.Name); !ok {
			continue
		}
		if n.Since != "" {
			if b, ok := before(version, n.Since); ok && b {
				out = append(out, fmt.Sprintf("%s is on the page, but %s has it only from %s (%s)", n.Name, version, n.Since, n.Source))
			}
		}
		if n.Until != "" {
			if b, ok := before(version, n.Until); ok && !b {
				out = append(out, fmt.Sprintf("%s is on the page, but %s no longer has it (%s)", n.Name, version, n.Source))
			}
		}
	}
	return out
}
