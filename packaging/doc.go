// Package packaging holds no code: its test builds kvwatch's Debian package
// with `make package` and installs, verifies and removes it (see
// docs/installation.md). The package's files are packaging/nfpm.yaml and
// packaging/scripts.
package packaging
