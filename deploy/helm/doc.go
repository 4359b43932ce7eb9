// Package helm holds no code: its tests render the Helm chart in
// deploy/helm/kvwatch with `helm template` (Helm built from its Go module by
// tools/helm/build.sh) for several values files, validate the output with
// kubectl-validate against Kubernetes' schemas and the Prometheus Operator's
// CRDs, compare it with the manifests `kvwatch stack generate` writes, and
// check that the chart's generated files are current (docs/kubernetes.md).
package helm
