package webhook

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/persistentpodstate"
	"github.com/shoal-io/shoal/coordinator/workloadspread/spread"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	policyv1alpha1 "github.com/shoal-io/shoal/protocol/apis/policy/v1alpha1"
	shoalfake "github.com/shoal-io/shoal/protocol/client/clientset/versioned/fake"
)

// fuzzTarget is one admission webhook of the coordinator as the apiserver
// calls it: a path and the kind of object sent there.
type fuzzTarget struct {
	path     string
	kind     metav1.GroupVersionKind
	resource string
	// cluster marks a cluster-scoped kind (no request namespace).
	cluster bool
	// object returns an empty typed object of the kind, for the patch
	// check.
	object func() any
}

// name is how the fuzz inputs of FuzzAdmissionObject name the target.
func (t fuzzTarget) name() string { return t.path + " " + t.kind.Kind }

func fuzzNew[T any]() func() any { return func() any { return new(T) } }

func fuzzKruise(version, kind string) metav1.GroupVersionKind {
	return metav1.GroupVersionKind{Group: "apps.kruise.io", Version: version, Kind: kind}
}

var (
	fuzzPod       = metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	fuzzCloneSet  = fuzzKruise("v1beta1", "CloneSet")
	fuzzCRR       = fuzzKruise("v1alpha1", "ContainerRecreateRequest")
	fuzzPullJob   = fuzzKruise("v1alpha1", "ImagePullJob")
	fuzzListJob   = fuzzKruise("v1alpha1", "ImageListPullJob")
	fuzzSidecar   = fuzzKruise("v1beta1", "SidecarSet")
	fuzzNamespace = metav1.GroupVersionKind{Version: "v1", Kind: "Namespace"}
)

