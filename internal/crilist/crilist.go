// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package crilist holds the rules for reading CRI list answers that both
// sides of the CRI need: which pod a listed item belongs to, as the
// kubelet groups them, and whether a list filter's label selector takes
// an item, as runtimes apply it. The generator and doctor read lists with
// it; the fake runtime and the simulator answer them with it.
package crilist

import (
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/runtime"
)

// MatchLabels reports whether labels hold every key of selector with its
// value, as containerd and CRI-O apply a filter's LabelSelector: a key
// the item lacks never matches, not even an empty value.
func MatchLabels(labels, selector map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Placer tells the pod of listed containers: a container's pod-UID label,
// else the pod of its sandbox. The zero Placer is ready to Reset.
type Placer struct {
	sandboxes []*runtimeapi.PodSandbox
	// bySandbox maps sandbox IDs to pod UIDs. It is built when a container
	// first lacks the label, which kubelet-made containers never do, and
	// kept between lists so that a relist does not allocate it anew.
	bySandbox map[string]string
	indexed   bool
}

// Reset makes p place the containers listed with sandboxes. Reset(nil)
// lets go of them, so that a held Placer does not keep a whole list.
func (p *Placer) Reset(sandboxes []*runtimeapi.PodSandbox) {
	p.sandboxes, p.indexed = sandboxes, false
}

// PodUID returns the UID of c's pod, or "" when neither its label nor its
// sandbox tells it; the kubelet then files c under no pod.
func (p *Placer) PodUID(c *runtimeapi.Container) string {
	if uid := c.GetLabels()[runtime.PodUIDLabel]; uid != "" {
		return uid
	}
	if !p.indexed {
		if p.bySandbox == nil {
			p.bySandbox = make(map[string]string, len(p.sandboxes))
		}
		clear(p.bySandbox)
		for _, sb := range p.sandboxes {
			if uid := sb.GetMetadata().GetUid(); uid != "" && sb.GetId() != "" {
				p.bySandbox[sb.GetId()] = uid
			}
		}
		p.indexed = true
	}
	return p.bySandbox[c.GetPodSandboxId()]
}

// Pod is one pod's listed items, in list order.
type Pod struct {
	UID, Name, Namespace string
	Sandboxes            []*runtimeapi.PodSandbox
	Containers           []*runtimeapi.Container
}

// Group groups listed items by pod UID as the kubelet does: sandboxes by
// their metadata, containers as a Placer places them. Items without an ID
// or a pod are left out, as the kubelet leaves them. A pod's name is the
// first one its items give. Pods come in the order their first item was
// listed, sandboxes before containers.
func Group(sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) []*Pod {
	var pods []*Pod
	byUID := make(map[string]*Pod)
	get := func(uid, name, namespace string) *Pod {
		p := byUID[uid]
		if p == nil {
			p = &Pod{UID: uid}
			byUID[uid] = p
			pods = append(pods, p)
		}
		if p.Name == "" {
			p.Name, p.Namespace = name, namespace
		}
		return p
	}
	for _, sb := range sandboxes {
		md := sb.GetMetadata()
		if md.GetUid() == "" || sb.GetId() == "" {
			continue
		}
		p := get(md.GetUid(), md.GetName(), md.GetNamespace())
		p.Sandboxes = append(p.Sandboxes, sb)
	}
	var placer Placer
	placer.Reset(sandboxes)
	for _, c := range containers {
		if c.GetId() == "" {
			continue
		}
		uid := placer.PodUID(c)
		if uid == "" {
			continue
		}
		labels := c.GetLabels()
		p := get(uid, labels[runtime.PodNameLabel], labels[runtime.PodNamespaceLabel])
		p.Containers = append(p.Containers, c)
	}
	return pods
}
