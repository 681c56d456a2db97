package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// newSetCommand returns `kubectl kruise set`.
func newSetCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "set",
		Short: "Change the pod template of a CloneSet, Advanced StatefulSet or Advanced DaemonSet: images or env",
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return unknownCommand(cmd, args[0])
		},
	}
	cmd.AddCommand(newSetImageCommand(g), newSetEnvCommand(g))
	return cmd
}

// templatePatch is the merge patch of a changed pod template's containers
// (the whole list: a merge patch replaces lists).
func templatePatch(containers []corev1.Container) any {
	return map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": containers}}}}
}

// setTemplate reads the workload, lets change edit a copy of its
// containers, and patches the result.
func setTemplate(cmd *cobra.Command, g *globalOptions, o *rolloutOptions, ref workloadRef, done string, change func([]corev1.Container) error) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), g.requestTimeout)
	defer cancel()
	t, err := loadWorkload(ctx, g, o, ref, true)
	if err != nil {
		return err
	}
	containers := t.w.podTemplate().DeepCopy().Spec.Containers
	if err := change(containers); err != nil {
		return err
	}
	return applyPatch(ctx, cmd.OutOrStdout(), t, *o, templatePatch(containers), done)
}

// noContainer is the error for a container the workload's template does
// not have.
func noContainer(ref workloadRef, container string, containers []corev1.Container) error {
	return fmt.Errorf("%s %q has no container %q (it has %s)", ref.kind.name, ref.name, container, containerNames(containers))
}

// newSetImageCommand returns `kubectl kruise set image`.
func newSetImageCommand(g *globalOptions) *cobra.Command {
	var o rolloutOptions
	cmd := &cobra.Command{
		Use:   "image " + workloadUse + " CONTAINER=IMAGE [CONTAINER=IMAGE...]",
		Short: "Set container images of a workload's pod template (* sets every container)",
		Example: "  kubectl kruise set image cloneset/web app=nginx:1.26\n  kubectl kruise set image cloneset/web '*=registry.example.com/app:v2' --dry-run=server\n" +
			"  kubectl kruise set image statefulset/db db=postgres:17\n  kubectl kruise set image ds/agent agent=agent:v2",
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usageError{fmt.Errorf("%q takes %s and at least one CONTAINER=IMAGE", cmd.CommandPath(), workloadUse)}
			}
			ref, err := parseWorkload(cmd, args[:1], rolloutKinds...)
			if err != nil {
				return err
			}
			images := map[string]string{}
			for _, a := range args[1:] {
				c, img, ok := strings.Cut(a, "=")
				if !ok || c == "" || img == "" {
					return usageError{fmt.Errorf("%q: use CONTAINER=IMAGE", a)}
				}
				images[c] = img
			}
			return setTemplate(cmd, g, &o, ref, "image updated", func(containers []corev1.Container) error {
				for c := range images {
					if c != "*" && !slices.ContainsFunc(containers, func(k corev1.Container) bool { return k.Name == c }) {
						return noContainer(ref, c, containers)
					}
				}
				for i := range containers {
					if img, ok := images[containers[i].Name]; ok {
						containers[i].Image = img
					} else if img, ok := images["*"]; ok {
						containers[i].Image = img
					}
				}
				return nil
			})
		},
	}
	addRolloutFlags(cmd, &o, true)
	return cmd
}

