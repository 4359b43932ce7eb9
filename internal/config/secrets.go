package config

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"

	promcfg "github.com/prometheus/common/config"
	"go.yaml.in/yaml/v3"

	"github.com/kvwatch/kvwatch/internal/safetext"
)

// InlineSecret is a secret written in a config file itself, rather than in
// a file the config names.
type InlineSecret struct {
	// Path is its key as problems name keys: targets[2].basic_auth.password,
	// targets[0].http_headers.X-Token.secrets[1], targets[1].url.
	Path string
	// Value is the secret (for a URL, the whole URL).
	Value string
	// FileKey is the key that names a file holding the secret instead, in
	// the same mapping: password_file, credentials_file, key_file... (files
	// for an http_headers secret). "" when the secret has no file form
	// (proxy_connect_header values, a password or token in a URL), or has
	// white space at its ends, which a file loses (its content is trimmed).
	FileKey string
	// URL says the secret is a URL holding a password or a token.
	URL bool

	parent *yaml.Node // the mapping holding the key
	key    int        // the key's index in parent.Content
}

// FilePath is the key path of the file form: targets[2].basic_auth.password_file,
// or targets[0].http_headers.X-Token.files; "" when there is none.
func (s InlineSecret) FilePath() string {
	switch s.FileKey {
	case "":
		return ""
	case "files":
		return s.Path[:strings.LastIndex(s.Path, ".secrets[")] + ".files"
	}
	return s.Path[:strings.LastIndex(s.Path, ".")+1] + s.FileKey
}

var (
	secretType  = reflect.TypeOf(promcfg.Secret(""))
	headersType = reflect.TypeOf(promcfg.Headers{})
	headerType  = reflect.TypeOf(promcfg.Header{})
	urlType     = reflect.TypeOf(promcfg.URL{})
)

// InlineSecrets lists the secrets written in the config file b, in the
// order of the file: the values of the Prometheus HTTP settings' secret
// keys (basic_auth.password, bearer_token, authorization.credentials,
// oauth2.client_secret and client_certificate_key, tls_config.key,
// http_headers secrets, proxy_connect_header) wherever the config has
// them, and URLs holding a password or a token-like query parameter (the
// ones serve masks, global.secret_query_params included).
func InlineSecrets(b []byte) ([]InlineSecret, error) {
	_, found, err := findSecrets(b)
	return found, err
}

// MoveInlineSecrets returns the config file b with every inline secret
// that has a file form written in that form, naming the file that file
// returns for it (password: x becomes password_file: <file>; an
// http_headers secret becomes an entry of the header's files). The rest
// of the file, comments included, is kept; secrets without a file form
// stay where they are.
func MoveInlineSecrets(b []byte, file func(InlineSecret) string) ([]byte, error) {
	root, found, err := findSecrets(b)
	if err != nil {
		return nil, err
	}
	out := b
	if len(found) > 0 {
		if out, err = moveSecrets(root, found, file); err != nil {
			return nil, fmt.Errorf("move the inline secrets to files: %w", err)
		}
	}
	// What the walk cannot see (a secret behind a YAML merge key) would
	// stay: the decoded result must hold no secret that has a file form.
	var c Config
	if err := yaml.Unmarshal(out, &c); err != nil {
		return nil, fmt.Errorf("move the inline secrets to files: the result does not decode (%v); write the secrets without YAML anchors", err)
	}
	if n := countSecrets(reflect.ValueOf(c)); n > countNoFileForm(found) {
		return nil, errors.New("move the inline secrets to files: some are behind a YAML merge key (<<); write them in place, or as *_file keys")
	}
	return out, nil
}

// moveSecrets rewrites the secrets found in root and encodes it.
func moveSecrets(root *yaml.Node, found []InlineSecret, file func(InlineSecret) string) ([]byte, error) {
	headers := map[*yaml.Node][]string{} // header mapping → its files, in order
	var order []*yaml.Node
	for _, s := range found {
		switch {
		case s.FileKey == "":
		case s.FileKey == "files":
			if _, ok := headers[s.parent]; !ok {
				order = append(order, s.parent)
			}
			headers[s.parent] = append(headers[s.parent], file(s))
		default:
			old := s.parent.Content[s.key+1]
			s.parent.Content[s.key].Value = s.FileKey
			s.parent.Content[s.key+1] = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: file(s),
				LineComment: old.LineComment, HeadComment: old.HeadComment, FootComment: old.FootComment}
		}
	}
	for _, h := range order {
		moveHeaderSecrets(h, headers[h])
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// moveHeaderSecrets replaces the secrets list of an http_headers entry by
// its files (those it had, then files).
func moveHeaderSecrets(h *yaml.Node, files []string) {
	var kept []*yaml.Node
	var have, secrets *yaml.Node
	at := -1
	for i := 0; i+1 < len(h.Content); i += 2 {
		switch h.Content[i].Value {
		case "secrets":
			at, secrets = len(kept), h.Content[i+1]
			continue
		case "files":
			have = h.Content[i+1]
			continue
		}
		kept = append(kept, h.Content[i], h.Content[i+1])
	}
	seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: secrets.Style}
	if have != nil && have.Kind == yaml.SequenceNode {
		seq = have
	}
	for _, f := range files {
		seq.Content = append(seq.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: f})
	}
	key := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "files"}
	h.Content = append(kept[:at:at], append([]*yaml.Node{key, seq}, kept[at:]...)...)
}

