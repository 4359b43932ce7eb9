package stack

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	promcfg "github.com/prometheus/common/config"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kvwatch/kvwatch/internal/config"
)

// inlineSecretsFile holds every kind of secret the config can hold inline.
const inlineSecretsFile = "testdata/inline-secrets.yml"

// inlineSecretValues are its secrets by the key the Secret keeps them
// under, as the file writes them.
var inlineSecretValues = map[string]string{
	"targets.0.basic_auth.password":              "s3cret-basic-password",
	"targets.1.bearer_token":                     "s3cret-bearer-token",
	"targets.2.authorization.credentials":        "s3cret-authorization-credentials",
	"targets.3.oauth2.client_secret":             "s3cret-oauth2-client-secret",
	"targets.3.oauth2.tls_config.key":            "s3cret-oauth2-tls-key",
	"targets.3.tls_config.key":                   "s3cret-target-tls-key",
	"targets.4.oauth2.client_certificate_key":    "s3cret-oauth2-jwt-signing-key",
	"targets.4.http_headers.X-Api-Key.secrets.0": "s3cret-header-one",
	"targets.4.http_headers.X-Api-Key.secrets.1": "s3cret-header-two",
	"file_sd_configs.0.basic_auth.password":      "s3cret-file-sd-password",
	"remote_write.0.basic_auth.password":         "s3cret-remote-write-password",
	"remote_write.1.authorization.credentials":   "s3cret-remote-write-credentials",
	"remote_write.2.oauth2.client_secret":        "s3cret-remote-write-oauth2",
}

// secretOptions is the stack of a config file, read as stack generate
// reads it.
func secretOptions(t *testing.T, file string) Options {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadWithoutFiles(file)
	if err != nil {
		t.Fatal(err)
	}
	return Options{Config: cfg, ConfigFile: raw, GrafanaAdminPassword: "not-a-config-secret"}
}

