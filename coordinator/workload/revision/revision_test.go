package revision

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
)

func template(image string) *corev1.PodTemplateSpec {
	return &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
	}
}

// foreignRevision is a revision as OpenKruise writes it: named by its own
// hash, the template stored as a replace patch.
func foreignRevision(t *testing.T, name string, number int64, tpl *corev1.PodTemplateSpec) *appsv1.ControllerRevision {
	t.Helper()
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tpl)
	require.NoError(t, err)
	raw["$patch"] = "replace"
	b, err := json.Marshal(map[string]any{"spec": map[string]any{"template": raw}})
	require.NoError(t, err)
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Data:       runtime.RawExtension{Raw: b}, Revision: number,
	}
}

// TestSyncAdoptsEqualRevision: the revisions OpenKruise left behind are
// reused when they hold the current template, so the pods they label stay
// up to date; a template no revision holds gets a new one of ours.
func TestSyncAdoptsEqualRevision(t *testing.T) {
	owner := &metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "uid-1"}
	kind := schema.GroupVersionKind{Group: "apps.kruise.io", Version: "v1beta1", Kind: "CloneSet"}
	cases := []struct {
		name       string
		template   *corev1.PodTemplateSpec
		revs       []*appsv1.ControllerRevision
		wantName   string
		wantNumber int64
		wantCreate bool
	}{
		{
			name:     "the newest foreign revision holds the template",
			template: template("nginx:1.25"),
			revs: []*appsv1.ControllerRevision{
				foreignRevision(t, "web-old", 1, template("nginx:1.24")),
				foreignRevision(t, "web-kruise", 2, template("nginx:1.25")),
			},
			wantName: "web-kruise", wantNumber: 2,
		},
		{
			name:     "an older foreign revision holds it: renumbered as the newest",
			template: template("nginx:1.24"),
			revs: []*appsv1.ControllerRevision{
				foreignRevision(t, "web-old", 1, template("nginx:1.24")),
				foreignRevision(t, "web-kruise", 2, template("nginx:1.25")),
			},
			wantName: "web-old", wantNumber: 3,
		},
		{
			name:       "no revision holds it",
			template:   template("nginx:1.26"),
			revs:       []*appsv1.ControllerRevision{foreignRevision(t, "web-kruise", 2, template("nginx:1.25"))},
			wantNumber: 3, wantCreate: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var objs []runtime.Object
			for _, r := range tc.revs {
				objs = append(objs, r)
			}
			client := fake.NewClientset(objs...)
			got, err := Sync(t.Context(), client, Owner{Object: owner, Kind: kind, Template: tc.template, HistoryLimit: 10}, tc.revs, nil)
			require.NoError(t, err)
			hash, err := Hash(tc.template, nil)
			require.NoError(t, err)
			if tc.wantCreate {
				require.Equal(t, "web-"+hash, got.Name)
			} else {
				require.Equal(t, tc.wantName, got.Name)
			}
			require.Equal(t, tc.wantNumber, got.Revision)
			stored, err := client.AppsV1().ControllerRevisions("ns").Get(t.Context(), got.Name, metav1.GetOptions{})
			require.NoError(t, err)
			require.Equal(t, tc.wantNumber, stored.Revision, "the stored revision's number")
			list, err := client.AppsV1().ControllerRevisions("ns").List(t.Context(), metav1.ListOptions{})
			require.NoError(t, err)
			wantCount := len(tc.revs)
			if tc.wantCreate {
				wantCount++
			}
			require.Len(t, list.Items, wantCount, "revisions after the sync")
		})
	}
}
