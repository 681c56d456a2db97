package webhook_test

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/shoal-io/shoal/coordinator/webhook"
)

// A CRRAdmission is built on a pod lookup (in the coordinator, its pod
// informer's lister) and its two handlers are served on the webhook server.
func ExampleCRRAdmission() {
	running := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "ns", UID: "uid-1"},
		Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "app"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "app", ContainerID: "containerd://aaa"},
		}},
	}
	crrs := webhook.NewCRRAdmission(webhook.PodGetterFunc(func(namespace, name string) (*corev1.Pod, error) {
		if namespace == running.Namespace && name == running.Name {
			return running, nil
		}
		return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
	}))
	// server.Handle(webhook.CRRMutatePath, crrs.Mutate)
	// server.Handle(webhook.CRRValidatePath, crrs.Validate)

	create := func(obj string) *admissionv1.AdmissionRequest {
		return &admissionv1.AdmissionRequest{Namespace: "ns", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: []byte(obj)}}
	}
	resp := crrs.Mutate(context.Background(), create(`{"metadata":{"name":"r"},"spec":{"podName":"web-0","containers":[{"name":"app"}]}}`))
	fmt.Println(resp.Allowed, string(resp.Patch))

	resp = crrs.Mutate(context.Background(), create(`{"metadata":{"name":"r"},"spec":{"podName":"web-0","containers":[{"name":"db"}]}}`))
	fmt.Println(resp.Allowed, resp.Result.Message)
	// Output:
	// true [{"op":"add","path":"/metadata/labels","value":{"crr.apps.kruise.io/active":"true","crr.apps.kruise.io/node-name":"node-1","crr.apps.kruise.io/pod-name":"web-0","crr.apps.kruise.io/pod-uid":"uid-1"}},{"op":"replace","path":"/spec","value":{"podName":"web-0","containers":[{"name":"app","statusContext":{"containerID":"containerd://aaa","restartCount":0}}],"strategy":{"failurePolicy":"Fail"}}}]
	// false spec.containers[0].name: container "db" is not in pod "web-0" (its containers: app)
}
