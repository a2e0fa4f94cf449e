// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// dialBoth returns runtime and image clients of the simulator.
func dialBoth(t testing.TB, s *Sim) (runtimeapi.RuntimeServiceClient, runtimeapi.ImageServiceClient) {
	t.Helper()
	conn, err := grpc.NewClient(s.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn)
}

// fixture is a sandbox with a running and an exited container.
type fixture struct {
	sandbox, running, exited string
}

func newFixture(ctx context.Context, t *testing.T, rc runtimeapi.RuntimeServiceClient, name string) fixture {
	t.Helper()
	sb, err := rc.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podSandboxConfig(name, "uid-"+name)})
	if err != nil {
		t.Fatal(err)
	}
	f := fixture{sandbox: sb.GetPodSandboxId()}
	for _, c := range []struct {
		name string
		id   *string
		stop bool
	}{{"run", &f.running, false}, {"done", &f.exited, true}} {
		resp, err := rc.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
			PodSandboxId: f.sandbox,
			Config:       containerConfigFor(name, "uid-"+name, c.name, 0),
		})
		if err != nil {
			t.Fatal(err)
		}
		*c.id = resp.GetContainerId()
		if _, err := rc.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: *c.id}); err != nil {
			t.Fatal(err)
		}
		if c.stop {
			if _, err := rc.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: *c.id, Timeout: 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return f
}

