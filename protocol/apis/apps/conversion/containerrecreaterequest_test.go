package conversion

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// crrFillFuncs fill the ContainerRecreateRequest enums, and give random
// objects the legacy annotations the conversion maps, in every form a
// client could write them (random metadata would never use those keys).
func crrFillFuncs() []any {
	return []any{
		func(s *v1alpha1.ContainerRecreateRequestFailurePolicyType, c randfill.Continue) {
			*s = pick(c, "", v1alpha1.ContainerRecreateRequestFailurePolicyFail, v1alpha1.ContainerRecreateRequestFailurePolicyIgnore)
		},
		func(s *v1beta1.ContainerRecreateRequestFailurePolicyType, c randfill.Continue) {
			*s = pick(c, "", v1beta1.ContainerRecreateRequestFailurePolicyFail, v1beta1.ContainerRecreateRequestFailurePolicyIgnore)
		},
		// v1alpha1's phase has no enum in its schema; v1beta1's has.
		func(s *v1beta1.ContainerRecreateRequestPhase, c randfill.Continue) {
			*s = pick(c, "", v1beta1.ContainerRecreateRequestPending, v1beta1.ContainerRecreateRequestRecreating,
				v1beta1.ContainerRecreateRequestSucceeded, v1beta1.ContainerRecreateRequestFailed, v1beta1.ContainerRecreateRequestCompleted)
		},
		// metav1.Condition's schema limits status to True, False and
		// Unknown; the type is often PreRecreateGrace, the one that maps.
		func(s *metav1.Condition, c randfill.Continue) {
			c.FillNoCustom(s)
			s.Status = pick(c, metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown)
			if c.Bool() {
				s.Type = v1beta1.ContainerRecreateRequestPreRecreateGraceType
			}
		},
		func(x *v1alpha1.ContainerRecreateRequest, c randfill.Continue) {
			c.FillNoCustom(x)
			crrFillAnnotation(&x.ObjectMeta, wellknown.AnnotationCRRSyncContainerStatuses, crrSyncAnnotationValues(c), c)
			crrFillAnnotation(&x.ObjectMeta, wellknown.AnnotationCRRUnreadyAcquired, crrUnreadyAnnotationValues(c), c)
		},
		// On a v1beta1 object the legacy annotations mean nothing, but a
		// client can still write them.
		func(x *v1beta1.ContainerRecreateRequest, c randfill.Continue) {
			c.FillNoCustom(x)
			if c.Intn(4) == 0 {
				crrFillAnnotation(&x.ObjectMeta, wellknown.AnnotationCRRSyncContainerStatuses, crrSyncAnnotationValues(c), c)
			}
			if c.Intn(4) == 0 {
				crrFillAnnotation(&x.ObjectMeta, wellknown.AnnotationCRRUnreadyAcquired, crrUnreadyAnnotationValues(c), c)
			}
		},
	}
}

// crrFillAnnotation sets key to one of values, or leaves it unset.
func crrFillAnnotation(meta *metav1.ObjectMeta, key string, values []string, c randfill.Continue) {
	i := c.Intn(len(values) + 1)
	if i == len(values) {
		return
	}
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Annotations[key] = values[i]
}

// crrSyncAnnotationValues are sync-container-statuses annotations: as the
// controller writes them, and as others might.
func crrSyncAnnotationValues(c randfill.Continue) []string {
	var list []v1alpha1.ContainerRecreateRequestSyncContainerStatus
	c.Fill(&list)
	canonical, _ := json.Marshal(list)
	return []string{
		string(canonical),
		`[{"name":"app","ready":true,"restartCount":1,"containerID":"containerd://abc"}]`,
		`[ {"name": "app", "ready": false, "restartCount": 0} ]`,
		`[{"name":"app","ready":true,"restartCount":2,"started":true}]`,
		`[{"NAME":"app","ready":true,"restartCount":2}]`,
		`[]`, `null`, ``, `{"name":"app"}`, `not json`,
	}
}

