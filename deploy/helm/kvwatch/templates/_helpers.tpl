{{/* The release's full name: the release name, with -kvwatch unless it says kvwatch already. */}}
{{- define "kvwatch.fullname" -}}
{{- if contains "kvwatch" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-kvwatch" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The pod's labels that selectors use; never changed by values (a Deployment's selector is immutable). */}}
{{- define "kvwatch.selectorLabels" -}}
app.kubernetes.io/name: kvwatch
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The labels of every object. */}}
{{- define "kvwatch.labels" -}}
{{ include "kvwatch.selectorLabels" . }}
app.kubernetes.io/version: {{ include "kvwatch.tag" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The labels of objects the Prometheus Operator or Grafana selects. */}}
{{- define "kvwatch.monitoringLabels" -}}
{{ include "kvwatch.labels" . }}
{{- with .Values.monitoringLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "kvwatch.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kvwatch.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The image's tag: image.tag, or the chart's appVersion; never latest. */}}
{{- define "kvwatch.tag" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion | toString -}}
{{- if eq $tag "latest" -}}
{{- fail "image.tag latest: pin a version (image.tag, default the chart's appVersion) or a digest (image.digest)" -}}
{{- end -}}
{{- $tag -}}
{{- end -}}

{{/* The image reference: repository@digest, or repository:tag. */}}
{{- define "kvwatch.image" -}}
{{- if .Values.image.digest -}}
{{- if not (regexMatch "^sha256:[0-9a-f]{64}$" .Values.image.digest) -}}
{{- fail (printf "image.digest %q: want sha256: and 64 hex digits" .Values.image.digest) -}}
{{- end -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (include "kvwatch.tag" .) -}}
{{- end -}}
{{- end -}}

{{/*
kvwatch.documents: the objects of a file in files/ (written by `kvwatch stack
generate`), as a YAML list. Arguments: a list of the root context and the
file's path.
*/}}
{{- define "kvwatch.documents" -}}
{{- $root := index . 0 -}}
{{- $path := index . 1 -}}
{{- $text := $root.Files.Get $path -}}
{{- if not $text -}}
{{- fail (printf "%s is missing from the chart: run make chart-files" $path) -}}
{{- end -}}
{{- $docs := list -}}
{{- range $doc := regexSplit "(?m)^---$" $text -1 -}}
{{- $obj := fromYaml $doc -}}
{{- if hasKey $obj "Error" -}}
{{- fail (printf "%s: %s" $path $obj.Error) -}}
{{- end -}}
{{- if $obj -}}
{{- $docs = append $docs $obj -}}
{{- end -}}
{{- end -}}
{{- toYaml $docs -}}
{{- end -}}

{{/*
kvwatch.generated: one object of a file in files/ with the release's
namespace, the release's labels (and the generated labels other than the
name), and the release's full name in place of the generated name's
leading "kvwatch". Arguments: a list of the root context and the object.
*/}}
{{- define "kvwatch.generated" -}}
{{- $root := index . 0 -}}
{{- $obj := index . 1 -}}
{{- $name := printf "%s%s" (include "kvwatch.fullname" $root) (trimPrefix "kvwatch" $obj.metadata.name) | trunc 63 | trimSuffix "-" -}}
{{- $labels := include "kvwatch.monitoringLabels" $root | fromYaml -}}
{{- range $k, $v := $obj.metadata.labels -}}
{{- if ne $k "app.kubernetes.io/name" -}}
{{- $_ := set $labels $k $v -}}
{{- end -}}
{{- end -}}
{{- $_ := set $obj "metadata" (dict "name" $name "namespace" $root.Release.Namespace "labels" $labels) -}}
{{- toYaml $obj -}}
{{- end -}}
