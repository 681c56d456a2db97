package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	shoalclient "github.com/shoal-io/shoal/protocol/client/clientset/versioned"
)

// workloadKind is one kind of workload the rollout and set commands work
// on: its names and how to read and patch one.
type workloadKind struct {
	// name is the kind in lower case, as messages name it ("cloneset").
	name string
	// kind is the API kind ("CloneSet").
	kind string
	// title is the kind as help and hints name it ("Advanced StatefulSet").
	title string
	// native is the upstream apps/v1 kind of the same name, when there is
	// one: a missing workload then gets a hint.
	native string
	// aliases are the names the command line takes for the kind.
	aliases []string
	// get reads the workload ns/name.
	get func(ctx context.Context, c shoalclient.Interface, ns, name string) (workload, error)
	// patch merge-patches the workload ns/name.
	patch func(ctx context.Context, c shoalclient.Interface, ns, name string, raw []byte, opts metav1.PatchOptions) (workload, error)
}

// resource is the kind's resource as kubectl prints it
// ("cloneset.apps.kruise.io").
func (k *workloadKind) resource() string { return k.name + "." + v1beta1.SchemeGroupVersion.Group }

// readError wraps an error reading the workload ns/name; a missing
// Advanced StatefulSet or DaemonSet gets a hint about the upstream kind of
// the same name, which kubectl's short names pick first.
func (k *workloadKind) readError(ns, name string, err error) error {
	if k.native != "" && apierrors.IsNotFound(err) {
		return fmt.Errorf("get %s %s/%s: %w (kubectl kruise works on the %s, %ss.%s; an apps/v1 %s is kubectl rollout's, or move it with 'kubectl kruise migrate %s/%s')",
			k.name, ns, name, err, k.title, k.name, v1beta1.SchemeGroupVersion.Group, k.native, k.name, name)
	}
	return fmt.Errorf("get %s %s/%s: %w", k.name, ns, name, err)
}

