// image: builds kvwatch's container image without a container engine
// (`make image`, docs/kubernetes.md). A module of its own so that
// go-containerregistry's dependencies stay out of kvwatch's go.mod.
module github.com/kvwatch/kvwatch/tools/image

go 1.26.8

require github.com/google/go-containerregistry v0.22.1

require (
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
)
