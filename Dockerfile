# kvwatch container image: the static binary on a distroless, non-root base.
#
#   docker build -t kvwatch:local --build-arg VERSION=$(git describe --tags --always --dirty) .
#   docker run --rm --network host -v "$PWD/kvwatch.yml:/etc/kvwatch/kvwatch.yml:ro" kvwatch:local
#
# NOT built or tested in this repository's CI: no container engine runs on
# the machines that test kvwatch (docs/installation.md); `make image` builds
# and tests an image of the static binary without one (docs/kubernetes.md).
# No image is published; push what you build and pass it to the Helm chart
# or `kvwatch stack generate --kubernetes.image`. The generated
# docker-compose.yml needs no image: it mounts the host's binary.

# uPlot for the web UI, from npm, as `make assets` does.
FROM node:22-bookworm-slim AS assets
WORKDIR /src/web
COPY web/package.json web/package-lock.json ./
RUN npm ci --no-audit --no-fund

FROM golang:1.26.8-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
COPY --from=assets /src/web/node_modules/uplot/dist/uPlot.iife.min.js /src/web/node_modules/uplot/dist/uPlot.min.css internal/web/static/vendor/
ARG VERSION=dev
ARG REVISION=unknown
ARG BUILD_DATE=unknown
RUN CGO_ENABLED=0 go build -trimpath -o /out/kvwatch \
      -ldflags "-s -w \
        -X github.com/prometheus/common/version.Version=${VERSION} \
        -X github.com/prometheus/common/version.Revision=${REVISION} \
        -X github.com/prometheus/common/version.BuildUser=docker \
        -X github.com/prometheus/common/version.BuildDate=${BUILD_DATE}" \
      ./cmd/kvwatch

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/kvwatch /usr/bin/kvwatch
USER nonroot:nonroot
EXPOSE 9477
ENTRYPOINT ["/usr/bin/kvwatch"]
# serve listens on loopback unless told otherwise: with --network host that
# is the host's loopback; elsewhere pass --web.listen-address=:9477 with
# --web.config.file (TLS, basic auth) or --web.insecure-listen.
CMD ["serve", "--config.file=/etc/kvwatch/kvwatch.yml"]