// TestIdempotentStopAndRemove checks the CRI's idempotence contract: stops
// and removals of unknown, stopped or removed items succeed, and removals
// take what they must with them.
func TestIdempotentStopAndRemove(t *testing.T) {
	const unknown = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	containerState := func(ctx context.Context, rc runtimeapi.RuntimeServiceClient, id string) (runtimeapi.ContainerState, int32, codes.Code) {
		resp, err := rc.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
		return resp.GetStatus().GetState(), resp.GetStatus().GetExitCode(), status.Code(err)
	}
	tests := []struct {
		name string
		// call makes the call under test, twice when the second must
		// succeed too.
		call func(ctx context.Context, rc runtimeapi.RuntimeServiceClient, f fixture) error
		// check looks at the state after the calls.
		check func(ctx context.Context, t *testing.T, rc runtimeapi.RuntimeServiceClient, f fixture)
	}{
		{
			name: "stop unknown sandbox",
			call: func(ctx context.Context, rc runtimeapi.RuntimeServiceClient, _ fixture) error {
				_, err := rc.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: unknown})
				return err
			},
		},
		{
			name: "stop sandbox twice",
			call: func(ctx context.Context, rc runtimeapi.RuntimeServiceClient, f fixture) error {
				for range 2 {
					if _, err := rc.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: f.sandbox}); err != nil {
						return err
					}
				}
				return nil
			},
			check: func(ctx context.Context, t *testing.T, rc runtimeapi.RuntimeServiceClient, f fixture) {
				resp, err := rc.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: f.sandbox})
				if err != nil || resp.GetStatus().GetState() != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
					t.Errorf("sandbox after two stops: %v, %v; want NOTREADY", resp.GetStatus().GetState(), err)
				}
				if st, code, _ := containerState(ctx, rc, f.running); st != runtimeapi.ContainerState_CONTAINER_EXITED || code != exitKilled {
					t.Errorf("its running container: %v, exit %d; want EXITED, %d", st, code, exitKilled)
				}
			},
		},
		{
			name: "remove unknown sandbox",
			call: func(ctx context.Context, rc runtimeapi.RuntimeServiceClient, _ fixture) error {
				_, err := rc.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: unknown})
				return err
			},
		},
		{
			name: "remove running sandbox removes its containers",
			call: func(ctx context.Context, rc runtimeapi.RuntimeServiceClient, f fixture) error {
				for range 2 {
					if _, err := rc.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: f.sandbox}); err != nil {
						return err
					}
				}
				return nil
			},
			check: func(ctx context.Context, t *testing.T, rc runtimeapi.RuntimeServiceClient, f fixture) {
				for _, id := range []string{f.running, f.exited} {
					if _, _, code := containerState(ctx, rc, id); code != codes.NotFound {
						t.Errorf("container %s of a removed sandbox: %v, want NotFound", id, code)
					}
				}
				resp, err := rc.ListContainers(ctx, &runtimeapi.ListContainersRequest{
					Filter: &runtimeapi.ContainerFilter{PodSandboxId: f.sandbox},
				})
				if err != nil || len(resp.GetContainers()) != 0 {
					t.Errorf("containers listed for a removed sandbox: %v, %v", resp.GetContainers(), err)
				}
			},
		},
		{
			name: "stop unknown container",
			call: func(ctx context.Context, rc runtimeapi.RuntimeServiceClient, _ fixture) error {
				_, err := rc.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: unknown})
				return err
			},
		},
		{
			name: "stop exited container",
			call: func(ctx context.Context, rc runtimeapi.RuntimeServiceClient, f fixture) error {
				_, err := rc.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: f.exited})
				return err
			},
			check: func(ctx context.Context, t *testing.T, rc runtimeapi.RuntimeServiceClient, f fixture) {
				// The first stop had a grace period: its exit code stays.
				if st, code, _ := containerState(ctx, rc, f.exited); st != runtimeapi.ContainerState_CONTAINER_EXITED || code != exitTerminated {
					t.Errorf("container stopped twice: %v, exit %d; want EXITED, %d", st, code, exitTerminated)
				}
			},
		},
		{
			name: "remove unknown container",
			call: func(ctx context.Context, rc runtimeapi.RuntimeServiceClient, _ fixture) error {
				_, err := rc.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: unknown})
				return err
			},
		},
		{
			name: "remove running container forcibly",
			call: func(ctx context.Context, rc runtimeapi.RuntimeServiceClient, f fixture) error {
				for range 2 {
					if _, err := rc.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: f.running}); err != nil {
						return err
					}
				}
				return nil
			},
			check: func(ctx context.Context, t *testing.T, rc runtimeapi.RuntimeServiceClient, f fixture) {
				if _, _, code := containerState(ctx, rc, f.running); code != codes.NotFound {
					t.Errorf("removed running container: %v, want NotFound", code)
				}
				if st, _, _ := containerState(ctx, rc, f.exited); st != runtimeapi.ContainerState_CONTAINER_EXITED {
					t.Errorf("its sibling: %v, want it left EXITED", st)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startSim(t, Options{})
			rc, _ := dialBoth(t, s)
			ctx := testContext(t)
			f := newFixture(ctx, t, rc, "pod")
			if err := tt.call(ctx, rc, f); err != nil {
				t.Fatalf("%s: %v, want success", tt.name, err)
			}
			if tt.check != nil {
				tt.check(ctx, t, rc, f)
			}
		})
	}
}

// TestCreateContainerChecks covers what CreateContainer refuses and what
// it reports back.
func TestCreateContainerChecks(t *testing.T) {
	tests := []struct {
		name     string
		edit     func(*runtimeapi.ContainerConfig)
		wantCode codes.Code
		check    func(t *testing.T, st *runtimeapi.ContainerStatus)
	}{
		{
			name: "group without user",
			edit: func(c *runtimeapi.ContainerConfig) {
				c.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
					RunAsGroup: &runtimeapi.Int64Value{Value: 1000},
				}}
			},
			wantCode: codes.InvalidArgument,
		},
		{
			name: "group with user",
			edit: func(c *runtimeapi.ContainerConfig) {
				c.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
					RunAsUser:  &runtimeapi.Int64Value{Value: 1000},
					RunAsGroup: &runtimeapi.Int64Value{Value: 1000},
				}}
			},
		},
		{
			name: "group with user name",
			edit: func(c *runtimeapi.ContainerConfig) {
				c.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
					RunAsUsername: "www-data",
					RunAsGroup:    &runtimeapi.Int64Value{Value: 1000},
				}}
			},
		},
		{
			name: "mounts are reported",
			edit: func(c *runtimeapi.ContainerConfig) {
				c.Mounts = []*runtimeapi.Mount{{
					HostPath: "/tmp/a", ContainerPath: "/a",
					Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER,
				}, {HostPath: "/tmp/b", ContainerPath: "/b", Readonly: true}}
			},
			check: func(t *testing.T, st *runtimeapi.ContainerStatus) {
				m := st.GetMounts()
				if len(m) != 2 || m[0].GetContainerPath() != "/a" ||
					m[0].GetPropagation() != runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER ||
					m[1].GetHostPath() != "/tmp/b" || !m[1].GetReadonly() {
					t.Errorf("mounts in status: %v", m)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startSim(t, Options{})
			rc, _ := dialBoth(t, s)
			ctx := testContext(t)
			sb, err := rc.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podSandboxConfig("p", "uid-p")})
			if err != nil {
				t.Fatal(err)
			}
			cfg := containerConfigFor("p", "uid-p", "c", 0)
			tt.edit(cfg)
			resp, err := rc.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.GetPodSandboxId(), Config: cfg})
			if status.Code(err) != tt.wantCode {
				t.Fatalf("CreateContainer: %v, want code %v", err, tt.wantCode)
			}
			if err != nil || tt.check == nil {
				return
			}
			st, err := rc.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: resp.GetContainerId()})
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, st.GetStatus())
		})
	}
}

