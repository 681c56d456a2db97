package webhook

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

func testCloneSetObject() *v1beta1.CloneSet {
	return &v1beta1.CloneSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps.kruise.io/v1beta1", Kind: "CloneSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "cs-uid"},
		Spec: v1beta1.CloneSetSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.25"}}},
			},
			UpdateStrategy: v1beta1.CloneSetUpdateStrategy{Type: v1beta1.RollingUpdateCloneSetUpdateStrategyType,
				RollingUpdate: &v1beta1.RollingUpdateCloneSetStrategy{PodUpdatePolicy: v1beta1.InPlaceOnlyCloneSetPodUpdateStrategyType}},
		},
	}
}

// clonePods is a PodGetter over a fixed set of pods of namespace default.
type clonePods map[string]*corev1.Pod

func (p clonePods) Pod(namespace, name string) (*corev1.Pod, error) {
	if pod, ok := p[name]; ok && namespace == "default" {
		return pod, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
}

func TestValidateCloneSet(t *testing.T) {
	owned := func(name string, deleting bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps.kruise.io/v1beta1", Kind: "CloneSet", Name: "web", UID: "cs-uid", Controller: ptr.To(true)}}}}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{}
		}
		return p
	}
	stranger := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "default"}}
	pods := clonePods{"web-a": owned("web-a", false), "web-b": owned("web-b", false), "web-gone": owned("web-gone", true), "other": stranger}
	a := NewCloneSetAdmission(pods)

	for _, tc := range []struct {
		name     string
		op       admissionv1.Operation
		change   func(*v1beta1.CloneSet)
		v1alpha1 bool
		deny     string // "" allows; else part of the message
	}{
		{"a valid CloneSet", admissionv1.Create, nil, false, ""},
		{"selector does not select the template", admissionv1.Create,
			func(cs *v1beta1.CloneSet) { cs.Spec.Template.Labels = map[string]string{"app": "api"} }, false,
			`spec.template.metadata.labels: map[app:api] does not match spec.selector "app=web"; add the selector's labels to the template`},
		{"restartPolicy OnFailure", admissionv1.Create,
			func(cs *v1beta1.CloneSet) { cs.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure }, false,
			`spec.template.spec.restartPolicy: "OnFailure" is not supported`},
		{"activeDeadlineSeconds", admissionv1.Create,
			func(cs *v1beta1.CloneSet) { cs.Spec.Template.Spec.ActiveDeadlineSeconds = ptr.To[int64](60) }, false,
			"spec.template.spec.activeDeadlineSeconds: must not be set"},
		{"a pod listed twice", admissionv1.Create,
			func(cs *v1beta1.CloneSet) { cs.Spec.ScaleStrategy.PodsToDelete = []string{"web-a", "web-a"} }, false,
			`spec.scaleStrategy.podsToDelete[1]: "web-a" is listed twice`},
		{"a pod of this CloneSet to delete", admissionv1.Update,
			func(cs *v1beta1.CloneSet) { cs.Spec.ScaleStrategy.PodsToDelete = []string{"web-a"} }, false, ""},
		{"no such pod", admissionv1.Update,
			func(cs *v1beta1.CloneSet) { cs.Spec.ScaleStrategy.PodsToDelete = []string{"web-zzz"} }, false,
			`spec.scaleStrategy.podsToDelete[0]: no pod "web-zzz" in namespace "default"`},
		{"another owner's pod", admissionv1.Update,
			func(cs *v1beta1.CloneSet) { cs.Spec.ScaleStrategy.PodsToDelete = []string{"other"} }, false,
			`spec.scaleStrategy.podsToDelete[0]: pod "other" is not a pod of CloneSet "web"`},
		{"a pod being deleted", admissionv1.Update,
			func(cs *v1beta1.CloneSet) { cs.Spec.ScaleStrategy.PodsToDelete = []string{"web-gone"} }, false,
			`spec.scaleStrategy.podsToDelete[0]: pod "web-gone" is already being deleted`},
		{"InPlaceOnly: a new image", admissionv1.Update,
			func(cs *v1beta1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Image = "nginx:1.26" }, false, ""},
		{"InPlaceOnly: a new env value", admissionv1.Update,
			func(cs *v1beta1.CloneSet) {
				cs.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "b"}}
			}, false,
			"spec.template.spec.containers[app].env: cannot change in place, and spec.updateStrategy.rollingUpdate.podUpdatePolicy is InPlaceOnly; change only images, labels and annotations, or set podUpdatePolicy to InPlaceIfPossible or ReCreate in the same update"},
		{"InPlaceOnly at v1alpha1 names v1alpha1's field", admissionv1.Update,
			func(cs *v1beta1.CloneSet) {
				cs.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "b"}}
			}, true, "spec.updateStrategy.type is InPlaceOnly"},
		{"a new env value while leaving InPlaceOnly", admissionv1.Update,
			func(cs *v1beta1.CloneSet) {
				cs.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "b"}}
				cs.Spec.UpdateStrategy.RollingUpdate.PodUpdatePolicy = v1beta1.RecreateCloneSetPodUpdateStrategyType
			}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := testCloneSetObject()
			cs := old.DeepCopy()
			if tc.change != nil {
				tc.change(cs)
			}
			req := &admissionv1.AdmissionRequest{Operation: tc.op, Namespace: "default"}
			raw, err := json.Marshal(cs)
			require.NoError(t, err)
			req.Object.Raw = raw
			if tc.op == admissionv1.Update {
				raw, err := json.Marshal(old)
				require.NoError(t, err)
				req.OldObject.Raw = raw
			}
			if tc.v1alpha1 {
				req.RequestKind = &metav1.GroupVersionKind{Group: "apps.kruise.io", Version: "v1alpha1", Kind: "CloneSet"}
			}
			resp := a.Validate(context.Background(), req)
			if tc.deny == "" {
				require.True(t, resp.Allowed, "%v", resp.Result)
				return
			}
			require.False(t, resp.Allowed)
			require.Contains(t, resp.Result.Message, tc.deny)
		})
	}

	t.Run("status updates are not checked", func(t *testing.T) {
		resp := a.Validate(context.Background(), &admissionv1.AdmissionRequest{Operation: admissionv1.Update, SubResource: "status"})
		require.True(t, resp.Allowed)
	})
}
