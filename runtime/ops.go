// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package runtime

// Operation types: the CRI calls, named as the operation_type label of the
// kubelet's kubelet_runtime_operations_* metrics. They are declared here
// once, for the instrumentation, the fake and simulated runtimes, and the
// diagnosis. A streamed list (StreamPodSandboxes, StreamContainers) counts
// as the list it streams.
const (
	OpVersion             = "version"
	OpStatus              = "status"
	OpRuntimeConfig       = "runtime_config"
	OpUpdateRuntimeConfig = "update_runtime_config"
	OpRunPodSandbox       = "run_podsandbox"
	OpStopPodSandbox      = "stop_podsandbox"
	OpRemovePodSandbox    = "remove_podsandbox"
	OpPodSandboxStatus    = "podsandbox_status"
	OpListPodSandbox      = "list_podsandbox"
	OpCreateContainer     = "create_container"
	OpStartContainer      = "start_container"
	OpStopContainer       = "stop_container"
	OpRemoveContainer     = "remove_container"
	OpListContainers      = "list_containers"
	OpContainerStatus     = "container_status"
	OpGetContainerEvents  = "get_container_events"
	OpListImages          = "list_images"
	OpImageStatus         = "image_status"
	OpPullImage           = "pull_image"
	OpRemoveImage         = "remove_image"
	OpImageFsInfo         = "image_fs_info"
)