// criRegistry is a registry like the one critest's images live in: three
// tags of one image, and images whose config sets a user.
var criRegistry = Registry{
	"example.com/tags:1":   {Digest: "sha256:1111111111111111111111111111111111111111111111111111111111111111"},
	"example.com/tags:2":   {Digest: "sha256:1111111111111111111111111111111111111111111111111111111111111111"},
	"example.com/tags:3":   {Digest: "sha256:1111111111111111111111111111111111111111111111111111111111111111"},
	"example.com/uid":      {User: "1002"},
	"example.com/uidgroup": {User: "1003:1003"},
	"example.com/name":     {User: "www-data:www-data"},
}

const someDigest = "sha256:9700f9a2f5bf2c45f2f605a0bd3bce7cf37420ec9d3ed50ac2758413308766bf"

// TestImageService pulls references and checks what the ImageService then
// tells of them.
func TestImageService(t *testing.T) {
	type want struct {
		tags, digests []string
		uid           int64
		user          string
	}
	tests := []struct {
		name string
		pull []string
		// same lists references that must all name the image of pull[0].
		same []string
		want want
		// removeBy removes the image by this reference; then none of pull
		// and same names an image.
		removeBy string
	}{
		{
			name: "short name",
			pull: []string{"busybox"},
			same: []string{"busybox:latest", "docker.io/library/busybox", "docker.io/library/busybox:latest"},
			want: want{tags: []string{"docker.io/library/busybox:latest"}},
		},
		{
			name: "digest",
			pull: []string{"busybox@" + someDigest},
			same: []string{"docker.io/library/busybox@" + someDigest},
			want: want{digests: []string{"docker.io/library/busybox@" + someDigest}},
		},
		{
			name:     "tags of one image",
			pull:     []string{"example.com/tags:1", "example.com/tags:2", "example.com/tags:3"},
			same:     []string{"example.com/tags:3"},
			want:     want{tags: []string{"example.com/tags:1", "example.com/tags:2", "example.com/tags:3"}},
			removeBy: "example.com/tags:2",
		},
		{
			name:     "one image on two registries",
			pull:     []string{"registry.k8s.io/pause:3.9", "k8s.gcr.io/pause:3.9"},
			want:     want{tags: []string{"k8s.gcr.io/pause:3.9", "registry.k8s.io/pause:3.9"}},
			removeBy: "k8s.gcr.io/pause:3.9",
		},
		{name: "user ID", pull: []string{"example.com/uid"}, want: want{tags: []string{"example.com/uid:latest"}, uid: 1002}},
		{name: "user ID and group", pull: []string{"example.com/uidgroup"}, want: want{tags: []string{"example.com/uidgroup:latest"}, uid: 1003}},
		{name: "user name", pull: []string{"example.com/name"}, want: want{tags: []string{"example.com/name:latest"}, user: "www-data"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startSim(t, Options{Registry: criRegistry})
			_, ic := dialBoth(t, s)
			ctx := testContext(t)
			var id string
			for i, ref := range tt.pull {
				resp, err := ic.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
				if err != nil {
					t.Fatalf("pull %s: %v", ref, err)
				}
				if i == 0 {
					id = resp.GetImageRef()
				} else if resp.GetImageRef() != id {
					t.Fatalf("pull %s: image %s, want %s as %s", ref, resp.GetImageRef(), id, tt.pull[0])
				}
			}
			status := func(ref string) *runtimeapi.Image {
				resp, err := ic.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
				if err != nil {
					t.Fatalf("status of %s: %v", ref, err)
				}
				return resp.GetImage()
			}
			img := status(tt.pull[0])
			if img.GetId() != id || !slices.Equal(img.GetRepoTags(), tt.want.tags) || img.GetSize() == 0 ||
				img.GetUid().GetValue() != tt.want.uid || img.GetUsername() != tt.want.user {
				t.Fatalf("status of %s: %v; want ID %s and %+v", tt.pull[0], img, id, tt.want)
			}
			if tt.want.digests != nil && !slices.Equal(img.GetRepoDigests(), tt.want.digests) {
				t.Fatalf("repo digests of %s: %v, want %v", tt.pull[0], img.GetRepoDigests(), tt.want.digests)
			}
			// Every name the status gives, and the ID with or without its
			// algorithm, finds the same image.
			refs := slices.Concat(tt.same, img.GetRepoTags(), img.GetRepoDigests(), []string{id, strings.TrimPrefix(id, "sha256:")})
			for _, ref := range refs {
				if got := status(ref); got.GetId() != id {
					t.Errorf("status of %s: %v, want image %s", ref, got, id)
				}
				list, err := ic.ListImages(ctx, &runtimeapi.ListImagesRequest{
					Filter: &runtimeapi.ImageFilter{Image: &runtimeapi.ImageSpec{Image: ref}},
				})
				if err != nil || len(list.GetImages()) != 1 || list.GetImages()[0].GetId() != id {
					t.Errorf("images listed for %s: %v, %v; want image %s alone", ref, list.GetImages(), err, id)
				}
			}
			removeBy := cmp.Or(tt.removeBy, id)
			if _, err := ic.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: removeBy}}); err != nil {
				t.Fatalf("remove %s: %v", removeBy, err)
			}
			for _, ref := range slices.Concat(tt.pull, refs) {
				if got := status(ref); got != nil {
					t.Errorf("status of %s after removing %s: %v, want none", ref, removeBy, got)
				}
			}
		})
	}
}

