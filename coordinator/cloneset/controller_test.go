package cloneset

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/workload/expectations"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	shoalfake "github.com/shoal-io/shoal/protocol/client/clientset/versioned/fake"
	shoalinformers "github.com/shoal-io/shoal/protocol/client/informers/externalversions"
)

// TestSyncChecksExpectationsBeforeListing is the regression test of a
// fifth pod seen in CI for 3 replicas and maxSurge 1: the informer showed
// the surge pod created by the previous sync in the middle of the next
// one, after its pods were listed and before its expectations were
// checked. The sync then both saw its create observed and missed the pod,
// and created another. Here the informer's event arrives during the
// sync's ControllerRevision write.
func TestSyncChecksExpectationsBeforeListing(t *testing.T) {
	const key = "ns/web"
	for _, tc := range []struct {
		name string
		// pending is a create the informer has not shown yet when the sync
		// starts, and shows during it.
		pending string
		creates int
	}{
		{name: "nothing pending: one surge pod", creates: 1},
		{name: "a create shown during the sync: none", pending: "web-surge", creates: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube := kubefake.NewClientset()
			shoal := shoalfake.NewSimpleClientset()
			kf := kubeinformers.NewSharedInformerFactory(kube, 0)
			sf := shoalinformers.NewSharedInformerFactory(shoal, 0)
			o := Options{
				Client: kube, Shoal: shoal,
				CloneSets: sf.Apps().V1beta1().CloneSets().Informer(), Pods: kf.Core().V1().Pods().Informer(),
				Revisions: kf.Apps().V1().ControllerRevisions().Informer(),
				IsLeader:  func() bool { return true }, Recorder: events.NewFakeRecorder(100),
				Clock: clocktesting.NewFakeClock(now),
			}
			c, err := New(o)
			require.NoError(t, err)

			cs := cloneSet(3, func(cs *v1beta1.CloneSet) {
				cs.UID = "cs-uid"
				cs.Spec.UpdateStrategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(1))
				cs.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(0))
				cs.Spec.Template.Labels = map[string]string{"app": "web"}
				cs.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", Image: "app:v3"}}
				cs.Status.CurrentRevision = oldRev
			})
			require.NoError(t, o.CloneSets.GetIndexer().Add(cs))
			require.NoError(t, shoal.Tracker().Add(cs))
			for _, name := range []string{"web-a", "web-b", "web-c"} {
				p := pod(name, oldRev, 0)
				p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(cs, v1beta1.SchemeGroupVersion.WithKind("CloneSet"))}
				require.NoError(t, o.Pods.GetIndexer().Add(p))
			}
			if tc.pending != "" {
				c.Expect.Expect(key, expectations.Create, tc.pending)
				kube.PrependReactor("create", "controllerrevisions", func(k8stesting.Action) (bool, runtime.Object, error) {
					c.Expect.Observe(key, expectations.Create, tc.pending)
					return false, nil, nil
				})
			}

			_, err = c.sync(context.Background(), key)
			require.NoError(t, err)
			creates := 0
			for _, a := range kube.Actions() {
				if a.Matches("create", "pods") {
					creates++
				}
			}
			require.Equal(t, tc.creates, creates, "pods created")
		})
	}
}
