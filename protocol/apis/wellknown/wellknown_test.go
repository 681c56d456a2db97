package wellknown

import (
	"go/ast"
	"go/parser"
	"go/token"
	"sort"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation"
)

// kind says how a constant is used, and so which syntax it must have.
type kind int

const (
	// kindKey: a label, annotation, finalizer or taint key: a qualified
	// name ([prefix/]name), checked with content.IsLabelKey, the
	// non-deprecated form of validation.IsQualifiedName.
	kindKey kind = iota
	// kindKeyPrefix: the start of a key; prefix + a name is a key.
	kindKeyPrefix
	// kindEnv: a container environment variable name.
	kindEnv
	// kindCondition: a pod condition type or readiness gate.
	kindCondition
	// kindValue: a fixed value of a label or annotation.
	kindValue
	// kindConfigKey: a data key of a ConfigMap.
	kindConfigKey
	// kindObjectName: the name of a namespace or ConfigMap.
	kindObjectName
	// kindNameSuffix: appended to an object or container name.
	kindNameSuffix
	// kindDataKeyPrefix: prefix + a number is a ConfigMap data key.
	kindDataKeyPrefix
)

type entry struct {
	name  string
	value string
	kind  kind
}

// entries lists every constant declared in wellknown.go.
// TestTableIsComplete checks that nothing is missing.
var entries = []entry{
	// Revisions and pod identity.
	{"LabelControllerRevisionHash", LabelControllerRevisionHash, kindKey},
	{"LabelPodTemplateHash", LabelPodTemplateHash, kindKey},
	{"LabelKruiseControllerRevisionHash", LabelKruiseControllerRevisionHash, kindKey},
	{"LabelStatefulSetPodName", LabelStatefulSetPodName, kindKey},
	{"LabelPodIndex", LabelPodIndex, kindKey},

	// CloneSet scaling and deletion.
	{"LabelCloneSetInstanceID", LabelCloneSetInstanceID, kindKey},
	{"LabelBroadcastJobName", LabelBroadcastJobName, kindKey},
	{"LabelResourceDistribution", LabelResourceDistribution, kindKey},
	{"LabelBroadcastJobControllerUID", LabelBroadcastJobControllerUID, kindKey},
	{"LabelSpecifiedDelete", LabelSpecifiedDelete, kindKey},
	{"AnnotationPVCOwnedByAdvancedStatefulSet", AnnotationPVCOwnedByAdvancedStatefulSet, kindKey},
	{"LabelCloneSetScalingExcludePreparingDelete", LabelCloneSetScalingExcludePreparingDelete, kindKey},
	{"AnnotationPodDeletionCost", AnnotationPodDeletionCost, kindKey},

	// Image pre-download.
	{"AnnotationImagePreDownloadParallelism", AnnotationImagePreDownloadParallelism, kindKey},
	{"AnnotationImagePreDownloadTimeoutSeconds", AnnotationImagePreDownloadTimeoutSeconds, kindKey},
	{"AnnotationImagePreDownloadMinUpdatedReadyPods", AnnotationImagePreDownloadMinUpdatedReadyPods, kindKey},
	{"LabelImagePreDownloadIgnored", LabelImagePreDownloadIgnored, kindKey},
	{"LabelImagePreDownloadCreated", LabelImagePreDownloadCreated, kindKey},

	// ImagePullJob, NodeImage and the node agent.
	{"AnnotationPullingImageBy", AnnotationPullingImageBy, kindKey},
	{"PullingImageByKruiseDaemon", PullingImageByKruiseDaemon, kindValue},
	{"AnnotationImagePullSecretSourceKey", AnnotationImagePullSecretSourceKey, kindKey},
	{"LabelImagePullSecretSourceUID", LabelImagePullSecretSourceUID, kindKey},
	{"AnnotationImagePullSecretReferences", AnnotationImagePullSecretReferences, kindKey},
	{"AnnotationImagePullSecretMode", AnnotationImagePullSecretMode, kindKey},
	{"ImagePullSecretModeBatch", ImagePullSecretModeBatch, kindValue},
	{"FinalizerDeletionProtection", FinalizerDeletionProtection, kindKey},
	{"LabelFakeNodeImage", LabelFakeNodeImage, kindKey},

	// In-place update.
	{"AnnotationInPlaceUpdateState", AnnotationInPlaceUpdateState, kindKey},
	{"AnnotationInPlaceUpdateStateOld", AnnotationInPlaceUpdateStateOld, kindKey},
	{"AnnotationInPlaceUpdateGrace", AnnotationInPlaceUpdateGrace, kindKey},
	{"AnnotationInPlaceUpdateGraceOld", AnnotationInPlaceUpdateGraceOld, kindKey},
	{"AnnotationRuntimeContainersMeta", AnnotationRuntimeContainersMeta, kindKey},

	// Pod lifecycle hooks.
	{"LabelLifecycleState", LabelLifecycleState, kindKey},
	{"AnnotationLifecycleTimestamp", AnnotationLifecycleTimestamp, kindKey},
	{"LifecycleStatePreparingNormal", string(LifecycleStatePreparingNormal), kindValue},
	{"LifecycleStateNormal", string(LifecycleStateNormal), kindValue},
	{"LifecycleStatePreparingUpdate", string(LifecycleStatePreparingUpdate), kindValue},
	{"LifecycleStateUpdating", string(LifecycleStateUpdating), kindValue},
	{"LifecycleStateUpdated", string(LifecycleStateUpdated), kindValue},
	{"LifecycleStatePreparingDelete", string(LifecycleStatePreparingDelete), kindValue},

	// Pod conditions and readiness gates.
	{"ConditionKruisePodReady", string(ConditionKruisePodReady), kindCondition},
	{"ConditionInPlaceUpdateReady", string(ConditionInPlaceUpdateReady), kindCondition},
	{"ConditionSidecarSetUpgradable", string(ConditionSidecarSetUpgradable), kindCondition},
	{"ConditionSidecarTerminated", string(ConditionSidecarTerminated), kindCondition},
	{"ReadinessGateKruisePodReady", string(ReadinessGateKruisePodReady), kindCondition},
	{"ReadinessGateInPlaceUpdateReady", string(ReadinessGateInPlaceUpdateReady), kindCondition},

	// Container launch priority.
	{"AnnotationContainerLaunchPriority", AnnotationContainerLaunchPriority, kindKey},
	{"ContainerLaunchPriorityOrdered", ContainerLaunchPriorityOrdered, kindValue},
	{"AnnotationContainerLaunchPriorityCompleted", AnnotationContainerLaunchPriorityCompleted, kindKey},
	{"EnvContainerPriority", EnvContainerPriority, kindEnv},
	{"EnvContainerBarrier", EnvContainerBarrier, kindEnv},
	{"ContainerLaunchBarrierConfigMapSuffix", ContainerLaunchBarrierConfigMapSuffix, kindNameSuffix},
	{"ContainerLaunchBarrierKeyPrefix", ContainerLaunchBarrierKeyPrefix, kindDataKeyPrefix},

	// Job sidecar terminator and virtual-kubelet nodes.
	{"EnvTerminateSidecarWhenJobExit", EnvTerminateSidecarWhenJobExit, kindEnv},
	{"EnvTerminateSidecarIgnoreExitCode", EnvTerminateSidecarIgnoreExitCode, kindEnv},
	{"EnvTerminateSidecarWhenJobExitWithImage", EnvTerminateSidecarWhenJobExitWithImage, kindEnv},
	{"LabelVirtualKubelet", LabelVirtualKubelet, kindKey},
	{"VirtualKubeletValue", VirtualKubeletValue, kindValue},
	{"TaintVirtualKubeletProvider", TaintVirtualKubeletProvider, kindKey},

	// ContainerRecreateRequest.
	{"LabelCRRPodName", LabelCRRPodName, kindKey},
	{"LabelCRRPodUID", LabelCRRPodUID, kindKey},
	{"LabelCRRNodeName", LabelCRRNodeName, kindKey},
	{"LabelCRRActive", LabelCRRActive, kindKey},
	{"AnnotationCRRSyncContainerStatuses", AnnotationCRRSyncContainerStatuses, kindKey},
	{"AnnotationCRRUnreadyAcquired", AnnotationCRRUnreadyAcquired, kindKey},
	{"AnnotationCRRVerifyEnvFromMetadata", AnnotationCRRVerifyEnvFromMetadata, kindKey},
	{"FinalizerCRRUnreadyAcquired", FinalizerCRRUnreadyAcquired, kindKey},

	// PodProbeMarker and NodePodProbe.
	{"AnnotationPodProbe", AnnotationPodProbe, kindKey},
	{"AnnotationPodProbeMarkerList", AnnotationPodProbeMarkerList, kindKey},
	{"FinalizerNodePodProbeCleanup", FinalizerNodePodProbeCleanup, kindKey},

	// SidecarSet.
	{"AnnotationSidecarSetHash", AnnotationSidecarSetHash, kindKey},
	{"AnnotationSidecarSetHashWithoutImage", AnnotationSidecarSetHashWithoutImage, kindKey},
	{"AnnotationSidecarSetInjectedList", AnnotationSidecarSetInjectedList, kindKey},
	{"AnnotationSidecarSetWorkingHotUpgradeContainer", AnnotationSidecarSetWorkingHotUpgradeContainer, kindKey},
	{"AnnotationSidecarSetVersionPrefix", AnnotationSidecarSetVersionPrefix, kindKeyPrefix},
	{"AnnotationSidecarSetVersionAltPrefix", AnnotationSidecarSetVersionAltPrefix, kindKeyPrefix},
	{"AnnotationSidecarSetInPlaceUpdateState", AnnotationSidecarSetInPlaceUpdateState, kindKey},
	{"LabelSidecarSetName", LabelSidecarSetName, kindKey},
	{"LabelSidecarSetCustomVersion", LabelSidecarSetCustomVersion, kindKey},
	{"AnnotationSidecarSetCanary", AnnotationSidecarSetCanary, kindKey},
	{"AnnotationSidecarSetBase", AnnotationSidecarSetBase, kindKey},
	{"EnvSidecarSetVersion", EnvSidecarSetVersion, kindEnv},
	{"EnvSidecarSetVersionAlt", EnvSidecarSetVersionAlt, kindEnv},
	{"EnvIsInjected", EnvIsInjected, kindEnv},
	{"HotUpgradeContainerSuffix1", HotUpgradeContainerSuffix1, kindNameSuffix},
	{"HotUpgradeContainerSuffix2", HotUpgradeContainerSuffix2, kindNameSuffix},

	// PodUnavailableBudget.
	{"AnnotationPubProtectOperations", AnnotationPubProtectOperations, kindKey},
	{"AnnotationPubProtectTotalReplicas", AnnotationPubProtectTotalReplicas, kindKey},
	{"AnnotationPubNoProtect", AnnotationPubNoProtect, kindKey},
	{"AnnotationPubRelatedPub", AnnotationPubRelatedPub, kindKey},
	{"AnnotationPubRelatedPubOld", AnnotationPubRelatedPubOld, kindKey},
	{"LabelUnavailablePodPrefix", LabelUnavailablePodPrefix, kindKeyPrefix},
	{"PubOperationDelete", string(PubOperationDelete), kindValue},
	{"PubOperationEvict", string(PubOperationEvict), kindValue},
	{"PubOperationUpdate", string(PubOperationUpdate), kindValue},
	{"PubOperationResize", string(PubOperationResize), kindValue},

	// Deletion protection.
	{"LabelDeleteProtection", LabelDeleteProtection, kindKey},
	{"DeletionProtectionAlways", string(DeletionProtectionAlways), kindValue},
	{"DeletionProtectionCascading", string(DeletionProtectionCascading), kindValue},

	// WorkloadSpread.
	{"AnnotationMatchedWorkloadSpread", AnnotationMatchedWorkloadSpread, kindKey},
	{"AnnotationWorkloadSpreadIgnorePatchExistingPods", AnnotationWorkloadSpreadIgnorePatchExistingPods, kindKey},

	// PersistentPodState.
	{"AnnotationAutoGeneratePersistentPodState", AnnotationAutoGeneratePersistentPodState, kindKey},
	{"AnnotationRequiredPersistentTopology", AnnotationRequiredPersistentTopology, kindKey},
	{"AnnotationPreferredPersistentTopology", AnnotationPreferredPersistentTopology, kindKey},
	{"AnnotationPersistentPodAnnotations", AnnotationPersistentPodAnnotations, kindKey},
	{"AnnotationInjectedPersistentPodState", AnnotationInjectedPersistentPodState, kindKey},

	// ResourceDistribution.
	{"AnnotationResourceDistributionFrom", AnnotationResourceDistributionFrom, kindKey},
	{"AnnotationResourceDistributionHashCode", AnnotationResourceDistributionHashCode, kindKey},
	{"AnnotationResourceDistributionDistributedTimestamp", AnnotationResourceDistributionDistributedTimestamp, kindKey},

	// UnitedDeployment, AdvancedCronJob, Advanced DaemonSet.
	{"LabelSubsetName", LabelSubsetName, kindKey},
	{"LabelUnitedDeploymentReservedPod", LabelUnitedDeploymentReservedPod, kindKey},
	{"AnnotationSubsetPatch", AnnotationSubsetPatch, kindKey},
	{"AnnotationScheduledAt", AnnotationScheduledAt, kindKey},
	{"AnnotationDaemonSetProgressiveCreatePod", AnnotationDaemonSetProgressiveCreatePod, kindKey},

	// Enhanced liveness probe.
	{"AnnotationUsingEnhancedLiveness", AnnotationUsingEnhancedLiveness, kindKey},
	{"AnnotationContainerProbeContext", AnnotationContainerProbeContext, kindKey},

	// Components and cluster-wide configuration.
	{"NamespaceKruiseSystem", NamespaceKruiseSystem, kindObjectName},
	{"NamespaceKruiseDaemonConfig", NamespaceKruiseDaemonConfig, kindObjectName},
	{"ConfigMapKruiseConfiguration", ConfigMapKruiseConfiguration, kindObjectName},
	{"ConfigSidecarSetPatchPodMetadataWhiteList", ConfigSidecarSetPatchPodMetadataWhiteList, kindConfigKey},
	{"ConfigWorkloadSpreadWatchCustomWorkloadWhiteList", ConfigWorkloadSpreadWatchCustomWorkloadWhiteList, kindConfigKey},
	{"ConfigPersistentPodStateWatchCustomWorkloadWhiteList", ConfigPersistentPodStateWatchCustomWorkloadWhiteList, kindConfigKey},
	{"EnvNodeName", EnvNodeName, kindEnv},
	{"EnvPodNamespace", EnvPodNamespace, kindEnv},
	{"EnvKruiseDaemonConfigNamespace", EnvKruiseDaemonConfigNamespace, kindEnv},
}