// TestImageServiceEdges covers what no pull table shows: determinism,
// idempotent removal, bad references, the file system, deadlines and the
// image a container reports.
func TestImageServiceEdges(t *testing.T) {
	s := startSim(t, Options{Registry: criRegistry, Latency: LatencyModel{
		"pull_image": {P50: 100 * time.Millisecond},
	}})
	rc, ic := dialBoth(t, s)
	ctx := testContext(t)
	pull := func(ref string) (string, error) {
		resp, err := ic.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		return resp.GetImageRef(), err
	}

	// A pull answers after its latency, so a shorter deadline fails it as
	// the deadline says.
	short, cancel := context.WithTimeout(ctx, time.Millisecond)
	_, err := ic.PullImage(short, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox"}})
	cancel()
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("pull with a 1 ms deadline: %v, want DeadlineExceeded", err)
	}

	// One reference, one ID, in any simulator; two tags, two images.
	id, err := pull("busybox:1.36")
	if err != nil {
		t.Fatal(err)
	}
	other := startSim(t, Options{})
	_, ic2 := dialBoth(t, other)
	if resp, err := ic2.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"}}); err != nil ||
		resp.GetImageRef() != id {
		t.Errorf("busybox:1.36 in another simulator: %v, %v; want %s", resp.GetImageRef(), err, id)
	}
	if id2, err := pull("busybox:1.37"); err != nil || id2 == id {
		t.Errorf("busybox:1.37: %s, %v; want an image of its own", id2, err)
	}

	// A container reports the ID its image was pulled as, whatever name
	// it was created with.
	sb, err := rc.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podSandboxConfig("p", "uid-p")})
	if err != nil {
		t.Fatal(err)
	}
	for i, ref := range []string{id, "busybox:1.36", "docker.io/library/busybox:1.36"} {
		cfg := containerConfigFor("p", "uid-p", "c", uint32(i))
		cfg.Image = &runtimeapi.ImageSpec{Image: ref, UserSpecifiedImage: "busybox:1.36"}
		c, err := rc.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.GetPodSandboxId(), Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		st, err := rc.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.GetContainerId()})
		if err != nil || st.GetStatus().GetImageId() != id || st.GetStatus().GetImageRef() != id {
			t.Errorf("container of %s: image %q, %v; want %s", ref, st.GetStatus().GetImageId(), err, id)
		}
		list, err := rc.ListContainers(ctx, &runtimeapi.ListContainersRequest{
			Filter: &runtimeapi.ContainerFilter{Id: c.GetContainerId()},
		})
		if err != nil || len(list.GetContainers()) != 1 || list.GetContainers()[0].GetImageId() != id {
			t.Errorf("listed container of %s: %v, %v; want image %s", ref, list.GetContainers(), err, id)
		}
	}

	// Bad references are refused, and found nowhere.
	for _, bad := range []string{"", "Busybox", "busybox@sha256:short"} {
		if _, err := pull(bad); status.Code(err) != codes.InvalidArgument {
			t.Errorf("pull %q: %v, want InvalidArgument", bad, err)
		}
		resp, err := ic.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: bad}})
		if err != nil || resp.GetImage() != nil {
			t.Errorf("status of %q: %v, %v; want no image", bad, resp.GetImage(), err)
		}
	}

	// Removing what is not there succeeds, twice.
	for _, ref := range []string{strings.Repeat("0", 64), "never/pulled:1", "Busybox"} {
		for range 2 {
			if _, err := ic.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
				t.Errorf("remove absent %q: %v, want success", ref, err)
			}
		}
	}

	// The image file system holds every image.
	list, err := ic.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var used uint64
	for _, img := range list.GetImages() {
		used += img.GetSize()
	}
	fs, err := ic.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if f := fs.GetImageFilesystems(); len(f) != 1 || f[0].GetUsedBytes().GetValue() != used ||
		f[0].GetInodesUsed().GetValue() != uint64(len(list.GetImages())) {
		t.Errorf("image file system: %v; want %d bytes in %d images", f, used, len(list.GetImages()))
	}
	// PauseImage, WorkloadImage and the two busyboxes.
	if n := len(list.GetImages()); n != 4 {
		t.Errorf("%d images listed, want 4: %v", n, list.GetImages())
	}
}