// fuzzTargets are the webhooks coordinator.go registers with Handle, in its
// order; DeletionProtectionPath serves several kinds. ConvertPath
// (HandleConversion) takes ConversionReviews, not AdmissionReviews, and is
// not fuzzed here.
var fuzzTargets = []fuzzTarget{
	{path: SelectorsPath, kind: fuzzCloneSet, resource: "clonesets", object: fuzzNew[v1beta1.CloneSet]()},
	{path: CRRMutatePath, kind: fuzzCRR, resource: "containerrecreaterequests", object: fuzzNew[v1alpha1.ContainerRecreateRequest]()},
	{path: CRRValidatePath, kind: fuzzCRR, resource: "containerrecreaterequests", object: fuzzNew[v1alpha1.ContainerRecreateRequest]()},
	{path: ImagePullJobMutatePath, kind: fuzzPullJob, resource: "imagepulljobs", object: fuzzNew[v1alpha1.ImagePullJob]()},
	{path: ImagePullJobValidatePath, kind: fuzzPullJob, resource: "imagepulljobs", object: fuzzNew[v1alpha1.ImagePullJob]()},
	{path: ImageListPullJobMutatePath, kind: fuzzListJob, resource: "imagelistpulljobs", object: fuzzNew[v1alpha1.ImageListPullJob]()},
	{path: ImageListPullJobValidatePath, kind: fuzzListJob, resource: "imagelistpulljobs", object: fuzzNew[v1alpha1.ImageListPullJob]()},
	{path: PodMutatePath, kind: fuzzPod, resource: "pods", object: fuzzNew[corev1.Pod]()},
	{path: CloneSetValidatePath, kind: fuzzCloneSet, resource: "clonesets", object: fuzzNew[v1beta1.CloneSet]()},
	{path: BroadcastJobValidatePath, kind: fuzzKruise("v1beta1", "BroadcastJob"), resource: "broadcastjobs", object: fuzzNew[v1beta1.BroadcastJob]()},
	{path: DaemonSetValidatePath, kind: fuzzKruise("v1beta1", "DaemonSet"), resource: "daemonsets", object: fuzzNew[v1beta1.DaemonSet]()},
	{path: StatefulSetValidatePath, kind: fuzzKruise("v1beta1", "StatefulSet"), resource: "statefulsets", object: fuzzNew[v1beta1.StatefulSet]()},
	{path: AdvancedCronJobValidatePath, kind: fuzzKruise("v1beta1", "AdvancedCronJob"), resource: "advancedcronjobs", object: fuzzNew[v1beta1.AdvancedCronJob]()},
	{path: PersistentPodStatePodMutatePath, kind: fuzzPod, resource: "pods", object: fuzzNew[corev1.Pod]()},
	{path: PersistentPodStateValidatePath, kind: fuzzKruise("v1alpha1", "PersistentPodState"), resource: "persistentpodstates", object: fuzzNew[v1alpha1.PersistentPodState]()},
	{path: PodUnavailableBudgetPodPath, kind: fuzzPod, resource: "pods", object: fuzzNew[corev1.Pod]()},
	{path: PodUnavailableBudgetValidatePath, kind: metav1.GroupVersionKind{Group: "policy.kruise.io", Version: "v1alpha1", Kind: "PodUnavailableBudget"},
		resource: "podunavailablebudgets", object: fuzzNew[policyv1alpha1.PodUnavailableBudget]()},
	{path: WorkloadSpreadPodPath, kind: fuzzPod, resource: "pods", object: fuzzNew[corev1.Pod]()},
	{path: WorkloadSpreadValidatePath, kind: fuzzKruise("v1alpha1", "WorkloadSpread"), resource: "workloadspreads", object: fuzzNew[v1alpha1.WorkloadSpread]()},
	{path: DeletionProtectionPath, kind: fuzzNamespace, resource: "namespaces", cluster: true, object: fuzzNew[corev1.Namespace]()},
	{path: DeletionProtectionPath, kind: metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, resource: "deployments", object: fuzzNew[appsv1.Deployment]()},
	{path: DeletionProtectionPath, kind: metav1.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"},
		resource: "customresourcedefinitions", cluster: true, object: fuzzNew[apiextensionsv1.CustomResourceDefinition]()},
	{path: DeletionProtectionPath, kind: metav1.GroupVersionKind{Version: "v1", Kind: "Service"}, resource: "services", object: fuzzNew[corev1.Service]()},
	{path: SidecarSetInjectPath, kind: fuzzPod, resource: "pods", object: fuzzNew[corev1.Pod]()},
	{path: SidecarSetMutatePath, kind: fuzzSidecar, resource: "sidecarsets", cluster: true, object: fuzzNew[v1beta1.SidecarSet]()},
	{path: SidecarSetValidatePath, kind: fuzzSidecar, resource: "sidecarsets", cluster: true, object: fuzzNew[v1beta1.SidecarSet]()},
	{path: PodProbeMarkerValidatePath, kind: fuzzKruise("v1alpha1", "PodProbeMarker"), resource: "podprobemarkers", object: fuzzNew[v1alpha1.PodProbeMarker]()},
	{path: PodProbeMarkerPodMutatePath, kind: fuzzPod, resource: "pods", object: fuzzNew[corev1.Pod]()},
	{path: LaunchPriorityPath, kind: fuzzPod, resource: "pods", object: fuzzNew[corev1.Pod]()},
}

