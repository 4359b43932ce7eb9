package config

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	promcfg "github.com/prometheus/common/config"
	"go.yaml.in/yaml/v3"
)

// TestDocsDefaults compares the default column of docs/configuration.md's
// key tables with the defaults the file is decoded onto (Default(), and
// each list entry's: defaultTarget, defaultFileSD, DefaultRemoteWrite), key
// by key, so that a default changed in code without the docs fails, and
// checks that every key has a row.
//
// A default written as one literal (`5s`, `0.90`, `[8192]`, `true`,
// optionally followed by a remark in parentheses) is decoded as the file
// would decode it and must equal the default. Any other text ("none",
// "required", "the engine's own", a reference such as
// `global.scrape_interval`) says the value comes from elsewhere: the
// default must then be unset (zero, or inherited).
func TestDocsDefaults(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	d := Default()
	limits := reflect.ValueOf(DefaultLimits())
	sections := map[string]reflect.Value{ // heading: the value of its keys
		"`global`":                  reflect.ValueOf(d.Global),
		"`targets[]`":               reflect.ValueOf(defaultTarget()),
		"`file_sd_configs[]`":       reflect.ValueOf(defaultFileSD()),
		"`probe`":                   reflect.ValueOf(d.Probe),
		"`alerts`":                  reflect.ValueOf(d.Alerts),
		"`history`":                 reflect.ValueOf(d.History),
		"`alerting`":                reflect.ValueOf(d.Alerting),
		"`remote_write[]`":          reflect.ValueOf(DefaultRemoteWrite()),
		"`kubernetes_sd_configs[]`": reflect.ValueOf(defaultKubernetesSD()),
		"`dns_sd_configs[]`":        reflect.ValueOf(defaultDNSSD()),
		"`http_sd_configs[]`":       reflect.ValueOf(defaultHTTPSD()),
		"Limits":                    limits,
	}
	documented := map[string][]string{} // heading: the keys of its table
	tick := regexp.MustCompile("`([^`]*)`")
	literal := regexp.MustCompile("^`([^`]*)`(?: \\(.*\\))?$")
	section, col := "", -1
	for i, line := range strings.Split(string(b), "\n") {
		if h, ok := strings.CutPrefix(line, "### "); ok {
			section, col = h, -1
			continue
		}
		if strings.HasPrefix(line, "## ") {
			section, col = "", -1
			continue
		}
		def, ok := sections[section]
		if !ok || !strings.HasPrefix(line, "|") {
			col = -1
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if col < 0 { // the header row
			col = slices.IndexFunc(cells, func(c string) bool { return strings.TrimSpace(c) == "default" })
			continue
		}
		if col == 0 || col >= len(cells) || strings.HasPrefix(strings.TrimSpace(cells[0]), "---") {
			continue
		}
		var keys []string
		parent := ""
		for _, m := range tick.FindAllStringSubmatch(cells[0], -1) {
			k := m[1]
			if k == "..." {
				continue
			}
			if p, _, ok := strings.Cut(k, "."); ok {
				parent = p
			} else if parent != "" {
				k = parent + "." + k // `queue_config.min_backoff`, `max_backoff`
			}
			keys = append(keys, k)
		}
		parts := strings.Split(strings.TrimSpace(cells[col]), ", ")
		if len(parts) != len(keys) {
			parts = []string{strings.TrimSpace(cells[col])} // one text for every key
		}
		for j, k := range keys {
			documented[section] = append(documented[section], k)
			var v reflect.Value
			if section == "Limits" {
				n := slices.Index(LimitKeys, k)
				if n < 0 {
					t.Errorf("configuration.md:%d: %s is not a limit", i+1, k)
					continue
				}
				v = limits.Field(n)
			} else if v, ok = keyValue(def, k); !ok {
				t.Errorf("configuration.md:%d: %s has no key %s", i+1, section, k)
				continue
			}
			text := parts[min(j, len(parts)-1)]
			if m := literal.FindStringSubmatch(text); m != nil && !isKeyPath(m[1]) {
				want := reflect.New(v.Type())
				if err := yaml.Unmarshal([]byte(m[1]), want.Interface()); err != nil {
					t.Errorf("configuration.md:%d: %s %s: default %q does not read as the key's value: %v", i+1, section, k, m[1], err)
					continue
				}
				if diff := cmp.Diff(want.Elem().Interface(), v.Interface(), cmpopts.IgnoreUnexported(promcfg.ProxyConfig{})); diff != "" {
					t.Errorf("configuration.md:%d: %s %s: the docs say default %s, the code's differs (-docs +code):\n%s", i+1, section, k, text, diff)
				}
			} else if !v.IsZero() && !(v.Type() == durationType && v.Int() == int64(unset)) {
				t.Errorf("configuration.md:%d: %s %s: the docs say %q, but the code's default is %v", i+1, section, k, text, v.Interface())
			}
		}
	}
	httpKeys := map[string]reflect.Type{}
	yamlFields(reflect.TypeOf(promcfg.HTTPClientConfig{}), httpKeys)
	for section, def := range sections {
		var want []string
		if section == "Limits" {
			want = LimitKeys
		} else {
			want = ownKeys(def.Type(), "", httpKeys)
		}
		for _, k := range want {
			if !slices.Contains(documented[section], k) {
				t.Errorf("configuration.md: %s has no row for %s", section, k)
			}
		}
	}
	top := map[string]reflect.Type{}
	yamlFields(reflect.TypeOf(Config{}), top)
	for k := range top {
		_, plain := sections["`"+k+"`"]
		_, list := sections["`"+k+"[]`"]
		if !plain && !list {
			t.Errorf("top-level key %s has no section in this test", k)
		}
	}
}

// keyValue returns the field of v at the dotted yaml key path k, through
// inline structs.
func keyValue(v reflect.Value, k string) (reflect.Value, bool) {
	for _, name := range strings.Split(k, ".") {
		f, ok := fieldByKey(v, name)
		if !ok {
			return reflect.Value{}, false
		}
		v = f
	}
	return v, true
}

func fieldByKey(v reflect.Value, name string) (reflect.Value, bool) {
	if v.Kind() != reflect.Struct {
		return reflect.Value{}, false
	}
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		tag, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if strings.Contains(opts, "inline") {
			if fv, ok := fieldByKey(v.Field(i), name); ok {
				return fv, true
			}
			continue
		}
		if tag == name {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}

// isKeyPath reports whether s names a key of the config (a reference such
// as global.scrape_interval, not a value).
func isKeyPath(s string) bool {
	_, ok := keyValue(reflect.ValueOf(Config{}), s)
	return ok && strings.Contains(s, ".")
}

// ownKeys lists kvwatch's own keys of struct type t, nested structs as
// dotted paths (a URL, written as one string, is one key), without the
// Prometheus HTTP client keys (httpKeys).
func ownKeys(t reflect.Type, prefix string, httpKeys map[string]reflect.Type) []string {
	fields := map[string]reflect.Type{}
	yamlFields(t, fields)
	var out []string
	for k, ft := range fields {
		if _, ok := httpKeys[k]; ok {
			continue
		}
		if ft.Kind() == reflect.Struct && ft != urlType {
			out = append(out, ownKeys(ft, prefix+k+".", httpKeys)...)
			continue
		}
		out = append(out, prefix+k)
	}
	return out
}
