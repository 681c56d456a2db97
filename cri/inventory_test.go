package cri_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	apitest "k8s.io/cri-api/pkg/apis/testing"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/cri"
	"github.com/shoal-io/shoal/cri/critest"
)

var t0 = time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)

// at returns t0 plus n seconds.
func at(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }

// preStopExec is a preStop handler as a pod spec would have it.
var preStopExec = &corev1.LifecycleHandler{
	Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "sleep 5"}},
}

// preStopHTTP is an httpGet preStop handler.
var preStopHTTP = &corev1.LifecycleHandler{
	HTTPGet: &corev1.HTTPGetAction{Path: "/drain", Port: intstr.FromInt32(8080), Scheme: corev1.URISchemeHTTP},
}

// nodeFixture fills a fake runtime with what kubelet would leave on a node:
//
//   - default/web: sandbox recreated once (old one NOTREADY), container app
//     restarted twice (attempts 0, 1 exited, 2 running, preStop exec), a
//     sidecar whose preStop annotation is malformed JSON, an exited init
//     container;
//   - default/db-0: a StatefulSet pod deleted and recreated under the same
//     name, with the old pod's sandbox and container still present;
//   - default/job-1: a finished pod (sandbox NOTREADY, container exited 0);
//   - kube-system/coredns: a container created but not started;
//   - a container whose sandbox is gone and that has no kubelet labels.
func nodeFixture(t *testing.T) *critest.Fake {
	t.Helper()
	f := critest.New(t)

	webOld := f.AddSandbox(critest.Sandbox{Namespace: "default", Name: "web", UID: "uid-web", Attempt: 0, NotReady: true, CreatedAt: at(0), PodLabels: map[string]string{"app": "web"}})
	webNew := f.AddSandbox(critest.Sandbox{Namespace: "default", Name: "web", UID: "uid-web", Attempt: 1, CreatedAt: at(100), IP: "10.244.1.7", PodLabels: map[string]string{"app": "web"}})
	f.AddContainer(webOld, critest.Container{Name: "init-config", Type: cri.ContainerTypeInit, State: runtimeapi.ContainerState_CONTAINER_EXITED, CreatedAt: at(1), StartedAt: at(2), FinishedAt: at(3), Reason: "Completed", Image: "sha256:init", ImageRef: "registry.local/init@sha256:aaa"})
	f.AddContainer(webOld, critest.Container{Name: "app", Attempt: 0, State: runtimeapi.ContainerState_CONTAINER_EXITED, CreatedAt: at(4), StartedAt: at(5), FinishedAt: at(50), ExitCode: 137, Reason: "Error", PreStop: preStopExec, TerminationGracePeriodSeconds: ptr.To[int64](45)})
	f.AddContainer(webNew, critest.Container{Name: "app", Attempt: 1, State: runtimeapi.ContainerState_CONTAINER_EXITED, CreatedAt: at(101), StartedAt: at(102), FinishedAt: at(150), ExitCode: 1, Reason: "Error", PreStop: preStopExec, TerminationGracePeriodSeconds: ptr.To[int64](45)})
	f.AddContainer(webNew, critest.Container{Name: "app", Attempt: 2, State: runtimeapi.ContainerState_CONTAINER_RUNNING, CreatedAt: at(160), StartedAt: at(161),
		Image: "sha256:app2", UserSpecifiedImage: "registry.local/app:v2", ImageRef: "registry.local/app@sha256:bbb", ImageID: "sha256:app2",
		PreStop: preStopExec, TerminationGracePeriodSeconds: ptr.To[int64](45)})
	f.AddContainer(webNew, critest.Container{Name: "sidecar", State: runtimeapi.ContainerState_CONTAINER_RUNNING, CreatedAt: at(103), StartedAt: at(104),
		TerminationGracePeriodSeconds: ptr.To[int64](45),
		Annotations:                   map[string]string{cri.AnnotationContainerPreStopHandler: `{"exec": {"command": "not-a-list"`}})

	dbOld := f.AddSandbox(critest.Sandbox{ID: "sb-db-old", Namespace: "default", Name: "db-0", UID: "uid-db-old", NotReady: true, CreatedAt: at(0)})
	dbNew := f.AddSandbox(critest.Sandbox{ID: "sb-db-new", Namespace: "default", Name: "db-0", UID: "uid-db-new", CreatedAt: at(200), IP: "10.244.1.9"})
	f.AddContainer(dbOld, critest.Container{Name: "db", Attempt: 5, State: runtimeapi.ContainerState_CONTAINER_EXITED, CreatedAt: at(10), StartedAt: at(11), FinishedAt: at(190)})
	f.AddContainer(dbNew, critest.Container{Name: "db", Attempt: 0, State: runtimeapi.ContainerState_CONTAINER_RUNNING, CreatedAt: at(201), StartedAt: at(202), PreStop: preStopHTTP})

	job := f.AddSandbox(critest.Sandbox{Namespace: "default", Name: "job-1", UID: "uid-job", NotReady: true, CreatedAt: at(20), IP: ""})
	f.AddContainer(job, critest.Container{Name: "main", State: runtimeapi.ContainerState_CONTAINER_EXITED, CreatedAt: at(21), StartedAt: at(22), FinishedAt: at(30), ExitCode: 0, Reason: "Completed"})

	dns := f.AddSandbox(critest.Sandbox{Namespace: "kube-system", Name: "coredns", UID: "uid-dns", CreatedAt: at(5), IP: "10.244.1.2"})
	f.AddContainer(dns, critest.Container{Name: "coredns", State: runtimeapi.ContainerState_CONTAINER_CREATED, CreatedAt: at(6)})

	// A container of a removed sandbox, without kubelet labels.
	f.RuntimeService.Lock()
	f.RuntimeService.Containers["orphan"] = &apitest.FakeContainer{
		ContainerStatus: runtimeapi.ContainerStatus{
			Id:       "orphan",
			Metadata: &runtimeapi.ContainerMetadata{Name: "x"},
			State:    runtimeapi.ContainerState_CONTAINER_EXITED,
		},
		SandboxID: "gone",
	}
	f.RuntimeService.Unlock()
	return f
}

