//go:build tools

// Package tools pins nfpm, the .deb builder of `make package`.
package tools

import _ "github.com/goreleaser/nfpm/v2/cmd/nfpm"