// newSetEnvCommand returns `kubectl kruise set env`.
func newSetEnvCommand(g *globalOptions) *cobra.Command {
	var o rolloutOptions
	var container string
	cmd := &cobra.Command{
		Use:   "env " + workloadUse + " KEY=VALUE|KEY- [...]",
		Short: "Set (KEY=VALUE) or remove (KEY-) env variables of a workload's containers",
		Long: "Set or remove env variables in the workload's pod template, in every container\n" +
			"or the one named with -c. An env change is not an in-place change: pods are\n" +
			"recreated (also under an InPlaceIfPossible update), and an InPlaceOnly update\n" +
			"refuses it.",
		Example: "  kubectl kruise set env cloneset/web LOG_LEVEL=debug\n  kubectl kruise set env cloneset/web -c app LOG_LEVEL-",
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usageError{fmt.Errorf("%q takes %s and at least one KEY=VALUE or KEY-", cmd.CommandPath(), workloadUse)}
			}
			ref, err := parseWorkload(cmd, args[:1], rolloutKinds...)
			if err != nil {
				return err
			}
			return setTemplate(cmd, g, &o, ref, "env updated", func(containers []corev1.Container) error {
				if container != "" && !slices.ContainsFunc(containers, func(k corev1.Container) bool { return k.Name == container }) {
					return noContainer(ref, container, containers)
				}
				for i := range containers {
					if container != "" && containers[i].Name != container {
						continue
					}
					for _, a := range args[1:] {
						if key, ok := strings.CutSuffix(a, "-"); ok && !strings.Contains(a, "=") {
							containers[i].Env = slices.DeleteFunc(containers[i].Env, func(e corev1.EnvVar) bool { return e.Name == key })
							continue
						}
						key, value, ok := strings.Cut(a, "=")
						if !ok || key == "" {
							return usageError{fmt.Errorf("%q: use KEY=VALUE to set or KEY- to remove", a)}
						}
						if j := slices.IndexFunc(containers[i].Env, func(e corev1.EnvVar) bool { return e.Name == key }); j >= 0 {
							containers[i].Env[j] = corev1.EnvVar{Name: key, Value: value}
						} else {
							containers[i].Env = append(containers[i].Env, corev1.EnvVar{Name: key, Value: value})
						}
					}
				}
				return nil
			})
		},
	}
	addRolloutFlags(cmd, &o, true)
	cmd.Flags().StringVarP(&container, "container", "c", "", "only this container (default: every container)")
	return cmd
}

// containerNames lists the containers' names, comma-separated.
func containerNames(cs []corev1.Container) string {
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	return strings.Join(names, ", ")
}

// newScaleDownCommand returns `kubectl kruise scaledown`.
func newScaleDownCommand(g *globalOptions) *cobra.Command {
	var o rolloutOptions
	var pods []string
	cmd := &cobra.Command{
		Use:   "scaledown cloneset/NAME --pods POD[,POD...]",
		Short: "Scale a CloneSet down by deleting the pods you name",
		Long: "Lower the CloneSet's replicas by the number of pods named and list them in\n" +
			"scaleStrategy.podsToDelete, so exactly those pods go (through their preDelete\n" +
			"hook, if any).",
		Example: "  kubectl kruise scaledown cloneset/web --pods web-abcde,web-fghij",
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseWorkload(cmd, args, cloneSetKind)
			if err != nil {
				return err
			}
			name := ref.name
			if len(pods) == 0 {
				return usageError{fmt.Errorf("--pods: name at least one pod of cloneset %q", name)}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), g.requestTimeout)
			defer cancel()
			t, err := loadWorkload(ctx, g, &o, ref, true)
			if err != nil {
				return err
			}
			cs, ns := t.w.(cloneSetWorkload).CloneSet, t.w.GetNamespace()
			toDelete := slices.Clone(cs.Spec.ScaleStrategy.PodsToDelete)
			for _, p := range pods {
				pod, err := t.kube.CoreV1().Pods(ns).Get(ctx, p, metav1.GetOptions{})
				if err != nil {
					return fmt.Errorf("pod %s/%s: %w", ns, p, err)
				}
				if ref := metav1.GetControllerOf(pod); ref == nil || ref.UID != cs.UID {
					return fmt.Errorf("pod %q is not a pod of cloneset %q", p, name)
				}
				if slices.Contains(toDelete, p) {
					return fmt.Errorf("pod %q is already in cloneset %q's podsToDelete", p, name)
				}
				toDelete = append(toDelete, p)
			}
			replicas := ptr.Deref(cs.Spec.Replicas, 1) - int32(len(pods))
			if replicas < 0 {
				return fmt.Errorf("cloneset %q has %d replicas: cannot scale down by %d", name, ptr.Deref(cs.Spec.Replicas, 1), len(pods))
			}
			patch := map[string]any{"spec": map[string]any{
				"replicas":      replicas,
				"scaleStrategy": map[string]any{"podsToDelete": toDelete},
			}}
			return applyPatch(ctx, cmd.OutOrStdout(), t, o, patch, fmt.Sprintf("scaled down to %d replicas", replicas))
		},
	}
	addRolloutFlags(cmd, &o, true)
	cmd.Flags().StringSliceVar(&pods, "pods", nil, "the pods to delete (required)")
	return cmd
}
