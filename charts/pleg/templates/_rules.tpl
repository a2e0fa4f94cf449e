{{/*
pleg's Prometheus rules, as a rule file's text (groups: ...): the
PrometheusRule's spec, and, rendered with the chart's defaults,
deploy/prometheus/prometheus-rules.yaml (make generate), which promtool's
unit tests (deploy/prometheus/prometheus-rules.test.yaml) test.

Values they follow:
- the job of pleg's series (pleg.job): every selector has it, so that a
  second release's rules never judge this one's series;
- health.relistThresholdSeconds, which also sets the daemon's
  --relist-threshold: PlegNotHealthy's threshold, and PlegRelistSlow's
  (a fraction of it);
- prometheusRule.alerts.NAME: each alert's for:, severity, and enabled;
- prometheusRule.additionalRuleLabels/Annotations, runbookUrlPattern,
  absentReference, additionalGroups.
Prometheus' own templates ({{ $labels.node }}) are written inside {{`...`}}
so that Helm leaves them alone.
*/}}

{{/* pleg.alertOn: "true" unless prometheusRule.alerts.NAME.enabled is false. */}}
{{- define "pleg.alertOn" -}}
{{- $a := index .root.Values.prometheusRule.alerts .name | default dict }}
{{- if or (not (hasKey $a "enabled")) $a.enabled }}true{{ end }}
{{- end }}

{{/*
pleg.alertMeta: an alert's for:, labels and its annotations' runbook_url
and extras, from prometheusRule.alerts.NAME and the additional values;
.annotations are the alert's own (summary, description).
*/}}
{{- define "pleg.alertMeta" -}}
{{- $v := .root.Values.prometheusRule }}
{{- $a := index $v.alerts .name | default dict }}
{{- $labels := merge (dict "severity" ($a.severity | default "warning")) (.labels | default dict) (deepCopy ($v.additionalRuleLabels | default dict)) }}
{{- $annotations := merge (deepCopy .annotations) (deepCopy ($v.additionalRuleAnnotations | default dict)) }}
{{- with $v.runbookUrlPattern }}
{{- $_ := set $annotations "runbook_url" (printf . (lower $.name)) }}
{{- end }}
for: {{ $a.for | default "5m" }}
labels:
  {{- toYaml $labels | nindent 2 }}
annotations:
  {{- toYaml $annotations | nindent 2 }}
{{- end }}