// fuzzPick returns the target named s: by name, else the first of its
// path, else one chosen by a hash of s, so that every input reaches a
// registered webhook.
func fuzzPick(s string) fuzzTarget {
	for _, t := range fuzzTargets {
		if t.name() == s {
			return t
		}
	}
	for _, t := range fuzzTargets {
		if t.path == s {
			return t
		}
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return fuzzTargets[h.Sum32()%uint32(len(fuzzTargets))]
}

// fuzzServer is the coordinator's webhook server with every handler of
// coordinator.go, over the in-memory fakes of this package's tests.
type fuzzServer struct {
	handler http.Handler
	// fixtures are the objects the fakes hand out as informer caches do:
	// shared, not to be changed by a handler; pristine are copies of them.
	fixtures, pristine []runtime.Object
}

func newFuzzServer() *fuzzServer {
	s := NewServer(func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return nil, nil }, prometheus.NewRegistry())
	fs := &fuzzServer{handler: s.mux}
	fixture := func(o runtime.Object) {
		fs.fixtures = append(fs.fixtures, o)
		fs.pristine = append(fs.pristine, o.DeepCopyObject())
	}

	// The objects the fakes serve, from the package's test helpers.
	crrPod := testPod()
	cloneOwned := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-a", Namespace: "default",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps.kruise.io/v1beta1", Kind: "CloneSet", Name: "web", UID: "cs-uid", Controller: ptr.To(true)}}}}
	grow := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "grow"}, AllowVolumeExpansion: ptr.To(true)}
	fixed := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fixed"}, AllowVolumeExpansion: ptr.To(false)}
	pps := testPPS()
	otherPub := testPub(1)
	otherSpread := wsSpread()
	sets := []*v1beta1.SidecarSet{scsTestSet(), scsOther("logger", nil)}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{corev1.LabelMetadataName: "ns", "mesh": "on"}}}
	marker := ppmMarker("game-server-probe", "game-server", [3]string{"game-server", "Idle", "game.io/idle"})
	for _, o := range []runtime.Object{crrPod, cloneOwned, grow, fixed, pps, otherPub, otherSpread, sets[0], sets[1], ns, marker} {
		fixture(o)
	}
	listSets := func() ([]*v1beta1.SidecarSet, error) { return sets, nil }
	namespaces := func(name string) (*corev1.Namespace, error) {
		if name == ns.Name {
			return ns, nil
		}
		return nil, apierrors.NewNotFound(corev1.Resource("namespaces"), name)
	}
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

	s.Handle(SelectorsPath, ValidateSelectors)
	crr := NewCRRAdmission(&fakePods{pods: []*corev1.Pod{crrPod}}).WithNodes(fakeNodes{})
	s.Handle(CRRMutatePath, crr.Mutate)
	s.Handle(CRRValidatePath, crr.Validate)
	s.Handle(ImagePullJobMutatePath, MutateImagePullJob)
	s.Handle(ImagePullJobValidatePath, ValidateImagePullJob)
	s.Handle(ImageListPullJobMutatePath, MutateImageListPullJob)
	s.Handle(ImageListPullJobValidatePath, ValidateImageListPullJob)
	s.Handle(PodMutatePath, PodReadinessGate(true))
	s.Handle(CloneSetValidatePath, NewCloneSetAdmission(clonePods{cloneOwned.Name: cloneOwned}).Validate)
	s.Handle(BroadcastJobValidatePath, ValidateBroadcastJob)
	s.Handle(DaemonSetValidatePath, ValidateDaemonSet)
	sts := &StatefulSetAdmission{ResizeClaims: true, Classes: fakeClasses{def: grow.Name, classes: map[string]*storagev1.StorageClass{grow.Name: grow, fixed.Name: fixed}}}
	s.Handle(StatefulSetValidatePath, sts.Validate)
	s.Handle(AdvancedCronJobValidatePath, ValidateAdvancedCronJob)
	ppsAdmission := NewPersistentPodStateAdmission(ppsLister(nil, pps)).WithCustomWorkloads(func() persistentpodstate.WhiteList {
		return persistentpodstate.WhiteList{{Group: "example.io", Version: "v1", Kind: "Widget"}}
	})
	s.Handle(PersistentPodStatePodMutatePath, ppsAdmission.MutatePod)
	s.Handle(PersistentPodStateValidatePath, ppsAdmission.Validate)
	// The pod checks of PodUnavailableBudget and WorkloadSpread write
	// status through the client when a budget or spread applies: with none,
	// every input sees the same state. Their object validations only read
	// the other budgets and spreads, so those get one each.
	pubPods := NewPodUnavailableBudgetAdmission(&fakeBudgets{}, &fakePods{}, shoalfake.NewSimpleClientset(), nil).
		WithNamespaces(func(string) bool { return false })
	pubPods.now = func() time.Time { return t0 }
	s.Handle(PodUnavailableBudgetPodPath, pubPods.ValidatePod)
	s.Handle(PodUnavailableBudgetValidatePath, NewPodUnavailableBudgetAdmission(&fakeBudgets{pubs: []*policyv1alpha1.PodUnavailableBudget{otherPub}}, nil, nil, nil).Validate)
	wsPods := NewWorkloadSpreadAdmission(&fakeSpreads{}, &fakePods{}, shoalfake.NewSimpleClientset()).
		WithCustomWorkloads(func() []spread.CustomWorkload { return nil })
	wsPods.now = func() time.Time { return t0 }
	wsPods.newUID = func() string { return "gen-uid" }
	s.Handle(WorkloadSpreadPodPath, wsPods.Pod)
	s.Handle(WorkloadSpreadValidatePath, NewWorkloadSpreadAdmission(&fakeSpreads{items: []*v1alpha1.WorkloadSpread{otherSpread}}, nil, nil).Validate)
	s.Handle(DeletionProtectionPath, NewDeletionProtection(fakeDependents{pods: 1, claims: 1, crs: true}, nil).Validate)
	injector := NewSidecarSetInjector(listSets, namespaces, nil)
	injector.now = func() metav1.Time { return metav1.NewTime(t0) }
	s.Handle(SidecarSetInjectPath, injector.Mutate)
	s.Handle(SidecarSetMutatePath, DefaultSidecarSet)
	s.Handle(SidecarSetValidatePath, NewSidecarSetAdmission(listSets).WithNamespaces(namespaces).
		WithPatchPodMetadataAllowed(scsTestAllowList).WithPatchPodMetadataDefaultsAllowed(false).Validate)
	s.Handle(PodProbeMarkerValidatePath, ValidatePodProbeMarker)
	// Registered only with EnablePodProbeMarkerOnServerless (AllowAll
	// otherwise): the injector is the one worth fuzzing.
	s.Handle(PodProbeMarkerPodMutatePath, NewPodProbeMarkerInjector(ppmMarkers(nil, marker)).Mutate)
	s.Handle(LaunchPriorityPath, LaunchPriority)
	return fs
}