// aliases lists the constants that intentionally share their value with
// another constant: alias name -> name of the constant it repeats.
var aliases = map[string]string{
	// A readiness gate names the condition it waits for.
	"ReadinessGateKruisePodReady":     "ConditionKruisePodReady",
	"ReadinessGateInPlaceUpdateReady": "ConditionInPlaceUpdateReady",
	// OpenKruise uses the same string as annotation and finalizer.
	"FinalizerCRRUnreadyAcquired": "AnnotationCRRUnreadyAcquired",
}

func TestSyntax(t *testing.T) {
	for _, e := range entries {
		t.Run(e.name, func(t *testing.T) {
			if e.value == "" || strings.TrimSpace(e.value) != e.value {
				t.Fatalf("%q is empty or has surrounding spaces", e.value)
			}
			var errs []string
			switch e.kind {
			case kindKey, kindCondition:
				errs = content.IsLabelKey(e.value)
			case kindKeyPrefix:
				if !strings.HasSuffix(e.value, "/") {
					errs = append(errs, "a key prefix must end in \"/\"")
				}
				errs = append(errs, content.IsDNS1123Subdomain(strings.TrimSuffix(e.value, "/"))...)
				errs = append(errs, content.IsLabelKey(e.value+"sidecar-1")...)
			case kindEnv:
				errs = append(validation.IsEnvVarName(e.value), content.IsCIdentifier(e.value)...)
			case kindValue:
				errs = content.IsLabelValue(e.value)
			case kindConfigKey:
				errs = validation.IsConfigMapKey(e.value)
			case kindObjectName:
				errs = content.IsDNS1123Label(e.value)
			case kindNameSuffix:
				errs = append(content.IsDNS1123Label("web-0"+e.value), content.IsDNS1123Subdomain("web-0"+e.value)...)
			case kindDataKeyPrefix:
				for _, p := range []string{"0", "10", "-2147483647"} {
					errs = append(errs, validation.IsConfigMapKey(e.value+p)...)
				}
			default:
				t.Fatalf("unknown kind %d", e.kind)
			}
			if len(errs) > 0 {
				t.Errorf("%q: %s", e.value, strings.Join(errs, "; "))
			}
		})
	}
}

