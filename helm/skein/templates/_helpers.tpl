{{/* Names, labels and the values every component shares. */}}

{{- define "skein.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "skein.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "skein.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "skein.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: skein
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component: (dict "root" $ "component" "broker"). */}}
{{- define "skein.selectorLabels" -}}
app.kubernetes.io/name: {{ include "skein.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "skein.componentLabels" -}}
{{ include "skein.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "skein.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "skein.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "skein.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "skein.broker.fullname" -}}{{ include "skein.fullname" . }}-broker{{- end -}}
{{- define "skein.broker.headless" -}}{{ include "skein.fullname" . }}-broker-headless{{- end -}}
{{- define "skein.controlPlane.fullname" -}}{{ include "skein.fullname" . }}-control-plane{{- end -}}
{{- define "skein.gateway.fullname" -}}{{ include "skein.fullname" . }}-gateway{{- end -}}
{{- define "skein.postgresql.fullname" -}}{{ include "skein.fullname" . }}-postgresql{{- end -}}

{{/* The controller's gRPC address, as brokers and gateways dial it: the control plane's
headless Service, whose name resolves to every replica (they try each until the one holding
the lease answers). */}}
{{- define "skein.controllerUrl" -}}
{{- printf "%s://%s-headless.%s.svc:%d" (ternary "https" "http" .Values.tls.enabled) (include "skein.controlPlane.fullname" .) .Release.Namespace (int .Values.controlPlane.ports.controller) -}}
{{- end -}}

{{/* The Secret the chart keeps generated keys in. */}}
{{- define "skein.generatedSecret" -}}{{ include "skein.fullname" . }}-generated{{- end -}}

{{- define "skein.controllerSecret.name" -}}
{{- default (include "skein.generatedSecret" .) .Values.controllerSecret.existingSecret -}}
{{- end -}}
{{- define "skein.controllerSecret.key" -}}
{{- if .Values.controllerSecret.existingSecret }}{{ .Values.controllerSecret.key }}{{ else }}controller-secret{{ end -}}
{{- end -}}

{{- define "skein.sinkSecret.name" -}}
{{- default (include "skein.generatedSecret" .) .Values.controlPlane.sinks.existingSecret -}}
{{- end -}}
{{- define "skein.sinkSecret.key" -}}
{{- if .Values.controlPlane.sinks.existingSecret }}{{ .Values.controlPlane.sinks.key }}{{ else }}sink-secret{{ end -}}
{{- end -}}

{{- define "skein.clientStateKey.name" -}}
{{- default (include "skein.generatedSecret" .) .Values.gateway.clientStateKey.existingSecret -}}
{{- end -}}
{{- define "skein.clientStateKey.key" -}}
{{- if .Values.gateway.clientStateKey.existingSecret }}{{ .Values.gateway.clientStateKey.key }}{{ else }}client-state-key{{ end -}}
{{- end -}}

{{/* The catalog URL's Secret and key. */}}
{{- define "skein.databaseUrl.name" -}}
{{- if .Values.postgresql.bundled.enabled -}}
{{- include "skein.postgresql.fullname" . -}}
{{- else -}}
{{- required "postgresql.external.existingSecret is required (or postgresql.bundled.enabled)" .Values.postgresql.external.existingSecret -}}
{{- end -}}
{{- end -}}
{{- define "skein.databaseUrl.key" -}}
{{- if .Values.postgresql.bundled.enabled }}database-url{{ else }}{{ .Values.postgresql.external.key }}{{ end -}}
{{- end -}}

{{- define "skein.tls.secretName" -}}
{{- if .Values.tls.certManager.enabled -}}
{{- include "skein.fullname" . }}-tls
{{- else -}}
{{- required "tls.existingSecret is required with tls.enabled (or tls.certManager.enabled)" .Values.tls.existingSecret -}}
{{- end -}}
{{- end -}}

{{/* The Kafka listeners' security protocol. */}}
{{- define "skein.kafkaProtocol" -}}
{{- if .Values.tls.enabled }}SASL_SSL{{ else }}SASL_PLAINTEXT{{ end -}}
{{- end -}}

{{- define "skein.podAntiAffinity" -}}
{{- $term := dict "labelSelector" (dict "matchLabels" (fromYaml (include "skein.selectorLabels" (dict "root" .root "component" .component)))) "topologyKey" "kubernetes.io/hostname" -}}
podAntiAffinity:
{{- if eq .mode "hard" }}
  requiredDuringSchedulingIgnoredDuringExecution:
    {{- toYaml (list $term) | nindent 4 }}
{{- else }}
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        {{- toYaml $term | nindent 8 }}
{{- end }}
{{- end -}}
