// Package packaging holds no code: its tests build kvwatch's Debian package
// with `make package` and install, verify and remove it (see
// docs/installation.md), and build the container image with `make image`
// and the chart with `make chart` and check what they hold
// (docs/kubernetes.md). The package's files are packaging/nfpm.yaml and
// packaging/scripts; the image's builder is tools/image.
package packaging
