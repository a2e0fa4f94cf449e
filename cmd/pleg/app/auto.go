// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/runtime"
	"github.com/plegkit/pleg/runtime/cri"
)

// autoEndpoint is the --runtime-endpoint that finds the node's runtime
// among the usual sockets, for one configuration over a fleet of
// containerd and CRI-O nodes.
const autoEndpoint = "auto"

// autoCandidates are the sockets --runtime-endpoint auto tries, in order,
// as crictl's default list does: containerd, CRI-O (under /run and
// /var/run, which most systems link but some do not), k3s' embedded
// containerd, and cri-dockerd, the CRI in front of docker. cri-dockerd
// comes last: a docker node also runs docker's own containerd, whose
// socket answers CRI only where its CRI plugin is on, and then for
// containers other than docker's.
func autoCandidates() []string {
	return []string{
		"unix:///run/containerd/containerd.sock",
		"unix:///run/crio/crio.sock",
		"unix:///var/run/crio/crio.sock",
		"unix:///run/k3s/containerd/containerd.sock",
		"unix:///run/cri-dockerd.sock",
		"unix:///var/run/cri-dockerd.sock",
	}
}

// autoProbeTimeout bounds the Version call that tells a candidate answers.
const autoProbeTimeout = 10 * time.Second

// autoRuntime is the runtime at the first candidate socket that exists and
// answers Version. Until one does, every call looks again and fails with
// what each candidate said: a runtime down at start makes an unhealthy
// PLEG that recovers once it answers, never a failed start. Once found,
// the runtime is kept: a node does not change runtimes under a running
// pleg, and one that restarts is waited for at its own socket.
type autoRuntime struct {
	candidates []string
	open       func(endpoint string) (*cri.Runtime, error)
	log        *slog.Logger

	found atomic.Pointer[cri.Runtime]
	mu    sync.Mutex // one search at a time
	// warned tells that a search found nothing, which is logged once.
	warned bool
}

var (
	_ runtime.Runtime            = (*autoRuntime)(nil)
	_ runtime.EventSource        = (*autoRuntime)(nil)
	_ runtime.CapabilityReporter = (*autoRuntime)(nil)
	_ runtime.ListSizer          = (*autoRuntime)(nil)
)

func newAutoRuntime(candidates []string, open func(string) (*cri.Runtime, error), log *slog.Logger) *autoRuntime {
	return &autoRuntime{candidates: candidates, open: open, log: log}
}

// runtime returns the runtime found, looking for it if none is yet.
func (a *autoRuntime) runtime(ctx context.Context) (*cri.Runtime, error) {
	if rt := a.found.Load(); rt != nil {
		return rt, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if rt := a.found.Load(); rt != nil {
		return rt, nil
	}
	rt, err := a.search(ctx)
	if err != nil {
		if !a.warned && ctx.Err() == nil {
			a.warned = true
			a.log.Warn("--runtime-endpoint auto: no runtime answers yet; looking again at every call", "err", err)
		}
		return nil, err
	}
	a.found.Store(rt)
	return rt, nil
}

// search tries the candidates in order.
func (a *autoRuntime) search(ctx context.Context) (*cri.Runtime, error) {
	var tried []string
	for _, ep := range a.candidates {
		path := strings.TrimPrefix(ep, "unix://")
		if _, err := os.Stat(path); err != nil {
			tried = append(tried, ep+": no socket")
			continue
		}
		rt, err := a.open(ep)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", ep, err))
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, autoProbeTimeout)
		v, err := rt.Version(pctx)
		cancel()
		if err != nil {
			_ = rt.Close() // never used: nothing to lose
			tried = append(tried, fmt.Sprintf("%s: %v", ep, err))
			if ctx.Err() != nil {
				break
			}
			continue
		}
		args := []any{"endpoint", ep, "runtime", v.GetRuntimeName(), "version", v.GetRuntimeVersion()}
		if len(tried) > 0 {
			args = append(args, "skipped", strings.Join(tried, "; "))
		}
		a.log.Info("--runtime-endpoint auto: using the runtime found", args...)
		return rt, nil
	}
	return nil, fmt.Errorf("--runtime-endpoint auto: no runtime answers at any of %d sockets: %s",
		len(a.candidates), strings.Join(tried, "; "))
}