// findSecrets parses b and walks it against the config's Go types.
func findSecrets(b []byte) (*yaml.Node, []InlineSecret, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, nil, fmt.Errorf("find inline secrets: %w", err)
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return &root, nil, nil
	}
	w := secretWalker{seen: map[*yaml.Node]bool{}}
	if n := nodeAt(&root, []any{"global", "secret_query_params"}); n != nil {
		_ = n.Decode(&w.params) // a bad value is validation's to report
	}
	w.walk(root.Content[0], reflect.TypeOf(Config{}), nil, nil, -1)
	return &root, w.found, nil
}

type secretWalker struct {
	params []string
	found  []InlineSecret
	// seen are the mappings walked: one an alias repeats is walked once,
	// its secrets listed where they are written.
	seen map[*yaml.Node]bool
}

func (w *secretWalker) add(path []any, v, fileKey string, parent *yaml.Node, key int) *InlineSecret {
	w.found = append(w.found, InlineSecret{Path: pathString(path), Value: v, FileKey: fileKey, parent: parent, key: key})
	return &w.found[len(w.found)-1]
}

// walk visits n, of Go type t at path; parent and key locate the key n is
// the value of (key -1 for a list item).
func (w *secretWalker) walk(n *yaml.Node, t reflect.Type, path []any, parent *yaml.Node, key int) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	at := func(k any) []any { return append(path[:len(path):len(path)], k) }
	switch {
	case t == secretType:
		if n.Kind == yaml.ScalarNode && n.Value != "" {
			w.add(path, n.Value, "", parent, key) // the caller says which file key
		}
	case t == urlType || t.Kind() == reflect.String:
		if n.Kind == yaml.ScalarNode && strings.Contains(n.Value, "://") && safetext.URLString(n.Value, w.params...) != n.Value {
			w.add(path, n.Value, "", parent, key).URL = true
		}
	case t == headersType:
		w.walk(n, reflect.TypeOf(map[string]promcfg.Header{}), path, parent, key)
	case t.Kind() == reflect.Struct:
		if n.Kind != yaml.MappingNode || w.seen[n] {
			return
		}
		w.seen[n] = true
		fields := map[string]reflect.Type{}
		yamlFields(t, fields)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			ft, ok := fields[k]
			if !ok {
				continue
			}
			before := len(w.found)
			if t == headerType && k == "secrets" {
				if v := n.Content[i+1]; v.Kind == yaml.SequenceNode {
					// The list moves whole, or not at all.
					fileKey := "files"
					for _, it := range v.Content {
						if strings.TrimSpace(it.Value) != it.Value {
							fileKey = ""
						}
					}
					for j, it := range v.Content {
						w.add(append(at(k), j), it.Value, fileKey, n, i)
					}
				}
				continue
			}
			w.walk(n.Content[i+1], ft, at(k), n, i)
			if ft == secretType && len(w.found) > before {
				v := w.found[before].Value
				// A key's PEM survives the trimming; a password may not.
				trimmed := strings.TrimSpace(v) == v || strings.HasPrefix(strings.TrimSpace(v), "-----BEGIN")
				if _, ok := fields[k+"_file"]; ok && trimmed {
					w.found[before].FileKey = k + "_file"
				}
			}
		}
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
		if n.Kind != yaml.SequenceNode {
			return
		}
		for i, c := range n.Content {
			w.walk(c, t.Elem(), at(i), n, -1)
		}
	case t.Kind() == reflect.Map:
		if n.Kind != yaml.MappingNode || w.seen[n] {
			return
		}
		w.seen[n] = true
		for i := 0; i+1 < len(n.Content); i += 2 {
			w.walk(n.Content[i+1], t.Elem(), at(n.Content[i].Value), n, i)
		}
	}
}

// countSecrets counts the non-empty secrets in a decoded config.
func countSecrets(v reflect.Value) int {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return 0
		}
		return countSecrets(v.Elem())
	case reflect.String:
		if v.Type() == secretType && v.Len() > 0 {
			return 1
		}
	case reflect.Struct:
		n := 0
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				n += countSecrets(v.Field(i))
			}
		}
		return n
	case reflect.Slice, reflect.Array:
		n := 0
		for i := 0; i < v.Len(); i++ {
			n += countSecrets(v.Index(i))
		}
		return n
	case reflect.Map:
		n := 0
		for it := v.MapRange(); it.Next(); {
			n += countSecrets(it.Value())
		}
		return n
	}
	return 0
}

// countNoFileForm counts the secrets of type Secret that have no file form
// (proxy_connect_header values): they stay after a move.
func countNoFileForm(found []InlineSecret) int {
	n := 0
	for _, s := range found {
		if s.FileKey == "" && !s.URL {
			n++
		}
	}
	return n
}