func TestReadInventory(t *testing.T) {
	ctx := context.Background()
	f := nodeFixture(t)
	inv, err := cri.ReadInventory(ctx, f.RuntimeService)
	require.NoError(t, err)

	var keys []string
	for _, p := range inv.Pods {
		keys = append(keys, p.Namespace+"/"+p.Name)
	}
	require.Equal(t, []string{"default/db-0", "default/job-1", "default/web", "kube-system/coredns"}, keys, "pods sorted by namespace/name")
	require.Len(t, inv.Warnings, 1)
	require.Contains(t, inv.Warnings[0], "orphan")

	tests := []struct {
		name  string
		check func(t *testing.T, inv cri.Inventory)
	}{
		{"latest sandbox wins and all sandboxes are counted", func(t *testing.T, inv cri.Inventory) {
			p, ok := inv.Find("default", "web")
			require.True(t, ok)
			require.Equal(t, "uid-web", p.UID)
			require.Equal(t, "sb-default-web-1", p.SandboxID)
			require.Equal(t, uint32(1), p.SandboxAttempt)
			require.Equal(t, 2, p.Sandboxes)
			require.Equal(t, cri.SandboxReady, p.State)
			require.True(t, p.Running())
			require.Equal(t, "10.244.1.7", p.IP)
			require.Equal(t, at(100), p.CreatedAt)
			require.Equal(t, map[string]string{"app": "web"}, p.Labels)
			require.Equal(t, ptr.To[int64](45), p.TerminationGracePeriodSeconds)
			require.Empty(t, p.Warnings)
		}},
		{"containers sorted by name, latest attempt kept", func(t *testing.T, inv cri.Inventory) {
			p, _ := inv.Find("default", "web")
			var names []string
			for _, c := range p.Containers {
				names = append(names, c.Name)
			}
			require.Equal(t, []string{"app", "init-config", "sidecar"}, names)

			app, ok := p.Container("app")
			require.True(t, ok)
			require.Equal(t, "c-sb-default-web-1-app-2", app.ID)
			require.Equal(t, "sb-default-web-1", app.SandboxID)
			require.Equal(t, uint32(2), app.Attempt)
			require.Equal(t, 2, app.RestartCount)
			require.Equal(t, 2, app.OlderAttempts)
			require.Equal(t, cri.ContainerRunning, app.State)
			require.Equal(t, cri.ContainerTypeRegular, app.Type)
			require.Equal(t, "sha256:app2", app.Image)
			require.Equal(t, "registry.local/app:v2", app.UserSpecifiedImage)
			require.Equal(t, "registry.local/app@sha256:bbb", app.ImageRef)
			require.Equal(t, "sha256:app2", app.ImageID, "image id comes from ContainerStatus")
			require.Equal(t, at(160), app.CreatedAt)
			require.Equal(t, ptr.To(at(161)), app.StartedAt)
			require.Nil(t, app.FinishedAt)
			require.Nil(t, app.ExitCode, "no exit code while running")
			require.Equal(t, "1a2b3c4d", app.Hash)
			require.Equal(t, ptr.To[int64](45), app.TerminationGracePeriodSeconds)
			require.Empty(t, app.Warnings)
		}},
		{"preStop handler decoded", func(t *testing.T, inv cri.Inventory) {
			web, _ := inv.Find("default", "web")
			app, _ := web.Container("app")
			require.Equal(t, preStopExec, app.PreStop)
			db, _ := inv.Find("default", "db-0")
			c, _ := db.Container("db")
			require.Equal(t, preStopHTTP, c.PreStop)
			init, _ := web.Container("init-config")
			require.Nil(t, init.PreStop)
		}},
		{"bad preStop JSON is a warning, not an error", func(t *testing.T, inv cri.Inventory) {
			p, _ := inv.Find("default", "web")
			sc, ok := p.Container("sidecar")
			require.True(t, ok)
			require.Nil(t, sc.PreStop)
			require.Len(t, sc.Warnings, 1)
			require.Contains(t, sc.Warnings[0], cri.AnnotationContainerPreStopHandler)
			require.Contains(t, sc.Warnings[0], "invalid JSON")
			require.Equal(t, cri.ContainerRunning, sc.State, "the rest of the container is still read")
			require.Equal(t, ptr.To(at(104)), sc.StartedAt)
		}},
		{"exited init container from the older sandbox", func(t *testing.T, inv cri.Inventory) {
			p, _ := inv.Find("default", "web")
			c, _ := p.Container("init-config")
			require.Equal(t, cri.ContainerTypeInit, c.Type)
			require.Equal(t, "sb-default-web-0", c.SandboxID)
			require.Equal(t, cri.ContainerExited, c.State)
			require.Equal(t, ptr.To[int32](0), c.ExitCode)
			require.Equal(t, "Completed", c.Reason)
			require.Equal(t, ptr.To(at(3)), c.FinishedAt)
			require.Equal(t, "registry.local/init@sha256:aaa", c.ImageRef)
		}},
		{"pod recreated under the same name keeps only the new UID's containers", func(t *testing.T, inv cri.Inventory) {
			p, _ := inv.Find("default", "db-0")
			require.Equal(t, "uid-db-new", p.UID)
			require.Equal(t, "sb-db-new", p.SandboxID)
			require.Equal(t, 2, p.Sandboxes)
			require.Equal(t, 1, p.StaleContainers)
			require.Len(t, p.Containers, 1)
			c := p.Containers[0]
			require.Equal(t, uint32(0), c.Attempt)
			require.Equal(t, 0, c.OlderAttempts)
			require.Equal(t, cri.ContainerRunning, c.State)
			require.Nil(t, p.TerminationGracePeriodSeconds)
		}},
		{"finished pod", func(t *testing.T, inv cri.Inventory) {
			p, _ := inv.Find("default", "job-1")
			require.Equal(t, cri.SandboxNotReady, p.State)
			require.False(t, p.Running())
			require.Empty(t, p.IP)
			require.Equal(t, 1, p.Sandboxes)
			c, _ := p.Container("main")
			require.Equal(t, cri.ContainerExited, c.State)
			require.Equal(t, ptr.To[int32](0), c.ExitCode)
			require.Equal(t, ptr.To(at(22)), c.StartedAt)
			require.Equal(t, ptr.To(at(30)), c.FinishedAt)
		}},
		{"created container has no status times", func(t *testing.T, inv cri.Inventory) {
			p, _ := inv.Find("kube-system", "coredns")
			c, _ := p.Container("coredns")
			require.Equal(t, cri.ContainerCreated, c.State)
			require.Equal(t, at(6), c.CreatedAt)
			require.Nil(t, c.StartedAt)
			require.Nil(t, c.ExitCode)
		}},
		{"find misses", func(t *testing.T, inv cri.Inventory) {
			_, ok := inv.Find("default", "nope")
			require.False(t, ok)
			_, ok = inv.Find("kube-system", "web")
			require.False(t, ok)
			p, _ := inv.Find("default", "web")
			_, ok = p.Container("nope")
			require.False(t, ok)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, inv) })
	}
}