// post sends body to path as the apiserver does.
func (s *fuzzServer) post(path string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	s.handler.ServeHTTP(rec, req)
	return rec
}

// checkFixtures fails when a handler changed an object it was handed by a
// fake (a shared informer cache object in the coordinator), and restores
// it for the next input.
func (s *fuzzServer) checkFixtures(t *testing.T) {
	t.Helper()
	for i, o := range s.fixtures {
		if reflect.DeepEqual(o, s.pristine[i]) {
			continue
		}
		got, _ := json.Marshal(o)
		reflect.ValueOf(o).Elem().Set(reflect.ValueOf(s.pristine[i].DeepCopyObject()).Elem())
		t.Errorf("a handler changed a shared cache object %T; it is now %s", o, got)
	}
}

// checkReview asserts the fuzz invariant on the answer rec to body, sent
// to target's path.
func checkReview(t *testing.T, target fuzzTarget, body []byte, rec *httptest.ResponseRecorder) {
	t.Helper()
	var in admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &in); err != nil || in.Request == nil {
		if rec.Code < 400 || rec.Code > 499 || strings.TrimSpace(rec.Body.String()) == "" {
			t.Fatalf("%s: body is not an AdmissionReview with a request (%v), want a 4xx with a message, got %d %q", target.path, err, rec.Code, rec.Body.String())
		}
		return
	}
	if rec.Code != http.StatusOK {
		t.Fatalf("%s: status %d %q for an AdmissionReview, want 200", target.path, rec.Code, rec.Body.String())
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("%s: the answer is not an AdmissionReview: %v: %q", target.path, err, rec.Body.String())
	}
	resp := out.Response
	switch {
	case resp == nil:
		t.Fatalf("%s: no response in %q", target.path, rec.Body.String())
	case out.Request != nil:
		t.Fatalf("%s: the answer carries the request back", target.path)
	case resp.UID != in.Request.UID:
		t.Fatalf("%s: response UID %q, want the request's %q", target.path, resp.UID, in.Request.UID)
	case !resp.Allowed && (resp.Result == nil || strings.TrimSpace(resp.Result.Message) == ""):
		t.Fatalf("%s: %s %s denied without a message: %+v", target.path, in.Request.Operation, in.Request.Kind.Kind, resp.Result)
	}
	if len(resp.Patch) > 0 || resp.PatchType != nil {
		checkPatch(t, target, in.Request, resp)
	}
}

