package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// fakePods is a PodGetter over a fixed set of pods.
type fakePods struct {
	pods []*corev1.Pod
	err  error // returned for every lookup when set
}

func (f *fakePods) Pod(namespace, name string) (*corev1.Pod, error) {
	if f.err != nil {
		return nil, f.err
	}
	for _, p := range f.pods {
		if p.Namespace == namespace && p.Name == name {
			return p, nil
		}
	}
	return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
}

// fakeNodes is a NodeGetter over a fixed set of nodes.
type fakeNodes map[string]*corev1.Node

func (f fakeNodes) Node(name string) (*corev1.Node, error) {
	if n, ok := f[name]; ok {
		return n, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("nodes"), name)
}

// testPod is a running pod web-0 on node-1 with an init container and two
// started containers: app (exec preStop, a port) and sidecar (httpGet
// preStop on a named port).
func testPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "ns", UID: "uid-1"},
		Spec: corev1.PodSpec{
			NodeName:                      "node-1",
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			InitContainers:                []corev1.Container{{Name: "init"}},
			Containers: []corev1.Container{
				{
					Name:      "app",
					Ports:     []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
					Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sleep", "5"}}}},
				},
				{
					Name:  "sidecar",
					Ports: []corev1.ContainerPort{{Name: "admin", ContainerPort: 9090, Protocol: corev1.ProtocolTCP}},
					Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{
						Path: "/drain", Port: intstr.FromString("admin"),
					}}},
				},
			},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "app", ContainerID: "containerd://aaa", RestartCount: 2},
				{Name: "sidecar", ContainerID: "containerd://bbb"},
			},
		},
	}
}

// testCRR asks to recreate app of web-0.
func testCRR() *v1alpha1.ContainerRecreateRequest {
	return &v1alpha1.ContainerRecreateRequest{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps.kruise.io/v1alpha1", Kind: "ContainerRecreateRequest"},
		ObjectMeta: metav1.ObjectMeta{Name: "crr-1", Namespace: "ns"},
		Spec: v1alpha1.ContainerRecreateRequestSpec{
			PodName:    "web-0",
			Containers: []v1alpha1.ContainerRecreateRequestContainer{{Name: "app"}},
		},
	}
}

func crrRequest(t *testing.T, op admissionv1.Operation, obj, old any) *admissionv1.AdmissionRequest {
	t.Helper()
	req := &admissionv1.AdmissionRequest{
		UID:       "u1",
		Kind:      metav1.GroupVersionKind{Group: "apps.kruise.io", Version: "v1alpha1", Kind: "ContainerRecreateRequest"},
		Resource:  metav1.GroupVersionResource{Group: "apps.kruise.io", Version: "v1alpha1", Resource: "containerrecreaterequests"},
		Name:      "crr-1",
		Namespace: "ns",
		Operation: op,
	}
	encode := func(v any) []byte {
		if b, ok := v.([]byte); ok {
			return b
		}
		b, err := json.Marshal(v)
		require.NoError(t, err)
		return b
	}
	if obj != nil {
		req.Object.Raw = encode(obj)
	}
	if old != nil {
		req.OldObject.Raw = encode(old)
	}
	return req
}

// applyJSONPatch applies patch to the object raw with client-go's fake
// dynamic client, which uses the same RFC 6902 implementation as the
// apiserver, and returns the result.
func applyJSONPatch(t *testing.T, raw, patch []byte) *v1alpha1.ContainerRecreateRequest {
	t.Helper()
	u := &unstructured.Unstructured{}
	require.NoError(t, u.UnmarshalJSON(raw))
	gvr := schema.GroupVersionResource{Group: "apps.kruise.io", Version: "v1alpha1", Resource: "containerrecreaterequests"}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gvr: "ContainerRecreateRequestList"}, u)
	patched, err := client.Resource(gvr).Namespace(u.GetNamespace()).Patch(context.Background(), u.GetName(), types.JSONPatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err, "patch: %s", patch)
	b, err := patched.MarshalJSON()
	require.NoError(t, err)
	out := &v1alpha1.ContainerRecreateRequest{}
	require.NoError(t, json.Unmarshal(b, out))
	return out
}

// mutate runs Mutate on crr against pods, requires it to be allowed, and
// returns crr with the patch applied.
func mutate(t *testing.T, a *CRRAdmission, crr any) *v1alpha1.ContainerRecreateRequest {
	t.Helper()
	req := crrRequest(t, admissionv1.Create, crr, nil)
	resp := a.Mutate(context.Background(), req)
	require.NotNil(t, resp)
	require.True(t, resp.Allowed, "denied: %+v", resp.Result)
	require.NotNil(t, resp.PatchType)
	require.Equal(t, admissionv1.PatchTypeJSONPatch, *resp.PatchType)
	return applyJSONPatch(t, req.Object.Raw, resp.Patch)
}

