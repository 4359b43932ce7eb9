package packaging

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/testenv"
)

// imageVersion is the version `make image` is given: a "+" is no tag
// character, so the tag has "-" there (stack.ImageTag and the Makefile's
// IMAGE_TAG both).
const (
	imageVersion = "v0.0.0-imagetest+5"
	imageRef     = "ghcr.io/kvwatch/kvwatch:v0.0.0-imagetest-5"
)

// readTar returns the regular files of a tar stream (gzip-compressed or
// not) by name, with their headers.
func readTar(t *testing.T, r io.Reader) (map[string][]byte, map[string]*tar.Header) {
	t.Helper()
	br := bufio.NewReader(r)
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	} else {
		r = br
	}
	files, headers := map[string][]byte{}, map[string]*tar.Header{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, headers
		}
		if err != nil {
			t.Fatal(err)
		}
		headers[h.Name] = h
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = b
		}
	}
}

// TestImage (issue 27): `make image` writes dist/kvwatch-image.tar without
// a container engine. Read back with archive/tar as a registry or
// `docker load` would: its one tag, a config running the entrypoint as
// user 65534 with the OCI labels, and one layer whose entrypoint is the
// static kvwatch binary of that version; run from the unpacked layer it
// prints the version, and the manifests it generates default to the very
// image. `make chart` of the same version defaults to it as well.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kvwatch and the image; skipped with -short")
	}
	mk := tool(t, "make", "make")
	cmd(t, "", true, mk, "-s", "image", "VERSION="+imageVersion)
	f, err := os.Open("../dist/kvwatch-image.tar")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	archive, _ := readTar(t, f)

	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(archive["manifest.json"], &manifest); err != nil {
		t.Fatalf("manifest.json: %v\n%s", err, archive["manifest.json"])
	}
	if len(manifest) != 1 || len(manifest[0].RepoTags) != 1 || manifest[0].RepoTags[0] != imageRef || len(manifest[0].Layers) != 1 {
		t.Fatalf("manifest.json %+v, want one image tagged %s with one layer", manifest, imageRef)
	}
	var cfg struct {
		OS, Architecture string
		Config           struct {
			User       string
			Entrypoint []string
			Cmd        []string
			Labels     map[string]string
		}
	}
	if err := json.Unmarshal(archive[manifest[0].Config], &cfg); err != nil {
		t.Fatalf("config %s: %v", manifest[0].Config, err)
	}
	if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cfg.OS, cfg.Architecture, runtime.GOARCH)
	}
	if cfg.Config.User != "65534:65534" {
		t.Errorf("user %q, want 65534:65534 (nobody, not root)", cfg.Config.User)
	}
	if len(cfg.Config.Entrypoint) != 1 || strings.Join(cfg.Config.Cmd, " ") != "serve --config.file=/etc/kvwatch/kvwatch.yml" {
		t.Fatalf("entrypoint %q, cmd %q, want the binary, then serve with the mounted config", cfg.Config.Entrypoint, cfg.Config.Cmd)
	}
	revision := strings.TrimSpace(cmd(t, "", false, tool(t, "git", "git"), "rev-parse", "HEAD"))
	for k, want := range map[string]string{
		"org.opencontainers.image.title":    "kvwatch",
		"org.opencontainers.image.version":  imageVersion,
		"org.opencontainers.image.revision": revision,
		"org.opencontainers.image.source":   "https://github.com/kvwatch/kvwatch",
		"org.opencontainers.image.ref.name": "v0.0.0-imagetest-5",
	} {
		if got := cfg.Config.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	if cfg.Config.Labels["org.opencontainers.image.created"] == "" {
		t.Error("no org.opencontainers.image.created label")
	}

	files, headers := readTar(t, bytes.NewReader(archive[manifest[0].Layers[0]]))
	entry := strings.TrimPrefix(path.Clean(cfg.Config.Entrypoint[0]), "/")
	bin, h := files[entry], headers[entry]
	if bin == nil {
		t.Fatalf("the layer has no %s (entrypoint %s); it has %d files", entry, cfg.Config.Entrypoint[0], len(files))
	}
	if h.Mode&0o111 == 0 || h.Uid != 0 {
		t.Errorf("%s: mode %o, owner %d, want executable and owned by root", entry, h.Mode, h.Uid)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "kvwatch")
	if err := os.WriteFile(p, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	ef, err := elf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, prog := range ef.Progs {
		if prog.Type == elf.PT_INTERP {
			t.Errorf("%s has a dynamic loader: want a static binary (CGO_ENABLED=0)", entry)
		}
	}
	ef.Close()
	out, err := exec.Command(p, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "kvwatch, version "+imageVersion+" (") {
		t.Errorf("%s --version: %v\n%s\nwant kvwatch, version %s", entry, err, out, imageVersion)
	}
	// The manifests this binary generates run this image.
	stackDir := filepath.Join(dir, "stack")
	if out, err := exec.Command(p, "stack", "generate", "--out", stackDir).CombinedOutput(); err != nil {
		t.Fatalf("stack generate: %v\n%s", err, out)
	}
	manifests, err := os.ReadFile(filepath.Join(stackDir, "kubernetes", "kvwatch.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(manifests), "\n        image: "+imageRef+"\n") {
		t.Errorf("the image's kvwatch generates a Deployment not running %s:\n%s", imageRef, manifests)
	}

	// So does the chart `make chart` packages from the same checkout.
	helm := testenv.Helm(t)
	cmd(t, "", true, mk, "-s", "chart", "VERSION="+imageVersion, "HELM="+helm)
	rendered := cmd(t, "", false, helm, "template", "kvwatch", "dist/kvwatch-0.1.0.tgz", "--namespace", "monitoring")
	if !strings.Contains(rendered, "\n          image: \""+imageRef+"\"\n") {
		t.Errorf("make chart's chart does not default to %s:\n%s", imageRef, rendered)
	}
}

// TestImagePush: `make image-push` puts the image into a registry (crane's
// own, serving on loopback) under IMAGE_REPOSITORY:<the version's tag>,
// from where it comes back with its labels.
func TestImagePush(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kvwatch and the image; skipped with -short")
	}
	mk := tool(t, "make", "make")
	crane := filepath.Join(t.TempDir(), "crane")
	cmd(t, "../tools/image", true, "go", "build", "-o", crane, "github.com/google/go-containerregistry/cmd/crane")
	addr := testenv.FreeAddr(t)
	testenv.Start(t, filepath.Join(t.TempDir(), "registry.log"), crane, "registry", "serve", "--address", addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	testenv.WaitOK(ctx, t, "http://"+addr+"/v2/")

	repo := addr + "/inference/kvwatch"
	cmd(t, "", true, mk, "-s", "image-push", "VERSION="+imageVersion, "IMAGE_REPOSITORY="+repo)
	var cfg struct {
		Config struct{ Labels map[string]string }
	}
	raw := cmd(t, "", false, crane, "config", repo+":v0.0.0-imagetest-5")
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatalf("crane config: %v\n%s", err, raw)
	}
	if v := cfg.Config.Labels["org.opencontainers.image.version"]; v != imageVersion {
		t.Errorf("the pushed image's version label %q, want %q", v, imageVersion)
	}
}