func TestRegistryValidation(t *testing.T) {
	tests := []struct {
		name string
		reg  Registry
		want string
	}{
		{"bad reference", Registry{"Not A Reference": {}}, "Not A Reference"},
		{"bad digest", Registry{"busybox": {Digest: "sha256:abc"}}, "digest of"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Options{Registry: tt.reg}.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate: %v, want an error about %q", err, tt.want)
			}
			if _, err := New(Options{Registry: tt.reg}); err == nil {
				t.Fatal("New accepted the registry")
			}
		})
	}
}

// TestContainerStats checks the made-up stats: one per listed container,
// filtered as ListContainers filters, with the fields critest and the
// kubelet read.
func TestContainerStats(t *testing.T) {
	s := startSim(t, Options{})
	rc, _ := dialBoth(t, s)
	ctx := testContext(t)
	a := newFixture(ctx, t, rc, "a")
	b := newFixture(ctx, t, rc, "b")
	created, err := rc.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: a.sandbox,
		Config:       containerConfigFor("a", "uid-a", "idle", 0),
	})
	if err != nil {
		t.Fatal(err)
	}

	single := []struct {
		name     string
		id       string
		wantCode codes.Code
		running  bool
	}{
		{"running", a.running, codes.OK, true},
		{"exited", a.exited, codes.OK, false},
		{"created", created.GetContainerId(), codes.OK, false},
		{"unknown", "feedface", codes.NotFound, false},
		{"empty ID", "", codes.InvalidArgument, false},
	}
	for _, tt := range single {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := rc.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: tt.id})
			if status.Code(err) != tt.wantCode {
				t.Fatalf("ContainerStats: %v, want code %v", err, tt.wantCode)
			}
			if err != nil {
				return
			}
			st := resp.GetStats()
			if st.GetAttributes().GetId() != tt.id || st.GetAttributes().GetMetadata().GetName() == "" ||
				st.GetCpu().GetTimestamp() == 0 || st.GetMemory().GetTimestamp() == 0 || st.GetWritableLayer() == nil {
				t.Fatalf("stats of %s: %v", tt.id, st)
			}
			if busy := st.GetMemory().GetWorkingSetBytes().GetValue() > 0; busy != tt.running {
				t.Errorf("working set %d; want some only when running", st.GetMemory().GetWorkingSetBytes().GetValue())
			}
		})
	}

	lists := []struct {
		name   string
		filter *runtimeapi.ContainerStatsFilter
		want   []string
	}{
		{"nil filter", nil, []string{a.running, a.exited, created.GetContainerId(), b.running, b.exited}},
		{"by ID", &runtimeapi.ContainerStatsFilter{Id: b.exited}, []string{b.exited}},
		{"by sandbox", &runtimeapi.ContainerStatsFilter{PodSandboxId: b.sandbox}, []string{b.running, b.exited}},
		{
			"by labels",
			&runtimeapi.ContainerStatsFilter{LabelSelector: map[string]string{"io.kubernetes.container.name": "idle"}},
			[]string{created.GetContainerId()},
		},
		{"unknown sandbox", &runtimeapi.ContainerStatsFilter{PodSandboxId: "feedface"}, nil},
	}
	for _, tt := range lists {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := rc.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{Filter: tt.filter})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, st := range resp.GetStats() {
				got = append(got, st.GetAttributes().GetId())
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tt.want))
			if !slices.Equal(got, want) {
				t.Fatalf("stats of %v, want %v", got, want)
			}
		})
	}

	// The CPU counter of a running container only grows.
	first, err := rc.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: a.running})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the CPU counter to grow", func() bool {
		next, err := rc.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: a.running})
		return err == nil && next.GetStats().GetCpu().GetUsageCoreNanoSeconds().GetValue() >
			first.GetStats().GetCpu().GetUsageCoreNanoSeconds().GetValue()
	})
}

