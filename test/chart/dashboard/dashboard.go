// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package dashboard is pleg's Grafana dashboard, written with Grafana's
// foundation SDK: a fleet view (nodes by health, the nodes whose
// PLEGDegraded condition is on, relist p99 by node, events a second by
// type, runtime errors by operation, versions) and a drill-down into the
// nodes the instance variable selects, with annotations where a node's
// condition turns on and where a pleg restarts. Its JSON is
// deploy/grafana/pleg-dashboard.json and the chart's dashboards/pleg.json
// (which the chart scopes to its release's job); test/kube evaluates
// every query against a Prometheus scraping real daemons. It needs
// Grafana 10.0 or later (MinGrafana).
package dashboard

import (
	"encoding/json"
	"strconv"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// UID is the dashboard's, stable across versions, so that links to it
// hold.
const UID = "pleg-fleet"

// MinGrafana is the oldest Grafana the dashboard is made for: the
// classic JSON model with panel types and options of Grafana 10.
const MinGrafana = "10.0"

// Top is how many nodes a "worst nodes" panel shows, at most, over the
// whole time range.
const Top = 20

// The selectors of every query: pleg's series (job="pleg", as the rules
// select them), of the clusters chosen, and in the drill-down of the nodes
// chosen. With "All", the variables are ".*", which also matches series
// without a cluster label.
const (
	fleet = `job="pleg", cluster=~"$cluster"`
	nodes = `job="pleg", cluster=~"$cluster", instance=~"$instance"`
)

// JSON is the dashboard as Grafana imports it, indented, ending in a
// newline.
func JSON() ([]byte, error) {
	d, err := New()
	if err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// New builds the dashboard.
//
//nolint:staticcheck // the classic dashboard JSON, which Grafana provisions from files and every version since 9 imports; v2 needs Grafana 12
func New() (dashboard.Dashboard, error) {
	b := dashboard.NewDashboardBuilder("pleg: pod lifecycle event generators").
		Uid(UID).
		Description("pleg across a fleet of nodes: which nodes' PLEG is healthy, hung or down, and why; then one node at a time. Grafana "+MinGrafana+" or later. See https://github.com/plegkit/pleg.").
		Tags([]string{"pleg", "kubernetes", "kubelet"}).
		Refresh("30s").
		Time("now-3h", "now").
		Timezone(common.TimeZoneBrowser).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Link(dashboard.NewDashboardLinkBuilder("Runbook").
			Type(dashboard.DashboardLinkTypeLink).
			Url("https://github.com/plegkit/pleg/blob/main/docs/runbook.md#pleg-is-not-healthy").
			TargetBlank(true)).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").
			Label("Data source").
			Type("prometheus")).
		WithVariable(labelVariable("cluster", "Cluster", `pleg_build_info{job="pleg"}`)).
		WithVariable(labelVariable("instance", "Node", `pleg_build_info{`+fleet+`}`)).
		Annotation(dashboard.NewAnnotationQueryBuilder().
			Name("PLEGDegraded on").
			Datasource(datasource()).
			Enable(true).
			IconColor("red").
			// A True series that was not there a minute before: the
			// condition turned on, or changed its reason.
			Expr(`pleg_node_condition{` + nodes + `, status="True"} unless pleg_node_condition{` + nodes + `, status="True"} offset 1m`).
			Step("1m").
			TitleFormat("{{instance}}: PLEGDegraded {{reason}}").
			TagKeys("instance,reason")).
		Annotation(dashboard.NewAnnotationQueryBuilder().
			Name("pleg restarts").
			Datasource(datasource()).
			Enable(true).
			IconColor("purple").
			Expr(`changes(process_start_time_seconds{` + nodes + `}[2m]) > 0`).
			Step("1m").
			TitleFormat("{{instance}}: pleg restarted").
			TagKeys("instance"))

	b = b.WithRow(dashboard.NewRowBuilder("Fleet"))
	for _, p := range fleetPanels() {
		b = b.WithPanel(p)
	}
	b = b.WithRow(dashboard.NewRowBuilder("Nodes: $instance"))
	for _, p := range nodePanels() {
		b = b.WithPanel(p)
	}
	return b.Build()
}

// labelVariable is a variable of the values label takes on series, with
// "All" (any value, or none) by default.
func labelVariable(label, title, series string) *dashboard.QueryVariableBuilder {
	query := "label_values(" + series + ", " + label + ")"
	return dashboard.NewQueryVariableBuilder(label).
		Label(title).
		Datasource(datasource()).
		Query(dashboard.StringOrMap{String: cog.ToPtr(query)}).
		Definition(query).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortAlphabeticalAsc).
		Multi(true).
		IncludeAll(true).
		AllValue(".*").
		Current(dashboard.VariableOption{
			Selected: cog.ToPtr(true),
			Text:     dashboard.StringOrArrayOfString{String: cog.ToPtr("All")},
			Value:    dashboard.StringOrArrayOfString{String: cog.ToPtr("$__all")},
		})
}

