package webhook

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/pub"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// testStatefulSetObject is a valid StatefulSet as the apiserver hands it
// over: with the CRD's defaults applied.
func testStatefulSetObject() *v1beta1.StatefulSet {
	return &v1beta1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps.kruise.io/v1beta1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db", UID: "sts-uid"},
		Spec: v1beta1.StatefulSetSpec{
			Replicas:    ptr.To[int32](3),
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			ServiceName: "db",
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "redis:7"}}},
			},
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy: v1beta1.StatefulSetUpdateStrategy{
				Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &v1beta1.RollingUpdateStatefulSetStrategy{
					Partition:       ptr.To[int32](0),
					MaxUnavailable:  ptr.To(intstr.FromString("50%")),
					PodUpdatePolicy: v1beta1.InPlaceOnlyPodUpdateStrategyType,
					MinReadySeconds: ptr.To[int32](0),
				},
			},
			RevisionHistoryLimit: ptr.To[int32](10),
			ReserveOrdinals:      []intstr.IntOrString{intstr.FromInt32(1), intstr.FromString("3-4"), intstr.FromString("7-7")},
			PersistentVolumeClaimRetentionPolicy: &v1beta1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: v1beta1.RetainPersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  v1beta1.RetainPersistentVolumeClaimRetentionPolicyType,
			},
		},
	}
}