func TestLoadRegistry(t *testing.T) {
	const d = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	tests := []struct {
		name, file, content string
		want                Registry
		wantErr             string
	}{
		{
			name: "json", file: "r.json",
			content: `{"busybox:1": {"digest": "` + d + `", "user": "1002"}}`,
			want:    Registry{"busybox:1": {Digest: d, User: "1002"}},
		},
		{
			name: "yaml", file: "r.yaml",
			content: "example.com/a:1:\n  digest: " + d + "\nexample.com/name:\n  user: www-data\n",
			want:    Registry{"example.com/a:1": {Digest: d}, "example.com/name": {User: "www-data"}},
		},
		{name: "unknown field", file: "r.yaml", content: "busybox:\n  digets: x\n", wantErr: "digets"},
		{name: "bad reference", file: "r.yaml", content: "\"Busybox\": {}\n", wantErr: "Busybox"},
		{name: "bad digest", file: "r.yaml", content: "busybox:\n  digest: md5:abc\n", wantErr: "digest of"},
		{name: "missing", file: "", wantErr: "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), cmp.Or(tt.file, "absent.yaml"))
			if tt.file != "" {
				if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := LoadRegistry(path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("LoadRegistry: %v, want an error about %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !maps.Equal(got, tt.want) {
				t.Fatalf("LoadRegistry: %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// TestRuntimeConfigCgroupDriver: RuntimeConfig reports the configured
// cgroup driver, which a kubelet from 1.34 takes over its own setting;
// an unknown driver is refused by New.
func TestRuntimeConfigCgroupDriver(t *testing.T) {
	for _, tt := range []struct {
		driver string
		want   runtimeapi.CgroupDriver
	}{
		{"", runtimeapi.CgroupDriver_SYSTEMD},
		{CgroupDriverSystemd, runtimeapi.CgroupDriver_SYSTEMD},
		{CgroupDriverCgroupfs, runtimeapi.CgroupDriver_CGROUPFS},
	} {
		t.Run(tt.driver, func(t *testing.T) {
			rc := dial(t, startSim(t, Options{CgroupDriver: tt.driver}))
			resp, err := rc.RuntimeConfig(context.Background(), &runtimeapi.RuntimeConfigRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.GetLinux().GetCgroupDriver(); got != tt.want {
				t.Errorf("cgroup driver %v, want %v", got, tt.want)
			}
		})
	}
	if err := (Options{CgroupDriver: "cgroupv3"}).Validate(); err == nil || !strings.Contains(err.Error(), "cgroupv3") {
		t.Errorf("Validate of cgroup driver cgroupv3: %v, want an error naming it", err)
	}
}

// TestReopenContainerLog: a running container's log file is made where
// the kubelet looks for it (below LogRoot here), and kept if it exists;
// a container not running gets FailedPrecondition and no file, an
// unknown one NotFound.
func TestReopenContainerLog(t *testing.T) {
	root := t.TempDir()
	s := startSim(t, Options{LogRoot: root})
	rc, _ := dialBoth(t, s)
	ctx := context.Background()
	sb, err := rc.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podSandboxConfig("logs", "uid-logs")})
	if err != nil {
		t.Fatal(err)
	}
	var f fixture
	for _, c := range []struct {
		name string
		id   *string
		stop bool
	}{{"run", &f.running, false}, {"done", &f.exited, true}} {
		cfg := containerConfigFor("logs", "uid-logs", c.name, 0)
		cfg.LogPath = c.name + "/0.log" // as the kubelet names it
		resp, err := rc.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.GetPodSandboxId(), Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		*c.id = resp.GetContainerId()
		if _, err := rc.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: *c.id}); err != nil {
			t.Fatal(err)
		}
		if c.stop {
			if _, err := rc.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: *c.id, Timeout: 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	path := func(id string) string {
		st, err := rc.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
		if err != nil {
			t.Fatal(err)
		}
		if st.GetStatus().GetLogPath() == "" {
			t.Fatalf("container %s has no log path", id)
		}
		return filepath.Join(root, st.GetStatus().GetLogPath())
	}
	for range 2 { // the second finds the file there
		if _, err := rc.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: f.running}); err != nil {
			t.Fatalf("ReopenContainerLog of a running container: %v", err)
		}
		if fi, err := os.Stat(path(f.running)); err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("after ReopenContainerLog, %s: %v", path(f.running), err)
		}
	}
	_, err = rc.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: f.exited})
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("ReopenContainerLog of an exited container: %v, want FailedPrecondition", err)
	}
	if _, err := os.Stat(path(f.exited)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an exited container's log file: %v, want none", err)
	}
	_, err = rc.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: "nope"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("ReopenContainerLog of an unknown container: %v, want NotFound", err)
	}
}

// TestImageFsMountpoint: ImageFsInfo reports the configured mount point,
// which a kubelet stats for its eviction manager.
func TestImageFsMountpoint(t *testing.T) {
	for _, tt := range []struct{ set, want string }{
		{"", DefaultImageFsMountpoint},
		{"/var/lib/kubelet", "/var/lib/kubelet"},
	} {
		_, ic := dialBoth(t, startSim(t, Options{ImageFsMountpoint: tt.set}))
		fs, err := ic.ImageFsInfo(context.Background(), &runtimeapi.ImageFsInfoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if got := fs.GetImageFilesystems()[0].GetFsId().GetMountpoint(); got != tt.want {
			t.Errorf("ImageFsMountpoint %q: mount point %q, want %q", tt.set, got, tt.want)
		}
	}
}