func TestReadInventoryFindReturnsPointerIntoInventory(t *testing.T) {
	f := nodeFixture(t)
	inv, err := cri.ReadInventory(context.Background(), f.RuntimeService)
	require.NoError(t, err)
	p, ok := inv.Find("default", "web")
	require.True(t, ok)
	p.IP = "changed"
	require.Equal(t, "changed", inv.Pods[2].IP)
}

func TestReadInventoryErrors(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name    string
		inject  string
		wantErr string
		check   func(t *testing.T, inv cri.Inventory)
	}{
		{name: "list sandboxes fails", inject: "ListPodSandbox", wantErr: "list pod sandboxes: boom"},
		{name: "list containers fails", inject: "ListContainers", wantErr: "list containers: boom"},
		{name: "sandbox status fails: warning", inject: "PodSandboxStatus", check: func(t *testing.T, inv cri.Inventory) {
			p, _ := inv.Find("default", "p")
			require.Len(t, p.Warnings, 1)
			require.Contains(t, p.Warnings[0], "PodSandboxStatus")
			require.Contains(t, p.Warnings[0], "boom")
			require.Empty(t, p.IP)
			require.Len(t, p.Containers, 1)
		}},
		{name: "container status fails: warning", inject: "ContainerStatus", check: func(t *testing.T, inv cri.Inventory) {
			p, _ := inv.Find("default", "p")
			require.Equal(t, "10.0.0.1", p.IP)
			c, _ := p.Container("c")
			require.Len(t, c.Warnings, 1)
			require.Contains(t, c.Warnings[0], "ContainerStatus")
			require.Equal(t, cri.ContainerRunning, c.State, "state from the list is kept")
			require.Nil(t, c.StartedAt)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := critest.New(t)
			sb := f.AddSandbox(critest.Sandbox{Namespace: "default", Name: "p", UID: "u", CreatedAt: at(0), IP: "10.0.0.1"})
			f.AddContainer(sb, critest.Container{Name: "c", State: runtimeapi.ContainerState_CONTAINER_RUNNING, CreatedAt: at(1), StartedAt: at(2)})
			f.RuntimeService.InjectError(tc.inject, boom)
			inv, err := cri.ReadInventory(context.Background(), f.RuntimeService)
			if tc.wantErr != "" {
				require.ErrorIs(t, err, boom)
				require.EqualError(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			tc.check(t, inv)
		})
	}
}

func TestReadInventoryStopsWhenContextEnds(t *testing.T) {
	f := nodeFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := cri.ReadInventory(ctx, f.RuntimeService)
	require.ErrorIs(t, err, context.Canceled)
}

func TestReadInventoryAnnotationWarnings(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		wantWarning string
		check       func(t *testing.T, c *cri.Container)
	}{
		{name: "restart count not a number", annotations: map[string]string{cri.AnnotationContainerRestartCount: "three"}, wantWarning: cri.AnnotationContainerRestartCount,
			check: func(t *testing.T, c *cri.Container) { require.Equal(t, 0, c.RestartCount) }},
		{name: "grace period not a number", annotations: map[string]string{cri.AnnotationPodTerminationGracePeriod: "30s"}, wantWarning: cri.AnnotationPodTerminationGracePeriod,
			check: func(t *testing.T, c *cri.Container) { require.Nil(t, c.TerminationGracePeriodSeconds) }},
		{name: "deletion grace period read", annotations: map[string]string{cri.AnnotationPodDeletionGracePeriod: "10"},
			check: func(t *testing.T, c *cri.Container) {
				require.Equal(t, ptr.To[int64](10), c.DeletionGracePeriodSeconds)
			}},
		{name: "preStop of the wrong JSON shape", annotations: map[string]string{cri.AnnotationContainerPreStopHandler: `["exec"]`}, wantWarning: "invalid JSON",
			check: func(t *testing.T, c *cri.Container) { require.Nil(t, c.PreStop) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := critest.New(t)
			sb := f.AddSandbox(critest.Sandbox{Namespace: "ns", Name: "p", UID: "u"})
			f.AddContainer(sb, critest.Container{Name: "c", Annotations: tc.annotations})
			inv, err := cri.ReadInventory(context.Background(), f.RuntimeService)
			require.NoError(t, err)
			p, ok := inv.Find("ns", "p")
			require.True(t, ok)
			c, ok := p.Container("c")
			require.True(t, ok)
			if tc.wantWarning == "" {
				require.Empty(t, c.Warnings)
			} else {
				require.Len(t, c.Warnings, 1)
				require.Contains(t, c.Warnings[0], tc.wantWarning)
			}
			tc.check(t, c)
		})
	}
}