func TestValidateStatefulSet(t *testing.T) {
	reserve := func(r ...intstr.IntOrString) func(*v1beta1.StatefulSet) {
		return func(s *v1beta1.StatefulSet) { s.Spec.ReserveOrdinals = r }
	}
	for _, tc := range []struct {
		name     string
		op       admissionv1.Operation
		change   func(*v1beta1.StatefulSet)
		v1alpha1 bool
		deny     []string // nil allows; else parts of the message
	}{
		{"a valid StatefulSet", admissionv1.Create, nil, false, nil},
		{"a valid StatefulSet at v1alpha1", admissionv1.Create, nil, true, nil},
		{"OnDelete with OrderedReady", admissionv1.Create, func(s *v1beta1.StatefulSet) {
			s.Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
			s.Spec.UpdateStrategy = v1beta1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
		}, false, nil},
		{"in-place without the readiness gate in the template (the controller adds it)", admissionv1.Create, func(s *v1beta1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate.PodUpdatePolicy = v1beta1.InPlaceIfPossiblePodUpdateStrategyType
		}, false, nil},
		{"weight terms with selectors", admissionv1.Create, func(s *v1beta1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate.UnorderedUpdate = &v1beta1.UnorderedUpdateStrategy{PriorityStrategy: &pub.UpdatePriorityStrategy{
				WeightPriority: []pub.UpdatePriorityWeightTerm{{Weight: 50, MatchSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tier": "a"}}}},
			}}
		}, false, nil},

		{"no selector (no spec at all)", admissionv1.Create, func(s *v1beta1.StatefulSet) { s.Spec = v1beta1.StatefulSetSpec{} }, false,
			[]string{"spec.selector: required; set matchLabels"}},
		{"selector does not select the template", admissionv1.Create,
			func(s *v1beta1.StatefulSet) { s.Spec.Template.Labels = map[string]string{"app": "cache"} }, false,
			[]string{`spec.template.metadata.labels: map[app:cache] does not match spec.selector "app=db"; add the selector's labels to the template`}},
		{"restartPolicy OnFailure", admissionv1.Create,
			func(s *v1beta1.StatefulSet) { s.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure }, false,
			[]string{`spec.template.spec.restartPolicy: "OnFailure" is not supported; a StatefulSet's pods run until replaced`}},
		{"activeDeadlineSeconds", admissionv1.Create,
			func(s *v1beta1.StatefulSet) { s.Spec.Template.Spec.ActiveDeadlineSeconds = ptr.To[int64](60) }, false,
			[]string{"spec.template.spec.activeDeadlineSeconds: must not be set"}},
		{"an empty weightPriority selector", admissionv1.Create, func(s *v1beta1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate.UnorderedUpdate = &v1beta1.UnorderedUpdateStrategy{PriorityStrategy: &pub.UpdatePriorityStrategy{
				WeightPriority: []pub.UpdatePriorityWeightTerm{
					{Weight: 50, MatchSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tier": "a"}}},
					{Weight: 10, MatchSelector: metav1.LabelSelector{MatchLabels: map[string]string{}}},
				},
			}}
		}, false, []string{"spec.updateStrategy.rollingUpdate.unorderedUpdate.priorityStrategy.weightPriority[1].matchSelector: must not be empty; set matchLabels or matchExpressions"}},
		{"a negative reserved ordinal", admissionv1.Create,
			reserve(intstr.FromInt32(0), intstr.FromInt32(-2)), false,
			[]string{"spec.reserveOrdinals[1]: -2 is negative; use an ordinal of 0 or more"}},
		{"a reserved range that is not a range", admissionv1.Create,
			reserve(intstr.FromString("three")), false,
			[]string{`spec.reserveOrdinals[0]: "three" is not an ordinal range; use an integer such as 3 or a string "a-b" such as "3-5"`}},
		{"a reserved ordinal as a string", admissionv1.Create,
			reserve(intstr.FromString("3")), false,
			[]string{`spec.reserveOrdinals[0]: "3" is not an ordinal range`, "(a single ordinal is an unquoted integer: 3)"}},
		{"a reserved range with a sign", admissionv1.Create,
			reserve(intstr.FromString("1-+3")), false,
			[]string{`spec.reserveOrdinals[0]: "1-+3" is not an ordinal range`}},
		{"a reserved range of three numbers", admissionv1.Create,
			reserve(intstr.FromString("1-3-5")), false,
			[]string{`spec.reserveOrdinals[0]: "1-3-5" is not an ordinal range`}},
		{"a reserved range beyond int32", admissionv1.Create,
			reserve(intstr.FromString("0-9999999999")), false,
			[]string{`spec.reserveOrdinals[0]: "0-9999999999" is not an ordinal range`, "from 0 to 2147483647"}},
		{"a reserved range high to low", admissionv1.Create,
			reserve(intstr.FromInt32(1), intstr.FromString("5-3")), false,
			[]string{`spec.reserveOrdinals[1]: "5-3" starts after it ends; write the range low to high, as "3-5"`}},
		{"several problems, one line each", admissionv1.Create, func(s *v1beta1.StatefulSet) {
			s.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
			s.Spec.ReserveOrdinals = []intstr.IntOrString{intstr.FromString("x")}
		}, false, []string{"spec.template.spec.restartPolicy: \"Never\" is not supported", "\nspec.reserveOrdinals[0]:"}},

		{"UPDATE: scale, new image, new strategy and reserved ordinals", admissionv1.Update, func(s *v1beta1.StatefulSet) {
			s.Spec.Replicas = ptr.To[int32](5)
			s.Spec.Template.Spec.Containers[0].Image = "redis:7.2"
			s.Spec.Template.Labels["release"] = "b"
			s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](2)
			s.Spec.UpdateStrategy.RollingUpdate.MinReadySeconds = ptr.To[int32](30)
			s.Spec.ReserveOrdinals = nil
			s.Spec.Ordinals = &v1beta1.StatefulSetOrdinals{Start: 1}
			s.Spec.RevisionHistoryLimit = ptr.To[int32](3)
			s.Spec.ScaleStrategy = &v1beta1.StatefulSetScaleStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(2))}
			s.Spec.PersistentVolumeClaimRetentionPolicy.WhenScaled = v1beta1.DeletePersistentVolumeClaimRetentionPolicyType
			s.Spec.Lifecycle = &pub.Lifecycle{}
			s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}
			s.Spec.VolumeClaimUpdateStrategy.Type = v1beta1.OnPodRollingUpdateVolumeClaimUpdateStrategyType
		}, false, nil},
		{"UPDATE at v1alpha1 allowed", admissionv1.Update,
			func(s *v1beta1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](0) }, true, nil},
		{"UPDATE: new serviceName", admissionv1.Update,
			func(s *v1beta1.StatefulSet) { s.Spec.ServiceName = "db-headless" }, false,
			[]string{"spec.serviceName: cannot be changed after creation; set it back, or delete the StatefulSet (kubectl delete --cascade=orphan keeps its pods) and create it again"}},
		{"UPDATE: new selector and podManagementPolicy", admissionv1.Update, func(s *v1beta1.StatefulSet) {
			s.Spec.Selector.MatchLabels["tier"] = "x"
			s.Spec.Template.Labels["tier"] = "x"
			s.Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
			s.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(1))
		}, false, []string{"spec.selector: cannot be changed after creation", "\nspec.podManagementPolicy: cannot be changed after creation"}},
		{"UPDATE: InPlaceOnly and a new env value", admissionv1.Update, func(s *v1beta1.StatefulSet) {
			s.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "b"}}
		}, false, []string{"spec.template.spec.containers[db].env: cannot change in place, and spec.updateStrategy.rollingUpdate.podUpdatePolicy is InPlaceOnly; change only images, labels and annotations, or set podUpdatePolicy to InPlaceIfPossible or ReCreate in the same update"}},
		{"UPDATE: InPlaceOnly and a new container", admissionv1.Update, func(s *v1beta1.StatefulSet) {
			s.Spec.Template.Spec.Containers = append(s.Spec.Template.Spec.Containers, corev1.Container{Name: "log", Image: "busybox"})
		}, false, []string{"spec.template.spec.containers (added or removed): cannot change in place"}},
		{"UPDATE: a new env value while leaving InPlaceOnly", admissionv1.Update, func(s *v1beta1.StatefulSet) {
			s.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "b"}}
			s.Spec.UpdateStrategy.RollingUpdate.PodUpdatePolicy = v1beta1.InPlaceIfPossiblePodUpdateStrategyType
		}, false, nil},
		{"UPDATE: the create rules apply too", admissionv1.Update,
			reserve(intstr.FromString("4-2")), false,
			[]string{`spec.reserveOrdinals[0]: "4-2" starts after it ends`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := testStatefulSetObject()
			sts := old.DeepCopy()
			if tc.change != nil {
				tc.change(sts)
			}
			req := &admissionv1.AdmissionRequest{Operation: tc.op, Namespace: "default", Name: sts.Name,
				Kind: metav1.GroupVersionKind{Group: "apps.kruise.io", Version: "v1beta1", Kind: "StatefulSet"}}
			if tc.v1alpha1 {
				// matchPolicy Equivalent: the object comes at v1beta1, the
				// request as made at v1alpha1.
				req.RequestKind = &metav1.GroupVersionKind{Group: "apps.kruise.io", Version: "v1alpha1", Kind: "StatefulSet"}
			}
			raw, err := json.Marshal(sts)
			require.NoError(t, err)
			req.Object.Raw = raw
			if tc.op == admissionv1.Update {
				raw, err := json.Marshal(old)
				require.NoError(t, err)
				req.OldObject.Raw = raw
			}
			resp := ValidateStatefulSet(t.Context(), req)
			if tc.deny == nil {
				require.True(t, resp.Allowed, "%v", resp.Result)
				return
			}
			require.False(t, resp.Allowed)
			require.EqualValues(t, 422, resp.Result.Code)
			for _, want := range tc.deny {
				require.Contains(t, resp.Result.Message, want)
			}
		})
	}

	t.Run("status updates and deletes are not checked", func(t *testing.T) {
		resp := ValidateStatefulSet(t.Context(), &admissionv1.AdmissionRequest{Operation: admissionv1.Update, SubResource: "status"})
		require.True(t, resp.Allowed)
		resp = ValidateStatefulSet(t.Context(), &admissionv1.AdmissionRequest{Operation: admissionv1.Delete})
		require.True(t, resp.Allowed)
	})

	t.Run("an object that is not a StatefulSet is a bad request", func(t *testing.T) {
		resp := ValidateStatefulSet(t.Context(), &admissionv1.AdmissionRequest{Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: []byte(`{"spec":{"replicas":"three"}}`)}})
		require.False(t, resp.Allowed)
		require.EqualValues(t, 400, resp.Result.Code)
		require.Contains(t, resp.Result.Message, "could not decode the StatefulSet")
	})
}

