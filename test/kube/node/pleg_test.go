// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// image is the pleg image `make image` built for this machine's platform.
type image struct {
	dir, ref string
	tar      string // the OCI archive ctr imports
}

// buildImage runs `make image` from the repository's root, for this
// platform alone, as the README says to build it.
func buildImage(t *testing.T, ctx context.Context) image {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "image",
		"IMAGE_PLATFORMS=linux/"+goarch(), "IMAGE_DIR="+dir, "IMAGE_TAG=node-test")
	cmd.Dir = repoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	ref, err := os.ReadFile(filepath.Join(dir, "ref"))
	if err != nil {
		t.Fatalf("make image wrote no ref: %v", err)
	}
	return image{dir: dir, ref: strings.TrimSpace(string(ref)), tar: filepath.Join(dir, "pleg.tar")}
}

func goarch() string {
	out, err := exec.Command("go", "env", "GOARCH").Output()
	if err != nil {
		return "amd64"
	}
	return strings.TrimSpace(string(out))
}

// importImage imports the image into the node's containerd, in the CRI's
// namespace, as an operator loads an image on a node without a registry.
func (c *cluster) importImage(t *testing.T, ctx context.Context, img image) {
	t.Helper()
	socket := strings.TrimPrefix(c.runtime.Endpoint, "unix://")
	cmd := exec.CommandContext(ctx, c.runtime.Bin.Ctr, "--address", socket, "--namespace", "k8s.io",
		"images", "import", "--snapshotter", "native", img.tar)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ctr images import %s: %v\n%s", img.tar, err, out)
	}
	out, err := exec.CommandContext(ctx, c.runtime.Bin.Ctr, "--address", socket, "--namespace", "k8s.io",
		"images", "ls", "-q").Output()
	if err != nil || !slices.Contains(strings.Fields(string(out)), img.ref) {
		t.Fatalf("after the import, containerd's images are %q (%v): no %s", out, err, img.ref)
	}
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
	args := []string{verb, release, filepath.Join(repoRoot(), "charts", "pleg"), "--namespace", namespace,
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

// waitFor polls cond every half second until it holds or ctx ends.
func waitFor(ctx context.Context, what string, cond func() (bool, error)) error {
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last == nil {
				return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
			}
			return fmt.Errorf("waiting for %s: %w (last: %w)", what, ctx.Err(), last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// follower reads pleg's /v1/events on the node's API socket, resuming
// after the last event it read whenever the stream ends (a pod restart),
// as `pleg watch --server unix:///run/pleg/pleg.sock` does.
type follower struct {
	mu     sync.Mutex
	events []api.Event
	cancel context.CancelFunc
	done   chan error
}

func follow(t *testing.T, socket string) *follower {
	t.Helper()
	cl, err := client.New("unix://"+socket, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &follower{cancel: cancel, done: make(chan error, 1)}
	go func() {
		f.done <- cl.Follow(ctx, client.FollowOptions{}, func(ev api.Event) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.events = append(f.events, ev)
			return nil
		})
	}()
	t.Cleanup(f.stop)
	return f
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

// key is one PLEG event as both the kubelet and pleg tell it: the pod's
// UID, the type and the container's (or sandbox's) ID.
type key struct {
	PodUID, Type, ID string
}

func (k key) String() string { return k.Type + " " + k.PodUID + "/" + shortID(k.ID) }

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// kubeletEvent is one line of the kubelet's log about a PLEG event.
type kubeletEvent struct {
	key
	Pod string // namespace/name, when the kubelet still knew the pod
}

// The kubelet logs each PLEG event it syncs a pod on at -v=2 ("SyncLoop
// (PLEG): event for pod", with the pod as namespace/name), and at -v=4
// those of pods it no longer has; ContainerRemoved it never syncs on, so
// it never logs it.
var (
	plegLine  = regexp.MustCompile(`"SyncLoop \(PLEG\): [^"]*"(?: pod="([^"]+)")? event=(\{[^}]*\})`)
	plegEvent = struct {
		ID, Type string
		Data     any
	}{}
)

// kubeletEvents parses the kubelet's log.
func kubeletEvents(log []byte) ([]kubeletEvent, error) {
	var out []kubeletEvent
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := plegLine.FindSubmatch(sc.Bytes())
		if m == nil {
			continue
		}
		ev := plegEvent
		if err := json.Unmarshal(m[2], &ev); err != nil {
			return nil, fmt.Errorf("kubelet log line %q: %w", sc.Text(), err)
		}
		id, _ := ev.Data.(string)
		out = append(out, kubeletEvent{key: key{PodUID: ev.ID, Type: ev.Type, ID: id}, Pod: string(m[1])})
	}
	return out, sc.Err()
}

// compare returns what one side has and the other lacks, and what either
// has twice.
func compare(kubelet, pleg []key) (onlyKubelet, onlyPleg, twice []key) {
	count := func(ks []key) map[key]int {
		m := map[key]int{}
		for _, k := range ks {
			m[k]++
		}
		return m
	}
	kc, pc := count(kubelet), count(pleg)
	for k, n := range kc {
		if pc[k] == 0 {
			onlyKubelet = append(onlyKubelet, k)
		}
		if n > 1 {
			twice = append(twice, k)
		}
	}
	for k, n := range pc {
		if kc[k] == 0 {
			onlyPleg = append(onlyPleg, k)
		}
		if n > 1 {
			twice = append(twice, k)
		}
	}
	sort := func(ks []key) {
		slices.SortFunc(ks, func(a, b key) int { return strings.Compare(a.String(), b.String()) })
	}
	sort(onlyKubelet)
	sort(onlyPleg)
	sort(twice)
	return onlyKubelet, onlyPleg, twice
}
