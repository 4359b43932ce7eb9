// The Kubernetes tools of the manifest and chart tests, built from their Go
// modules by tools/kubectl-validate/build.sh and tools/helm/build.sh
// (`make kubectl-validate`, `make helm`).

package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// KubectlValidate returns the kubectl-validate binary and the directory of
// the Prometheus Operator CRDs that tools/kubectl-validate/build.sh made:
// in $KVWATCH_KUBECTL_VALIDATE_DIR, or bin/kubectl-validate at the repo root.
func KubectlValidate(t testing.TB) (bin, crds string) {
	t.Helper()
	d := builtTool(t, "KVWATCH_KUBECTL_VALIDATE_DIR", filepath.Join("bin", "kubectl-validate"))
	crds = filepath.Join(d, "crds")
	if _, err := os.Stat(crds); err != nil {
		missing(t, "kubectl-validate not built in "+d+"; run `make kubectl-validate` (tools/kubectl-validate/build.sh)")
	}
	return filepath.Join(d, "kubectl-validate"), crds
}

// Helm returns the helm binary tools/helm/build.sh made: $KVWATCH_HELM, or
// bin/helm/helm at the repo root.
func Helm(t testing.TB) string {
	t.Helper()
	p := os.Getenv("KVWATCH_HELM")
	if p == "" {
		p = filepath.Join(builtTool(t, "", filepath.Join("bin", "helm")), "helm")
	}
	if st, err := os.Stat(p); err != nil || st.IsDir() {
		missing(t, "helm not built at "+p+"; run `make helm` (tools/helm/build.sh)")
	}
	return p
}

// builtTool returns $env, or rel under the repo root (the directory of
// kvwatch's go.mod above the test's working directory), as an absolute path.
func builtTool(t testing.TB, env, rel string) string {
	t.Helper()
	if env != "" {
		if d := os.Getenv(env); d != "" {
			abs, err := filepath.Abs(d)
			if err != nil {
				t.Fatal(err)
			}
			return abs
		}
	}
	return filepath.Join(RepoRoot(t), rel)
}

// RepoRoot returns the repository root: the nearest directory at or above
// the test's working directory that holds go.mod.
func RepoRoot(t testing.TB) string {
	t.Helper()
	d, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		up := filepath.Dir(d)
		if up == d {
			t.Fatal("no go.mod above the test's directory")
		}
		d = up
	}
}
