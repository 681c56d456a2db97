package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of the kinds in this package.
const GroupName = "apps.kruise.io"

// SchemeGroupVersion is the group and version of the kinds in this package.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1beta1"}

var (
	// SchemeBuilder collects the functions that add this package's kinds to a
	// scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds this package's kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Kind returns the group-qualified kind for an unqualified kind name.
func Kind(kind string) schema.GroupKind {
	return SchemeGroupVersion.WithKind(kind).GroupKind()
}

// Resource returns the group-qualified resource for an unqualified resource
// name. Generated listers use it.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, knownTypes()...)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}

// knownTypes lists every kind (and its list) served by this group version.
func knownTypes() []runtime.Object {
	return []runtime.Object{
		&StatefulSet{}, &StatefulSetList{},
		&CloneSet{}, &CloneSetList{},
		&DaemonSet{}, &DaemonSetList{},
		&SidecarSet{}, &SidecarSetList{},
		&BroadcastJob{}, &BroadcastJobList{},
		&AdvancedCronJob{}, &AdvancedCronJobList{},
		&ImagePullJob{}, &ImagePullJobList{},
		&ImageListPullJob{}, &ImageListPullJobList{},
		&ContainerRecreateRequest{}, &ContainerRecreateRequestList{},
		&WorkloadSpread{}, &WorkloadSpreadList{},
		&UnitedDeployment{}, &UnitedDeploymentList{},
		&ResourceDistribution{}, &ResourceDistributionList{},
		&PersistentPodState{}, &PersistentPodStateList{},
	}
}
