package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	shoalclient "github.com/shoal-io/shoal/protocol/client/clientset/versioned"
)

// adoption is how an upstream apps/v1 kind moves, in place, to the
// Advanced kind of the same name: the Advanced object is created from
// the upstream one and the upstream one deleted with its pods orphaned,
// for the Advanced one to adopt.
type adoption struct {
	// from is the upstream kind's resource ("statefulset.apps").
	from string
	// to is the Advanced kind.
	to *workloadKind
	// aliases are the names the command line takes for the upstream kind.
	aliases []string
	// read reads the upstream object ns/name and returns it, how many pods
	// it has, and the Advanced object it becomes.
	read func(ctx context.Context, kube kubernetes.Interface, ns, name string) (metav1.Object, int32, runtime.Object, error)
	// create creates the Advanced object (one read returned) in ns.
	create func(ctx context.Context, shoal shoalclient.Interface, ns string, obj runtime.Object, opts metav1.CreateOptions) error
	// delete deletes the upstream object ns/name.
	delete func(ctx context.Context, kube kubernetes.Interface, ns, name string, opts metav1.DeleteOptions) error
}

// upstreamClient is what an adoption uses of an apps/v1 typed client.
type upstreamClient[S any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (S, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// advancedClient is what an adoption uses of an apps.kruise.io typed
// client.
type advancedClient[A any] interface {
	Create(ctx context.Context, obj A, opts metav1.CreateOptions) (A, error)
}

// newAdoption is the adoption a of the upstream objects src reads into
// Advanced objects convert makes and dst creates.
func newAdoption[S metav1.Object, A runtime.Object](a adoption, src func(kubernetes.Interface, string) upstreamClient[S],
	dst func(shoalclient.Interface, string) advancedClient[A], convert func(S) (A, int32, error)) *adoption {
	a.read = func(ctx context.Context, kube kubernetes.Interface, ns, name string) (metav1.Object, int32, runtime.Object, error) {
		obj, err := src(kube, ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, 0, nil, fmt.Errorf("get %s %s/%s: %w", a.from, ns, name, err)
		}
		adv, pods, err := convert(obj)
		if err != nil {
			return nil, 0, nil, err
		}
		return obj, pods, adv, nil
	}
	a.create = func(ctx context.Context, shoal shoalclient.Interface, ns string, obj runtime.Object, opts metav1.CreateOptions) error {
		_, err := dst(shoal, ns).Create(ctx, obj.(A), opts)
		return err
	}
	a.delete = func(ctx context.Context, kube kubernetes.Interface, ns, name string, opts metav1.DeleteOptions) error {
		return src(kube, ns).Delete(ctx, name, opts)
	}
	return &a
}

// adoptions are the upstream kinds `migrate` moves in place.
var adoptions = []*adoption{
	newAdoption(adoption{from: "statefulset.apps", to: statefulSetKind,
		aliases: []string{"statefulset", "statefulsets", "sts", "statefulset.apps", "statefulsets.apps"}},
		func(kube kubernetes.Interface, ns string) upstreamClient[*appsv1.StatefulSet] {
			return kube.AppsV1().StatefulSets(ns)
		},
		func(shoal shoalclient.Interface, ns string) advancedClient[*v1beta1.StatefulSet] {
			return shoal.AppsV1beta1().StatefulSets(ns)
		},
		statefulSetFromUpstream),
	newAdoption(adoption{from: "daemonset.apps", to: daemonSetKind,
		aliases: []string{"daemonset", "daemonsets", "ds", "daemonset.apps", "daemonsets.apps"}},
		func(kube kubernetes.Interface, ns string) upstreamClient[*appsv1.DaemonSet] {
			return kube.AppsV1().DaemonSets(ns)
		},
		func(shoal shoalclient.Interface, ns string) advancedClient[*v1beta1.DaemonSet] {
			return shoal.AppsV1beta1().DaemonSets(ns)
		},
		daemonSetFromUpstream),
}

// parseAdoption reads `migrate KIND/NAME` or `migrate KIND NAME` of an
// upstream StatefulSet or DaemonSet; ok is false for other arguments.
func parseAdoption(args []string) (a *adoption, name string, ok bool) {
	var kind string
	switch {
	case len(args) == 1 && strings.Contains(args[0], "/"):
		kind, name, _ = strings.Cut(args[0], "/")
	case len(args) == 1 || len(args) == 2:
		kind = args[0]
		if len(args) == 2 {
			name = args[1]
		}
	default:
		return nil, "", false
	}
	kind = strings.ToLower(kind)
	for _, a := range adoptions {
		if slices.Contains(a.aliases, kind) {
			return a, name, true
		}
	}
	return nil, "", false
}

// cloneSetOnlyFlags are the migrate flags of the Deployment to CloneSet
// move, which an in-place move does not take.
var cloneSetOnlyFlags = []string{"from", "src-name", "dst-name", "create", "copy", "replicas", "max-surge", "timeout"}

// adopt moves the upstream object ns/name to the Advanced kind: checks
// the Advanced object with a server dry run, deletes the upstream one
// with propagation Orphan (only if it is still the object read), so its
// pods stay, waits until they are released, and creates the Advanced
// object, which adopts them.
func adopt(cmd *cobra.Command, g *globalOptions, o migrateOptions, a *adoption, name string) error {
	if name == "" {
		return usageError{fmt.Errorf("name the %s to migrate: kubectl kruise migrate %s/NAME", a.to.native, a.to.name)}
	}
	for _, f := range cloneSetOnlyFlags {
		if cmd.Flags().Changed(f) {
			return usageError{fmt.Errorf("--%s: only for 'migrate cloneset --from deployment'; migrate %s/%s moves every pod at once, keeping the name", f, a.to.name, name)}
		}
	}
	switch o.dryRun {
	case "none", "client", "server":
	default:
		return usageError{fmt.Errorf("--dry-run %q: use none, client or server", o.dryRun)}
	}
	shoal, kube, ns, err := g.env.clients(g)
	if err != nil {
		return err
	}
	if o.namespace != "" {
		ns = o.namespace
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), g.requestTimeout)
	defer cancel()
	src, pods, obj, err := a.read(ctx, kube, ns, name)
	if err != nil {
		return err
	}
	from, to := a.from+"/"+name, a.to.resource()+"/"+name
	created := fmt.Sprintf("%s created from %s", to, from)
	deleted := fmt.Sprintf("%s deleted with propagationPolicy Orphan: its %d pods keep running, for %s to adopt", from, pods, to)
	out := cmd.OutOrStdout()
	if o.dryRun == "client" {
		m, err := manifest(obj)
		if err != nil {
			return fmt.Errorf("print %s %s/%s: %w", a.to.resource(), ns, name, err)
		}
		_, err = fmt.Fprintf(out, "%s (dry run)\n%s (dry run)\n%s:\n%s", created, deleted, to, indent(m))
		return err
	}
	suffix := ""
	createOpts := metav1.CreateOptions{}
	deleteOpts := metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan),
		Preconditions:     metav1.NewUIDPreconditions(string(src.GetUID())),
	}
	if o.dryRun == "server" {
		suffix = " (server dry run)"
		createOpts.DryRun = []string{metav1.DryRunAll}
		deleteOpts.DryRun = []string{metav1.DryRunAll}
	}
	if o.dryRun == "server" {
		if err := a.create(ctx, shoal, ns, obj, createOpts); err != nil {
			return fmt.Errorf("create %s %s/%s (%s is left as it was): %w", a.to.resource(), ns, name, from, err)
		}
		if err := a.delete(ctx, kube, ns, name, deleteOpts); err != nil {
			return fmt.Errorf("delete %s %s/%s with propagationPolicy Orphan: %w", a.from, ns, name, err)
		}
		_, err = fmt.Fprintf(out, "%s%s\n%s%s\n", created, suffix, deleted, suffix)
		return err
	}
	// The Advanced object must not exist while the upstream one still
	// controls the pods: it would start pods of its own next to them (a
	// DaemonSet on every node). So: check the create with a server dry
	// run, orphan the pods, wait until the garbage collector released
	// them, then create.
	if err := a.create(ctx, shoal, ns, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		return fmt.Errorf("create %s %s/%s (checked with a dry run; %s is left as it was): %w", a.to.resource(), ns, name, from, err)
	}
	if err := a.delete(ctx, kube, ns, name, deleteOpts); err != nil {
		return fmt.Errorf("delete %s %s/%s with propagationPolicy Orphan (%s is left as it was): %w", a.from, ns, name, from, err)
	}
	if err := waitReleased(ctx, kube, ns, src.GetUID()); err != nil {
		return fmt.Errorf("%s was deleted but its pods are still not released (%w); create %s once they are: kubectl kruise migrate %s/%s --dry-run=client prints it",
			from, err, to, a.to.name, name)
	}
	if err := a.create(ctx, shoal, ns, obj, createOpts); err != nil {
		return fmt.Errorf("create %s %s/%s (%s was deleted and its pods run without a controller; create the object from kubectl kruise migrate --dry-run=client's output): %w",
			a.to.resource(), ns, name, from, err)
	}
	_, err = fmt.Fprintf(out, "%s%s\n%s%s\n", created, suffix, deleted, suffix)
	return err
}

