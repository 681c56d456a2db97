package sidecarcontrol

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	appsv1beta1 "github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// testNow is the injection time used by the tests.
var testNow = metav1.NewTime(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))

// newSet returns a SidecarSet selecting app=web with the given containers.
func newSet(name string, containers ...appsv1beta1.SidecarContainer) *appsv1beta1.SidecarSet {
	return &appsv1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name + "-uid")},
		Spec: appsv1beta1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Containers: containers,
		},
	}
}

// sidecar returns a sidecar container.
func sidecar(name, image string) appsv1beta1.SidecarContainer {
	return appsv1beta1.SidecarContainer{Container: corev1.Container{Name: name, Image: image}}
}

// newPod returns a pod labeled app=web with one app container.
func newPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "web-0", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "app:1",
			Env: []corev1.EnvVar{{Name: "POD_NAME", Value: "web-0"}, {Name: "LOG_LEVEL", Value: "debug"}, {Name: "REGION", Value: "eu"}},
		}}},
	}
}

// names lists the names of containers.
func names(cs []corev1.Container) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// container returns the container called name, or nil.
func container(cs []corev1.Container, name string) *corev1.Container {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}

// envValue returns the value of the variable called name in c ("" when
// absent) and whether it is there.
func envValue(c *corev1.Container, name string) (string, bool) {
	if e := findEnv(c.Env, name); e != nil {
		return e.Value, true
	}
	return "", false
}

// revisions is a RevisionGetter over a fixed list.
type revisions []*appsv1.ControllerRevision

func (r revisions) Revisions(string) ([]*appsv1.ControllerRevision, error) { return r, nil }

// intstrPercent is a string IntOrString.
func intstrPercent(s string) intstr.IntOrString { return intstr.FromString(s) }

// intstrInt is an integer IntOrString.
func intstrInt(i int) intstr.IntOrString { return intstr.FromInt32(int32(i)) }
