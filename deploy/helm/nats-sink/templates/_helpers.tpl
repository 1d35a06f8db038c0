{{/*
Names, labels, the effective nats-sink config and the checks every template shares.
*/}}

{{/* The chart's name, or nameOverride. */}}
{{- define "nats-sink.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Object names: fullnameOverride, or the release name (prefixed with the chart's name when it does not contain it). */}}
{{- define "nats-sink.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "nats-sink.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" $name .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The labels selecting this release's pods (never change them on an installed release). */}}
{{- define "nats-sink.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nats-sink.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "nats-sink.labels" -}}
{{ include "nats-sink.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: {{ include "nats-sink.sinkType" . | replace "_" "-" }}
app.kubernetes.io/part-of: nats-sinks
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{/* The ServiceAccount the pods run as. */}}
{{- define "nats-sink.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "nats-sink.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
The effective nats-sink config as JSON: `config` with `sink` built from sink.type and
sink.settings (unless `config` has its own `sink`), and the metrics listener the probes use.
Fails with a message naming the value when the config cannot be built.
*/}}
{{- define "nats-sink.config" -}}
{{- $config := deepCopy .Values.config -}}
{{- if hasKey $config "sink" -}}
{{- if .Values.sink.type -}}
{{- fail "set either sink.type (with sink.settings) or a whole config with config.sink, not both" -}}
{{- end -}}
{{- else -}}
{{- if not .Values.sink.type -}}
{{- fail "sink.type is required: file, mysql, http, s3, spool, coherence, oracle_nosql or oracle (or a whole config with config.sink)" -}}
{{- end -}}
{{- if hasKey (.Values.sink.settings | default dict) "type" -}}
{{- fail "sink.settings must not contain type: set sink.type" -}}
{{- end -}}
{{- $_ := set $config "sink" (merge (dict "type" .Values.sink.type) (deepCopy (.Values.sink.settings | default dict))) -}}
{{- end -}}
{{- if not $config.nats -}}
{{- fail "config.nats is required (url, stream, consumer, subject: docs/configuration.md)" -}}
{{- end -}}
{{- $listen := printf "0.0.0.0:%d" (int .Values.metrics.port) -}}
{{- $_ := set $config "metrics" (merge (dict "enabled" true "listen" $listen) (deepCopy ($config.metrics | default dict))) -}}
{{- toJson $config -}}
{{- end -}}

{{/* The sink's type, from the effective config. */}}
{{- define "nats-sink.sinkType" -}}
{{- $config := include "nats-sink.config" . | fromJson -}}
{{- $config.sink.type | default "" -}}
{{- end -}}

{{/*
The container image: image.name, or the sink's slim image <repository>-<feature> (the
feature is the sink type; `nosql` for oracle_nosql), with image.tag or appVersion.
*/}}
{{- define "nats-sink.image" -}}
{{- $type := include "nats-sink.sinkType" . -}}
{{- $features := dict "file" "file" "mysql" "mysql" "http" "http" "s3" "s3" "spool" "spool" "coherence" "coherence" "oracle_nosql" "nosql" "oracle" "oracle" "review_package" "review_package" -}}
{{- $name := .Values.image.name -}}
{{- if not $name -}}
{{- if not (hasKey $features $type) -}}
{{- fail (printf "sink type %q has no slim image: set image.name to an image built with the sinks it needs" $type) -}}
{{- end -}}
{{- $name = printf "%s-%s" .Values.image.repository (get $features $type) -}}
{{- end -}}
{{- printf "%s:%s" $name (.Values.image.tag | default .Chart.AppVersion | toString) -}}
{{- end -}}

{{/*
Checks of values that would render valid objects but a pod that cannot work: the grace
period against the stop budget, and the file, spool and review package sinks' directory
against the volume.
*/}}
{{- define "nats-sink.checks" -}}
{{- $config := include "nats-sink.config" . | fromJson -}}
{{- $cm := $config.consumer_management | default dict -}}
{{- $ackWait := $cm.ack_wait_seconds | default 30 -}}
{{- $drain := $config.nats.drain_timeout_seconds | default 30 -}}
{{- $budget := add (ceil (mulf $ackWait 0.8)) $drain -}}
{{- if lt (int .Values.terminationGracePeriodSeconds) (int $budget) -}}
{{- fail (printf "terminationGracePeriodSeconds %v is below the stop budget of %v s (80 %% of the ack wait plus nats.drain_timeout_seconds)" .Values.terminationGracePeriodSeconds $budget) -}}
{{- end -}}
{{- $type := $config.sink.type | default "" -}}
{{- if has $type (list "file" "spool" "review_package") -}}
{{- $dir := $config.sink.directory | default "" | toString -}}
{{- $mount := .Values.persistence.mountPath | trimSuffix "/" -}}
{{- if not .Values.persistence.enabled -}}
{{- fail (printf "the %s sink writes to sink.directory: set persistence.enabled (the root filesystem is read-only)" $type) -}}
{{- end -}}
{{- if not (or (eq $dir $mount) (hasPrefix (printf "%s/" $mount) $dir)) -}}
{{- fail (printf "sink.directory %q is outside persistence.mountPath %q" $dir $mount) -}}
{{- end -}}
{{- end -}}
{{- end -}}