// manifest is obj as YAML, without status and the empty creation time.
func manifest(obj runtime.Object) (string, error) {
	m, err := asMap(obj)
	if err != nil {
		return "", err
	}
	delete(m, "status")
	if meta, ok := m["metadata"].(map[string]any); ok {
		delete(meta, "creationTimestamp")
	}
	raw, err := yaml.Marshal(m)
	return string(raw), err
}

// keptAnnotations are a workload's annotations less kubectl's
// last-applied configuration (which describes the old kind) and those
// with one of the prefixes its controller owns; nil when none is left.
func keptAnnotations(annotations map[string]string, controllerPrefixes ...string) map[string]string {
	var kept map[string]string
	for k, v := range annotations {
		if k == corev1.LastAppliedConfigAnnotation || slices.ContainsFunc(controllerPrefixes, func(p string) bool { return strings.HasPrefix(k, p) }) {
			continue
		}
		if kept == nil {
			kept = map[string]string{}
		}
		kept[k] = v
	}
	return kept
}

// statefulSetFromUpstream is the Advanced StatefulSet an apps/v1
// StatefulSet becomes, of the same name, so that it takes over the pods
// <name>-<ordinal> and their PVCs: its labels, annotations, replicas,
// selector, template, volumeClaimTemplates, serviceName,
// podManagementPolicy, revisionHistoryLimit, PVC retention policy and
// ordinals; its update strategy with partition and maxUnavailable (the
// latter only with podManagementPolicy Parallel: an OrderedReady
// StatefulSet updates one pod at a time, and the Advanced one takes no
// other value), pods recreated on update as the upstream controller does,
// and minReadySeconds moved into rollingUpdate. It also returns the
// number of pods.
func statefulSetFromUpstream(s *appsv1.StatefulSet) (*v1beta1.StatefulSet, int32, error) {
	spec := s.Spec.DeepCopy()
	a := &v1beta1.StatefulSet{
		TypeMeta: metav1.TypeMeta{APIVersion: v1beta1.SchemeGroupVersion.String(), Kind: statefulSetKind.kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, Labels: maps.Clone(s.Labels),
			Annotations: keptAnnotations(s.Annotations)},
		Spec: v1beta1.StatefulSetSpec{
			Replicas:             spec.Replicas,
			Selector:             spec.Selector,
			Template:             spec.Template,
			VolumeClaimTemplates: spec.VolumeClaimTemplates,
			ServiceName:          spec.ServiceName,
			PodManagementPolicy:  spec.PodManagementPolicy,
			RevisionHistoryLimit: spec.RevisionHistoryLimit,
			UpdateStrategy:       v1beta1.StatefulSetUpdateStrategy{Type: spec.UpdateStrategy.Type},
		},
	}
	if p := spec.PersistentVolumeClaimRetentionPolicy; p != nil {
		a.Spec.PersistentVolumeClaimRetentionPolicy = &v1beta1.StatefulSetPersistentVolumeClaimRetentionPolicy{
			WhenDeleted: v1beta1.PersistentVolumeClaimRetentionPolicyType(p.WhenDeleted),
			WhenScaled:  v1beta1.PersistentVolumeClaimRetentionPolicyType(p.WhenScaled),
		}
	}
	if o := spec.Ordinals; o != nil {
		a.Spec.Ordinals = &v1beta1.StatefulSetOrdinals{Start: o.Start}
	}
	minReady := spec.MinReadySeconds
	if spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		if minReady > 0 {
			return nil, 0, fmt.Errorf("statefulset.apps %s/%s: minReadySeconds %d cannot be carried over: an Advanced StatefulSet has it in rollingUpdate, which OnDelete does not take",
				s.Namespace, s.Name, minReady)
		}
		return a, s.Status.Replicas, nil
	}
	if minReady > v1beta1.MaxMinReadySeconds {
		return nil, 0, fmt.Errorf("statefulset.apps %s/%s: minReadySeconds %d is above the Advanced StatefulSet's maximum, %d",
			s.Namespace, s.Name, minReady, v1beta1.MaxMinReadySeconds)
	}
	a.Spec.UpdateStrategy.Type = appsv1.RollingUpdateStatefulSetStrategyType
	ru := &v1beta1.RollingUpdateStatefulSetStrategy{PodUpdatePolicy: v1beta1.RecreatePodUpdateStrategyType}
	if minReady > 0 {
		ru.MinReadySeconds = ptr.To(minReady)
	}
	if r := spec.UpdateStrategy.RollingUpdate; r != nil {
		ru.Partition = r.Partition
		if r.MaxUnavailable != nil && (spec.PodManagementPolicy == appsv1.ParallelPodManagement || *r.MaxUnavailable == intstr.FromInt32(1)) {
			ru.MaxUnavailable = r.MaxUnavailable
		}
	}
	a.Spec.UpdateStrategy.RollingUpdate = ru
	return a, s.Status.Replicas, nil
}