// crrUnreadyAnnotationValues are unready-acquired annotations: as the
// controller writes them, and as others might.
func crrUnreadyAnnotationValues(c randfill.Continue) []string {
	var at metav1.Time
	c.Fill(&at)
	return []string{
		at.UTC().Format(time.RFC3339),
		"2025-03-01T08:30:00+08:00",
		"2025-03-01T00:30:00.250Z",
		"", "yesterday", "1740789000",
	}
}

func TestContainerRecreateRequestRoundTrip(t *testing.T) {
	roundTrip(t, "ContainerRecreateRequest", containerRecreateRequestToV1beta1, containerRecreateRequestToV1alpha1, crrFillFuncs()...)
}

// TestContainerRecreateRequestMapping checks the mappings both ways: the
// v1alpha1 object becomes the v1beta1 one, and the v1beta1 one becomes the
// v1alpha1 one.
func TestContainerRecreateRequestMapping(t *testing.T) {
	unready := time.Date(2025, 3, 1, 0, 30, 0, 0, time.UTC)
	labels := map[string]string{
		wellknown.LabelCRRNodeName: "worker-3",
		wellknown.LabelCRRPodUID:   "0b8f0f9e-3c55-4c1e-9a55-5f0d3a2f9b11",
		wellknown.LabelCRRActive:   "true",
	}
	grace := metav1.Condition{
		Type: v1beta1.ContainerRecreateRequestPreRecreateGraceType, Status: metav1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(unready), Reason: "PreRecreateGrace", Message: crrPreRecreateGraceMessage,
	}
	tests := []struct {
		name  string
		alpha v1alpha1.ContainerRecreateRequest
		beta  v1beta1.ContainerRecreateRequest
	}{
		{
			name: "spec, labels and finalizer are the same in v1beta1; preStop keeps its handler",
			alpha: v1alpha1.ContainerRecreateRequest{
				ObjectMeta: metav1.ObjectMeta{Name: "restart-web", Namespace: "shop", Labels: labels, Finalizers: []string{wellknown.FinalizerCRRUnreadyAcquired}},
				Spec: v1alpha1.ContainerRecreateRequestSpec{
					PodName: "web-0",
					Containers: []v1alpha1.ContainerRecreateRequestContainer{{
						Name:          "web",
						PreStop:       &v1alpha1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/drain", Port: intstr.FromString("http")}},
						Ports:         []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
						StatusContext: &v1alpha1.ContainerRecreateRequestContainerContext{ContainerID: "containerd://4f6c", RestartCount: 2},
					}},
					Strategy: &v1alpha1.ContainerRecreateRequestStrategy{
						FailurePolicy: v1alpha1.ContainerRecreateRequestFailurePolicyIgnore, OrderedRecreate: true, ForceRecreate: true,
						TerminationGracePeriodSeconds: ptr.To[int64](10), UnreadyGracePeriodSeconds: ptr.To[int64](5), MinStartedSeconds: 3,
					},
					ActiveDeadlineSeconds: ptr.To[int64](300), TTLSecondsAfterFinished: ptr.To[int32](60),
				},
				Status: v1alpha1.ContainerRecreateRequestStatus{
					Phase: v1alpha1.ContainerRecreateRequestCompleted, CompletionTime: ptr.To(metav1.NewTime(unready)),
					ContainerRecreateStates: []v1alpha1.ContainerRecreateRequestContainerRecreateState{{Name: "web", Phase: v1alpha1.ContainerRecreateRequestSucceeded, IsKilled: true}},
				},
			},
			beta: v1beta1.ContainerRecreateRequest{
				ObjectMeta: metav1.ObjectMeta{Name: "restart-web", Namespace: "shop", Labels: labels, Finalizers: []string{wellknown.FinalizerCRRUnreadyAcquired}},
				Spec: v1beta1.ContainerRecreateRequestSpec{
					PodName: "web-0",
					Containers: []v1beta1.ContainerRecreateRequestContainer{{
						Name:          "web",
						PreStop:       &v1beta1.CRRProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/drain", Port: intstr.FromString("http")}},
						Ports:         []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
						StatusContext: &v1beta1.ContainerRecreateRequestContainerContext{ContainerID: "containerd://4f6c", RestartCount: 2},
					}},
					Strategy: &v1beta1.ContainerRecreateRequestStrategy{
						FailurePolicy: v1beta1.ContainerRecreateRequestFailurePolicyIgnore, OrderedRecreate: true, ForceRecreate: true,
						TerminationGracePeriodSeconds: ptr.To[int64](10), UnreadyGracePeriodSeconds: ptr.To[int64](5), MinStartedSeconds: 3,
					},
					ActiveDeadlineSeconds: ptr.To[int64](300), TTLSecondsAfterFinished: ptr.To[int32](60),
				},
				Status: v1beta1.ContainerRecreateRequestStatus{
					Phase: v1beta1.ContainerRecreateRequestCompleted, CompletionTime: ptr.To(metav1.NewTime(unready)),
					ContainerRecreateStates: []v1beta1.ContainerRecreateRequestContainerRecreateState{{Name: "web", Phase: v1beta1.ContainerRecreateRequestSucceeded, IsKilled: true}},
				},
			},
		},
		{
			name: "v1alpha1 sync-container-statuses annotation is v1beta1 status.containerStatusSnapshot",
			alpha: v1alpha1.ContainerRecreateRequest{
				ObjectMeta: metav1.ObjectMeta{Name: "r", Annotations: map[string]string{
					wellknown.AnnotationCRRSyncContainerStatuses: `[{"name":"app","ready":true,"restartCount":1,"containerID":"containerd://new"},{"name":"log","ready":false,"restartCount":0}]`,
					"team": "shop",
				}},
				Status: v1alpha1.ContainerRecreateRequestStatus{Phase: v1alpha1.ContainerRecreateRequestRecreating},
			},
			beta: v1beta1.ContainerRecreateRequest{
				ObjectMeta: metav1.ObjectMeta{Name: "r", Annotations: map[string]string{"team": "shop"}},
				Status: v1beta1.ContainerRecreateRequestStatus{
					Phase: v1beta1.ContainerRecreateRequestRecreating,
					ContainerStatusSnapshot: []v1beta1.ContainerRecreateRequestSyncContainerStatus{
						{Name: "app", Ready: true, RestartCount: 1, ContainerID: "containerd://new"},
						{Name: "log"},
					},
				},
			},
		},
		{
			name: "v1alpha1 unready-acquired annotation is a True PreRecreateGrace condition at that time",
			alpha: v1alpha1.ContainerRecreateRequest{
				ObjectMeta: metav1.ObjectMeta{Name: "r", Annotations: map[string]string{wellknown.AnnotationCRRUnreadyAcquired: "2025-03-01T00:30:00Z"}},
			},
			beta: v1beta1.ContainerRecreateRequest{
				ObjectMeta: metav1.ObjectMeta{Name: "r"},
				Status:     v1beta1.ContainerRecreateRequestStatus{Conditions: []metav1.Condition{grace}},
			},
		},
		{
			name: "an unready-acquired annotation in another zone is the same instant; its text is stashed",
			alpha: v1alpha1.ContainerRecreateRequest{
				ObjectMeta: metav1.ObjectMeta{Name: "r", Annotations: map[string]string{wellknown.AnnotationCRRUnreadyAcquired: "2025-03-01T08:30:00+08:00"}},
			},
			beta: v1beta1.ContainerRecreateRequest{
				ObjectMeta: metav1.ObjectMeta{Name: "r", Annotations: map[string]string{
					"conversion.shoal.io/v1alpha1": `{"unreadyAcquired":"2025-03-01T08:30:00+08:00"}`,
				}},
				Status: v1beta1.ContainerRecreateRequestStatus{Conditions: []metav1.Condition{grace}},
			},
		},
		{
			name: "annotations that do not parse give no field and are stashed as they are",
			alpha: v1alpha1.ContainerRecreateRequest{
				ObjectMeta: metav1.ObjectMeta{Name: "r", Annotations: map[string]string{
					wellknown.AnnotationCRRUnreadyAcquired:       "yesterday",
					wellknown.AnnotationCRRSyncContainerStatuses: "{broken",
				}},
			},
			beta: v1beta1.ContainerRecreateRequest{
				ObjectMeta: metav1.ObjectMeta{Name: "r", Annotations: map[string]string{
					"conversion.shoal.io/v1alpha1": `{"syncContainerStatuses":"{broken","unreadyAcquired":"yesterday"}`,
				}},
			},
		},
		{
			name: "other conditions and a released PreRecreateGrace have no annotation; v1alpha1 keeps them in the stash",
			alpha: v1alpha1.ContainerRecreateRequest{
				ObjectMeta: metav1.ObjectMeta{Name: "r", Annotations: map[string]string{
					"conversion.shoal.io/v1beta1": `{"conditions":[{"type":"PreRecreateGrace","status":"False","lastTransitionTime":"2025-03-01T00:30:00Z","reason":"Released","message":""}]}`,
				}},
			},
			beta: v1beta1.ContainerRecreateRequest{
				ObjectMeta: metav1.ObjectMeta{Name: "r"},
				Status: v1beta1.ContainerRecreateRequestStatus{Conditions: []metav1.Condition{{
					Type: v1beta1.ContainerRecreateRequestPreRecreateGraceType, Status: metav1.ConditionFalse,
					LastTransitionTime: metav1.NewTime(unready), Reason: "Released",
				}}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var beta v1beta1.ContainerRecreateRequest
			require.NoError(t, containerRecreateRequestToV1beta1(&tc.alpha, &beta))
			crrRequireEqual(t, tc.beta, beta)
			var alpha v1alpha1.ContainerRecreateRequest
			require.NoError(t, containerRecreateRequestToV1alpha1(&tc.beta, &alpha))
			crrRequireEqual(t, tc.alpha, alpha)
		})
	}
}

// crrRequireEqual compares as the API does: times by instant, whatever
// their zone (times read back from a stash are local).
func crrRequireEqual(t *testing.T, want, got any) {
	t.Helper()
	if !apiequality.Semantic.DeepEqual(want, got) {
		require.Equal(t, want, got)
	}
}

// TestContainerRecreateRequestEdits checks which side wins when one version
// changes an object that came from the other.
func TestContainerRecreateRequestEdits(t *testing.T) {
	at := func(s string) metav1.Time {
		tm, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return metav1.NewTime(tm.UTC())
	}
	other := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, LastTransitionTime: at("2025-03-01T00:00:00Z"), Reason: "Ready"}

	t.Run("a v1alpha1 writer setting unready-acquired adds PreRecreateGrace next to the stashed conditions", func(t *testing.T) {
		beta := v1beta1.ContainerRecreateRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "r"},
			Status:     v1beta1.ContainerRecreateRequestStatus{Conditions: []metav1.Condition{other}},
		}
		var alpha v1alpha1.ContainerRecreateRequest
		require.NoError(t, containerRecreateRequestToV1alpha1(&beta, &alpha))
		require.NotContains(t, alpha.Annotations, wellknown.AnnotationCRRUnreadyAcquired)

		alpha.Annotations[wellknown.AnnotationCRRUnreadyAcquired] = "2025-03-01T00:30:00Z" // as the controller does
		var got v1beta1.ContainerRecreateRequest
		require.NoError(t, containerRecreateRequestToV1beta1(&alpha, &got))
		crrRequireEqual(t, []metav1.Condition{other, {
			Type: v1beta1.ContainerRecreateRequestPreRecreateGraceType, Status: metav1.ConditionTrue,
			LastTransitionTime: at("2025-03-01T00:30:00Z"), Reason: "PreRecreateGrace", Message: crrPreRecreateGraceMessage,
		}}, got.Status.Conditions)
		require.Nil(t, got.Annotations)
	})

	t.Run("a v1beta1 PreRecreateGrace condition is the v1alpha1 annotation, its details stashed", func(t *testing.T) {
		grace := metav1.Condition{
			Type: v1beta1.ContainerRecreateRequestPreRecreateGraceType, Status: metav1.ConditionTrue,
			LastTransitionTime: at("2025-03-01T00:30:00Z"), Reason: "PodMarkedUnready", Message: "draining", ObservedGeneration: 1,
		}
		beta := v1beta1.ContainerRecreateRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "r", Finalizers: []string{wellknown.FinalizerCRRUnreadyAcquired}},
			Status:     v1beta1.ContainerRecreateRequestStatus{Conditions: []metav1.Condition{grace, other}},
		}
		var alpha v1alpha1.ContainerRecreateRequest
		require.NoError(t, containerRecreateRequestToV1alpha1(&beta, &alpha))
		require.Equal(t, "2025-03-01T00:30:00Z", alpha.Annotations[wellknown.AnnotationCRRUnreadyAcquired])
		require.Contains(t, alpha.Annotations, "conversion.shoal.io/v1beta1")
		require.Equal(t, []string{wellknown.FinalizerCRRUnreadyAcquired}, alpha.Finalizers)

		var back v1beta1.ContainerRecreateRequest
		require.NoError(t, containerRecreateRequestToV1beta1(&alpha, &back))
		crrRequireEqual(t, beta, back)
	})

	t.Run("a v1beta1 writer changing the snapshot wins over a stashed annotation text", func(t *testing.T) {
		alpha := v1alpha1.ContainerRecreateRequest{ObjectMeta: metav1.ObjectMeta{Name: "r", Annotations: map[string]string{
			wellknown.AnnotationCRRSyncContainerStatuses: `[ {"name": "app", "ready": false, "restartCount": 0} ]`,
		}}}
		var beta v1beta1.ContainerRecreateRequest
		require.NoError(t, containerRecreateRequestToV1beta1(&alpha, &beta))
		require.Equal(t, []v1beta1.ContainerRecreateRequestSyncContainerStatus{{Name: "app"}}, beta.Status.ContainerStatusSnapshot)

		beta.Status.ContainerStatusSnapshot[0].Ready = true
		var got v1alpha1.ContainerRecreateRequest
		require.NoError(t, containerRecreateRequestToV1alpha1(&beta, &got))
		require.Equal(t, map[string]string{
			wellknown.AnnotationCRRSyncContainerStatuses: `[{"name":"app","ready":true,"restartCount":0}]`,
		}, got.Annotations)
	})

	t.Run("a v1beta1 writer setting PreRecreateGrace replaces an unparsable annotation", func(t *testing.T) {
		alpha := v1alpha1.ContainerRecreateRequest{ObjectMeta: metav1.ObjectMeta{Name: "r", Annotations: map[string]string{
			wellknown.AnnotationCRRUnreadyAcquired: "yesterday",
		}}}
		var beta v1beta1.ContainerRecreateRequest
		require.NoError(t, containerRecreateRequestToV1beta1(&alpha, &beta))
		require.Empty(t, beta.Status.Conditions)

		beta.Status.Conditions = []metav1.Condition{{
			Type: v1beta1.ContainerRecreateRequestPreRecreateGraceType, Status: metav1.ConditionTrue,
			LastTransitionTime: at("2025-03-01T00:30:00Z"), Reason: "PreRecreateGrace", Message: crrPreRecreateGraceMessage,
		}}
		var got v1alpha1.ContainerRecreateRequest
		require.NoError(t, containerRecreateRequestToV1alpha1(&beta, &got))
		require.Equal(t, map[string]string{wellknown.AnnotationCRRUnreadyAcquired: "2025-03-01T00:30:00Z"}, got.Annotations)
	})
}
