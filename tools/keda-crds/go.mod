// keda-crds pins the KEDA release whose CRDs (config/crd/bases in its module
// zip) the generated ScaledObjects are validated against:
// tools/kubectl-validate/build.sh downloads this module and copies them
// next to the Prometheus Operator CRDs. Nothing is built from it, so it
// holds no package and no other requirement.
module github.com/kvwatch/kvwatch/tools/keda-crds

go 1.26.8

require github.com/kedacore/keda/v2 v2.21.0