func datasource() common.DataSourceRef {
	return common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}
}

// query is a PromQL target: a range query, shown with legend.
func query(expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().Datasource(datasource()).Expr(expr).LegendFormat(legend).Range()
}

// instant is an instant PromQL target, as a table shows it.
func instant(expr string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().Datasource(datasource()).Expr(expr).Instant().Format(prometheus.PromQueryFormatTable)
}

// The alerts' thresholds: a relist not done for a minute is late (half
// the threshold, 90 s, is PlegRelistNearThreshold's page), for three the
// PLEG is not healthy (PlegNotHealthy); a relist of 10 s is
// PlegDurationHigh's.
func staleness() *dashboard.ThresholdsConfigBuilder {
	return dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps([]dashboard.Threshold{
		{Color: "green"}, {Value: cog.ToPtr(60.0), Color: "orange"}, {Value: cog.ToPtr(180.0), Color: "red"},
	})
}

// bounded keeps the Top series of expr by their highest value over the
// whole time range: topk alone, in a range query, picks its Top at every
// step, and the panel shows every series that was ever among them.
func bounded(expr, by string) string {
	return `(` + expr + `) and on (` + by + `) topk(` + strconv.Itoa(Top) + `, max_over_time((` + expr + `)[$__range:] @ end()))`
}

// relistThreshold marks the relist duration against the health threshold
// (the kubelet's 180 s, health.relistThresholdSeconds' default): orange
// from half of it, PlegRelistSlow's, red at it.
func relistThreshold() *dashboard.ThresholdsConfigBuilder {
	return dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps([]dashboard.Threshold{
		{Color: "green"}, {Value: cog.ToPtr(90.0), Color: "orange"}, {Value: cog.ToPtr(180.0), Color: "red"},
	})
}

func series(title, description, unit string, targets ...cog.Builder[variants.Dataquery]) *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().Title(title).Description(description).Unit(unit).Height(8).Span(12).
		FillOpacity(10).
		Legend(common.NewVizLegendOptionsBuilder().DisplayMode(common.LegendDisplayModeTable).Placement(common.LegendPlacementRight).ShowLegend(true).Calcs([]string{"lastNotNull", "max"}))
	for _, t := range targets {
		p = p.WithTarget(t)
	}
	return p
}

