{{/*
The name label of every object, and so the job of pleg's series under the
Prometheus operator (the PodMonitor's jobLabel): the rules select
job="pleg", so it is not overridable.
*/}}
{{- define "pleg.name" -}}
pleg
{{- end }}

{{/*
The full name of the release's objects: the release's name, or
fullnameOverride.
*/}}
{{- define "pleg.fullname" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "pleg.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pleg.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "pleg.labels" -}}
{{ include "pleg.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "pleg.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "pleg.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The image, pinned: the tag defaults to the chart's appVersion, and a
digest wins over the tag.
*/}}
{{- define "pleg.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
The runtime's socket on the node: runtime.socket, or the preset's.
*/}}
{{- define "pleg.runtimeSocket" -}}
{{- $presets := dict "containerd" "/run/containerd/containerd.sock" "crio" "/var/run/crio/crio.sock" }}
{{- if .Values.runtime.socket }}
{{- .Values.runtime.socket }}
{{- else if hasKey $presets .Values.runtime.preset }}
{{- get $presets .Values.runtime.preset }}
{{- else }}
{{- fail (printf "runtime.preset %q: want containerd or crio, or set runtime.socket" .Values.runtime.preset) }}
{{- end }}
{{- end }}
