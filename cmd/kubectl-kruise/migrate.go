package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// migrateOptions are the flags of `kubectl kruise migrate`.
type migrateOptions struct {
	namespace, from, srcName, dstName, dryRun string
	create, copyReplicas                      bool
	replicas, maxSurge                        int32
	timeout                                   time.Duration
}

// newMigrateCommand returns `kubectl kruise migrate`: OpenKruise's
// kruise-tools command with the same flags for a Deployment, and an
// in-place move of a StatefulSet or DaemonSet to the Advanced kind.
func newMigrateCommand(g *globalOptions) *cobra.Command {
	var o migrateOptions
	cmd := &cobra.Command{
		Use: "migrate cloneset --from deployment --src-name DEPLOYMENT [--dst-name CLONESET] [--create [--copy]] [--replicas N] [--max-surge N]\n" +
			"  kubectl kruise migrate (statefulset|daemonset)/NAME [--dry-run=none|client|server]",
		Short: "Move a Deployment's pods to a CloneSet, or a StatefulSet or DaemonSet to the Advanced kind",
		Long: "Create a CloneSet from a Deployment (--create: same labels, selector and pod\n" +
			"template, 0 replicas, or the Deployment's with --copy, leaving the Deployment as\n" +
			"it is), or move replicas from the Deployment to an existing CloneSet: --max-surge\n" +
			"at a time, the CloneSet scaled up and its new pods available before the\n" +
			"Deployment is scaled down, so the total never drops. --replicas bounds how many\n" +
			"move (default: all).\n\n" +
			"statefulset/NAME and daemonset/NAME move an apps/v1 StatefulSet or DaemonSet to an\n" +
			"Advanced StatefulSet or Advanced DaemonSet (apps.kruise.io) of the same name, in\n" +
			"place: the Advanced one is created with the same selector, pod template, update\n" +
			"strategy and the rest of the spec (checked first with a server dry run); the\n" +
			"apps/v1 one is deleted with propagationPolicy Orphan, and once its pods are\n" +
			"released the Advanced one is created and adopts them. The pods (and a\n" +
			"StatefulSet's PVCs) keep running; the Advanced one then rolls them to its own\n" +
			"revision with its update strategy (set rollingUpdate.partition to the replica\n" +
			"count first to hold them). --dry-run\n" +
			"client prints what would be created and deleted; server has the apiserver check\n" +
			"both without storing anything.",
		Example: "  kubectl kruise migrate cloneset --from deployment --src-name web --create\n" +
			"  kubectl kruise migrate cloneset --from deployment --src-name web --dst-name web --max-surge 2\n" +
			"  kubectl kruise migrate statefulset/db --dry-run=client\n" +
			"  kubectl kruise migrate daemonset/agent -n kube-system",
		RunE: func(cmd *cobra.Command, args []string) error {
			if a, name, ok := parseAdoption(args); ok {
				return adopt(cmd, g, o, a, name)
			}
			if len(args) != 1 || !strings.EqualFold(args[0], "cloneset") {
				return usageError{fmt.Errorf("%q migrates to a CloneSet (kubectl kruise migrate cloneset --from deployment --src-name NAME), "+
					"or a StatefulSet or DaemonSet to the Advanced kind (kubectl kruise migrate statefulset/NAME or daemonset/NAME)", cmd.CommandPath())}
			}
			if !strings.EqualFold(o.from, "deployment") {
				return usageError{fmt.Errorf("--from %q: only a deployment moves to a CloneSet; a StatefulSet or DaemonSet moves in place to the Advanced kind with kubectl kruise migrate statefulset/NAME or daemonset/NAME", o.from)}
			}
			if cmd.Flags().Changed("dry-run") {
				return usageError{fmt.Errorf("--dry-run: only for migrate statefulset/NAME and daemonset/NAME")}
			}
			if o.srcName == "" {
				return usageError{fmt.Errorf("--src-name: name the Deployment to migrate from")}
			}
			if o.dstName == "" {
				o.dstName = o.srcName
			}
			if o.maxSurge < 1 {
				return usageError{fmt.Errorf("--max-surge %d: move at least 1 replica at a time", o.maxSurge)}
			}
			return migrate(cmd, g, o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.namespace, "namespace", "n", "", "the namespace (default: the kubeconfig context's)")
	f.StringVar(&o.from, "from", "deployment", "the kind to migrate from (deployment)")
	f.StringVar(&o.srcName, "src-name", "", "the Deployment's name (required)")
	f.StringVar(&o.dstName, "dst-name", "", "the CloneSet's name (default: the Deployment's)")
	f.BoolVar(&o.create, "create", false, "create the CloneSet from the Deployment, with 0 replicas")
	f.BoolVar(&o.copyReplicas, "copy", false, "with --create: give the CloneSet the Deployment's replicas (the Deployment is left as it is)")
	f.Int32Var(&o.replicas, "replicas", -1, "how many replicas to move (default: all of the Deployment's)")
	f.Int32Var(&o.maxSurge, "max-surge", 1, "replicas moved at a time")
	f.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up when a step is not available after this long")
	f.StringVar(&o.dryRun, "dry-run", "none", "statefulset/NAME and daemonset/NAME only: none, client (print what would be created and deleted, send nothing) or server (the server checks both, nothing is stored)")
	return cmd
}

// cloneSetFromDeployment is the CloneSet a Deployment becomes: its labels,
// annotations, selector, template, minReadySeconds and history limit, with
// its rolling update's maxUnavailable and maxSurge, updated by recreating
// pods as a Deployment does.
func cloneSetFromDeployment(d *appsv1.Deployment, name string, replicas int32) *v1beta1.CloneSet {
	cs := &v1beta1.CloneSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: name, Labels: d.Labels,
			Annotations: keptAnnotations(d.Annotations, "deployment.kubernetes.io/")},
		Spec: v1beta1.CloneSetSpec{
			Replicas:             ptr.To(replicas),
			Selector:             d.Spec.Selector.DeepCopy(),
			Template:             *d.Spec.Template.DeepCopy(),
			MinReadySeconds:      d.Spec.MinReadySeconds,
			RevisionHistoryLimit: d.Spec.RevisionHistoryLimit,
			UpdateStrategy: v1beta1.CloneSetUpdateStrategy{Type: v1beta1.RollingUpdateCloneSetUpdateStrategyType,
				RollingUpdate: &v1beta1.RollingUpdateCloneSetStrategy{PodUpdatePolicy: v1beta1.RecreateCloneSetPodUpdateStrategyType}},
		},
	}
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
		cs.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ru.MaxUnavailable
		cs.Spec.UpdateStrategy.RollingUpdate.MaxSurge = ru.MaxSurge
		if ru.MaxSurge != nil && ru.MaxSurge.String() == "25%" && ru.MaxUnavailable != nil && ru.MaxUnavailable.String() == "25%" {
			// The Deployment's defaults become the CloneSet's.
			cs.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromString("20%"))
			cs.Spec.UpdateStrategy.RollingUpdate.MaxSurge = nil
		}
	}
	return cs
}