// typedClient is what the commands use of a generated typed client.
type typedClient[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

// newWorkloadKind is a workloadKind whose objects client reads and patches
// and wrap turns into workloads.
func newWorkloadKind[T any](k workloadKind, client func(shoalclient.Interface, string) typedClient[T], wrap func(T) workload) *workloadKind {
	k.get = func(ctx context.Context, c shoalclient.Interface, ns, name string) (workload, error) {
		obj, err := client(c, ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return wrap(obj), nil
	}
	k.patch = func(ctx context.Context, c shoalclient.Interface, ns, name string, raw []byte, opts metav1.PatchOptions) (workload, error) {
		obj, err := client(c, ns).Patch(ctx, name, types.MergePatchType, raw, opts)
		if err != nil {
			return nil, err
		}
		return wrap(obj), nil
	}
	return &k
}

// The kinds of workload the rollout and set commands work on.
var (
	cloneSetKind = newWorkloadKind(workloadKind{name: "cloneset", kind: "CloneSet", title: "CloneSet",
		aliases: []string{"cloneset", "clonesets", "cs", "cloneset.apps.kruise.io", "clonesets.apps.kruise.io"}},
		func(c shoalclient.Interface, ns string) typedClient[*v1beta1.CloneSet] {
			return c.AppsV1beta1().CloneSets(ns)
		},
		func(cs *v1beta1.CloneSet) workload {
			return cloneSetWorkload{cs, workloadBase{cs, &cs.Spec.Template, cs.Spec.Selector}}
		})
	statefulSetKind = newWorkloadKind(workloadKind{name: "statefulset", kind: "StatefulSet", title: "Advanced StatefulSet", native: "StatefulSet",
		aliases: []string{"statefulset", "statefulsets", "sts", "asts", "statefulset.apps.kruise.io", "statefulsets.apps.kruise.io",
			"advancedstatefulset", "advancedstatefulsets"}},
		func(c shoalclient.Interface, ns string) typedClient[*v1beta1.StatefulSet] {
			return c.AppsV1beta1().StatefulSets(ns)
		},
		func(s *v1beta1.StatefulSet) workload {
			return statefulSetWorkload{s, workloadBase{s, &s.Spec.Template, s.Spec.Selector}}
		})
	daemonSetKind = newWorkloadKind(workloadKind{name: "daemonset", kind: "DaemonSet", title: "Advanced DaemonSet", native: "DaemonSet",
		aliases: []string{"daemonset", "daemonsets", "ds", "ads", "daemonset.apps.kruise.io", "daemonsets.apps.kruise.io",
			"advanceddaemonset", "advanceddaemonsets"}},
		func(c shoalclient.Interface, ns string) typedClient[*v1beta1.DaemonSet] {
			return c.AppsV1beta1().DaemonSets(ns)
		},
		func(d *v1beta1.DaemonSet) workload {
			return daemonSetWorkload{d, workloadBase{d, &d.Spec.Template, d.Spec.Selector}}
		})

	// rolloutKinds are the kinds rollout and set take.
	rolloutKinds = []*workloadKind{cloneSetKind, statefulSetKind, daemonSetKind}
)

// upstreamKinds are the names of kinds kubectl itself rolls out: named,
// they get a hint to use kubectl.
var upstreamKinds = []string{"deployment", "deployments", "deploy", "deployment.apps", "deployments.apps",
	"statefulset.apps", "statefulsets.apps", "daemonset.apps", "daemonsets.apps"}

// workload is one object of a workloadKind, as the commands see it.
type workload interface {
	metav1.Object
	// object is the API object.
	object() runtime.Object
	// podTemplate is spec.template.
	podTemplate() *corev1.PodTemplateSpec
	// podSelector is spec.selector.
	podSelector() *metav1.LabelSelector
	// pausedPatch is the merge patch that sets the rolling update's
	// paused, nil when it is so already.
	pausedPatch(paused bool) (any, error)
	// progress is where the rollout stands.
	progress() (rolloutProgress, error)
	// revisions are status's update and current revision names (current
	// empty where the kind has none) and the pods at the update revision.
	revisions() (update, current string, updated int32)
}

// workloadRef is a workload named on the command line.
type workloadRef struct {
	kind *workloadKind
	name string
}

// parseWorkload reads KIND/NAME or the two arguments KIND NAME, KIND one
// of kinds.
func parseWorkload(cmd *cobra.Command, args []string, kinds ...*workloadKind) (workloadRef, error) {
	var kind, name string
	switch {
	case len(args) == 1 && strings.Contains(args[0], "/"):
		kind, name, _ = strings.Cut(args[0], "/")
	case len(args) == 2:
		kind, name = args[0], args[1]
	default:
		return workloadRef{}, usageError{fmt.Errorf("%q takes one workload, as %s (or KIND NAME)", cmd.CommandPath(), kindForms(kinds))}
	}
	lower := strings.ToLower(kind)
	i := slices.IndexFunc(kinds, func(k *workloadKind) bool { return slices.Contains(k.aliases, lower) })
	switch {
	case i < 0 && slices.Contains(upstreamKinds, lower):
		return workloadRef{}, usageError{fmt.Errorf("kind %q: %s works on %s; use %s for %s", kind, cmd.CommandPath(), kindTitles(kinds), upstreamCommand(cmd), kind)}
	case i < 0:
		return workloadRef{}, usageError{fmt.Errorf("kind %q: %s works on %s (%s)", kind, cmd.CommandPath(), kindTitles(kinds), kindForms(kinds))}
	case name == "":
		return workloadRef{}, usageError{fmt.Errorf("the workload's name is empty: use %s/NAME", kinds[i].name)}
	}
	return workloadRef{kind: kinds[i], name: name}, nil
}

// kindForms is "cloneset/NAME, statefulset/NAME or daemonset/NAME".
func kindForms(kinds []*workloadKind) string {
	var forms []string
	for _, k := range kinds {
		forms = append(forms, k.name+"/NAME")
	}
	return joinOr(forms, "or")
}

// kindTitles is "CloneSets, Advanced StatefulSets and Advanced DaemonSets".
func kindTitles(kinds []*workloadKind) string {
	var titles []string
	for _, k := range kinds {
		titles = append(titles, k.title+"s")
	}
	return joinOr(titles, "and")
}

// joinOr joins words with commas and conj before the last.
func joinOr(words []string, conj string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " " + conj + " " + words[len(words)-1]
}

// upstreamCommand is kubectl's own command for what cmd does to
// upstream kinds ("kubectl rollout", "kubectl set", "kubectl scale").
func upstreamCommand(cmd *cobra.Command) string {
	for cmd.HasParent() && cmd.Parent().HasParent() {
		cmd = cmd.Parent()
	}
	if cmd.Name() == "scaledown" {
		return "kubectl scale"
	}
	return "kubectl " + cmd.Name()
}

// pausePatch is the merge patch that sets spec.updateStrategy (strategy,
// with rollingUpdate.paused added), nil when the rolling update's paused
// is so already.
func pausePatch(isPaused, paused bool, strategy map[string]any) any {
	if isPaused == paused {
		return nil
	}
	strategy["rollingUpdate"] = map[string]any{"paused": paused}
	return map[string]any{"spec": map[string]any{"updateStrategy": strategy}}
}

// workloadBase is what the workloads of every kind answer alike: the
// object, its pod template and its selector.
type workloadBase struct {
	obj      runtime.Object
	template *corev1.PodTemplateSpec
	selector *metav1.LabelSelector
}

func (b workloadBase) object() runtime.Object               { return b.obj }
func (b workloadBase) podTemplate() *corev1.PodTemplateSpec { return b.template }
func (b workloadBase) podSelector() *metav1.LabelSelector   { return b.selector }

// cloneSetWorkload is a CloneSet as a workload.
type cloneSetWorkload struct {
	*v1beta1.CloneSet
	workloadBase
}

func (w cloneSetWorkload) revisions() (string, string, int32) {
	return w.Status.UpdateRevision, w.Status.CurrentRevision, w.Status.UpdatedReplicas
}

func (w cloneSetWorkload) pausedPatch(paused bool) (any, error) {
	ru := w.Spec.UpdateStrategy.RollingUpdate
	return pausePatch(ru != nil && ru.Paused, paused, map[string]any{}), nil
}

func (w cloneSetWorkload) progress() (rolloutProgress, error) {
	st, ru := w.Status, w.Spec.UpdateStrategy.RollingUpdate
	replicas := ptr.Deref(w.Spec.Replicas, 1)
	p := rolloutProgress{
		observed: st.ObservedGeneration >= w.Generation, paused: ru != nil && ru.Paused, unit: "replicas",
		desired: replicas, wantUpdated: st.ExpectedUpdatedReplicas, updated: st.UpdatedReplicas,
		surplus: st.Replicas - replicas, updateRevision: st.UpdateRevision,
		waits: []progressCount{{st.UpdatedAvailableReplicas, st.ExpectedUpdatedReplicas, "updated replicas are available"}},
	}
	for _, c := range st.Conditions {
		if c.Type == v1beta1.CloneSetConditionTypeProgressing && c.Reason == string(v1beta1.CloneSetProgressDeadlineExceeded) {
			p.deadline = c.Message
		}
	}
	return p, nil
}

// statefulSetWorkload is an Advanced StatefulSet as a workload.
type statefulSetWorkload struct {
	*v1beta1.StatefulSet
	workloadBase
}

func (w statefulSetWorkload) revisions() (string, string, int32) {
	return w.Status.UpdateRevision, w.Status.CurrentRevision, w.Status.UpdatedReplicas
}

// onDelete is the error of a rollout command an OnDelete StatefulSet or
// DaemonSet has no use for.
func onDelete(k *workloadKind, name, what string) error {
	return fmt.Errorf("%s %q updates OnDelete (a pod moves to the new revision when it is deleted): %s needs updateStrategy.type RollingUpdate", k.name, name, what)
}

func (w statefulSetWorkload) pausedPatch(paused bool) (any, error) {
	if w.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return nil, onDelete(statefulSetKind, w.Name, "pausing")
	}
	// The type goes along: rollingUpdate is allowed with RollingUpdate only.
	ru := w.Spec.UpdateStrategy.RollingUpdate
	return pausePatch(ru != nil && ru.Paused, paused, map[string]any{"type": string(appsv1.RollingUpdateStatefulSetStrategyType)}), nil
}

func (w statefulSetWorkload) progress() (rolloutProgress, error) {
	if w.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return rolloutProgress{}, onDelete(statefulSetKind, w.Name, "rollout status")
	}
	st, ru := w.Status, w.Spec.UpdateStrategy.RollingUpdate
	replicas := ptr.Deref(w.Spec.Replicas, 1)
	partition := int32(0)
	if ru != nil {
		partition = min(max(ptr.Deref(ru.Partition, 0), 0), replicas)
	}
	return rolloutProgress{
		observed: st.ObservedGeneration >= w.Generation, paused: ru != nil && ru.Paused, unit: "replicas",
		desired: replicas, wantUpdated: replicas - partition, updated: st.UpdatedReplicas,
		surplus: st.Replicas - replicas, updateRevision: st.UpdateRevision,
		waits: []progressCount{{st.ReadyReplicas, replicas, "replicas are ready"}, {st.AvailableReplicas, replicas, "replicas are available"}},
	}, nil
}

