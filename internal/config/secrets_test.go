package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestInlineSecrets: every secret written in the config itself is found
// with its key path and the key of its file form, wherever the Prometheus
// HTTP settings appear; URLs holding a password or a token count too, but
// have no file form.
func TestInlineSecrets(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     []string // path fileKey value
	}{
		{"none", "targets:\n  - url: http://a:1\n    basic_auth: {username: u, password_file: /p}\n", nil},
		{"every key of a target", `targets:
  - url: http://a:1
    basic_auth: {username: u, password: pw}
  - url: http://b:1
    bearer_token: bt
    tls_config: {key: tk}
  - url: http://c:1
    authorization: {credentials: cr}
    http_headers:
      X-A: {secrets: [h0, h1], files: [/f]}
  - url: http://d:1
    oauth2: {client_id: i, client_secret: cs, token_url: "http://t:1", tls_config: {key: ok}}
    proxy_url: http://proxy:3128
    proxy_connect_header: {Proxy-Authorization: [pa]}
`, []string{
			"targets[0].basic_auth.password password_file pw",
			"targets[1].bearer_token bearer_token_file bt",
			"targets[1].tls_config.key key_file tk",
			"targets[2].authorization.credentials credentials_file cr",
			"targets[2].http_headers.X-A.secrets[0] files h0",
			"targets[2].http_headers.X-A.secrets[1] files h1",
			"targets[3].oauth2.client_secret client_secret_file cs",
			"targets[3].oauth2.tls_config.key key_file ok",
			"targets[3].proxy_connect_header.Proxy-Authorization[0]  pa",
		}},
		{"file_sd_configs, remote_write and an alias", `file_sd_configs:
  - files: [a.yml]
    authorization: {credentials: &tok sd}
remote_write:
  - url: http://rw:1/w
    authorization: {credentials: *tok}
    oauth2: {client_id: i, grant_type: "urn:ietf:params:oauth:grant-type:jwt-bearer", client_certificate_key: jwt, token_url: "http://t:1"}
`, []string{
			"file_sd_configs[0].authorization.credentials credentials_file sd",
			"remote_write[0].authorization.credentials credentials_file sd",
			"remote_write[0].oauth2.client_certificate_key client_certificate_key_file jwt",
		}},
		{"white space a file would lose; a PEM key keeps its newline", `targets:
  - url: http://a:1
    basic_auth: {username: u, password: " pw "}
    http_headers:
      X-A: {secrets: [ok, "h "]}
    tls_config:
      key: |
        -----BEGIN PRIVATE KEY-----
        -----END PRIVATE KEY-----
`, []string{
			"targets[0].basic_auth.password   pw ",
			"targets[0].http_headers.X-A.secrets[0]  ok",
			"targets[0].http_headers.X-A.secrets[1]  h ",
			"targets[0].tls_config.key key_file -----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----\n",
		}},
		{"URLs with a password or a token", `global: {secret_query_params: [sig]}
targets:
  - url: http://bob:pw@a:1/metrics
  - url: http://b:1/metrics?sig=abc
  - url: http://c:1/metrics?page=2
    proxy_url: http://u:pp@proxy:3128
alerting:
  webhooks: ["http://hook:1/?token=t"]
`, []string{
			"targets[0].url  http://bob:pw@a:1/metrics",
			"targets[1].url  http://b:1/metrics?sig=abc",
			"targets[2].proxy_url  http://u:pp@proxy:3128",
			"alerting.webhooks[0]  http://hook:1/?token=t",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			found, err := InlineSecrets([]byte(c.in))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range found {
				got = append(got, s.Path+" "+s.FileKey+" "+s.Value)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("InlineSecrets (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMoveInlineSecrets: the secrets with a file form are written in it,
// the rest of the file (comments, order, other keys) kept; secrets without
// one stay; a secret the walk cannot reach (behind a merge key) is an
// error rather than a config that still holds it.
func TestMoveInlineSecrets(t *testing.T) {
	file := func(s InlineSecret) string {
		return "/run/secrets/" + strings.NewReplacer("[", ".", "]", "").Replace(s.Path)
	}
	for _, c := range []struct {
		name, in, want, err string
	}{
		{"every file form", `# kvwatch config
targets:
  - url: http://a:1 # the router
    basic_auth:
      username: u
      password: pw # rotate monthly
  - url: http://b:1
    bearer_token: bt
    tls_config: {cert_file: /c.pem, key: tk}
    http_headers:
      X-A: {values: [v], secrets: [h0, h1], files: [/f]}
      X-B:
        secrets: [h2]
remote_write:
  - url: http://rw:1/w
    oauth2: {client_id: i, client_secret: cs, token_url: "http://t:1"}
    proxy_url: http://proxy:3128
    proxy_connect_header: {Proxy-Authorization: [pa]}
`, `# kvwatch config
targets:
  - url: http://a:1 # the router
    basic_auth:
      username: u
      password_file: /run/secrets/targets.0.basic_auth.password # rotate monthly
  - url: http://b:1
    bearer_token_file: /run/secrets/targets.1.bearer_token
    tls_config: {cert_file: /c.pem, key_file: /run/secrets/targets.1.tls_config.key}
    http_headers:
      X-A: {values: [v], files: [/f, /run/secrets/targets.1.http_headers.X-A.secrets.0, /run/secrets/targets.1.http_headers.X-A.secrets.1]}
      X-B:
        files: [/run/secrets/targets.1.http_headers.X-B.secrets.0]
remote_write:
  - url: http://rw:1/w
    oauth2: {client_id: i, client_secret_file: /run/secrets/remote_write.0.oauth2.client_secret, token_url: "http://t:1"}
    proxy_url: http://proxy:3128
    proxy_connect_header: {Proxy-Authorization: [pa]}
`, ""},
		{"nothing to move", "targets:\n  - url: http://bob:pw@a:1\n", "targets:\n  - url: http://bob:pw@a:1\n", ""},
		{"a mapping shared through an alias", `targets:
  - url: http://a:1
    basic_auth: &ba {username: u, password: pw}
  - url: http://b:1
    basic_auth: *ba
`, `targets:
  - url: http://a:1
    basic_auth: &ba {username: u, password_file: /run/secrets/targets.0.basic_auth.password}
  - url: http://b:1
    basic_auth: *ba
`, ""},
		// The config refuses merge keys; were they let through, the
		// secret behind one would not be left in the result.
		{"behind a merge key", `targets:
  - <<: {basic_auth: {username: u, password: pw}}
    url: http://b:1
`, "", "move the inline secrets to files: some are behind a YAML merge key (<<); write them in place, or as *_file keys"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := MoveInlineSecrets([]byte(c.in), file)
			if (err == nil) != (c.err == "") || (err != nil && err.Error() != c.err) {
				t.Fatalf("MoveInlineSecrets error = %v, want %q", err, c.err)
			}
			if c.err != "" {
				return
			}
			if diff := cmp.Diff(c.want, string(out)); diff != "" {
				t.Errorf("MoveInlineSecrets (-want +got):\n%s", diff)
			}
			// Valid as it stands (the files are for elsewhere).
			if strings.Contains(c.in, "<<") {
				return
			}
			f := parse(out, "moved.yml", "")
			v := &validator{root: f.root, problems: f.problems, skipFiles: true}
			f.cfg.validate(v, nil)
			if len(v.problems) > 0 {
				t.Errorf("the moved config is not valid: %v", v.problems)
			}
		})
	}
}

func TestInlineSecretFilePath(t *testing.T) {
	for _, c := range []struct {
		s    InlineSecret
		want string
	}{
		{InlineSecret{Path: "targets[2].basic_auth.password", FileKey: "password_file"}, "targets[2].basic_auth.password_file"},
		{InlineSecret{Path: "remote_write[0].bearer_token", FileKey: "bearer_token_file"}, "remote_write[0].bearer_token_file"},
		{InlineSecret{Path: "targets[0].http_headers.X.secrets.v2.secrets[1]", FileKey: "files"}, "targets[0].http_headers.X.secrets.v2.files"},
		{InlineSecret{Path: "targets[0].url", URL: true}, ""},
	} {
		if got := c.s.FilePath(); got != c.want {
			t.Errorf("FilePath(%s) = %q, want %q", c.s.Path, got, c.want)
		}
	}
}
