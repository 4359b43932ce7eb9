// Command image writes kvwatch's container image as a tarball (the format
// of `docker save`, which docker load, podman load, skopeo and crane read)
// without a container engine: one layer holding the static kvwatch binary
// at /usr/bin/kvwatch (and, when given, a CA bundle for HTTPS scrapes), run
// as its entrypoint by the non-root user 65534 (nobody), with the
// org.opencontainers.image labels. `make image` runs it; docs/kubernetes.md.
//
//	go run . --binary dist/image/kvwatch --ref ghcr.io/kvwatch/kvwatch:v1.2.3 \
//	  --version v1.2.3 --revision abc1234 --created 2026-01-02T03:04:05Z --out dist/kvwatch-image.tar
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// User is the image's user: nobody, as the Kubernetes manifests' runAsUser.
const User = "65534:65534"

type options struct {
	binary, caBundle, ref, out       string
	version, revision, created, arch string
}

func main() {
	var o options
	flag.StringVar(&o.binary, "binary", "", "the static kvwatch binary (CGO_ENABLED=0) to run as the entrypoint")
	flag.StringVar(&o.caBundle, "ca-certificates", "", "a CA bundle to install as /etc/ssl/certs/ca-certificates.crt (optional)")
	flag.StringVar(&o.ref, "ref", "", "the image's name and tag, e.g. ghcr.io/kvwatch/kvwatch:v1.2.3")
	flag.StringVar(&o.out, "out", "", "the tarball to write")
	flag.StringVar(&o.version, "version", "", "kvwatch's version (label org.opencontainers.image.version)")
	flag.StringVar(&o.revision, "revision", "", "the commit (label org.opencontainers.image.revision)")
	flag.StringVar(&o.created, "created", "", "RFC 3339 time of the image and its files, e.g. the commit's (label org.opencontainers.image.created)")
	flag.StringVar(&o.arch, "arch", runtime.GOARCH, "the binary's GOARCH")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.binary == "" || o.ref == "" || o.out == "" || o.version == "" || o.created == "" {
		return errors.New("--binary, --ref, --out, --version and --created are required")
	}
	ref, err := name.NewTag(o.ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("--ref %q: want REPOSITORY:TAG: %w", o.ref, err)
	}
	created, err := time.Parse(time.RFC3339, o.created)
	if err != nil {
		return fmt.Errorf("--created %q: want an RFC 3339 time: %w", o.created, err)
	}
	files := []file{{path: "usr/bin/kvwatch", src: o.binary, mode: 0o755}}
	if o.caBundle != "" {
		files = append(files, file{path: "etc/ssl/certs/ca-certificates.crt", src: o.caBundle, mode: 0o644})
	}
	layerTar, err := layer(files, created)
	if err != nil {
		return err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerTar)), nil })
	if err != nil {
		return fmt.Errorf("layer: %w", err)
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: l, History: v1.History{
		Created: v1.Time{Time: created}, CreatedBy: "kvwatch tools/image: /usr/bin/kvwatch", Comment: o.version}})
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return fmt.Errorf("image config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", o.arch, v1.Time{Time: created}
	cf.Config.User = User
	cf.Config.Entrypoint = []string{"/usr/bin/kvwatch"}
	// As the Dockerfile: serve with the config the Kubernetes manifests mount.
	cf.Config.Cmd = []string{"serve", "--config.file=/etc/kvwatch/kvwatch.yml"}
	cf.Config.WorkingDir = "/"
	cf.Config.ExposedPorts = map[string]struct{}{"9477/tcp": {}}
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.title":       "kvwatch",
		"org.opencontainers.image.description": "KV-cache observability for LLM inference servers",
		"org.opencontainers.image.version":     o.version,
		"org.opencontainers.image.revision":    o.revision,
		"org.opencontainers.image.created":     created.UTC().Format(time.RFC3339),
		"org.opencontainers.image.source":      "https://github.com/kvwatch/kvwatch",
		"org.opencontainers.image.ref.name":    ref.TagStr(),
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return fmt.Errorf("image config: %w", err)
	}
	if err := tarball.WriteToFile(o.out, ref, img); err != nil {
		return fmt.Errorf("write %s: %w", o.out, err)
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s: %s (%s)\n", o.out, ref, d)
	return nil
}

type file struct {
	path, src string
	mode      int64
}

// layer returns an uncompressed tar of files and their parent
// directories, owned by root, with the times set to created, so the same
// inputs make the same layer.
func layer(files []file, created time.Time) ([]byte, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	dirs := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f.src)
		if err != nil {
			return nil, fmt.Errorf("layer: %w", err)
		}
		for _, d := range parents(f.path) {
			if dirs[d] {
				continue
			}
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: created, Format: tar.FormatPAX}); err != nil {
				return nil, err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.path, Mode: f.mode, Size: int64(len(data)), ModTime: created, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// parents returns the directories above p, outermost first: usr/bin/kvwatch
// gives usr and usr/bin.
func parents(p string) []string {
	var out []string
	for i := 0; i < len(p); i++ {
		if p[i] == '/' {
			out = append(out, p[:i])
		}
	}
	return out
}