// fleetPanels answer "which nodes, and why".
func fleetPanels() []cog.Builder[dashboard.Panel] {
	lastSeen := `time() - kubelet_pleg_last_seen_seconds{` + fleet + `}`
	health := stat.NewPanelBuilder().
		Title("Nodes by health").
		Description("Nodes whose pleg relisted within a minute; whose runtime has not answered pleg's calls for 20 s (PlegRuntimeNotAnswering's condition, the earliest page); that have not relisted for 3 minutes, when the kubelet calls its PLEG not healthy (PlegNotHealthy's); whose pleg Prometheus cannot scrape (PlegDown's).").
		Height(6).Span(12).
		ColorMode(common.BigValueColorModeBackground).
		TextMode(common.BigValueTextModeValueAndName).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})).
		WithTarget(query(`count(`+lastSeen+` <= 60) or vector(0)`, "healthy")).
		WithTarget(query(`count(pleg_runtime_unanswered_seconds{`+fleet+`} > 20) or vector(0)`, "runtime not answering")).
		WithTarget(query(`count(`+lastSeen+` > 180) or vector(0)`, "not healthy (3m)")).
		WithTarget(query(`count(up{`+fleet+`} == 0) or vector(0)`, "down")).
		OverrideByName("healthy", []dashboard.DynamicConfigValue{{Id: "color", Value: map[string]any{"mode": "fixed", "fixedColor": "green"}}}).
		OverrideByName("runtime not answering", []dashboard.DynamicConfigValue{{Id: "color", Value: map[string]any{"mode": "fixed", "fixedColor": "orange"}}}).
		OverrideByName("not healthy (3m)", []dashboard.DynamicConfigValue{{Id: "color", Value: map[string]any{"mode": "fixed", "fixedColor": "red"}}}).
		OverrideByName("down", []dashboard.DynamicConfigValue{{Id: "color", Value: map[string]any{"mode": "fixed", "fixedColor": "purple"}}})

	condition := table.NewPanelBuilder().
		Title("Nodes whose PLEGDegraded condition is on").
		Description("The condition pleg last wrote on each node (pleg run --in-cluster), where it is True: the reason names the cause, before the kubelet's PLEG turns unhealthy. kubectl describe node shows its message.").
		Height(6).Span(12).
		WithTarget(instant(`pleg_node_condition{` + fleet + `, status="True"} == 1`)).
		WithTransformation(dashboard.DataTransformerConfig{Id: "organize", Options: map[string]any{
			"excludeByName": map[string]any{"Time": true, "Value": true, "__name__": true, "job": true, "condition": true, "status": true},
		}})

	return []cog.Builder[dashboard.Panel]{
		health,
		condition,
		series("Relist p99, slowest 20 nodes", "99th percentile of the global relist's duration, by node (pleg_relist_duration_seconds, whose buckets reach 10 minutes: a relist of minutes shows as it is). The 20 nodes slowest over the time range. PlegRelistSlow fires past half the health threshold (90 s of 180 by default); the kubelet's PLEG is unhealthy at the threshold.", "s",
			query(bounded(`histogram_quantile(0.99, sum by (cluster, instance, le) (rate(pleg_relist_duration_seconds_bucket{`+fleet+`}[$__rate_interval])))`, "cluster, instance"), "{{instance}}")).
			Thresholds(relistThreshold()).ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeLine)),
		series("Time since the last relist, 20 worst nodes", "Seconds since each node's last successful relist, for the 20 nodes worst over the time range. Over 60 a relist hangs; over 180 the kubelet calls the PLEG not healthy.", "s",
			query(bounded(lastSeen, "cluster, instance"), "{{instance}}")).
			Thresholds(staleness()).ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeLine)),
		series("Pod lifecycle events a second, by type", "The events every pleg produced (pleg_events_total), summed over the nodes chosen.", "ops",
			query(`sum by (type) (rate(pleg_events_total{`+fleet+`}[$__rate_interval]))`, "{{type}}")),
		series("Runtime errors a second, by operation", "Failed CRI calls (kubelet_runtime_operations_errors_total) across the nodes chosen: a hung call fails at pleg's --timeout.", "ops",
			query(`sum by (operation_type) (rate(kubelet_runtime_operations_errors_total{`+fleet+`}[$__rate_interval]))`, "{{operation_type}}")),
		series("Writes to the Kubernetes API a second, by result", "pleg's node condition and events (pleg_kube_reports_total): retried and dropped writes, and none written, are PlegKubeReportsFailing.", "ops",
			query(`sum by (result) (rate(pleg_kube_reports_total{`+fleet+`}[$__rate_interval]))`, "{{result}}")),
		table.NewPanelBuilder().
			Title("Versions").
			Description("Nodes by pleg's version and revision and the runtime's name and version (pleg_build_info).").
			Height(8).Span(12).
			WithTarget(instant(`count by (version, revision, runtime, runtime_version) (pleg_build_info{` + fleet + `})`)),
	}
}