// materialise writes the kvwatch pod's config volume (ConfigMap, or the
// projected ConfigMap and Secret) into a new directory, the mount path in
// kvwatch.yml replaced by it, and returns the directory.
func materialise(t *testing.T, files Files) string {
	t.Helper()
	var dep appsv1.Deployment
	k8sDecode(t, files.Get("kubernetes/kvwatch.yaml"), "Deployment", &dep)
	mount := dep.Spec.Template.Spec.Containers[0].VolumeMounts[0].MountPath
	vol := dep.Spec.Template.Spec.Volumes[0].VolumeSource
	local := t.TempDir()
	put := func(name string, data []byte) {
		p := filepath.Join(local, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		data = bytes.ReplaceAll(data, []byte(mount+"/"), []byte(local+"/"))
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	putConfigMap := func() {
		var cm corev1.ConfigMap
		k8sDecode(t, files.Get("kubernetes/kvwatch.yaml"), "ConfigMap", &cm)
		for k, v := range cm.Data {
			put(k, []byte(v))
		}
	}
	var secret corev1.Secret
	switch {
	case vol.ConfigMap != nil:
		putConfigMap()
	case vol.Projected != nil:
		for _, src := range vol.Projected.Sources {
			switch {
			case src.ConfigMap != nil:
				putConfigMap()
			case src.Secret != nil:
				k8sDecode(t, files.Get(k8sSecretFile), "Secret", &secret)
				for _, it := range src.Secret.Items {
					d, ok := secret.Data[it.Key]
					if !ok {
						t.Fatalf("the volume mounts key %s, which the Secret lacks", it.Key)
					}
					put(it.Path, d)
				}
			}
		}
	default:
		t.Fatalf("kvwatch's volume %+v is neither a ConfigMap nor projected", vol)
	}
	return local
}

// secretsOf are the secrets h gives, in a fixed order: inline, or read
// from the files it names (as prometheus/common reads them, trimmed).
func secretsOf(t *testing.T, h promcfg.HTTPClientConfig) []string {
	t.Helper()
	val := func(inline promcfg.Secret, file string) string {
		if file == "" {
			return string(inline)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	var out []string
	if b := h.BasicAuth; b != nil {
		out = append(out, "basic_auth:"+val(b.Password, b.PasswordFile))
	}
	if a := h.Authorization; a != nil { // bearer_token is here too, once validated
		out = append(out, "authorization:"+val(a.Credentials, a.CredentialsFile))
	}
	if o := h.OAuth2; o != nil {
		out = append(out, "oauth2:"+val(o.ClientSecret, o.ClientSecretFile), "oauth2 jwt:"+val(o.ClientCertificateKey, o.ClientCertificateKeyFile),
			"oauth2 tls:"+val(o.TLSConfig.Key, o.TLSConfig.KeyFile))
	}
	out = append(out, "tls:"+val(h.TLSConfig.Key, h.TLSConfig.KeyFile))
	if h.HTTPHeaders != nil {
		for _, name := range []string{"X-Api-Key", "X-Tenant"} {
			hd := h.HTTPHeaders.Headers[name]
			for _, s := range hd.Secrets {
				out = append(out, name+":"+string(s))
			}
			for _, f := range hd.Files {
				out = append(out, name+":"+val("", f))
			}
		}
	}
	return out
}

// allSecretsOf lists the secrets of every HTTP setting of c.
func allSecretsOf(t *testing.T, c *config.Config) []string {
	var out []string
	for _, x := range c.Targets {
		out = append(out, secretsOf(t, x.HTTPClientConfig)...)
	}
	for _, x := range c.FileSD {
		out = append(out, secretsOf(t, x.HTTPClientConfig)...)
	}
	for _, x := range c.RemoteWrite {
		out = append(out, secretsOf(t, x.HTTPClientConfig)...)
	}
	return out
}

// TestInlineSecretsStayOutOfGeneratedFiles (issue 31 item 4): stack
// generate copied the config's inline secrets (all 13 of the test file:
// passwords, tokens, credentials, client secrets, keys, header secrets)
// into the Kubernetes ConfigMap and a world-readable kvwatch.yml. Now no
// generated file holds one except the Secret manifest, whose data is
// exactly the secrets, and the stack's own kvwatch.yml; both are 0600.
// The pod's volume, written out as Kubernetes would, gives kvwatch the
// same secrets through the *_file keys.
func TestInlineSecretsStayOutOfGeneratedFiles(t *testing.T) {
	o := secretOptions(t, inlineSecretsFile)
	files, dir := generateDir(t, o)
	holders := map[string]bool{k8sSecretFile: true, "kvwatch.yml": true}
	secretModes := map[string]fs.FileMode{k8sSecretFile: 0o600, "kvwatch.yml": 0o600, GrafanaPasswordFile: 0o600}
	for _, f := range files {
		if !holders[f.Path] {
			for k, v := range inlineSecretValues {
				if bytes.Contains(f.Data, []byte(v)) || bytes.Contains(f.Data, []byte(base64.StdEncoding.EncodeToString([]byte(v)))) {
					t.Errorf("%s holds the secret %s", f.Path, k)
				}
			}
		}
		want := fs.FileMode(0o644)
		if m, ok := secretModes[f.Path]; ok {
			want = m
		}
		st, err := os.Stat(filepath.Join(dir, filepath.FromSlash(f.Path)))
		if err != nil {
			t.Fatal(err)
		}
		if f.Mode != want || st.Mode().Perm() != want {
			t.Errorf("%s: mode %v, written %v; want %v", f.Path, f.Mode, st.Mode().Perm(), want)
		}
	}
	if !bytes.Equal(files.Get("kvwatch.yml"), o.ConfigFile) {
		t.Errorf("the stack's kvwatch.yml is not the given config")
	}

	var secret corev1.Secret
	k8sDecode(t, files.Get(k8sSecretFile), "Secret", &secret)
	got := map[string]string{}
	for k, v := range secret.Data {
		got[k] = string(v)
	}
	if diff := cmp.Diff(inlineSecretValues, got); diff != "" {
		t.Errorf("the Secret's data (-want +got):\n%s", diff)
	}
	if secret.Name != k8sSecretName || secret.Type != corev1.SecretTypeOpaque {
		t.Errorf("Secret %s of type %s, want %s, Opaque", secret.Name, secret.Type, k8sSecretName)
	}
	var dep appsv1.Deployment
	k8sDecode(t, files.Get("kubernetes/kvwatch.yaml"), "Deployment", &dep)
	ps := dep.Spec.Template.Spec
	if v := ps.Volumes[0].Projected; v == nil || v.DefaultMode == nil || *v.DefaultMode != 0o440 || ps.SecurityContext.FSGroup == nil || *ps.SecurityContext.FSGroup != 65534 {
		t.Errorf("config volume %+v, pod security %+v: want a projected volume of mode 0440, readable by fsGroup 65534", ps.Volumes[0], ps.SecurityContext)
	}

	// The config the pod reads, with the volume's files in place, loads as
	// serve loads it (every file it names exists) and gives the secrets
	// the original wrote inline.
	local := materialise(t, files)
	if err := os.WriteFile(filepath.Join(local, "idp-client.crt"), nil, 0o600); err != nil { // a file the original names
		t.Fatal(err)
	}
	pod, err := config.Load(filepath.Join(local, "kvwatch.yml"))
	if err != nil {
		t.Fatalf("the pod's kvwatch.yml: %v", err)
	}
	orig, err := config.LoadWithoutFiles(inlineSecretsFile)
	if err != nil {
		t.Fatal(err)
	}
	want := allSecretsOf(t, orig)
	if n := strings.Count(strings.Join(want, "\n"), "s3cret-"); n != len(inlineSecretValues) {
		t.Fatalf("the original config gives %d secrets, want %d: %q", n, len(inlineSecretValues), want)
	}
	if diff := cmp.Diff(want, allSecretsOf(t, pod)); diff != "" {
		t.Errorf("the pod's secrets (-want, the config's +got, the pod's):\n%s", diff)
	}
}

// noFileFormOptions is the stack of a config with secrets that have no
// file form.
func noFileFormOptions(t *testing.T) Options {
	p := filepath.Join(t.TempDir(), "kvwatch.yml")
	if err := os.WriteFile(p, []byte(`targets:
  - url: http://kvwatch:s3cret-url-password@127.0.0.1:30001
  - url: http://127.0.0.1:30002
    basic_auth: {username: kvwatch, password: s3cret-basic}
    proxy_url: http://127.0.0.1:3128
    proxy_connect_header: {Proxy-Authorization: [s3cret-proxy]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return secretOptions(t, p)
}

// TestSecretWithoutFileForm: a secret the config cannot name by file (a
// password in a target URL, a proxy_connect_header) takes the whole
// kvwatch.yml into the Secret; no ConfigMap holds it.
func TestSecretWithoutFileForm(t *testing.T) {
	o := noFileFormOptions(t)
	files, err := Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	warning, err := SecretWarning(o)
	wantWarning := warningHead(3) +
		"  targets[0].url: the URL holds a password or a token; give them with basic_auth.password_file or authorization.credentials_file (kubernetes/secret.yaml then holds the whole kvwatch.yml)\n" +
		"  targets[1].basic_auth.password: write targets[1].basic_auth.password_file: FILE\n" +
		"  targets[1].proxy_connect_header.Proxy-Authorization[0]: cannot be moved to a file (no file form, or white space at its ends, which a file loses); kubernetes/secret.yaml then holds the whole kvwatch.yml\n"
	if diff := cmp.Diff(wantWarning, warning); err != nil || diff != "" {
		t.Errorf("SecretWarning: %v (-want +got):\n%s", err, diff)
	}
	for _, f := range files {
		if f.Path != k8sSecretFile && f.Path != "kvwatch.yml" && bytes.Contains(f.Data, []byte("s3cret-")) {
			t.Errorf("%s holds a secret", f.Path)
		}
	}
	for _, d := range k8sDocs(t, files.Get("kubernetes/kvwatch.yaml")) {
		if bytes.Contains(d, []byte("kind: ConfigMap")) {
			t.Errorf("kubernetes/kvwatch.yaml has a ConfigMap:\n%s", d)
		}
	}
	var secret corev1.Secret
	k8sDecode(t, files.Get(k8sSecretFile), "Secret", &secret)
	wantCfg := `targets:
  - url: http://kvwatch:s3cret-url-password@127.0.0.1:30001
  - url: http://127.0.0.1:30002
    basic_auth: {username: kvwatch, password_file: /etc/kvwatch/secrets/targets.1.basic_auth.password}
    proxy_url: http://127.0.0.1:3128
    proxy_connect_header: {Proxy-Authorization: [s3cret-proxy]}
`
	want := map[string]string{"targets.1.basic_auth.password": "s3cret-basic", "kvwatch.yml": wantCfg}
	got := map[string]string{}
	for k, v := range secret.Data {
		got[k] = string(v)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the Secret's data (-want +got):\n%s", diff)
	}
	local := materialise(t, files)
	b, err := os.ReadFile(filepath.Join(local, "kvwatch.yml"))
	if err != nil || !strings.Contains(string(b), "password_file: "+local+"/secrets/targets.1.basic_auth.password") {
		t.Errorf("the pod's volume has no kvwatch.yml naming its password file: %v\n%s", err, b)
	}
	if c, err := config.Load(filepath.Join(local, "kvwatch.yml")); err != nil || secretsOf(t, c.Targets[1].HTTPClientConfig)[0] != "basic_auth:s3cret-basic" {
		t.Errorf("the pod's kvwatch.yml: %v", err)
	}
}

// warningHead is the first line of SecretWarning for n secrets.
func warningHead(n int) string {
	return fmt.Sprintf("warning: the kvwatch config holds %d secrets inline. ", n) +
		"The Kubernetes manifests keep them in kubernetes/secret.yaml (their ConfigMap names them by file), " +
		"but the stack's kvwatch.yml holds them as written: it is written 0600 and the kvwatch systemd unit reads it as a credential " +
		"(see docs/stack.md, \"Secrets\", for what that changes, and for docker-compose.yml). Put each in a file and name the file instead:\n"
}

// TestSecretWarning: stack generate names every inline secret by its key
// path with the key of its file form, or says why it has none.
func TestSecretWarning(t *testing.T) {
	got, err := SecretWarning(secretOptions(t, inlineSecretsFile))
	if err != nil {
		t.Fatal(err)
	}
	want := warningHead(13) +
		"  targets[0].basic_auth.password: write targets[0].basic_auth.password_file: FILE\n" +
		"  targets[1].bearer_token: write targets[1].bearer_token_file: FILE\n" +
		"  targets[2].authorization.credentials: write targets[2].authorization.credentials_file: FILE\n" +
		"  targets[3].oauth2.client_secret: write targets[3].oauth2.client_secret_file: FILE\n" +
		"  targets[3].oauth2.tls_config.key: write targets[3].oauth2.tls_config.key_file: FILE\n" +
		"  targets[3].tls_config.key: write targets[3].tls_config.key_file: FILE\n" +
		"  targets[4].oauth2.client_certificate_key: write targets[4].oauth2.client_certificate_key_file: FILE\n" +
		"  targets[4].http_headers.X-Api-Key.secrets[0]: list the file under targets[4].http_headers.X-Api-Key.files\n" +
		"  targets[4].http_headers.X-Api-Key.secrets[1]: list the file under targets[4].http_headers.X-Api-Key.files\n" +
		"  file_sd_configs[0].basic_auth.password: write file_sd_configs[0].basic_auth.password_file: FILE\n" +
		"  remote_write[0].basic_auth.password: write remote_write[0].basic_auth.password_file: FILE\n" +
		"  remote_write[1].authorization.credentials: write remote_write[1].authorization.credentials_file: FILE\n" +
		"  remote_write[2].oauth2.client_secret: write remote_write[2].oauth2.client_secret_file: FILE\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SecretWarning (-want +got):\n%s", diff)
	}
	if got, err := SecretWarning(goldenOptions()); got != "" || err != nil {
		t.Errorf("SecretWarning without secrets = %q, %v; want nothing", got, err)
	}
}

// TestInlineSecretsOnDisk: the kvwatch unit of a stack whose kvwatch.yml
// holds secrets reads it as a credential (it is 0600, its dynamic user
// could not open it); install finds the directory there and keeps the
// mode; a stack generated again over one without secrets, or installed
// over an older copy, makes kvwatch.yml 0600 before writing it, and keeps
// the Grafana admin password.
func TestInlineSecretsOnDisk(t *testing.T) {
	o := secretOptions(t, inlineSecretsFile)
	dir := t.TempDir()
	plain := goldenOptions()
	plain.GrafanaAdminPassword = ""
	first, err := Generate(plain)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Write(dir); err != nil {
		t.Fatal(err)
	}
	password, err := os.ReadFile(filepath.Join(dir, GrafanaPasswordFile))
	if err != nil {
		t.Fatal(err)
	}
	files, err := Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := files.Write(dir); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "kvwatch.yml")
	if b, err := os.ReadFile(cfgPath); err != nil || !bytes.Equal(b, o.ConfigFile) {
		t.Errorf("kvwatch.yml after generating again: %v; want the config with secrets", err)
	}
	if mode, err := permOf(cfgPath); err != nil || mode != 0o600 {
		t.Errorf("kvwatch.yml after generating again: %v, mode %v; want 0600", err, mode)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, GrafanaPasswordFile)); !bytes.Equal(b, password) {
		t.Errorf("the Grafana admin password changed when the stack was generated again")
	}

	unit := string(files.Get("systemd/" + UnitKVWatch))
	for _, want := range []string{"\nLoadCredential=kvwatch.yml:/etc/kvwatch/stack/kvwatch.yml\n", " --config.file=%d/kvwatch.yml "} {
		if !strings.Contains(unit, want) {
			t.Errorf("kvwatch.service lacks %q:\n%s", strings.TrimSpace(want), unit)
		}
	}
	if plainUnit := string(first.Get("systemd/" + UnitKVWatch)); strings.Contains(plainUnit, "LoadCredential") ||
		!strings.Contains(plainUnit, " --config.file=/etc/kvwatch/stack/kvwatch.yml ") {
		t.Errorf("kvwatch.service without secrets:\n%s\nwant --config.file=/etc/kvwatch/stack/kvwatch.yml and no credential", plainUnit)
	}

	root := t.TempDir()
	installed := filepath.Join(root, DefaultInstallDir, "kvwatch.yml")
	if err := os.MkdirAll(filepath.Dir(installed), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(installed, o.ConfigFile, 0o644); err != nil { // an older install, same content
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Install(InstallOptions{Dir: dir, Root: root, Out: &out}); err != nil {
		t.Fatal(err)
	}
	if mode, err := permOf(installed); err != nil || mode != 0o600 {
		t.Errorf("installed kvwatch.yml: %v, mode %v; want 0600", err, mode)
	}
	if b, err := os.ReadFile(filepath.Join(root, SystemdDir, UnitKVWatch)); err != nil || string(b) != unit {
		t.Errorf("installed kvwatch.service: %v", err)
	}
}

// permOf returns the permission bits of the file at p.
func permOf(p string) (os.FileMode, error) {
	st, err := os.Stat(p)
	if err != nil {
		return 0, err
	}
	return st.Mode().Perm(), nil
}
