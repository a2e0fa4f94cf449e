// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package bundle

import (
	"regexp"
	"slices"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Redacted stands for a value the bundle leaves out.
const Redacted = "<redacted>"

// keptLabels are the only labels of the runtime's sandboxes and
// containers a bundle keeps: the kubelet's own, which name the pod and
// the container. A pod's other labels are copied there by the kubelet
// and are the user's; annotations (which hold, among others, kubectl's
// last-applied-configuration, env values included) are never kept.
var keptLabels = []string{
	"io.kubernetes.pod.name", "io.kubernetes.pod.namespace", "io.kubernetes.pod.uid",
	"io.kubernetes.container.name",
}

// Sandbox is what a bundle keeps of one of the runtime's sandboxes: an
// allow-list of CRI's fields.
type Sandbox struct {
	ID             string            `json:"id"`
	Name           string            `json:"name,omitempty"`
	Namespace      string            `json:"namespace,omitempty"`
	UID            string            `json:"uid,omitempty"`
	Attempt        uint32            `json:"attempt"`
	State          string            `json:"state"`
	CreatedAt      int64             `json:"createdAt"`
	RuntimeHandler string            `json:"runtimeHandler,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
}

// Container is what a bundle keeps of one of the runtime's containers:
// an allow-list of CRI's fields. Its environment, mounts and command are
// not in CRI's list answer, and the bundle never asks for a status.
type Container struct {
	ID        string            `json:"id"`
	SandboxID string            `json:"sandboxId"`
	Name      string            `json:"name,omitempty"`
	Attempt   uint32            `json:"attempt"`
	Image     string            `json:"image,omitempty"`
	ImageRef  string            `json:"imageRef,omitempty"`
	State     string            `json:"state"`
	CreatedAt int64             `json:"createdAt"`
	Labels    map[string]string `json:"labels,omitempty"`
}

func keepLabels(in map[string]string) map[string]string {
	var out map[string]string
	for _, k := range keptLabels {
		if v, ok := in[k]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

func sandboxOf(s *runtimeapi.PodSandbox) Sandbox {
	md := s.GetMetadata()
	return Sandbox{
		ID: s.GetId(), Name: md.GetName(), Namespace: md.GetNamespace(), UID: md.GetUid(), Attempt: md.GetAttempt(),
		State: s.GetState().String(), CreatedAt: s.GetCreatedAt(), RuntimeHandler: s.GetRuntimeHandler(),
		Labels: keepLabels(s.GetLabels()),
	}
}

func containerOf(c *runtimeapi.Container) Container {
	return Container{
		ID: c.GetId(), SandboxID: c.GetPodSandboxId(), Name: c.GetMetadata().GetName(),
		Attempt: c.GetMetadata().GetAttempt(), Image: c.GetImage().GetImage(), ImageRef: c.GetImageRef(),
		State: c.GetState().String(), CreatedAt: c.GetCreatedAt(), Labels: keepLabels(c.GetLabels()),
	}
}

// configKeys are the keys of a runtime's configuration (containerd's
// config.toml, CRI-O's crio.conf) whose string values a bundle keeps:
// paths, names, types, images, levels, what a maintainer asks for. Any
// other string, wherever it is, is replaced by Redacted: a registry's
// username, password, auth or identitytoken, a header, an environment
// value, and whatever a later version of the runtime adds, unless it is
// added here. Booleans and numbers are kept: they hold no credential.
var configKeys = []string{
	// both, and the TOML's own
	"version", "root", "state", "address", "listen", "log_level", "level", "format", "log_dir",
	// containerd
	"snapshotter", "default_runtime_name", "runtime_type", "runtime_path", "sandbox_image", "sandbox", "BinaryName",
	"config_path", "bin_dir", "bin_dirs", "conf_dir", "conf_template", "ip_pref", "sandboxer", "io_type",
	"cni_conf_dir", "cni_bin_dir", "disabled_plugins", "required_plugins", "plugin_dir", "stream_server_address",
	"stream_server_port", "stream_idle_timeout", "image_pull_progress_timeout", "drain_exec_sync_io_timeout",
	"runtime_engine", "runtime_root", "shim", "cgroup_path", "default_runtime", "untrusted_workload_runtime",
	"container_annotations", "pod_annotations", "discard_unpacked_layers",
	// CRI-O
	"storage_driver", "runroot", "conmon", "conmon_cgroup", "cgroup_manager", "pinns_path", "monitor_path",
	"runtime_type", "pause_image", "pause_command", "signature_policy", "network_dir", "plugin_dirs",
	"default_capabilities", "default_sysctls", "seccomp_profile", "apparmor_profile", "hooks_dir",
	"container_exits_dir", "container_attach_socket_dir", "namespaces_dir", "version_file",
	"version_file_persist", "clean_shutdown_file", "stream_address", "stream_port", "log_to_journald",
	"default_transport", "image_volumes", "infra_ctr_cpuset", "selinux", "default_ulimits",
	"allowed_annotations", "monitor_cgroup", "monitor_exec_cgroup", "privileged_without_host_devices",
}

// redactConfig returns v, a decoded TOML document, with every string
// whose key is not in configKeys replaced by Redacted; keys are kept.
func redactConfig(v any) any {
	return redactValue(v, "")
}

func redactValue(v any, key string) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = redactValue(e, k)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = redactValue(e, key)
		}
		return out
	case string:
		if slices.Contains(configKeys, key) {
			return x
		}
		return Redacted
	case bool, int64, float64, int, uint64:
		return x
	default:
		// Dates and times of TOML, and anything else: not needed, and
		// never a credential worth the risk.
		return Redacted
	}
}

// logRules are the shapes of credentials a log line of the runtime or the
// kubelet may carry, each replaced. A log is free text: no allow-list can
// read it, so this list is the bundle's one deny-list, and the README of
// every bundle says so.
var logRules = []struct {
	re   *regexp.Regexp
	with string
}{
	// JSON Web Tokens: service account tokens, OIDC ID tokens.
	{regexp.MustCompile(`eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*`), Redacted},
	// Authorization headers and their schemes.
	{regexp.MustCompile(`(?i)\b(bearer|basic)(\s+|%20)[A-Za-z0-9._~+/=-]{6,}`), "$1 " + Redacted},
	// A URL's user information: scheme://user:password@host.
	{regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s:@]+:[^/\s@]+@`), "${1}" + Redacted + "@"},
	// CRI's KeyValue as Go prints it (an environment variable of a
	// container config the kubelet or the runtime logs): the value.
	{regexp.MustCompile(`(KeyValue\{Key:[^,}]*,Value:)[^}]*`), "${1}" + Redacted + ","},
	// An environment list as JSON ({"name":"X","value":"Y"}) or as
	// an OCI spec prints it ("env":["X=Y"], Env:[X=Y]).
	{regexp.MustCompile(`("value"\s*:\s*)"(?:[^"\\]|\\.)*"`), `$1"` + Redacted + `"`},
	{regexp.MustCompile(`(?i)("env"\s*:\s*\[)[^\]]*`), `$1"` + Redacted + `"`},
	{regexp.MustCompile(`(?i)(\benv:\[)[^\]]*`), "${1}" + Redacted},
	// key=value and key: value where the key names a secret.
	{
		regexp.MustCompile(`(?i)((?:password|passwd|secret|token|api[_-]?key|access[_-]?key|auth|credentials?|` +
			`identitytoken|private[_-]?key)["']?\s*[:=]\s*["']?)[^\s"',}&]+`),
		"${1}" + Redacted,
	},
}

// RedactLine returns a log line with every credential shape logRules
// knows replaced.
func RedactLine(line string) string {
	for _, r := range logRules {
		line = r.re.ReplaceAllString(line, r.with)
	}
	return line
}

// redactLog redacts every line of a log.
func redactLog(b []byte) []byte {
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		lines[i] = RedactLine(l)
	}
	return []byte(strings.Join(lines, "\n"))
}