// checkPatch asserts that a mutation's patch is a JSON Patch and, when the
// object is the typed object's own encoding (as the apiserver sends it),
// that it applies to the object and leaves an object of the kind.
func checkPatch(t *testing.T, target fuzzTarget, req *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse) {
	t.Helper()
	if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("%s: patch %s with patchType %v, want JSONPatch", target.path, resp.Patch, resp.PatchType)
	}
	if trimmed := bytes.TrimSpace(resp.Patch); !json.Valid(trimmed) || len(trimmed) == 0 || trimmed[0] != '[' {
		t.Fatalf("%s: patch is not a JSON array: %q", target.path, resp.Patch)
	}
	patch, err := jsonpatch.DecodePatch(resp.Patch)
	if err != nil {
		t.Fatalf("%s: patch is not a JSON Patch: %v: %s", target.path, err, resp.Patch)
	}
	raw := req.Object.Raw
	if len(raw) == 0 {
		return
	}
	typed := target.object()
	if json.Unmarshal(raw, typed) != nil {
		return
	}
	if canonical, err := json.Marshal(typed); err != nil || !bytes.Equal(canonical, raw) {
		return
	}
	patched, err := patch.Apply(raw)
	if err != nil {
		t.Fatalf("%s: patch does not apply to the object: %v\npatch:  %s\nobject: %s", target.path, err, resp.Patch, raw)
	}
	if err := json.Unmarshal(patched, target.object()); err != nil {
		t.Fatalf("%s: the patched object is no longer a %s: %v\npatch:   %s\npatched: %s", target.path, target.kind.Kind, err, resp.Patch, patched)
	}
}

// fuzzReview builds the AdmissionReview the apiserver would send to target
// for op ("CREATE", or with a subresource "CREATE/eviction") on object
// over oldObject; false when object or oldObject is not JSON (the
// apiserver only sends objects).
func fuzzReview(target fuzzTarget, op string, object, oldObject []byte) ([]byte, bool) {
	if (len(object) > 0 && !json.Valid(object)) || (len(oldObject) > 0 && !json.Valid(oldObject)) {
		return nil, false
	}
	operation, sub, _ := strings.Cut(op, "/")
	req := &admissionv1.AdmissionRequest{
		UID: types.UID("fuzz-" + target.resource), Kind: target.kind, RequestKind: &target.kind,
		Resource:    metav1.GroupVersionResource{Group: target.kind.Group, Version: target.kind.Version, Resource: target.resource},
		SubResource: sub, Operation: admissionv1.Operation(operation),
		Object: runtime.RawExtension{Raw: object}, OldObject: runtime.RawExtension{Raw: oldObject},
	}
	if sub == "eviction" {
		req.Kind = metav1.GroupVersionKind{Group: "policy", Version: "v1", Kind: "Eviction"}
		req.RequestKind = &req.Kind
	}
	// Name and namespace come from the object, as the apiserver's do.
	var meta struct {
		Metadata struct{ Name, Namespace string } `json:"metadata"`
	}
	if len(object) > 0 {
		_ = json.Unmarshal(object, &meta)
	} else {
		_ = json.Unmarshal(oldObject, &meta)
	}
	req.Name, req.Namespace = meta.Metadata.Name, meta.Metadata.Namespace
	if req.Namespace == "" && !target.cluster {
		req.Namespace = "ns"
	}
	body, err := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  req,
	})
	if err != nil {
		return nil, false
	}
	return body, true
}

// fuzzSeed is a realistic request for a target, from the package's tests.
type fuzzSeed struct {
	target, op     string
	object, old    any // encoded with encoding/json unless a string
	objRaw, oldRaw []byte
}