// daemonSetWorkload is an Advanced DaemonSet as a workload.
type daemonSetWorkload struct {
	*v1beta1.DaemonSet
	workloadBase
}

func (w daemonSetWorkload) revisions() (string, string, int32) {
	return w.Status.UpdateRevision, "", w.Status.UpdatedNumberScheduled
}

func (w daemonSetWorkload) pausedPatch(paused bool) (any, error) {
	ru := w.Spec.UpdateStrategy.RollingUpdate
	return pausePatch(ru != nil && ptr.Deref(ru.Paused, false), paused, map[string]any{}), nil
}

func (w daemonSetWorkload) progress() (rolloutProgress, error) {
	if w.Spec.UpdateStrategy.Type == v1beta1.OnDeleteDaemonSetStrategyType {
		return rolloutProgress{}, onDelete(daemonSetKind, w.Name, "rollout status")
	}
	st, ru := w.Status, w.Spec.UpdateStrategy.RollingUpdate
	desired := st.DesiredNumberScheduled
	partition := int32(0)
	if ru != nil && ru.Partition != nil {
		// As the controller counts it: a share of the desired pods,
		// rounded up.
		n, err := intstr.GetScaledValueFromIntOrPercent(ru.Partition, int(desired), true)
		if err != nil {
			return rolloutProgress{}, fmt.Errorf("daemonset %q: spec.updateStrategy.rollingUpdate.partition %q: %w", w.Name, ru.Partition.String(), err)
		}
		partition = min(max(int32(n), 0), desired)
	}
	return rolloutProgress{
		observed: st.ObservedGeneration >= w.Generation, paused: ru != nil && ptr.Deref(ru.Paused, false), unit: "pods",
		desired: desired, wantUpdated: desired - partition, updated: st.UpdatedNumberScheduled, updateRevision: st.UpdateRevision,
		waits: []progressCount{{st.NumberAvailable, desired, "pods are available"}},
	}, nil
}