func requireDenied(t *testing.T, resp *admissionv1.AdmissionResponse, code int32, message string) {
	t.Helper()
	require.NotNil(t, resp)
	require.False(t, resp.Allowed)
	require.Nil(t, resp.Patch)
	require.NotNil(t, resp.Result)
	require.Equal(t, code, resp.Result.Code)
	require.Equal(t, message, resp.Result.Message)
}

func TestCRRMutateRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		crr  func(*v1alpha1.ContainerRecreateRequest)
		pod  func(*corev1.Pod)
		want string
	}{
		{name: "no podName",
			crr:  func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.PodName = "" },
			want: `spec.podName: required; set it to the name of a running pod in namespace "ns"`},
		{name: "no podName and no containers",
			crr: func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.PodName, c.Spec.Containers = "", nil },
			want: `spec.podName: required; set it to the name of a running pod in namespace "ns"` + "\n" +
				`spec.containers: must list at least one container; name the pod's containers to recreate`},
		{name: "no containers",
			crr:  func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.Containers = nil },
			want: `spec.containers: must list at least one container; name the pod's containers to recreate`},
		{name: "empty container name",
			crr: func(c *v1alpha1.ContainerRecreateRequest) {
				c.Spec.Containers = append(c.Spec.Containers, v1alpha1.ContainerRecreateRequestContainer{})
			},
			want: `spec.containers[1].name: required; set it to one of the pod's containers`},
		{name: "duplicate container",
			crr: func(c *v1alpha1.ContainerRecreateRequest) {
				c.Spec.Containers = []v1alpha1.ContainerRecreateRequestContainer{{Name: "app"}, {Name: "sidecar"}, {Name: "app"}}
			},
			want: `spec.containers[2].name: duplicate container "app"; list each container once`},
		{name: "unknown failurePolicy",
			crr: func(c *v1alpha1.ContainerRecreateRequest) {
				c.Spec.Strategy = &v1alpha1.ContainerRecreateRequestStrategy{FailurePolicy: "Retry"}
			},
			want: `spec.strategy.failurePolicy: unsupported value "Retry"; use Fail or Ignore`},
		{name: "negative terminationGracePeriodSeconds",
			crr: func(c *v1alpha1.ContainerRecreateRequest) {
				c.Spec.Strategy = &v1alpha1.ContainerRecreateRequestStrategy{TerminationGracePeriodSeconds: ptr.To[int64](-1)}
			},
			want: `spec.strategy.terminationGracePeriodSeconds: must be 0 or more, got -1`},
		{name: "negative unreadyGracePeriodSeconds",
			crr: func(c *v1alpha1.ContainerRecreateRequest) {
				c.Spec.Strategy = &v1alpha1.ContainerRecreateRequestStrategy{UnreadyGracePeriodSeconds: ptr.To[int64](-5)}
			},
			want: `spec.strategy.unreadyGracePeriodSeconds: must be 0 or more, got -5`},
		{name: "negative minStartedSeconds",
			crr: func(c *v1alpha1.ContainerRecreateRequest) {
				c.Spec.Strategy = &v1alpha1.ContainerRecreateRequestStrategy{MinStartedSeconds: -3}
			},
			want: `spec.strategy.minStartedSeconds: must be 0 or more, got -3`},
		{name: "activeDeadlineSeconds under 3",
			crr:  func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.ActiveDeadlineSeconds = ptr.To[int64](2) },
			want: `spec.activeDeadlineSeconds: must be at least 3 seconds, got 2`},
		{name: "negative ttlSecondsAfterFinished",
			crr:  func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.TTLSecondsAfterFinished = ptr.To[int32](-1) },
			want: `spec.ttlSecondsAfterFinished: must be 0 or more, got -1`},
		{name: "pod not found",
			crr:  func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.PodName = "web-9" },
			want: `spec.podName: pod "web-9" not found in namespace "ns"; name an existing pod of the request's namespace`},
		{name: "pod in another namespace",
			pod:  func(p *corev1.Pod) { p.Namespace = "other" },
			want: `spec.podName: pod "web-0" not found in namespace "ns"; name an existing pod of the request's namespace`},
		{name: "pod being deleted",
			pod:  func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} },
			want: `spec.podName: pod "web-0" is being deleted; its containers cannot be recreated, name a pod that is not terminating`},
		{name: "pod being deleted with SidecarTerminated",
			pod: func(p *corev1.Pod) {
				p.DeletionTimestamp = &metav1.Time{}
				p.Status.Phase = corev1.PodSucceeded
				p.Status.Conditions = []corev1.PodCondition{{Type: wellknown.ConditionSidecarTerminated, Status: corev1.ConditionTrue}}
			},
			want: `spec.podName: pod "web-0" is being deleted; its containers cannot be recreated, name a pod that is not terminating`},
		{name: "pod not scheduled",
			pod:  func(p *corev1.Pod) { p.Spec.NodeName, p.Status.Phase = "", corev1.PodPending },
			want: `spec.podName: pod "web-0" is not scheduled to a node yet; create the request once the pod is running`},
		{name: "pod pending on a node, a container without containerID",
			pod: func(p *corev1.Pod) {
				p.Status.Phase = corev1.PodPending
				p.Status.ContainerStatuses[0].ContainerID = ""
			},
			want: `spec.containers[0].name: container "app" of pod "web-0" is not initialized (no containerID in the pod's status); create the request once it has started`},
		{name: "pod without phase, no container statuses",
			pod:  func(p *corev1.Pod) { p.Status.Phase, p.Status.ContainerStatuses = "", nil },
			want: `spec.containers[0].name: container "app" of pod "web-0" is not initialized (no containerID in the pod's status); create the request once it has started`},
		{name: "pod succeeded",
			pod:  func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded },
			want: `spec.podName: pod "web-0" is Succeeded, not Running; only the containers of a running pod can be recreated`},
		{name: "pod failed",
			pod:  func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed },
			want: `spec.podName: pod "web-0" is Failed, not Running; only the containers of a running pod can be recreated`},
		{name: "pod unknown",
			pod:  func(p *corev1.Pod) { p.Status.Phase = corev1.PodUnknown },
			want: `spec.podName: pod "web-0" is Unknown, not Running; only the containers of a running pod can be recreated`},
		{name: "container not in pod",
			crr: func(c *v1alpha1.ContainerRecreateRequest) {
				c.Spec.Containers = []v1alpha1.ContainerRecreateRequestContainer{{Name: "app"}, {Name: "foo"}}
			},
			want: `spec.containers[1].name: container "foo" is not in pod "web-0" (its containers: app, sidecar)`},
		{name: "init container",
			crr: func(c *v1alpha1.ContainerRecreateRequest) {
				c.Spec.Containers = []v1alpha1.ContainerRecreateRequestContainer{{Name: "init"}}
			},
			want: `spec.containers[0].name: "init" is an init container of pod "web-0"; only regular containers can be recreated (its containers: app, sidecar)`},
		{name: "container without status",
			pod:  func(p *corev1.Pod) { p.Status.ContainerStatuses = p.Status.ContainerStatuses[1:] },
			want: `spec.containers[0].name: container "app" of pod "web-0" is not initialized (no containerID in the pod's status); create the request once it has started`},
		{name: "container without containerID",
			pod:  func(p *corev1.Pod) { p.Status.ContainerStatuses[0].ContainerID = "" },
			want: `spec.containers[0].name: container "app" of pod "web-0" is not initialized (no containerID in the pod's status); create the request once it has started`},
		{name: "several problems at once",
			crr: func(c *v1alpha1.ContainerRecreateRequest) {
				c.Spec.Containers = []v1alpha1.ContainerRecreateRequestContainer{{Name: "foo"}, {Name: "foo"}}
				c.Spec.ActiveDeadlineSeconds = ptr.To[int64](0)
			},
			want: `spec.containers[1].name: duplicate container "foo"; list each container once` + "\n" +
				`spec.activeDeadlineSeconds: must be at least 3 seconds, got 0` + "\n" +
				`spec.containers[0].name: container "foo" is not in pod "web-0" (its containers: app, sidecar)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			crr, pod := testCRR(), testPod()
			if tc.crr != nil {
				tc.crr(crr)
			}
			if tc.pod != nil {
				tc.pod(pod)
			}
			a := NewCRRAdmission(&fakePods{pods: []*corev1.Pod{pod}})
			resp := a.Mutate(context.Background(), crrRequest(t, admissionv1.Create, crr, nil))
			requireDenied(t, resp, http.StatusUnprocessableEntity, tc.want)
		})
	}
}

func TestCRRMutateErrors(t *testing.T) {
	t.Run("malformed object", func(t *testing.T) {
		a := NewCRRAdmission(&fakePods{pods: []*corev1.Pod{testPod()}})
		resp := a.Mutate(context.Background(), crrRequest(t, admissionv1.Create, []byte(`{"spec":{"containers":"app"}}`), nil))
		requireDenied(t, resp, http.StatusBadRequest,
			"could not decode the ContainerRecreateRequest (object): json: cannot unmarshal string into Go struct field ContainerRecreateRequestSpec.spec.containers of type []v1alpha1.ContainerRecreateRequestContainer")
	})
	t.Run("no object", func(t *testing.T) {
		a := NewCRRAdmission(&fakePods{})
		resp := a.Mutate(context.Background(), crrRequest(t, admissionv1.Create, nil, nil))
		requireDenied(t, resp, http.StatusBadRequest, "could not decode the ContainerRecreateRequest: the admission request has no object")
	})
	t.Run("pod lookup fails", func(t *testing.T) {
		a := NewCRRAdmission(&fakePods{err: errors.New("cache not synced")})
		resp := a.Mutate(context.Background(), crrRequest(t, admissionv1.Create, testCRR(), nil))
		requireDenied(t, resp, http.StatusInternalServerError, `could not look up pod "web-0" in namespace "ns": cache not synced`)
	})
	t.Run("node lookup fails", func(t *testing.T) {
		a := NewCRRAdmission(&fakePods{pods: []*corev1.Pod{testPod()}}).WithNodes(failingNodes{})
		resp := a.Mutate(context.Background(), crrRequest(t, admissionv1.Create, testCRR(), nil))
		requireDenied(t, resp, http.StatusInternalServerError, `could not look up node "node-1" of pod "web-0": boom`)
	})
}

type failingNodes struct{}

func (failingNodes) Node(string) (*corev1.Node, error) { return nil, errors.New("boom") }

func TestCRRMutateDefaults(t *testing.T) {
	a := NewCRRAdmission(&fakePods{pods: []*corev1.Pod{testPod()}})

	t.Run("minimal request", func(t *testing.T) {
		crr := testCRR()
		crr.Spec.Containers = []v1alpha1.ContainerRecreateRequestContainer{{Name: "app"}, {Name: "sidecar"}}
		got := mutate(t, a, crr)

		require.Equal(t, map[string]string{
			wellknown.LabelCRRNodeName: "node-1",
			wellknown.LabelCRRPodUID:   "uid-1",
			wellknown.LabelCRRPodName:  "web-0",
			wellknown.LabelCRRActive:   "true",
		}, got.Labels)
		require.Equal(t, "crr-1", got.Name)
		require.Equal(t, "web-0", got.Spec.PodName)
		require.Equal(t, &v1alpha1.ContainerRecreateRequestStrategy{
			FailurePolicy:                 v1alpha1.ContainerRecreateRequestFailurePolicyFail,
			TerminationGracePeriodSeconds: ptr.To[int64](30),
		}, got.Spec.Strategy)
		require.Nil(t, got.Spec.ActiveDeadlineSeconds)
		require.Nil(t, got.Spec.TTLSecondsAfterFinished)
		require.Equal(t, []v1alpha1.ContainerRecreateRequestContainer{
			{
				Name:          "app",
				PreStop:       &v1alpha1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sleep", "5"}}},
				StatusContext: &v1alpha1.ContainerRecreateRequestContainerContext{ContainerID: "containerd://aaa", RestartCount: 2},
			},
			{
				Name:          "sidecar",
				PreStop:       &v1alpha1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/drain", Port: intstr.FromString("admin")}},
				Ports:         []corev1.ContainerPort{{Name: "admin", ContainerPort: 9090, Protocol: corev1.ProtocolTCP}},
				StatusContext: &v1alpha1.ContainerRecreateRequestContainerContext{ContainerID: "containerd://bbb"},
			},
		}, got.Spec.Containers)
	})

	t.Run("user values kept", func(t *testing.T) {
		crr := testCRR()
		crr.Labels = map[string]string{"team": "a", wellknown.LabelCRRNodeName: "forged", wellknown.LabelCRRActive: "false"}
		crr.Annotations = map[string]string{"note": "x"}
		crr.Spec.ActiveDeadlineSeconds = ptr.To[int64](3)
		crr.Spec.TTLSecondsAfterFinished = ptr.To[int32](0)
		crr.Spec.Strategy = &v1alpha1.ContainerRecreateRequestStrategy{
			FailurePolicy:                 v1alpha1.ContainerRecreateRequestFailurePolicyIgnore,
			OrderedRecreate:               true,
			ForceRecreate:                 true,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			UnreadyGracePeriodSeconds:     ptr.To[int64](1),
			MinStartedSeconds:             5,
		}
		got := mutate(t, a, crr)

		require.Equal(t, map[string]string{
			"team":                     "a",
			wellknown.LabelCRRNodeName: "node-1",
			wellknown.LabelCRRPodUID:   "uid-1",
			wellknown.LabelCRRPodName:  "web-0",
			wellknown.LabelCRRActive:   "true",
		}, got.Labels)
		require.Equal(t, map[string]string{"note": "x"}, got.Annotations)
		require.Equal(t, ptr.To[int64](3), got.Spec.ActiveDeadlineSeconds)
		require.Equal(t, ptr.To[int32](0), got.Spec.TTLSecondsAfterFinished)
		require.Equal(t, crr.Spec.Strategy, got.Spec.Strategy)
	})

	t.Run("read-only fields come from the pod", func(t *testing.T) {
		crr := testCRR()
		crr.Spec.Containers = []v1alpha1.ContainerRecreateRequestContainer{{
			Name:          "app",
			PreStop:       &v1alpha1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(1)}},
			Ports:         []corev1.ContainerPort{{ContainerPort: 1}},
			StatusContext: &v1alpha1.ContainerRecreateRequestContainerContext{ContainerID: "containerd://forged", RestartCount: 9},
		}}
		got := mutate(t, a, crr)
		require.Equal(t, []v1alpha1.ContainerRecreateRequestContainer{{
			Name:          "app",
			PreStop:       &v1alpha1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sleep", "5"}}},
			StatusContext: &v1alpha1.ContainerRecreateRequestContainerContext{ContainerID: "containerd://aaa", RestartCount: 2},
		}}, got.Spec.Containers)
	})

	t.Run("container without preStop", func(t *testing.T) {
		pod := testPod()
		pod.Spec.Containers[0].Lifecycle = nil
		pod.Spec.Containers[1].Lifecycle.PreStop = &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 3}}
		pod.Spec.TerminationGracePeriodSeconds = nil
		crr := testCRR()
		crr.Spec.Containers = []v1alpha1.ContainerRecreateRequestContainer{{Name: "app"}, {Name: "sidecar"}}
		got := mutate(t, NewCRRAdmission(&fakePods{pods: []*corev1.Pod{pod}}), crr)
		require.Equal(t, []v1alpha1.ContainerRecreateRequestContainer{
			{Name: "app", StatusContext: &v1alpha1.ContainerRecreateRequestContainerContext{ContainerID: "containerd://aaa", RestartCount: 2}},
			{Name: "sidecar", StatusContext: &v1alpha1.ContainerRecreateRequestContainerContext{ContainerID: "containerd://bbb"}},
		}, got.Spec.Containers)
		require.Equal(t, &v1alpha1.ContainerRecreateRequestStrategy{FailurePolicy: v1alpha1.ContainerRecreateRequestFailurePolicyFail}, got.Spec.Strategy)
	})

	t.Run("preStop is a copy", func(t *testing.T) {
		pod := testPod()
		crr := testCRR()
		req := crrRequest(t, admissionv1.Create, crr, nil)
		resp := NewCRRAdmission(&fakePods{pods: []*corev1.Pod{pod}}).Mutate(context.Background(), req)
		require.True(t, resp.Allowed)
		require.Equal(t, []string{"sleep", "5"}, pod.Spec.Containers[0].Lifecycle.PreStop.Exec.Command)
		require.Equal(t, testPod(), pod, "the pod from the cache must not be modified")
	})

	t.Run("no metadata labels and no strategy in the object", func(t *testing.T) {
		raw := []byte(`{"apiVersion":"apps.kruise.io/v1alpha1","kind":"ContainerRecreateRequest",` +
			`"metadata":{"name":"crr-1","namespace":"ns"},"spec":{"podName":"web-0","containers":[{"name":"sidecar"}]}}`)
		req := crrRequest(t, admissionv1.Create, raw, nil)
		resp := a.Mutate(context.Background(), req)
		require.True(t, resp.Allowed)
		var ops []map[string]any
		require.NoError(t, json.Unmarshal(resp.Patch, &ops))
		require.Len(t, ops, 2)
		require.Equal(t, "add", ops[0]["op"])
		require.Equal(t, "/metadata/labels", ops[0]["path"])
		require.Equal(t, "replace", ops[1]["op"])
		require.Equal(t, "/spec", ops[1]["path"])
		got := applyJSONPatch(t, raw, resp.Patch)
		require.Equal(t, "uid-1", got.Labels[wellknown.LabelCRRPodUID])
		require.Equal(t, v1alpha1.ContainerRecreateRequestFailurePolicyFail, got.Spec.Strategy.FailurePolicy)
		require.Equal(t, "containerd://bbb", got.Spec.Containers[0].StatusContext.ContainerID)
	})

	t.Run("existing labels are replaced as a whole", func(t *testing.T) {
		crr := testCRR()
		crr.Labels = map[string]string{"team": "a"}
		req := crrRequest(t, admissionv1.Create, crr, nil)
		resp := a.Mutate(context.Background(), req)
		require.True(t, resp.Allowed)
		var ops []map[string]any
		require.NoError(t, json.Unmarshal(resp.Patch, &ops))
		require.Equal(t, "replace", ops[0]["op"])
		require.Equal(t, "/metadata/labels", ops[0]["path"])
	})

	t.Run("virtual-kubelet node", func(t *testing.T) {
		nodes := fakeNodes{"node-1": {ObjectMeta: metav1.ObjectMeta{Name: "node-1",
			Labels: map[string]string{wellknown.LabelVirtualKubelet: wellknown.VirtualKubeletValue}}}}
		got := mutate(t, NewCRRAdmission(&fakePods{pods: []*corev1.Pod{testPod()}}).WithNodes(nodes), testCRR())
		require.Equal(t, wellknown.VirtualKubeletValue, got.Labels[wellknown.LabelVirtualKubelet])

		nodes["node-1"].Labels = map[string]string{wellknown.LabelVirtualKubelet: "agent"}
		got = mutate(t, NewCRRAdmission(&fakePods{pods: []*corev1.Pod{testPod()}}).WithNodes(nodes), testCRR())
		require.NotContains(t, got.Labels, wellknown.LabelVirtualKubelet)

		got = mutate(t, NewCRRAdmission(&fakePods{pods: []*corev1.Pod{testPod()}}).WithNodes(fakeNodes{}), testCRR())
		require.NotContains(t, got.Labels, wellknown.LabelVirtualKubelet)
	})
}

func TestCRRMutateSidecarTerminated(t *testing.T) {
	for _, tc := range []struct {
		phase  corev1.PodPhase
		status corev1.ConditionStatus
	}{
		{corev1.PodSucceeded, corev1.ConditionTrue},
		{corev1.PodFailed, corev1.ConditionTrue},
		{corev1.PodSucceeded, corev1.ConditionFalse},
		{corev1.PodPending, corev1.ConditionUnknown},
	} {
		t.Run(string(tc.phase)+"/"+string(tc.status), func(t *testing.T) {
			pod := testPod()
			pod.Status.Phase = tc.phase
			pod.Status.Conditions = []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionFalse},
				{Type: wellknown.ConditionSidecarTerminated, Status: tc.status},
			}
			crr := testCRR()
			crr.Spec.Containers = []v1alpha1.ContainerRecreateRequestContainer{{Name: "sidecar"}}
			got := mutate(t, NewCRRAdmission(&fakePods{pods: []*corev1.Pod{pod}}), crr)
			require.Equal(t, "node-1", got.Labels[wellknown.LabelCRRNodeName])
			require.Equal(t, "containerd://bbb", got.Spec.Containers[0].StatusContext.ContainerID)
		})
	}
	t.Run("still needs a node", func(t *testing.T) {
		pod := testPod()
		pod.Spec.NodeName = ""
		pod.Status.Phase = corev1.PodSucceeded
		pod.Status.Conditions = []corev1.PodCondition{{Type: wellknown.ConditionSidecarTerminated, Status: corev1.ConditionTrue}}
		resp := NewCRRAdmission(&fakePods{pods: []*corev1.Pod{pod}}).Mutate(context.Background(), crrRequest(t, admissionv1.Create, testCRR(), nil))
		requireDenied(t, resp, http.StatusUnprocessableEntity,
			`spec.podName: pod "web-0" is not scheduled to a node yet; create the request once the pod is running`)
	})
}

// TestCRRMutatePendingPod: as in OpenKruise, a scheduled, active pod whose
// phase is still Pending (a container in its postStart hook) is accepted
// when every named container has a containerID; the rows refusing it
// otherwise are in TestCRRMutateRejects.
func TestCRRMutatePendingPod(t *testing.T) {
	for _, phase := range []corev1.PodPhase{corev1.PodPending, ""} {
		t.Run("phase "+string(phase), func(t *testing.T) {
			pod := testPod()
			pod.Status.Phase = phase
			crr := testCRR()
			crr.Spec.Containers = []v1alpha1.ContainerRecreateRequestContainer{{Name: "app"}, {Name: "sidecar"}}
			got := mutate(t, NewCRRAdmission(&fakePods{pods: []*corev1.Pod{pod}}), crr)
			require.Equal(t, "node-1", got.Labels[wellknown.LabelCRRNodeName])
			require.Equal(t, pod.Status.ContainerStatuses[0].ContainerID, got.Spec.Containers[0].StatusContext.ContainerID)
			require.Equal(t, pod.Status.ContainerStatuses[1].ContainerID, got.Spec.Containers[1].StatusContext.ContainerID)
		})
	}
}

func TestCRRMutateOtherOperations(t *testing.T) {
	a := NewCRRAdmission(&fakePods{err: errors.New("must not be called")})
	crr := testCRR()
	for _, op := range []admissionv1.Operation{admissionv1.Update, admissionv1.Delete, admissionv1.Connect} {
		t.Run(string(op), func(t *testing.T) {
			changed := testCRR()
			changed.Spec.PodName = "other"
			resp := a.Mutate(context.Background(), crrRequest(t, op, changed, crr))
			require.Equal(t, &admissionv1.AdmissionResponse{Allowed: true}, resp)
		})
	}
}

// mutated is testCRR after Mutate, as stored.
func mutated(t *testing.T) *v1alpha1.ContainerRecreateRequest {
	t.Helper()
	return mutate(t, NewCRRAdmission(&fakePods{pods: []*corev1.Pod{testPod()}}), testCRR())
}

func TestCRRValidateCreate(t *testing.T) {
	const missingMutation = "; it is set by the mutating webhook at /mutate-containerrecreaterequest, check that the shoal-mutating MutatingWebhookConfiguration is installed"
	for _, tc := range []struct {
		name string
		crr  func(*v1alpha1.ContainerRecreateRequest)
		want string // "" = allowed
	}{
		{name: "as mutated"},
		{name: "duplicate container added after mutation",
			crr: func(c *v1alpha1.ContainerRecreateRequest) {
				c.Spec.Containers = append(c.Spec.Containers, c.Spec.Containers[0])
			},
			want: `spec.containers[1].name: duplicate container "app"; list each container once`},
		{name: "containers removed after mutation",
			crr:  func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.Containers = nil },
			want: `spec.containers: must list at least one container; name the pod's containers to recreate`},
		{name: "bad strategy after mutation",
			crr: func(c *v1alpha1.ContainerRecreateRequest) {
				c.Spec.Strategy.FailurePolicy = "Never"
				c.Spec.Strategy.TerminationGracePeriodSeconds = ptr.To[int64](-2)
				c.Spec.ActiveDeadlineSeconds = ptr.To[int64](1)
			},
			want: `spec.strategy.failurePolicy: unsupported value "Never"; use Fail or Ignore` + "\n" +
				`spec.strategy.terminationGracePeriodSeconds: must be 0 or more, got -2` + "\n" +
				`spec.activeDeadlineSeconds: must be at least 3 seconds, got 1`},
		{name: "not mutated",
			crr: func(c *v1alpha1.ContainerRecreateRequest) {
				c.Labels = nil
				c.Spec.Containers[0].StatusContext = nil
			},
			want: "metadata.labels[crr.apps.kruise.io/node-name]: missing" + missingMutation + "\n" +
				"metadata.labels[crr.apps.kruise.io/pod-uid]: missing" + missingMutation + "\n" +
				"spec.containers[0].statusContext: missing" + missingMutation},
	} {
		t.Run(tc.name, func(t *testing.T) {
			crr := mutated(t)
			if tc.crr != nil {
				tc.crr(crr)
			}
			a := NewCRRAdmission(&fakePods{err: errors.New("must not be called")})
			resp := a.Validate(context.Background(), crrRequest(t, admissionv1.Create, crr, nil))
			if tc.want == "" {
				require.Equal(t, &admissionv1.AdmissionResponse{Allowed: true}, resp)
				return
			}
			requireDenied(t, resp, http.StatusUnprocessableEntity, tc.want)
		})
	}
}