func fuzzSeeds() []fuzzSeed {
	name := func(path string, kind metav1.GroupVersionKind) string {
		return fuzzTarget{path: path, kind: kind}.name()
	}
	readinessPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
	cloneUpdate := testCloneSetObject()
	cloneUpdate.Spec.Template.Spec.Containers[0].Image = "nginx:1.26"
	cloneUpdate.Spec.ScaleStrategy.PodsToDelete = []string{"web-a", "web-missing"}
	stsUpdate := testStatefulSetObject()
	stsUpdate.Spec.Template.Spec.Containers[0].Image = "redis:7.2"
	broadcast := &v1beta1.BroadcastJob{}
	broadcast.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	broadcast.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Image: "busybox"}}
	daemon := &v1beta1.DaemonSet{}
	daemon.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}
	daemon.Spec.Template.Labels = map[string]string{"app": "agent"}
	daemon.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Image: "busybox"}}
	cron := &v1beta1.AdvancedCronJob{Spec: v1beta1.AdvancedCronJobSpec{Schedule: "*/5 * * * *", TimeZone: ptr.To("Europe/Berlin")}}
	cron.Spec.Template.JobTemplate = &batchv1.JobTemplateSpec{}
	newPub := testPub(0, func(p *policyv1alpha1.PodUnavailableBudget) {
		p.Name, p.UID, p.Annotations = "web-pub-2", "", map[string]string{"kruise.io/pub-protect-operations": "DELETE,EVICT"}
		p.Status = policyv1alpha1.PodUnavailableBudgetStatus{}
	})
	newSpread := wsSpread()
	newSpread.Name, newSpread.Status = "ws-2", v1alpha1.WorkloadSpreadStatus{}
	newSpread.Spec.TargetReference.Name = "web-2"
	defaults := &v1beta1.SidecarSet{Spec: v1beta1.SidecarSetSpec{
		InitContainers: []v1beta1.SidecarContainer{{Container: corev1.Container{Name: "init"}}},
		Containers: []v1beta1.SidecarContainer{{Container: corev1.Container{Name: "a"}},
			{Container: corev1.Container{Name: "b"}, PodInjectPolicy: v1beta1.AfterAppContainerType}},
	}}
	setUpdate := scsTestSet()
	setUpdate.Spec.Containers[0].Image = "centos:7"
	meshPod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "web-", Namespace: "ns", Labels: map[string]string{"app": "web", "app.example.com/main-container": "main"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "app:1",
			Env: []corev1.EnvVar{{Name: "PROXY_IP", Value: "10.0.0.1"}, {Name: "TZ", Value: "UTC"}}}}},
	}
	ordered := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Annotations: map[string]string{"apps.kruise.io/container-launch-priority": "Ordered"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}, {Name: "b"}, {Name: "c"}}}}
	const always = `{"metadata":{"name":"demo","labels":{"policy.kruise.io/delete-protection":"Always"}}}`
	const cascading = `{"metadata":{"name":"demo","namespace":"ns","labels":{"policy.kruise.io/delete-protection":"Cascading"}},"spec":{"replicas":3}}`
	return []fuzzSeed{
		{target: name(SelectorsPath, fuzzCloneSet), op: "CREATE", object: `{"spec":{"selector":{"matchLabels":{"app":"not valid!"}}}}`},
		{target: name(SelectorsPath, fuzzCloneSet), op: "CREATE", object: `{"spec":{"template":{"spec":{"affinity":{"podAntiAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[{"topologyKey":"x","labelSelector":{"matchExpressions":[{"key":"app","operator":"In"}]}}]}}}}}}`},
		{target: name(CRRMutatePath, fuzzCRR), op: "CREATE", object: testCRR()},
		{target: name(CRRValidatePath, fuzzCRR), op: "UPDATE", object: testCRR(), old: testCRR()},
		{target: name(ImagePullJobMutatePath, fuzzPullJob), op: "CREATE", object: testImagePullJob("nginx", nil)},
		{target: name(ImagePullJobValidatePath, fuzzPullJob), op: "CREATE", object: testImagePullJob("nginx:1.25@"+testDigest, ptr.To(intstr.FromInt32(2)))},
		{target: name(ImageListPullJobMutatePath, fuzzListJob), op: "CREATE", object: testImageListPullJob(nil, "nginx", "docker.io/library/redis:7")},
		{target: name(ImageListPullJobValidatePath, fuzzListJob), op: "UPDATE", object: testImageListPullJob(ptr.To(intstr.FromString("50%")), "nginx:1.25"),
			old: testImageListPullJob(nil, "nginx")},
		{target: name(PodMutatePath, fuzzPod), op: "CREATE", object: readinessPod},
		{target: name(CloneSetValidatePath, fuzzCloneSet), op: "CREATE", object: testCloneSetObject()},
		{target: name(CloneSetValidatePath, fuzzCloneSet), op: "UPDATE", object: cloneUpdate, old: testCloneSetObject()},
		{target: name(BroadcastJobValidatePath, fuzzKruise("v1beta1", "BroadcastJob")), op: "CREATE", object: broadcast},
		{target: name(DaemonSetValidatePath, fuzzKruise("v1beta1", "DaemonSet")), op: "CREATE", object: daemon},
		{target: name(StatefulSetValidatePath, fuzzKruise("v1beta1", "StatefulSet")), op: "CREATE", object: testStatefulSetObject()},
		{target: name(StatefulSetValidatePath, fuzzKruise("v1beta1", "StatefulSet")), op: "UPDATE", object: stsUpdate, old: testStatefulSetObject()},
		{target: name(AdvancedCronJobValidatePath, fuzzKruise("v1beta1", "AdvancedCronJob")), op: "CREATE", object: cron},
		{target: name(PersistentPodStatePodMutatePath, fuzzPod), op: "CREATE", object: stsPod()},
		{target: name(PersistentPodStateValidatePath, fuzzKruise("v1alpha1", "PersistentPodState")), op: "CREATE", object: testPPS()},
		{target: name(PodUnavailableBudgetPodPath, fuzzPod), op: "DELETE", old: readyPod("web-0")},
		{target: name(PodUnavailableBudgetPodPath, fuzzPod), op: "UPDATE", object: readyPod("web-0", withImage("registry.example/app:v2")), old: readyPod("web-0")},
		{target: name(PodUnavailableBudgetPodPath, fuzzPod), op: "CREATE/eviction", object: &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "ns"}}},
		{target: name(PodUnavailableBudgetValidatePath, metav1.GroupVersionKind{Kind: "PodUnavailableBudget"}), op: "CREATE", object: newPub},
		{target: name(WorkloadSpreadPodPath, fuzzPod), op: "CREATE", object: stsPod()},
		{target: name(WorkloadSpreadValidatePath, fuzzKruise("v1alpha1", "WorkloadSpread")), op: "CREATE", object: newSpread},
		{target: name(DeletionProtectionPath, fuzzNamespace), op: "DELETE", old: always},
		{target: name(DeletionProtectionPath, metav1.GroupVersionKind{Kind: "Deployment"}), op: "DELETE", old: cascading},
		{target: name(DeletionProtectionPath, metav1.GroupVersionKind{Kind: "CustomResourceDefinition"}), op: "DELETE",
			old: `{"metadata":{"name":"widgets.example.com","labels":{"policy.kruise.io/delete-protection":"Cascading"}},"spec":{"group":"example.com","names":{"plural":"widgets"}}}`},
		{target: name(DeletionProtectionPath, metav1.GroupVersionKind{Kind: "Service"}), op: "DELETE", old: always},
		{target: name(SidecarSetInjectPath, fuzzPod), op: "CREATE", object: scsInjectTestPod},
		{target: name(SidecarSetInjectPath, fuzzPod), op: "CREATE", object: meshPod},
		{target: name(SidecarSetMutatePath, fuzzSidecar), op: "CREATE", object: defaults},
		{target: name(SidecarSetValidatePath, fuzzSidecar), op: "CREATE", object: scsOther("logger-2", nil)},
		{target: name(SidecarSetValidatePath, fuzzSidecar), op: "UPDATE", object: setUpdate, old: scsTestSet()},
		{target: name(PodProbeMarkerValidatePath, fuzzKruise("v1alpha1", "PodProbeMarker")), op: "CREATE", object: ppmTestMarker()},
		{target: name(PodProbeMarkerPodMutatePath, fuzzPod), op: "CREATE", object: ppmGameServerPod()},
		{target: name(LaunchPriorityPath, fuzzPod), op: "CREATE", object: ordered},
	}
}