func migrate(cmd *cobra.Command, g *globalOptions, o migrateOptions) error {
	shoal, kube, ns, err := g.env.clients(g)
	if err != nil {
		return err
	}
	if o.namespace != "" {
		ns = o.namespace
	}
	out := cmd.OutOrStdout()
	ctx := cmd.Context()
	d, err := kube.AppsV1().Deployments(ns).Get(ctx, o.srcName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get deployment %s/%s: %w", ns, o.srcName, err)
	}
	if o.create {
		replicas := int32(0)
		if o.copyReplicas {
			replicas = ptr.Deref(d.Spec.Replicas, 1)
		}
		if _, err := shoal.AppsV1beta1().CloneSets(ns).Create(ctx, cloneSetFromDeployment(d, o.dstName, replicas), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create cloneset %s/%s: %w", ns, o.dstName, err)
		}
		_, err := fmt.Fprintf(out, "cloneset.apps.kruise.io/%s created from deployment.apps/%s with %d replicas\n", o.dstName, o.srcName, replicas)
		return err
	}

	total := ptr.Deref(d.Spec.Replicas, 1)
	if o.replicas >= 0 {
		total = min(total, o.replicas)
	}
	moved := int32(0)
	for moved < total {
		step := min(o.maxSurge, total-moved)
		cs, err := shoal.AppsV1beta1().CloneSets(ns).Get(ctx, o.dstName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get cloneset %s/%s (create it with --create): %w", ns, o.dstName, err)
		}
		want := ptr.Deref(cs.Spec.Replicas, 1) + step
		if err := scaleTo(func(raw []byte) error {
			_, err := shoal.AppsV1beta1().CloneSets(ns).Patch(ctx, o.dstName, types.MergePatchType, raw, metav1.PatchOptions{})
			return err
		}, want); err != nil {
			return fmt.Errorf("scale cloneset %s/%s to %d: %w", ns, o.dstName, want, err)
		}
		wctx, cancel := context.WithTimeout(ctx, o.timeout)
		err = waitUntil(wctx, g.env.refresh, func() (bool, error) {
			cs, err := shoal.AppsV1beta1().CloneSets(ns).Get(wctx, o.dstName, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return cs.Status.ObservedGeneration >= cs.Generation && cs.Status.AvailableReplicas >= want, nil
		})
		cancel()
		if err != nil {
			return fmt.Errorf("cloneset %s/%s did not have %d available replicas within %s (nothing was scaled down for this step): %w", ns, o.dstName, want, o.timeout, err)
		}
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, o.srcName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get deployment %s/%s: %w", ns, o.srcName, err)
		}
		left := max(ptr.Deref(d.Spec.Replicas, 1)-step, 0)
		if err := scaleTo(func(raw []byte) error {
			_, err := kube.AppsV1().Deployments(ns).Patch(ctx, o.srcName, types.MergePatchType, raw, metav1.PatchOptions{})
			return err
		}, left); err != nil {
			return fmt.Errorf("scale deployment %s/%s to %d: %w", ns, o.srcName, left, err)
		}
		moved += step
		fmt.Fprintf(out, "moved %d of %d: cloneset.apps.kruise.io/%s has %d available, deployment.apps/%s scaled to %d\n",
			moved, total, o.dstName, want, o.srcName, left)
	}
	_, err = fmt.Fprintf(out, "migrated %d replicas from deployment.apps/%s to cloneset.apps.kruise.io/%s\n", total, o.srcName, o.dstName)
	return err
}

// scaleTo sends the merge patch that sets spec.replicas.
func scaleTo(patch func([]byte) error, replicas int32) error {
	raw, err := json.Marshal(map[string]any{"spec": map[string]any{"replicas": replicas}})
	if err != nil {
		return err
	}
	return patch(raw)
}

// waitUntil polls cond every interval until it holds, fails, or ctx ends.
func waitUntil(ctx context.Context, interval time.Duration, cond func() (bool, error)) error {
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}
