// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"fmt"
	"strings"
)

// runtimeKind is the runtime in use as an operator acts on it: its
// service, its logs, how to have its goroutine stacks, how to list its
// containers below the CRI, where it keeps its state. Actions name what
// fits the runtime, not containerd's tools on a CRI-O node.
type runtimeKind struct {
	// name is how findings call it.
	name string
	// service is its systemd units, journal the command that shows their
	// logs.
	service, journal string
	// tasks lists its containers below the CRI; root is its state.
	tasks, root string
	// shim greps its shims out of ps; resume resumes a paused container.
	shim, resume string
	// stacks tells how to have the goroutine stacks of its process pid.
	stacks func(pid int) string
}

var (
	containerdKind = runtimeKind{
		name: "containerd", service: "containerd", journal: "journalctl -u containerd",
		tasks: "ctr -n k8s.io tasks ls", root: "/var/lib/containerd", shim: "containerd-shim",
		resume: "ctr -n k8s.io tasks resume ID",
		stacks: func(pid int) string {
			return fmt.Sprintf("kill -USR1 %s writes containerd's goroutines to its log (journalctl -u containerd); "+
				"with a debug socket ([debug] address), ctr pprof goroutines reads them", pidOr(pid, "$(pidof containerd)"))
		},
	}
	crioKind = runtimeKind{
		name: "CRI-O", service: "crio", journal: "journalctl -u crio",
		tasks: "crictl ps -a", root: "/var/lib/containers", shim: "conmon", resume: "runc --root /run/runc resume ID",
		stacks: func(pid int) string {
			return fmt.Sprintf("crio status goroutines, or kill -USR1 %s, which writes /tmp/crio-goroutine-stacks-*.log",
				pidOr(pid, "$(pidof crio)"))
		},
	}
	dockerKind = runtimeKind{
		name: "cri-dockerd", service: "cri-docker and docker", journal: "journalctl -u cri-docker -u docker",
		tasks: "docker ps -a", root: "/var/lib/docker", shim: "containerd-shim", resume: "docker unpause ID",
		stacks: func(int) string {
			return "kill -USR1 $(pidof dockerd), which writes docker's goroutines to a goroutine-stacks-*.log " +
				"under /var/run/docker (cri-dockerd only translates the CRI to docker's API)"
		},
	}
	// otherKind is a runtime not known by name: the words fit containerd
	// and CRI-O both.
	otherKind = runtimeKind{
		name: "the runtime", service: "containerd (or crio)", journal: "journalctl -u containerd (or -u crio)",
		tasks: "crictl ps -a", root: "/var/lib/containerd (or /var/lib/containers)", shim: "-e containerd-shim -e conmon",
		resume: "the runtime's resume (ctr tasks resume, runc resume)",
		stacks: func(pid int) string {
			return fmt.Sprintf("kill -USR1 %s: containerd writes its goroutines to its log, CRI-O to "+
				"/tmp/crio-goroutine-stacks-*.log", pidOr(pid, "on the runtime"))
		},
	}
)

func pidOr(pid int, otherwise string) string {
	if pid > 0 {
		return fmt.Sprint(pid)
	}
	return otherwise
}

// kindOf tells the runtime from what is known of it, the surest first:
// the name CRI Version gave (containerd, cri-o, docker for cri-dockerd),
// its process's name, its socket's path.
func kindOf(versionName, comm, endpoint string) runtimeKind {
	for _, s := range []string{strings.ToLower(versionName), comm, endpoint} {
		switch {
		case s == "":
		case strings.Contains(s, "cri-o"), s == "crio", strings.Contains(s, "crio.sock"):
			return crioKind
		case strings.Contains(s, "docker"):
			return dockerKind
		case strings.Contains(s, "containerd"):
			return containerdKind
		}
	}
	return otherKind
}

// systemctl is the command that shows its services' state.
func (k runtimeKind) systemctl() string {
	switch k.name {
	case dockerKind.name:
		return "systemctl status cri-docker docker"
	case otherKind.name:
		return "systemctl status containerd (or crio)"
	}
	return "systemctl status " + k.service
}