// encodedFuzzSeeds returns fuzzSeeds with their objects encoded.
func encodedFuzzSeeds(f *testing.F) []fuzzSeed {
	f.Helper()
	encode := func(v any) []byte {
		switch v := v.(type) {
		case nil:
			return nil
		case string:
			return []byte(v)
		}
		raw, err := json.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		return raw
	}
	seeds := fuzzSeeds()
	for i := range seeds {
		if t := fuzzPick(seeds[i].target); t.name() != seeds[i].target {
			f.Fatalf("seed for unknown target %q", seeds[i].target)
		}
		seeds[i].objRaw, seeds[i].oldRaw = encode(seeds[i].object), encode(seeds[i].old)
	}
	return seeds
}

// FuzzAdmission posts arbitrary bodies to the coordinator's admission
// webhooks (every path coordinator.go registers with Server.Handle, over
// the fakes of this package's tests) through the Server's own HTTP
// handler, so that both the AdmissionReview envelope decoding of
// Server.review and the handlers' decoding of the objects inside are
// fuzzed. The inputs are a path (an unknown one is mapped onto a
// registered one) and the request body.
//
// The invariant, checked for every input: no panic; a body that is an
// admission.k8s.io/v1 AdmissionReview with a request gets a 200 with an
// AdmissionReview whose response has the request's UID, and any other
// body a 4xx with a message; a denial carries a message; a patch is a
// JSON Patch array with patchType JSONPatch and, when the object is a
// typed object's own encoding, applies to it and leaves an object of the
// kind; no handler changes the objects the fakes hand out (shared cache
// objects in the coordinator).
//
// The seeds (f.Add and testdata/fuzz/FuzzAdmission) run with go test. To
// fuzz longer:
//
//	go test -run '^$' -fuzz '^FuzzAdmission$' -fuzztime 60s ./coordinator/webhook/
//
// (the pattern is anchored: FuzzAdmission alone also matches
// FuzzAdmissionObject, and go test fuzzes one target at a time).
func FuzzAdmission(f *testing.F) {
	for _, seed := range encodedFuzzSeeds(f) {
		target := fuzzPick(seed.target)
		body, ok := fuzzReview(target, seed.op, seed.objRaw, seed.oldRaw)
		if !ok {
			f.Fatalf("seed for %s does not encode", seed.target)
		}
		f.Add(target.path, body)
	}
	// Envelopes that are not AdmissionReviews with a request, and
	// AdmissionReviews whose objects are not objects.
	f.Add(SelectorsPath, []byte("not json"))
	f.Add(CRRMutatePath, []byte(""))
	f.Add(PodMutatePath, []byte(`{}`))
	f.Add(DeletionProtectionPath, []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":null}`))
	f.Add(SidecarSetInjectPath, []byte(`{"request":{"uid":"u","operation":"CREATE","object":"not an object"}}`))
	f.Add(StatefulSetValidatePath, []byte(`{"request":{"uid":"u","operation":"UPDATE","object":{"spec":[]},"oldObject":{}}}`))
	f.Add(PodUnavailableBudgetPodPath, []byte(`{"request":{"uid":"u","operation":"DELETE","name":"web-0","namespace":"ns","oldObject":null}}`))

	srv := newFuzzServer()
	f.Fuzz(func(t *testing.T, path string, body []byte) {
		target := fuzzPick(path)
		checkReview(t, target, body, srv.post(target.path, body))
		srv.checkFixtures(t)
	})
}

// FuzzAdmissionObject sends well-formed AdmissionReviews to the
// coordinator's admission webhooks with fuzzed objects: the inputs are a
// target (a path and kind, "/mutate-pod Pod"; see fuzzTargets), an
// operation ("CREATE", "UPDATE", "DELETE", with a subresource
// "CREATE/eviction", "UPDATE/status", or anything else) and the bytes of
// request.object.raw and request.oldObject.raw, which is where the
// handlers do their decoding. Inputs whose objects are not JSON are
// skipped: the apiserver only sends objects, and FuzzAdmission covers
// broken envelopes. The invariant is FuzzAdmission's.
//
// The seeds (f.Add and testdata/fuzz/FuzzAdmissionObject) run with go
// test. To fuzz longer:
//
//	go test -run '^$' -fuzz '^FuzzAdmissionObject$' -fuzztime 60s ./coordinator/webhook/
func FuzzAdmissionObject(f *testing.F) {
	for _, seed := range encodedFuzzSeeds(f) {
		f.Add(seed.target, seed.op, seed.objRaw, seed.oldRaw)
	}
	f.Add(fuzzTargets[0].name(), "CONNECT", []byte(`{}`), []byte(nil))
	f.Add(fuzzPick(SidecarSetInjectPath).name(), "CREATE", []byte(`{"metadata":{"labels":{"app":"web"}}}`), []byte(nil))

	srv := newFuzzServer()
	f.Fuzz(func(t *testing.T, name, op string, object, oldObject []byte) {
		target := fuzzPick(name)
		body, ok := fuzzReview(target, op, object, oldObject)
		if !ok {
			return
		}
		checkReview(t, target, body, srv.post(target.path, body))
		srv.checkFixtures(t)
	})
}
