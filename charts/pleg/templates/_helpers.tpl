{{/*
The app.kubernetes.io/name label of every object: the chart's name, or
nameOverride. The job of pleg's series is the release's (pleg.job), not
this.
*/}}
{{- define "pleg.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The full name of the release's objects: the release's name, or
fullnameOverride.
*/}}
{{- define "pleg.fullname" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The job label of pleg's series, which every rule and the dashboard
select: metrics.job, or the release's name (the PodMonitor's jobLabel is
the pods' app.kubernetes.io/instance). Two releases have two jobs, and
each release's rules and dashboard see its own pods' series alone.
*/}}
{{- define "pleg.job" -}}
{{- default .Release.Name .Values.metrics.job }}
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
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
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
{{- $repository := .Values.image.repository }}
{{- with (.Values.global | default dict).imageRegistry }}
{{- /* A registry mirror: it replaces the repository's registry (its first
part when that names a host, as ghcr.io does). */}}
{{- $parts := splitList "/" $repository }}
{{- if and (gt (len $parts) 1) (or (contains "." (first $parts)) (contains ":" (first $parts)) (eq (first $parts) "localhost")) }}
{{- $repository = join "/" (rest $parts) }}
{{- end }}
{{- $repository = printf "%s/%s" (trimSuffix "/" .) $repository }}
{{- end }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" $repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
The runtime's socket on the node: runtime.socket, or the preset's; empty
for the preset auto without a socket, where pleg probes the known
sockets (pleg.autoSocketDirs).
*/}}
{{- define "pleg.runtimeSocket" -}}
{{- $presets := dict "containerd" "/run/containerd/containerd.sock" "crio" "/var/run/crio/crio.sock" "auto" "" }}
{{- if .Values.runtime.socket }}
{{- .Values.runtime.socket }}
{{- else if hasKey $presets .Values.runtime.preset }}
{{- get $presets .Values.runtime.preset }}
{{- else }}
{{- fail (printf "runtime.preset %q: want containerd, crio or auto, or set runtime.socket" .Values.runtime.preset) }}
{{- end }}
{{- end }}

{{/*
The runtime endpoint pleg is given: the socket's, or "auto".
*/}}
{{- define "pleg.runtimeEndpoint" -}}
{{- with include "pleg.runtimeSocket" . }}unix://{{ . }}{{ else }}auto{{ end }}
{{- end }}

{{/*
The directories of the sockets --runtime-endpoint auto tries, by volume
name: containerd's, CRI-O's (both of its paths: /var/run is a link to
/run on most distributions, not all), k3s's. Each is mounted with type
DirectoryOrCreate, so that a node without that runtime starts the pod
(an empty directory, created on the host, where the socket is absent).
*/}}
{{- define "pleg.autoSocketDirs" -}}
cri-containerd: /run/containerd
cri-crio: /run/crio
cri-crio-var: /var/run/crio
cri-k3s: /run/k3s/containerd
{{- end }}

{{/*
GOMEMLIMIT: goMemLimit, or 90% of resources.limits.memory, so that Go's
collector works harder before the kernel's OOM killer steps in; empty
without either.
*/}}
{{- define "pleg.goMemLimit" -}}
{{- if .Values.goMemLimit }}
{{- .Values.goMemLimit }}
{{- else }}
{{- $limit := toString (dig "limits" "memory" "" (.Values.resources | default dict)) }}
{{- if $limit }}
{{- $units := dict "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 "K" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 "" 1 }}
{{- $m := regexFind "^[0-9]+" $limit }}
{{- $unit := trimPrefix $m $limit }}
{{- if or (not $m) (not (hasKey $units $unit)) }}
{{- fail (printf "resources.limits.memory %q: want an integer and a unit (Ki, Mi, Gi, K, M, G) to derive goMemLimit from, or set goMemLimit" $limit) }}
{{- end }}
{{- $bytes := mul (int64 $m) (int64 (get $units $unit)) }}
{{- printf "%dMiB" (div (mul $bytes 9) (mul 10 1048576)) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
"true" when the daemon reads the kubelet's own PLEG (pleg run --kubelet
auto): kubelet.readPLEG, with kube.report, whose token and ClusterRole it
uses; empty otherwise.
*/}}
{{- define "pleg.readKubelet" -}}
{{- if and .Values.kube.report (.Values.kubelet | default dict).readPLEG }}true{{ end }}
{{- end }}