func TestReadInventoryEmptyAndUnlabelled(t *testing.T) {
	t.Run("empty runtime gives empty lists, not null", func(t *testing.T) {
		f := critest.New(t)
		inv, err := cri.ReadInventory(context.Background(), f.RuntimeService)
		require.NoError(t, err)
		raw, err := json.Marshal(inv)
		require.NoError(t, err)
		require.JSONEq(t, `{"pods":[]}`, string(raw))
	})
	t.Run("sandbox metadata stands in for missing labels", func(t *testing.T) {
		f := critest.New(t)
		f.RuntimeService.SetFakeSandboxes([]*apitest.FakePodSandbox{{
			PodSandboxStatus: runtimeapi.PodSandboxStatus{
				Id:       "bare",
				Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "ns", Uid: "u", Attempt: 3},
				State:    runtimeapi.PodSandboxState_SANDBOX_READY,
			},
		}})
		f.RuntimeService.SetFakeContainers([]*apitest.FakeContainer{{
			ContainerStatus: runtimeapi.ContainerStatus{
				Id:       "bare-c",
				Metadata: &runtimeapi.ContainerMetadata{Name: "c"},
				State:    runtimeapi.ContainerState_CONTAINER_CREATED,
			},
			SandboxID: "bare",
		}})
		inv, err := cri.ReadInventory(context.Background(), f.RuntimeService)
		require.NoError(t, err)
		p, ok := inv.Find("ns", "p")
		require.True(t, ok)
		require.Equal(t, "u", p.UID)
		require.Equal(t, uint32(3), p.SandboxAttempt)
		require.Nil(t, p.Labels)
		c, ok := p.Container("c")
		require.True(t, ok)
		require.Equal(t, 0, c.RestartCount)
		require.Empty(t, c.Warnings)
	})
}