// rolloutProgress is where a workload's rollout stands, in the counts
// rollout status reports.
type rolloutProgress struct {
	// observed is false while status.observedGeneration lags behind.
	observed bool
	// deadline is the message of an exceeded progress deadline.
	deadline string
	// paused is the rolling update's paused.
	paused bool
	// unit is what the counts count: "replicas" or "pods".
	unit string
	// desired is how many pods are wanted, wantUpdated how many of them
	// the partition lets be updated, updated how many are.
	desired, wantUpdated, updated int32
	// surplus is how many pods beyond desired are still to go.
	surplus int32
	// waits are the further counts the rollout waits for, in order.
	waits []progressCount
	// updateRevision is status.updateRevision.
	updateRevision string
}

// progressCount is a count a rollout waits for: "have of want what".
type progressCount struct {
	have, want int32
	what       string
}

// rolloutStatus tells where a workload's rollout stands, whether it is
// over, and an error when it cannot get anywhere (the progress deadline,
// or an OnDelete update strategy).
func rolloutStatus(k *workloadKind, w workload) (string, bool, error) {
	p, err := w.progress()
	if err != nil {
		return "", false, err
	}
	name := w.GetName()
	waiting := fmt.Sprintf("Waiting for %s %q rollout to finish: ", k.name, name)
	switch {
	case !p.observed:
		return fmt.Sprintf("Waiting for the %s's spec update to be observed...", k.kind), false, nil
	case p.deadline != "":
		return fmt.Sprintf("%s %q exceeded its progress deadline: %s", k.name, name, p.deadline), false,
			fmt.Errorf("%s %q exceeded its progress deadline", k.name, name)
	case p.paused && p.updated < p.wantUpdated:
		return fmt.Sprintf("%s %q is paused at %d of %d updated %s; resume it with 'kubectl kruise rollout resume %s/%s'",
			k.name, name, p.updated, p.wantUpdated, p.unit, k.name, name), false, nil
	case p.updated < p.wantUpdated:
		return fmt.Sprintf("%s%d out of %d new %s have been updated...", waiting, p.updated, p.wantUpdated, p.unit), false, nil
	case p.surplus > 0:
		return fmt.Sprintf("%s%d old %s are pending termination...", waiting, p.surplus, p.unit), false, nil
	}
	for _, c := range p.waits {
		if c.have < c.want {
			return fmt.Sprintf("%s%d of %d %s...", waiting, c.have, c.want, c.what), false, nil
		}
	}
	if p.wantUpdated < p.desired {
		return fmt.Sprintf("%s %q partition rolled out: %d of %d %s at revision %s, %d kept at the old one by the partition",
			k.name, name, p.updated, p.desired, p.unit, p.updateRevision, p.desired-p.wantUpdated), true, nil
	}
	return fmt.Sprintf("%s %q successfully rolled out", k.name, name), true, nil
}