// Endpoint is the endpoint found, or "" before one is.
func (a *autoRuntime) Endpoint() string {
	if rt := a.found.Load(); rt != nil {
		return rt.Endpoint()
	}
	return ""
}

// Client is the CRI client of the runtime found, or nil before one is:
// what the daemon's own diagnosis asks.
func (a *autoRuntime) Client() runtimeapi.RuntimeServiceClient {
	if rt := a.found.Load(); rt != nil {
		return rt.Client()
	}
	return nil
}

// Version asks the runtime found its version, looking for one first.
func (a *autoRuntime) Version(ctx context.Context) (*runtimeapi.VersionResponse, error) {
	rt, err := a.runtime(ctx)
	if err != nil {
		return nil, err
	}
	return rt.Version(ctx)
}

func (a *autoRuntime) ListPodSandbox(
	ctx context.Context,
	filter *runtimeapi.PodSandboxFilter,
) ([]*runtimeapi.PodSandbox, error) {
	rt, err := a.runtime(ctx)
	if err != nil {
		return nil, err
	}
	return rt.ListPodSandbox(ctx, filter)
}

func (a *autoRuntime) ListContainers(
	ctx context.Context,
	filter *runtimeapi.ContainerFilter,
) ([]*runtimeapi.Container, error) {
	rt, err := a.runtime(ctx)
	if err != nil {
		return nil, err
	}
	return rt.ListContainers(ctx, filter)
}

func (a *autoRuntime) PodSandboxStatus(
	ctx context.Context,
	id string,
	verbose bool,
) (*runtimeapi.PodSandboxStatusResponse, error) {
	rt, err := a.runtime(ctx)
	if err != nil {
		return nil, err
	}
	return rt.PodSandboxStatus(ctx, id, verbose)
}

func (a *autoRuntime) ContainerStatus(
	ctx context.Context,
	id string,
	verbose bool,
) (*runtimeapi.ContainerStatusResponse, error) {
	rt, err := a.runtime(ctx)
	if err != nil {
		return nil, err
	}
	return rt.ContainerStatus(ctx, id, verbose)
}

// GetContainerEvents implements runtime.EventSource: the stream fails
// until a runtime is found, and the generator opens it again.
func (a *autoRuntime) GetContainerEvents(ctx context.Context) (runtime.EventStream, error) {
	rt, err := a.runtime(ctx)
	if err != nil {
		return nil, err
	}
	return rt.GetContainerEvents(ctx)
}

// Capabilities implements runtime.CapabilityReporter: nothing is known
// before a runtime is found.
func (a *autoRuntime) Capabilities() runtime.Capabilities {
	if rt := a.found.Load(); rt != nil {
		return rt.Capabilities()
	}
	return runtime.Capabilities{}
}

// ListSizes implements runtime.ListSizer.
func (a *autoRuntime) ListSizes() runtime.ListSizes {
	if rt := a.found.Load(); rt != nil {
		return rt.ListSizes()
	}
	return runtime.ListSizes{}
}

// Close closes the connection to the runtime found, if any.
func (a *autoRuntime) Close() error {
	if rt := a.found.Load(); rt != nil {
		return rt.Close()
	}
	return nil
}

// present is the first candidate whose socket exists, or "": a runtime
// there that does not answer may be hung, which pleg doctor diagnoses.
func present(candidates []string) string {
	for _, ep := range candidates {
		if _, err := os.Stat(strings.TrimPrefix(ep, "unix://")); err == nil {
			return ep
		}
	}
	return ""
}