func TestCRRValidateUpdate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, new func(*v1alpha1.ContainerRecreateRequest)
		want     string // "" = allowed
	}{
		{name: "unchanged"},
		{name: "status, finalizer and other labels change",
			new: func(c *v1alpha1.ContainerRecreateRequest) {
				c.Status.Phase = v1alpha1.ContainerRecreateRequestCompleted
				c.Finalizers = []string{wellknown.FinalizerCRRUnreadyAcquired}
				c.Labels["team"] = "b"
				c.Annotations = map[string]string{wellknown.AnnotationCRRUnreadyAcquired: "2024-01-01T00:00:00Z"}
			}},
		{name: "active label removed",
			new: func(c *v1alpha1.ContainerRecreateRequest) { delete(c.Labels, wellknown.LabelCRRActive) }},
		{name: "labels set later on an old request",
			old: func(c *v1alpha1.ContainerRecreateRequest) { c.Labels = nil }},
		{name: "podName changed",
			new:  func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.PodName = "web-1" },
			want: "spec: is immutable; delete the request and create a new one"},
		{name: "strategy changed",
			new:  func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.Strategy.ForceRecreate = true },
			want: "spec: is immutable; delete the request and create a new one"},
		{name: "container added",
			new: func(c *v1alpha1.ContainerRecreateRequest) {
				c.Spec.Containers = append(c.Spec.Containers, v1alpha1.ContainerRecreateRequestContainer{Name: "sidecar"})
			},
			want: "spec: is immutable; delete the request and create a new one"},
		{name: "ttl set",
			new:  func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.TTLSecondsAfterFinished = ptr.To[int32](10) },
			want: "spec: is immutable; delete the request and create a new one"},
		{name: "node-name changed",
			new:  func(c *v1alpha1.ContainerRecreateRequest) { c.Labels[wellknown.LabelCRRNodeName] = "node-2" },
			want: `metadata.labels[crr.apps.kruise.io/node-name]: is immutable once set; keep it "node-1"`},
		{name: "pod-uid removed",
			new:  func(c *v1alpha1.ContainerRecreateRequest) { delete(c.Labels, wellknown.LabelCRRPodUID) },
			want: `metadata.labels[crr.apps.kruise.io/pod-uid]: is immutable once set; keep it "uid-1"`},
		{name: "pod-name changed",
			new:  func(c *v1alpha1.ContainerRecreateRequest) { c.Labels[wellknown.LabelCRRPodName] = "web-1" },
			want: `metadata.labels[crr.apps.kruise.io/pod-name]: is immutable once set; keep it "web-0"`},
		{name: "unready-acquired changed",
			old: func(c *v1alpha1.ContainerRecreateRequest) {
				c.Annotations = map[string]string{wellknown.AnnotationCRRUnreadyAcquired: "2024-01-01T00:00:00Z"}
			},
			new: func(c *v1alpha1.ContainerRecreateRequest) {
				c.Annotations = map[string]string{wellknown.AnnotationCRRUnreadyAcquired: "2024-01-01T00:00:09Z"}
			},
			want: `metadata.annotations[crr.apps.kruise.io/unready-acquired]: is immutable once set; keep it "2024-01-01T00:00:00Z"`},
		{name: "spec and labels at once",
			new: func(c *v1alpha1.ContainerRecreateRequest) {
				c.Spec.Containers[0].StatusContext.RestartCount++
				c.Labels = nil
			},
			want: "spec: is immutable; delete the request and create a new one\n" +
				`metadata.labels[crr.apps.kruise.io/node-name]: is immutable once set; keep it "node-1"` + "\n" +
				`metadata.labels[crr.apps.kruise.io/pod-uid]: is immutable once set; keep it "uid-1"` + "\n" +
				`metadata.labels[crr.apps.kruise.io/pod-name]: is immutable once set; keep it "web-0"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, cur := mutated(t), mutated(t)
			if tc.old != nil {
				tc.old(old)
				tc.old(cur)
			}
			if tc.new != nil {
				tc.new(cur)
			}
			a := NewCRRAdmission(&fakePods{err: errors.New("must not be called")})
			resp := a.Validate(context.Background(), crrRequest(t, admissionv1.Update, cur, old))
			if tc.want == "" {
				require.Equal(t, &admissionv1.AdmissionResponse{Allowed: true}, resp)
				return
			}
			requireDenied(t, resp, http.StatusUnprocessableEntity, tc.want)
		})
	}
}

func TestCRRValidateOther(t *testing.T) {
	a := NewCRRAdmission(&fakePods{})
	t.Run("malformed old object", func(t *testing.T) {
		resp := a.Validate(context.Background(), crrRequest(t, admissionv1.Update, mutated(t), []byte(`[]`)))
		requireDenied(t, resp, http.StatusBadRequest,
			"could not decode the ContainerRecreateRequest (old object): json: cannot unmarshal array into Go value of type v1alpha1.ContainerRecreateRequest")
	})
	t.Run("missing old object", func(t *testing.T) {
		resp := a.Validate(context.Background(), crrRequest(t, admissionv1.Update, mutated(t), nil))
		requireDenied(t, resp, http.StatusBadRequest, "could not decode the ContainerRecreateRequest: the admission request has no old object")
	})
	t.Run("malformed object", func(t *testing.T) {
		resp := a.Validate(context.Background(), crrRequest(t, admissionv1.Create, []byte(`{"spec":`), nil))
		requireDenied(t, resp, http.StatusBadRequest, "could not decode the ContainerRecreateRequest (object): unexpected end of JSON input")
	})
	t.Run("delete", func(t *testing.T) {
		resp := a.Validate(context.Background(), crrRequest(t, admissionv1.Delete, nil, mutated(t)))
		require.Equal(t, &admissionv1.AdmissionResponse{Allowed: true}, resp)
	})
}
