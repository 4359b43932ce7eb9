package stack

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kvwatch/kvwatch/internal/config"
)

// The secrets of kvwatch's config in the stack (issue 31 item 4): written
// inline in the config, they were copied into the Kubernetes ConfigMap and a
// world-readable kvwatch.yml. The Kubernetes manifests keep them in a
// Secret, mounted as files that the ConfigMap's kvwatch.yml names through
// the *_file keys; the stack's own kvwatch.yml (systemd, compose) keeps them
// but is written 0600, and SecretWarning names each with how to move it to
// a file.
const (
	k8sConfigDir   = "/etc/kvwatch"    // where the pod mounts its config
	k8sSecretsDir  = "secrets"         // the secrets' files, under k8sConfigDir
	k8sSecretName  = "kvwatch-secrets" // the Secret holding them
	k8sSecretFile  = "kubernetes/secret.yaml"
	configFileName = "kvwatch.yml"
)

// configSecrets are the inline secrets of the config file copied into the
// stack.
func configSecrets(o Options) ([]config.InlineSecret, error) {
	if o.ConfigFile == nil {
		return nil, nil
	}
	s, err := config.InlineSecrets(o.ConfigFile)
	if err != nil {
		return nil, fmt.Errorf("kvwatch config: %w", err)
	}
	return s, nil
}

// configMode is the mode of the stack's kvwatch.yml: 0600 while it holds a
// secret.
func configMode(secrets []config.InlineSecret) fs.FileMode {
	if len(secrets) > 0 {
		return 0o600
	}
	return 0o644
}

// k8sConfig is the kvwatch config of the Kubernetes manifests.
type k8sConfig struct {
	// file is kvwatch.yml, each secret with a file form named by its file.
	file []byte
	// data is the Secret's: each such secret under its key (and kvwatch.yml
	// itself when inSecret); empty when the config holds no secret.
	data map[string][]byte
	// items mount the Secret's keys under k8sConfigDir.
	items []corev1.KeyToPath
	// inSecret: kvwatch.yml holds a secret that has no file form (a
	// password in a URL, a proxy_connect_header), so it is in the Secret,
	// not in the ConfigMap.
	inSecret bool
}

var k8sKeyBad = regexp.MustCompile(`[^-._a-zA-Z0-9]+`)

// kubernetesConfig moves the config's inline secrets into the Secret's data.
func kubernetesConfig(o Options, secrets []config.InlineSecret) (k8sConfig, error) {
	cfg, err := kvwatchConfig(o)
	if err != nil || len(secrets) == 0 {
		return k8sConfig{file: cfg}, err
	}
	k := k8sConfig{data: map[string][]byte{}}
	keys := map[string]string{} // secret path → its key
	for _, s := range secrets {
		if s.FileKey == "" {
			k.inSecret = true
			continue
		}
		key := k8sKeyBad.ReplaceAllString(strings.NewReplacer("[", ".", "]", "").Replace(s.Path), "-")
		for n := 2; k.data[key] != nil || len(validation.IsConfigMapKey(key)) > 0; n++ {
			key = fmt.Sprintf("secret-%d", n) // a path no key can be made of, or taken
		}
		keys[s.Path] = key
		k.data[key] = []byte(s.Value)
		k.items = append(k.items, corev1.KeyToPath{Key: key, Path: path.Join(k8sSecretsDir, key)})
	}
	k.file, err = config.MoveInlineSecrets(cfg, func(s config.InlineSecret) string {
		return path.Join(k8sConfigDir, k8sSecretsDir, keys[s.Path])
	})
	if err != nil {
		return k8sConfig{}, fmt.Errorf("kvwatch config: %w", err)
	}
	if k.inSecret {
		k.data[configFileName] = k.file
		k.items = append(k.items, corev1.KeyToPath{Key: configFileName, Path: configFileName})
	}
	return k, nil
}

// SecretWarning is what `stack generate` says on stderr about the inline
// secrets of o.ConfigFile: each by its key path with how to move it to a
// file; "" when there are none.
func SecretWarning(o Options) (string, error) {
	secrets, err := configSecrets(o)
	if err != nil || len(secrets) == 0 {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "warning: the kvwatch config holds %d secrets inline. The Kubernetes manifests keep them in %s (their ConfigMap names them by file), "+
		"but the stack's %s holds them as written: it is written 0600 and the kvwatch systemd unit reads it as a credential "+
		"(see docs/stack.md, \"Secrets\", for what that changes, and for docker-compose.yml). Put each in a file and name the file instead:\n",
		len(secrets), k8sSecretFile, configFileName)
	for _, s := range secrets {
		switch {
		case s.FileKey == "files":
			fmt.Fprintf(&b, "  %s: list the file under %s\n", s.Path, s.FilePath())
		case s.FileKey != "":
			fmt.Fprintf(&b, "  %s: write %s: FILE\n", s.Path, s.FilePath())
		case s.URL:
			fmt.Fprintf(&b, "  %s: the URL holds a password or a token; give them with basic_auth.password_file or authorization.credentials_file (%s then holds the whole %s)\n",
				s.Path, k8sSecretFile, configFileName)
		default:
			fmt.Fprintf(&b, "  %s: cannot be moved to a file (no file form, or white space at its ends, which a file loses); %s then holds the whole %s\n",
				s.Path, k8sSecretFile, configFileName)
		}
	}
	return b.String(), nil
}
