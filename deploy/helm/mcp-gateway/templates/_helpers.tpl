{{/* Name of the chart (app.kubernetes.io/name, app.kubernetes.io/part-of). */}}
{{- define "mcp-gateway.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Base name of every object: the release name when it contains the chart name (a release named
mcp-gateway gives the same names as the kustomize base), else <release>-<chart>. */}}
{{- define "mcp-gateway.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "mcp-gateway.routerName" -}}
{{- printf "%s-router" (include "mcp-gateway.fullname" .) | trunc 52 | trimSuffix "-" }}
{{- end }}

{{- define "mcp-gateway.secretName" -}}
{{- default (printf "%s-secrets" (include "mcp-gateway.fullname" .)) .Values.secret.name }}
{{- end }}

{{/* Selector labels of one component (gateway | router): the kustomize base's labels plus the
release, so that two releases in one namespace do not select each other's pods. */}}
{{- define "mcp-gateway.selectorLabels" -}}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/name: {{ include "mcp-gateway.name" .root }}
app.kubernetes.io/part-of: {{ include "mcp-gateway.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end }}

{{- define "mcp-gateway.labels" -}}
{{ include "mcp-gateway.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{- end }}

{{/* gateway.yaml as given: .Values.config, or the base's file. */}}
{{- define "mcp-gateway.configSource" -}}
{{- if .Values.config }}{{ .Values.config }}{{ else }}{{ .Files.Get "files/gateway.yaml" }}{{ end }}
{{- end }}

{{/* gateway.yaml as served: the source, plus a `state:` section with .Values.state.store when that
is set. Appended as text (not re-serialized) so the file keeps its comments and order. A config
that already has a `state:` section must carry the store itself: two sources would disagree. */}}
{{- define "mcp-gateway.config" -}}
{{- $source := include "mcp-gateway.configSource" . }}
{{- if .Values.state.store }}
{{- $parsed := fromYaml $source }}
{{- if hasKey $parsed "state" }}
{{- fail (printf "config has a state: section and state.store is set too (%s): set the store in one place (in the config's state: section, or only state.store)" .Values.state.store) }}
{{- end }}
{{- printf "%s\n# Added by the Helm chart from the value state.store.\nstate:\n  store: %s\n" (trimSuffix "\n" $source) (.Values.state.store | quote) }}
{{- else }}
{{- $source }}
{{- end }}
{{- end }}

{{/* The store replicas share sessions and routing through (gateway.yaml's state.store, after
.Values.state.store is applied): "memory" means nothing is shared. */}}
{{- define "mcp-gateway.stateStore" -}}
{{- $parsed := fromYaml (include "mcp-gateway.configSource" .) }}
{{- default (dig "state" "store" "memory" $parsed) .Values.state.store }}
{{- end }}

{{/* "true" when the sticky router is deployed. router.enabled: auto (the default) deploys it only
when sessions live in one process (state store memory): with a shared store any replica serves
any request, so the Service selects the gateway pods directly. */}}
{{- define "mcp-gateway.routerEnabled" -}}
{{- if eq (toString .Values.router.enabled) "auto" }}
{{- if eq (include "mcp-gateway.stateStore" .) "memory" }}true{{ end }}
{{- else if .Values.router.enabled }}true
{{- end }}
{{- end }}

{{/* True when the Prometheus Operator's API is served (or passed with --api-versions). */}}
{{- define "mcp-gateway.hasMonitoringApi" -}}
{{- if .Capabilities.APIVersions.Has "monitoring.coreos.com/v1" }}true{{ end }}
{{- end }}