// daemonSetFromUpstream is the Advanced DaemonSet an apps/v1 DaemonSet
// becomes, of the same name: its labels, annotations (less the upstream
// controller's), selector, template, minReadySeconds and
// revisionHistoryLimit, and its update strategy with maxUnavailable and
// maxSurge, pods recreated on update (Standard) as the upstream
// controller does. It also returns the number of pods.
func daemonSetFromUpstream(d *appsv1.DaemonSet) (*v1beta1.DaemonSet, int32, error) {
	spec := d.Spec.DeepCopy()
	a := &v1beta1.DaemonSet{
		TypeMeta: metav1.TypeMeta{APIVersion: v1beta1.SchemeGroupVersion.String(), Kind: daemonSetKind.kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: d.Name, Labels: maps.Clone(d.Labels),
			Annotations: keptAnnotations(d.Annotations, "deprecated.daemonset.template.generation")},
		Spec: v1beta1.DaemonSetSpec{
			Selector:             spec.Selector,
			Template:             spec.Template,
			MinReadySeconds:      spec.MinReadySeconds,
			RevisionHistoryLimit: spec.RevisionHistoryLimit,
			UpdateStrategy:       v1beta1.DaemonSetUpdateStrategy{Type: v1beta1.DaemonSetUpdateStrategyType(spec.UpdateStrategy.Type)},
		},
	}
	if spec.UpdateStrategy.Type != appsv1.OnDeleteDaemonSetStrategyType {
		a.Spec.UpdateStrategy.Type = v1beta1.RollingUpdateDaemonSetStrategyType
		ru := &v1beta1.RollingUpdateDaemonSet{Type: v1beta1.StandardRollingUpdateType}
		if r := spec.UpdateStrategy.RollingUpdate; r != nil {
			ru.MaxUnavailable, ru.MaxSurge = r.MaxUnavailable, r.MaxSurge
		}
		a.Spec.UpdateStrategy.RollingUpdate = ru
	}
	return a, d.Status.CurrentNumberScheduled + d.Status.NumberMisscheduled, nil
}

// waitReleased polls (within ctx) until no pod in ns has a controller
// reference to uid: the garbage collector removes it after an orphaning
// delete.
func waitReleased(ctx context.Context, kube kubernetes.Interface, ns string, uid types.UID) error {
	for {
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("list pods: %w", err)
		}
		held := slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool {
			ref := metav1.GetControllerOf(&p)
			return ref != nil && ref.UID == uid
		})
		if !held {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
