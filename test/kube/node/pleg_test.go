// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/plegkit/pleg/api"
	"github.com/plegkit/pleg/api/client"
)

// release is the chart's release: the name an operator gives it in the
// README's command.
const (
	release   = "pleg"
	namespace = "kube-system"
)

// image is the pleg image `make image` built, as docs/kubernetes.md
// builds it.
type image struct {
	ref string
	// chart is the chart's directory; empty: this checkout's.
	chart string
}

// imageAsDocumented builds the image and imports it into the node's
// containerd with the commands of docs/kubernetes.md, as an operator loads
// it on a node without a registry: the reference is then the one the
// chart's appVersion and deploy/ name.
func (c *cluster) imageAsDocumented(t *testing.T, ctx context.Context, docs *docCommands) image {
	t.Helper()
	c.shell(t, ctx, "", docs.take(t, "docs/kubernetes.md", "make image", "ctr -n k8s.io images import"), nil)
	ref, err := os.ReadFile(filepath.Join(repoRoot(), "_output", "image", "ref"))
	if err != nil {
		t.Fatalf("make image wrote no ref: %v", err)
	}
	img := image{ref: strings.TrimSpace(string(ref))}
	socket := strings.TrimPrefix(c.runtime.Endpoint, "unix://")
	out, err := exec.CommandContext(ctx, c.runtime.Bin.Ctr, "--address", socket, "--namespace", "k8s.io",
		"images", "ls", "-q").Output()
	if err != nil || !slices.Contains(strings.Fields(string(out)), img.ref) {
		t.Fatalf("after the import, containerd's images are %q (%v): no %s", out, err, img.ref)
	}
	return img
}

// install is the README's helm install, with the image built here and the
// node's own paths: this runtime's socket, and a state and an API
// directory of the test's, so that no run sees another's journal.
type install struct {
	stateDir, apiDir string
}

func (in install) socket() string { return filepath.Join(in.apiDir, "pleg.sock") }

func (c *cluster) helmInstall(t *testing.T, ctx context.Context, verb string, img image, in install, extra ...string) {
	t.Helper()
	repo, tag, _ := strings.Cut(img.ref, ":")
	chart := img.chart
	if chart == "" {
		chart = filepath.Join(repoRoot(), "charts", "pleg")
	}
	args := []string{verb, release, chart, "--namespace", namespace,
		"--set", "image.repository=" + repo, "--set", "image.tag=" + tag,
		"--set", "runtime.socket=" + strings.TrimPrefix(c.runtime.Endpoint, "unix://"),
		"--set", "stateDir.hostPath=" + in.stateDir, "--set", "apiSocket.hostPath=" + in.apiDir,
		"--wait", "--timeout", "5m"}
	c.run(t, ctx, "helm", append(args, extra...)...)
}

// plegPod is the pleg pod on the node, and whether it is Ready.
func (c *cluster) plegPod(ctx context.Context) (*corev1.Pod, error) {
	pods, err := c.cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.Set{"app.kubernetes.io/name": "pleg", "app.kubernetes.io/instance": release}.String(),
		FieldSelector: "spec.nodeName=" + nodeName,
	})
	if err != nil {
		return nil, err
	}
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	if len(live) != 1 {
		return nil, fmt.Errorf("%d pleg pods on %s", len(live), nodeName)
	}
	return &live[0], nil
}

func podReady(p *corev1.Pod) (bool, time.Time) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue, c.LastTransitionTime.Time
		}
	}
	return false, time.Time{}
}

// follower reads pleg's /v1/events on the node's API socket, resuming
// after the last event it read whenever the stream ends (a pod restart),
// as `pleg watch --server unix:///run/pleg/pleg.sock` does.
type follower struct {
	mu     sync.Mutex
	events []api.Event
	cancel context.CancelFunc
	done   chan error
	// opened is closed when a stream first opens (or an event comes).
	opened     chan struct{}
	openedOnce sync.Once
}

func follow(t *testing.T, socket string) *follower {
	t.Helper()
	cl, err := client.New("unix://"+socket, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &follower{cancel: cancel, done: make(chan error, 1), opened: make(chan struct{})}
	open := func() { f.openedOnce.Do(func() { close(f.opened) }) }
	go func() {
		f.done <- cl.Follow(ctx, client.FollowOptions{Connected: open}, func(ev api.Event) error {
			open()
			f.mu.Lock()
			defer f.mu.Unlock()
			f.events = append(f.events, ev)
			return nil
		})
	}()
	t.Cleanup(f.stop)
	return f
}

// waitOpened waits until the follower's first stream opened: a follower
// started before the daemon answers gets what happens from then on.
func (f *follower) waitOpened(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-f.opened:
	case <-ctx.Done():
		t.Fatalf("the follower's stream never opened: %v", ctx.Err())
	}
}

func (f *follower) stop() {
	f.cancel()
	err := <-f.done
	f.done <- err // for the next stop or err
}

// err is why the follower stopped, or nil while it follows.
func (f *follower) err() error {
	select {
	case err := <-f.done:
		f.done <- err
		return err
	default:
		return nil
	}
}

func (f *follower) snapshot() []api.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.events)
}