// TestStatefulSetImmutableFields lists the spec fields an UPDATE may not
// change. A new spec field fails it until it is placed on one side or the
// other: into statefulSetMutableFields, or into this list.
func TestStatefulSetImmutableFields(t *testing.T) {
	var fixed []string
	typ := reflect.TypeFor[v1beta1.StatefulSetSpec]()
	jsonFieldName := func(tag string) string { name, _, _ := strings.Cut(tag, ","); return name }
	for i := range typ.NumField() {
		name := jsonFieldName(typ.Field(i).Tag.Get("json"))
		if !statefulSetMutableFields[name] {
			fixed = append(fixed, name)
		}
	}
	require.Equal(t, []string{"selector", "serviceName", "podManagementPolicy"}, fixed)
	for name := range statefulSetMutableFields {
		_, ok := typ.FieldByNameFunc(func(f string) bool {
			sf, _ := typ.FieldByName(f)
			return jsonFieldName(sf.Tag.Get("json")) == name
		})
		require.True(t, ok, "statefulSetMutableFields lists %q, which the spec does not have", name)
	}
}

// fakeClasses are storage classes by name; def names the default.
type fakeClasses struct {
	classes map[string]*storagev1.StorageClass
	def     string
}

func (f fakeClasses) Get(_ context.Context, name string) (*storagev1.StorageClass, error) {
	if sc, ok := f.classes[name]; ok {
		return sc, nil
	}
	return nil, apierrors.NewNotFound(storagev1.Resource("storageclasses"), name)
}