{{- define "pleg.ruleFile" -}}
{{- $job := include "pleg.job" . }}
{{- $sel := printf "job=%q" $job }}
{{- $by := "cluster, job, node, instance" }}
{{- $threshold := int .Values.health.relistThresholdSeconds }}
{{- $alerts := .Values.prometheusRule.alerts }}
groups:
  - name: {{ $job }}.rules
    rules:
      # kubernetes-mixin's node_quantile:kubelet_pleg_relist_duration_seconds
      # recording rule, over pleg's series. job is kept, so that two
      # releases' recordings stay apart.
      {{- range $q := list "0.99" "0.9" "0.5" }}
      - record: node_quantile:pleg_relist_duration_seconds:histogram_quantile
        expr: histogram_quantile({{ $q }}, sum by ({{ $by }}, le) (rate(kubelet_pleg_relist_duration_seconds_bucket{ {{- $sel -}} }[5m])))
        labels:
          quantile: {{ $q | quote }}
      {{- end }}
  - name: {{ $job }}.alerts
    # Every 15 s, whatever the Prometheus' own evaluation_interval: the
    # pages must fire over a minute before the kubelet turns the node
    # NotReady, some two minutes into a hang.
    interval: {{ .Values.prometheusRule.interval }}
    rules:
      {{- if include "pleg.alertOn" (dict "root" . "name" "PlegDurationHigh") }}
      # The stock KubeletPlegDurationHigh, adapted: the kubelet-compatible
      # histogram, whose last bucket is 10 s.
      - alert: PlegDurationHigh
        expr: node_quantile:pleg_relist_duration_seconds:histogram_quantile{ {{- $sel -}} ,quantile="0.99"} >= 10
        {{- include "pleg.alertMeta" (dict "root" . "name" "PlegDurationHigh" "annotations" (dict
          "summary" "The pod lifecycle event generator is taking too long to relist."
          "description" `The 99th percentile of pleg's relist duration on {{ $labels.node }} is {{ $value | humanizeDuration }}. Run pleg doctor on the node.`)) | trim | nindent 8 }}
      {{- end }}
      {{- if include "pleg.alertOn" (dict "root" . "name" "PlegRelistSlow") }}
      # Relists that complete, but take a good part of the health threshold
      # (pleg_relist_duration_seconds, whose buckets reach 10 minutes): the
      # node's PLEG is about to turn unhealthy. The threshold is a fraction
      # of health.relistThresholdSeconds, the daemon's --relist-threshold.
      {{- $fraction := (index $alerts "PlegRelistSlow" | default dict).fraction | default 0.5 | float64 }}
      - alert: PlegRelistSlow
        expr: histogram_quantile(0.99, sum by ({{ $by }}, le) (rate(pleg_relist_duration_seconds_bucket{ {{- $sel -}} }[5m]))) >= {{ mulf $threshold $fraction }}
        {{- include "pleg.alertMeta" (dict "root" . "name" "PlegRelistSlow" "annotations" (dict
          "summary" "pleg's relists take a large part of the PLEG's health threshold."
          "description" (printf `The 99th percentile of pleg's relist duration on {{ $labels.node }} is {{ $value | humanizeDuration }}, over %v of the %ds health threshold: the kubelet's PLEG on this node turns unhealthy if it reaches it. Run pleg doctor on the node.` $fraction $threshold))) | trim | nindent 8 }}
      {{- end }}
      {{- if include "pleg.alertOn" (dict "root" . "name" "PlegRuntimeNotAnswering") }}
      # The earliest page: the container runtime has not answered pleg's
      # node-wide calls for 20 s (pleg_runtime_unanswered_seconds: its
      # Status, asked every 5 s as the kubelet's runtime check asks it,
      # and the whole-node lists). A healthy runtime answers in
      # milliseconds, one restarting refuses for a few seconds. The
      # kubelet's own runtime check turns the node NotReady a little over
      # two minutes into such a hang (measured: 133 s on containerd 2.4),
      # its PLEG at three: with a 15 s scrape and evaluation this fires
      # within about 55 s of the hang, over a minute before.
      - alert: PlegRuntimeNotAnswering
        expr: pleg_runtime_unanswered_seconds{ {{- $sel -}} } > 20
        {{- include "pleg.alertMeta" (dict "root" . "name" "PlegRuntimeNotAnswering" "annotations" (dict
          "summary" "The container runtime does not answer."
          "description" (printf `The container runtime on {{ $labels.node }} has not answered pleg's Status or list calls for {{ $value | humanizeDuration }}. The kubelet's runtime check waits on it too and turns the node NotReady about two minutes into the hang; its PLEG turns unhealthy after %ds. Run pleg doctor on the node.` $threshold))) | trim | nindent 8 }}
      {{- end }}
      {{- if include "pleg.alertOn" (dict "root" . "name" "PlegRuntimeSlow") }}
      # The runtime answers, slowly: the median of its last five answers to
      # pleg's Status (pleg_runtime_status_latency_seconds) is 2 s or more,
      # where a healthy one answers in milliseconds. A runtime starved of
      # CPU answered so for minutes; the kubelet marks the node NotReady
      # once one of its own Status calls goes 30 s without an answer.
      - alert: PlegRuntimeSlow
        expr: pleg_runtime_status_latency_seconds{ {{- $sel -}} } >= 2
        {{- include "pleg.alertMeta" (dict "root" . "name" "PlegRuntimeSlow" "annotations" (dict
          "summary" "The container runtime answers slowly."
          "description" `The container runtime on {{ $labels.node }} answers pleg's Status calls in {{ $value | humanizeDuration }}, typically, where a healthy one answers in milliseconds: it is starved (CPU, memory) or overloaded. The kubelet marks the node NotReady once its own Status call goes 30 s without an answer. Run pleg doctor on the node.`)) | trim | nindent 8 }}
      {{- end }}
      {{- if include "pleg.alertOn" (dict "root" . "name" "PlegPodStatusHung") }}
      # Pods whose status calls do not answer (pleg_pods_hung: their
      # inspection passed pleg's deadline, 10 s): the kubelet waits up to
      # its runtime request timeout, 2 min, for each such call in every
      # relist, so two of them in one relist take its PLEG past its 3 min
      # threshold. Held for a minute, it fires over a minute before the
      # kubelet's NotReady.
      - alert: PlegPodStatusHung
        expr: pleg_pods_hung{ {{- $sel -}} } > 0
        {{- include "pleg.alertMeta" (dict "root" . "name" "PlegPodStatusHung" "annotations" (dict
          "summary" "The container runtime's status calls hang for some pods."
          "description" (printf `Status calls of {{ $value }} pod(s) on {{ $labels.node }} do not answer within pleg's deadline. The kubelet waits up to 2 minutes for each such call in every relist: its PLEG turns unhealthy once one relist takes %ds. pleg doctor on the node names the pods and why.` $threshold))) | trim | nindent 8 }}
      {{- end }}
      {{- if include "pleg.alertOn" (dict "root" . "name" "PlegRelistNearThreshold") }}
      # No relist of pleg's has succeeded for half the health threshold:
      # the runtime answers its Status but not the lists, or the relist
      # is that slow. The kubelet's relist waits on the same lists.
      # kubelet_pleg_last_seen_seconds moves with every relist, every
      # second, or every 30 s while the event stream drives: a scrape of
      # 15 s leaves it at most a minute behind on a healthy node.
      - alert: PlegRelistNearThreshold
        expr: time() - kubelet_pleg_last_seen_seconds{ {{- $sel -}} } > {{ div $threshold 2 }}
        {{- include "pleg.alertMeta" (dict "root" . "name" "PlegRelistNearThreshold" "annotations" (dict
          "summary" "pleg's relists have not succeeded for half the PLEG's health threshold."
          "description" (printf `pleg on {{ $labels.node }} last relisted {{ $value | humanizeDuration }} ago: the container runtime's lists hang or fail. The kubelet's PLEG on this node turns unhealthy after %ds. Run pleg doctor on the node.` $threshold))) | trim | nindent 8 }}
      {{- end }}
      {{- if include "pleg.alertOn" (dict "root" . "name" "PlegNotHealthy") }}
      # What the condition and the kubelet's own check report, as a metric:
      # no successful relist for longer than the health threshold
      # (health.relistThresholdSeconds, the daemon's --relist-threshold).
      # The kubelet would call the node NotReady.
      - alert: PlegNotHealthy
        expr: time() - kubelet_pleg_last_seen_seconds{ {{- $sel -}} } > {{ $threshold }}
        {{- include "pleg.alertMeta" (dict "root" . "name" "PlegNotHealthy" "annotations" (dict
          "summary" (printf "PLEG is not healthy: no successful relist for more than %ds." $threshold)
          "description" `pleg on {{ $labels.node }} last relisted {{ $value | humanizeDuration }} ago; the container runtime does not answer its lists. Run pleg doctor on the node.`)) | trim | nindent 8 }}
      {{- end }}
      {{- if include "pleg.alertOn" (dict "root" . "name" "PlegKubeletRelistBehind") }}
      # The kubelet's own PLEG, as pleg reads it from the kubelet's metrics
      # every 10 s (the chart's kubelet.readPLEG), not seen active for half
      # the kubelet's threshold, which is 3 minutes and not configurable:
      # the node condition's KubeletRelistBehind. 0, where no read has
      # found it yet or none is made, is left out. The kubelet moves it
      # every second; a read every 10 s and a scrape of 15 s leave it at
      # most some 25 s behind on a healthy node. A read that fails keeps
      # the last one, which ages: a kubelet whose metrics stop answering
      # fires it too. Half is pleg_kubelet_pleg_behind_after_seconds: 90,
      # or 450 where the kubelet runs EventedPLEG, whose generic PLEG
      # relists every 5 minutes against a 10-minute threshold.
      - alert: PlegKubeletRelistBehind
        expr: >-
          time() - (pleg_kubelet_pleg_last_seen_seconds{ {{- $sel -}} } > 0)
          > pleg_kubelet_pleg_behind_after_seconds{ {{- $sel -}} }
        {{- include "pleg.alertMeta" (dict "root" . "name" "PlegKubeletRelistBehind" "annotations" (dict
          "summary" "The kubelet's own PLEG has not relisted for half its health threshold."
          "description" `The kubelet's PLEG on {{ $labels.node }} last relisted {{ $value | humanizeDuration }} ago, by the kubelet's metrics as pleg last read them: at 3 minutes (10 with EventedPLEG) the kubelet reports PLEG not healthy and the node turns NotReady. Where pleg's own relists of the same runtime succeed, the kubelet itself is starved or stuck. Run pleg doctor on the node.`)) | trim | nindent 8 }}
      {{- end }}
      {{- if include "pleg.alertOn" (dict "root" . "name" "PlegDown") }}
      # A pleg that is there but does not answer its scrapes: crashing,
      # wedged, or cut off by a NetworkPolicy. Every other alert of the
      # node is blind meanwhile. A node that is down takes its pleg with
      # it: inhibit this alert by KubeNodeNotReady on equal node and
      # cluster (docs/runbook.md).
      - alert: PlegDown
        expr: up{ {{- $sel -}} } == 0
        {{- include "pleg.alertMeta" (dict "root" . "name" "PlegDown" "annotations" (dict
          "summary" "Prometheus cannot scrape pleg."
          "description" `Scrapes of pleg on {{ $labels.node }} have failed: its pod crashes or does not answer, its node is down, or the network does not let Prometheus through. pleg's other alerts cannot fire for this node meanwhile.`)) | trim | nindent 8 }}
      {{- end }}
      {{- if include "pleg.alertOn" (dict "root" . "name" "PlegAbsent") }}
      # No pleg target at all in a cluster: the DaemonSet is gone, or its
      # series do not carry the job the rules select, and no other pleg
      # alert can fire there. absent() alone would drop the cluster label,
      # so each cluster that has the reference series (the kubelet's
      # scrape, prometheusRule.absentReference) but no pleg target is one
      # alert with its cluster; absent() answers only where no reference
      # series exists at all.
      - alert: PlegAbsent
        expr: |
          {{- with .Values.prometheusRule.absentReference }}
          count by (cluster) ({{ . }})
          unless on (cluster)
          count by (cluster) (up{ {{- $sel -}} })
          or on ()
          {{- end }}
          absent(up{ {{- $sel -}} })
        {{- include "pleg.alertMeta" (dict "root" . "name" "PlegAbsent" "labels" (dict "job" $job) "annotations" (dict
          "summary" "No pleg target is scraped."
          "description" (printf `Prometheus has no target with job="%s"{{ with $labels.cluster }} in cluster {{ . }}{{ end }}: pleg is not deployed, or its scrape configuration does not give its series that job, and none of pleg's alerts can fire.` $job))) | trim | nindent 8 }}
      {{- end }}
      {{- if include "pleg.alertOn" (dict "root" . "name" "PlegKubeReportsFailing") }}
      # The API server keeps refusing pleg's reports, or cannot be reached:
      # writes failed (retried or dropped) and none succeeded for 15
      # minutes, although the condition's heartbeat writes every 5. The
      # node's PLEGDegraded condition and events are stale meanwhile.
      - alert: PlegKubeReportsFailing
        expr: |
          sum by ({{ $by }}) (increase(pleg_kube_reports_total{ {{- $sel -}} ,result=~"dropped|retried"}[15m])) > 0
          unless on ({{ $by }})
          sum by ({{ $by }}) (increase(pleg_kube_reports_total{ {{- $sel -}} ,result="written"}[15m])) > 0
        {{- include "pleg.alertMeta" (dict "root" . "name" "PlegKubeReportsFailing" "annotations" (dict
          "summary" "pleg cannot write its node condition and events to the Kubernetes API."
          "description" `pleg on {{ $labels.node }} failed {{ $value | humanize }} writes to the Kubernetes API in 15 minutes and made none: its PLEGDegraded condition and events on the node are stale. Its log says why (forbidden, unreachable, throttled).`)) | trim | nindent 8 }}
      {{- end }}
      {{- if include "pleg.alertOn" (dict "root" . "name" "PlegNodeConditionWarning") }}
      # The warnings pleg writes into its node condition that page nowhere
      # else: a runtime list near the kubelet's message limit (past it,
      # every relist of the kubelet fails), a runtime that says itself not
      # ready (the kubelet's node is NotReady for it).
      - alert: PlegNodeConditionWarning
        expr: pleg_node_condition{ {{- $sel -}} ,status="True",reason=~"ListNearSizeLimit|RuntimeNotReady"} == 1
        {{- include "pleg.alertMeta" (dict "root" . "name" "PlegNodeConditionWarning" "annotations" (dict
          "summary" "pleg's node condition warns of a runtime about to fail the kubelet's PLEG."
          "description" `pleg on {{ $labels.node }} reports PLEGDegraded with reason {{ $labels.reason }}; kubectl describe node {{ $labels.node }} shows its message.`)) | trim | nindent 8 }}
      {{- end }}
      {{- if include "pleg.alertOn" (dict "root" . "name" "PlegJournalDegraded") }}
      # The journal cannot use its state directory (full, read-only,
      # unusable): it keeps events in memory, and a restart loses them
      # (clients resume with a Gap, containers are reported again).
      - alert: PlegJournalDegraded
        expr: pleg_journal_degraded{ {{- $sel -}} } == 1
        {{- include "pleg.alertMeta" (dict "root" . "name" "PlegJournalDegraded" "annotations" (dict
          "summary" "pleg's journal keeps its events in memory only."
          "description" `pleg on {{ $labels.node }} cannot use its state directory and keeps its journal in memory: a restart loses its events. Its log says why (disk full, read-only, corrupt).`)) | trim | nindent 8 }}
      {{- end }}
      {{- if include "pleg.alertOn" (dict "root" . "name" "PlegEventStreamDown") }}
      # The runtime's event stream, which the mode asks for and the runtime
      # has, has been down for over 15 minutes
      # (pleg_evented_stream_down_seconds: 0 in generic mode and on a
      # runtime without a stream, so those never fire it). pleg keeps
      # working, relisting at the generic period, but a runtime whose
      # stream broke is worth a look.
      - alert: PlegEventStreamDown
        expr: pleg_evented_stream_down_seconds{ {{- $sel -}} } > 900
        {{- include "pleg.alertMeta" (dict "root" . "name" "PlegEventStreamDown" "annotations" (dict
          "summary" "The container runtime's event stream is down; pleg relists alone."
          "description" `pleg on {{ $labels.node }} has had no container event stream from the runtime for {{ $value | humanizeDuration }} and relists alone meanwhile. Its log and pleg doctor say why.`)) | trim | nindent 8 }}
      {{- end }}
      {{- if include "pleg.alertOn" (dict "root" . "name" "PlegPodInspectionDeadlines") }}
      # Pod inspections that pass their deadline: a status call of the
      # runtime hangs for some pods, whose next relist tries again. The
      # kubelet's sync of these pods waits on the same calls.
      - alert: PlegPodInspectionDeadlines
        expr: sum by ({{ $by }}) (increase(pleg_pod_inspection_failures_total{ {{- $sel -}} ,reason="deadline"}[10m])) > 0
        {{- include "pleg.alertMeta" (dict "root" . "name" "PlegPodInspectionDeadlines" "annotations" (dict
          "summary" "The runtime's status calls for some pods pass their deadline."
          "description" `pleg on {{ $labels.node }} saw {{ $value | humanize }} pod inspections pass their deadline in 10 minutes: the runtime does not answer status calls for these pods. pleg doctor on the node names them.`)) | trim | nindent 8 }}
      {{- end }}
{{- with .Values.prometheusRule.additionalGroups }}
{{ toYaml . | indent 2 }}
{{- end }}
{{- end }}