// nodePanels show the nodes the instance variable chose.
func nodePanels() []cog.Builder[dashboard.Panel] {
	quantile := func(q, by string) string {
		return `histogram_quantile(` + q + `, sum by (` + by + `, le) (rate(pleg_relist_duration_seconds_bucket{` + nodes + `}[$__rate_interval])))`
	}
	return []cog.Builder[dashboard.Panel]{
		series("Relist duration", "p50 and p99 of the global relist, by node (pleg_relist_duration_seconds, up to 10 minutes; the kubelet-compatible kubelet_pleg_relist_duration_seconds stops at 10 s).", "s",
			query(quantile("0.5", "instance"), "{{instance}} p50"),
			query(quantile("0.99", "instance"), "{{instance}} p99")).
			Thresholds(relistThreshold()).ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeLine)),
		series("Time since the last relist, and relist in flight", "Seconds since the last successful relist; and whether a relist is under way (1), which, held, is a hung runtime call.", "s",
			query(`time() - kubelet_pleg_last_seen_seconds{`+nodes+`}`, "{{instance}} since last relist"),
			query(`pleg_relist_in_flight{`+nodes+`}`, "{{instance}} in flight")).
			Thresholds(staleness()).ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeLine)),
		series("Runtime call p99, by operation", "99th percentile of each CRI operation's duration (kubelet_runtime_operations_duration_seconds).", "s",
			query(`histogram_quantile(0.99, sum by (instance, operation_type, le) (rate(kubelet_runtime_operations_duration_seconds_bucket{`+nodes+`}[$__rate_interval])))`, "{{instance}} {{operation_type}}")),
		series("Runtime calls and errors a second, by operation", "CRI calls (kubelet_runtime_operations_total) and their failures.", "ops",
			query(`sum by (instance, operation_type) (rate(kubelet_runtime_operations_total{`+nodes+`}[$__rate_interval]))`, "{{instance}} {{operation_type}}"),
			query(`sum by (instance, operation_type) (rate(kubelet_runtime_operations_errors_total{`+nodes+`}[$__rate_interval]))`, "{{instance}} {{operation_type}} errors")),
		series("Pods and containers", "Pods with a ready sandbox, and containers by state, as the last relist saw them.", "short",
			query(`kubelet_running_pods{`+nodes+`}`, "{{instance}} pods"),
			query(`kubelet_running_containers{`+nodes+`}`, "{{instance}} {{container_state}}")),
		series("Events a second, by type", "The pod lifecycle events this node's pleg produced.", "ops",
			query(`sum by (instance, type) (rate(pleg_events_total{`+nodes+`}[$__rate_interval]))`, "{{instance}} {{type}}")),
		series("Pod inspections failed a second", "Pods whose inspection passed its deadline (a status call that hangs: the kubelet waits 2 minutes for each) or failed otherwise.", "ops",
			query(`sum by (instance, reason) (rate(pleg_pod_inspection_failures_total{`+nodes+`}[$__rate_interval]))`, "{{instance}} {{reason}}")),
		series("Mode and event stream", "1 for the mode in force (evented: the runtime's event stream drives; generic: relisting alone), and whether the event stream is connected.", "short",
			query(`pleg_mode{`+nodes+`} == 1`, "{{instance}} {{mode}}"),
			query(`pleg_evented_stream_connected{`+nodes+`}`, "{{instance}} stream connected")),
	}
}