func TestInventoryJSON(t *testing.T) {
	f := nodeFixture(t)
	inv, err := cri.ReadInventory(context.Background(), f.RuntimeService)
	require.NoError(t, err)
	raw, err := json.Marshal(inv)
	require.NoError(t, err)

	var back cri.Inventory
	require.NoError(t, json.Unmarshal(raw, &back))
	again, err := json.Marshal(back)
	require.NoError(t, err)
	require.JSONEq(t, string(raw), string(again), "the JSON form round-trips")

	var generic struct {
		Pods []map[string]json.RawMessage `json:"pods"`
	}
	require.NoError(t, json.Unmarshal(raw, &generic))
	web := generic.Pods[2]
	for _, k := range []string{"namespace", "name", "uid", "sandboxId", "sandboxAttempt", "sandboxes", "state", "ip", "createdAt", "labels", "terminationGracePeriodSeconds", "containers"} {
		require.Contains(t, web, k)
	}
	var containers []map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(web["containers"], &containers))
	app := containers[0]
	for _, k := range []string{"name", "id", "sandboxId", "attempt", "olderAttempts", "type", "state", "image", "userSpecifiedImage", "imageRef", "imageId", "createdAt", "startedAt", "restartCount", "hash", "preStop", "terminationGracePeriodSeconds"} {
		require.Contains(t, app, k)
	}
	require.JSONEq(t, `"RUNNING"`, string(app["state"]))
	require.JSONEq(t, `{"exec":{"command":["/bin/sh","-c","sleep 5"]}}`, string(app["preStop"]))
	require.JSONEq(t, `"2025-03-01T10:02:41Z"`, string(app["startedAt"]))
	sidecar := containers[2]
	require.Contains(t, sidecar, "warnings")
}