func TestNoSharedValues(t *testing.T) {
	byName := map[string]string{}
	byValue := map[string][]string{}
	for _, e := range entries {
		if _, dup := byName[e.name]; dup {
			t.Errorf("%s is listed twice", e.name)
		}
		byName[e.name] = e.value
		byValue[e.value] = append(byValue[e.value], e.name)
	}
	for alias, target := range aliases {
		v, ok := byName[alias]
		if !ok {
			t.Errorf("alias %s is not a listed constant", alias)
			continue
		}
		if tv, ok := byName[target]; !ok || tv != v {
			t.Errorf("alias %s = %q does not repeat %s = %q", alias, v, target, tv)
		}
	}
	for value, names := range byValue {
		if len(names) < 2 {
			continue
		}
		var unexplained []string
		for _, n := range names {
			if _, ok := aliases[n]; !ok {
				unexplained = append(unexplained, n)
			}
		}
		if len(unexplained) > 1 {
			sort.Strings(unexplained)
			t.Errorf("%q is the value of %s; list all but one of them in aliases if that is intended",
				value, strings.Join(unexplained, ", "))
		}
	}
}

// TestTableIsComplete parses wellknown.go and checks that entries lists
// exactly its constants, each with the value written in the source.
func TestTableIsComplete(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "wellknown.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]string{}
	var order []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			if len(vs.Names) != len(vs.Values) {
				t.Fatalf("%s: every constant needs its own value", vs.Names[0].Name)
			}
			for i, n := range vs.Names {
				var v string
				switch x := vs.Values[i].(type) {
				case *ast.BasicLit:
					if v, err = strconv.Unquote(x.Value); err != nil {
						t.Fatalf("%s: %v", n.Name, err)
					}
				case *ast.Ident:
					lit, ok := declared[x.Name]
					if !ok {
						t.Fatalf("%s refers to %s, which is not declared before it", n.Name, x.Name)
					}
					v = lit
				default:
					t.Fatalf("%s: value must be a string literal or another constant", n.Name)
				}
				declared[n.Name] = v
				order = append(order, n.Name)
			}
		}
	}
	listed := map[string]string{}
	for _, e := range entries {
		listed[e.name] = e.value
	}
	for _, n := range order {
		v, ok := listed[n]
		switch {
		case !ok:
			t.Errorf("%s is declared in wellknown.go but missing from entries", n)
		case v != declared[n]:
			t.Errorf("entries lists %s with value %q, wellknown.go declares %q", n, v, declared[n])
		}
	}
	for n := range listed {
		if _, ok := declared[n]; !ok {
			t.Errorf("entries lists %s, which wellknown.go does not declare", n)
		}
	}
}