func (f fakeClasses) Default(context.Context) (*storagev1.StorageClass, error) {
	return f.classes[f.def], nil
}

func TestValidateStatefulSetVolumeClaimTemplates(t *testing.T) {
	classes := fakeClasses{def: "grow", classes: map[string]*storagev1.StorageClass{
		"grow":  {ObjectMeta: metav1.ObjectMeta{Name: "grow"}, AllowVolumeExpansion: ptr.To(true)},
		"fixed": {ObjectMeta: metav1.ObjectMeta{Name: "fixed"}, AllowVolumeExpansion: ptr.To(false)},
		"unset": {ObjectMeta: metav1.ObjectMeta{Name: "unset"}},
	}}
	claim := func(name, class, size string) corev1.PersistentVolumeClaim {
		c := corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
			},
		}
		if class != "" {
			c.Spec.StorageClassName = ptr.To(class)
		}
		return c
	}
	for _, tc := range []struct {
		name     string
		strategy v1beta1.VolumeClaimUpdateStrategyType
		old, new []corev1.PersistentVolumeClaim
		gateOff  bool
		deny     string
	}{
		{name: "grows on an expandable class", old: []corev1.PersistentVolumeClaim{claim("data", "grow", "1Gi")}, new: []corev1.PersistentVolumeClaim{claim("data", "grow", "2Gi")}},
		{name: "grows on the default class", old: []corev1.PersistentVolumeClaim{claim("data", "", "1Gi")}, new: []corev1.PersistentVolumeClaim{claim("data", "", "2Gi")}},
		{name: "shrinks: new PVCs only", old: []corev1.PersistentVolumeClaim{claim("data", "fixed", "2Gi")}, new: []corev1.PersistentVolumeClaim{claim("data", "fixed", "1Gi")}},
		{
			name: "grows on a class that refuses expansion",
			old:  []corev1.PersistentVolumeClaim{claim("data", "fixed", "1Gi")}, new: []corev1.PersistentVolumeClaim{claim("data", "fixed", "2Gi")},
			deny: "spec.volumeClaimTemplates[data].spec.resources.requests.storage: raised from 1Gi to 2Gi, but storage class fixed does not allow volume expansion",
		},
		{
			name: "allowVolumeExpansion unset is no",
			old:  []corev1.PersistentVolumeClaim{claim("data", "unset", "1Gi")}, new: []corev1.PersistentVolumeClaim{claim("data", "unset", "2Gi")},
			deny: "storage class unset does not allow volume expansion",
		},
		{
			name: "a missing class",
			old:  []corev1.PersistentVolumeClaim{claim("data", "gone", "1Gi")}, new: []corev1.PersistentVolumeClaim{claim("data", "gone", "2Gi")},
			deny: `storage class "gone" could not be read`,
		},
		{
			name: "the mixed case: only the refusing template grows",
			old:  []corev1.PersistentVolumeClaim{claim("a", "fixed", "1Gi"), claim("b", "grow", "1Gi")},
			new:  []corev1.PersistentVolumeClaim{claim("a", "fixed", "2Gi"), claim("b", "grow", "1Gi")},
			deny: "spec.volumeClaimTemplates[a].spec.resources.requests.storage",
		},
		{
			name: "added", old: []corev1.PersistentVolumeClaim{claim("a", "grow", "1Gi")},
			new:  []corev1.PersistentVolumeClaim{claim("a", "grow", "1Gi"), claim("b", "grow", "1Gi")},
			deny: "spec.volumeClaimTemplates: 2 templates instead of 1; templates cannot be added or removed",
		},
		{
			name: "renamed", old: []corev1.PersistentVolumeClaim{claim("a", "grow", "1Gi")}, new: []corev1.PersistentVolumeClaim{claim("b", "grow", "1Gi")},
			deny: "spec.volumeClaimTemplates[b].name: no template of that name before",
		},
		{
			name: "another class", old: []corev1.PersistentVolumeClaim{claim("a", "grow", "1Gi")}, new: []corev1.PersistentVolumeClaim{claim("a", "fixed", "1Gi")},
			deny: `spec.volumeClaimTemplates[a].spec.storageClassName: changed from "grow" to "fixed"`,
		},
		{
			name: "OnDelete: anything goes", strategy: v1beta1.OnPVCDeleteVolumeClaimUpdateStrategyType,
			old: []corev1.PersistentVolumeClaim{claim("a", "fixed", "1Gi")}, new: []corev1.PersistentVolumeClaim{claim("b", "fixed", "2Gi")},
		},
		{
			name: "gate off: anything goes", gateOff: true,
			old: []corev1.PersistentVolumeClaim{claim("a", "fixed", "1Gi")}, new: []corev1.PersistentVolumeClaim{claim("a", "fixed", "2Gi")},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, sts := testStatefulSetObject(), testStatefulSetObject()
			old.Spec.VolumeClaimTemplates, sts.Spec.VolumeClaimTemplates = tc.old, tc.new
			strategy := tc.strategy
			if strategy == "" {
				strategy = v1beta1.OnPodRollingUpdateVolumeClaimUpdateStrategyType
			}
			sts.Spec.VolumeClaimUpdateStrategy.Type = strategy
			req := &admissionv1.AdmissionRequest{Operation: admissionv1.Update, Namespace: "default", Name: sts.Name}
			var err error
			req.Object.Raw, err = json.Marshal(sts)
			require.NoError(t, err)
			req.OldObject.Raw, err = json.Marshal(old)
			require.NoError(t, err)
			resp := (&StatefulSetAdmission{ResizeClaims: !tc.gateOff, Classes: classes}).Validate(t.Context(), req)
			if tc.deny == "" {
				require.True(t, resp.Allowed, "%v", resp.Result)
				return
			}
			require.False(t, resp.Allowed)
			require.Contains(t, resp.Result.Message, tc.deny)
		})
	}
}
