package sim

import "fmt"

// Operation names, spelled as the kubelet's operation_type label. Faults
// and latencies are keyed by them. The Stream* lists count as the list they
// stream: StreamContainers is list_containers.
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

// op indexes the operations, so that the per-call path reads faults,
// latencies and counters from arrays instead of maps.
type op uint8

const (
	opVersion op = iota
	opStatus
	opRuntimeConfig
	opUpdateRuntimeConfig
	opRunPodSandbox
	opStopPodSandbox
	opRemovePodSandbox
	opPodSandboxStatus
	opListPodSandbox
	opCreateContainer
	opStartContainer
	opStopContainer
	opRemoveContainer
	opListContainers
	opContainerStatus
	opGetContainerEvents
	opListImages
	opImageStatus
	opPullImage
	opRemoveImage
	opImageFsInfo
	numOps
)

func (o op) String() string {
	switch o {
	case opVersion:
		return OpVersion
	case opStatus:
		return OpStatus
	case opRuntimeConfig:
		return OpRuntimeConfig
	case opUpdateRuntimeConfig:
		return OpUpdateRuntimeConfig
	case opRunPodSandbox:
		return OpRunPodSandbox
	case opStopPodSandbox:
		return OpStopPodSandbox
	case opRemovePodSandbox:
		return OpRemovePodSandbox
	case opPodSandboxStatus:
		return OpPodSandboxStatus
	case opListPodSandbox:
		return OpListPodSandbox
	case opCreateContainer:
		return OpCreateContainer
	case opStartContainer:
		return OpStartContainer
	case opStopContainer:
		return OpStopContainer
	case opRemoveContainer:
		return OpRemoveContainer
	case opListContainers:
		return OpListContainers
	case opContainerStatus:
		return OpContainerStatus
	case opGetContainerEvents:
		return OpGetContainerEvents
	case opListImages:
		return OpListImages
	case opImageStatus:
		return OpImageStatus
	case opPullImage:
		return OpPullImage
	case opRemoveImage:
		return OpRemoveImage
	case opImageFsInfo:
		return OpImageFsInfo
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Operations returns every operation name the simulator serves, in a
// fixed order.
func Operations() []string {
	names := make([]string, numOps)
	for o := range numOps {
		names[o] = o.String()
	}
	return names
}

// lookupOp returns the index of an operation name.
func lookupOp(name string) (op, bool) {
	for o := range numOps {
		if o.String() == name {
			return o, true
		}
	}
	return 0, false
}
