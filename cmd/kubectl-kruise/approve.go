package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// Kruise Rollout's canary step states that approve moves between.
const (
	canaryStepPaused = "StepPaused"
	canaryStepReady  = "StepReady"
)

// rolloutVersions are the served versions of Kruise Rollout's Rollout,
// newest first.
var rolloutVersions = []schema.GroupVersionResource{
	{Group: "rollouts.kruise.io", Version: "v1beta1", Resource: "rollouts"},
	{Group: "rollouts.kruise.io", Version: "v1alpha1", Resource: "rollouts"},
}

// newRolloutApproveCommand returns `kubectl kruise rollout approve`: as
// OpenKruise's plugin does, it lets a Kruise Rollout (rollouts.kruise.io,
// a separate project Shoal does not serve) that waits at a canary step go
// on to the next one, by setting its status.canaryStatus.currentStepState
// from StepPaused to StepReady.
func newRolloutApproveCommand(g *globalOptions) *cobra.Command {
	var o rolloutOptions
	cmd := &cobra.Command{
		Use:   "approve rollout/NAME",
		Short: "Let a Kruise Rollout (rollouts.kruise.io) paused at a canary step go on to the next step",
		Example: "  kubectl kruise rollout approve rollout/web-canary\n" +
			"  kubectl kruise rollout approve rollout web-canary -n shop",
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := parseRollout(cmd, args)
			if err != nil {
				return err
			}
			dyn, ns, err := g.env.dynamic(g)
			if err != nil {
				return err
			}
			if o.namespace != "" {
				ns = o.namespace
			}
			msg, err := approve(cmd.Context(), dyn, ns, name)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), msg)
			return err
		},
	}
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", "", "the Rollout's namespace (default: the kubeconfig context's)")
	return cmd
}

// parseRollout reads rollout/NAME or the two arguments rollout NAME.
func parseRollout(cmd *cobra.Command, args []string) (string, error) {
	var kind, name string
	switch {
	case len(args) == 1 && strings.Contains(args[0], "/"):
		kind, name, _ = strings.Cut(args[0], "/")
	case len(args) == 2:
		kind, name = args[0], args[1]
	default:
		return "", usageError{fmt.Errorf("%q takes one Rollout, as rollout/NAME or rollout NAME", cmd.CommandPath())}
	}
	switch strings.ToLower(kind) {
	case "rollout", "rollouts", "rollout.rollouts.kruise.io", "rollouts.rollouts.kruise.io":
	case "cloneset", "clonesets", "cs", "cloneset.apps.kruise.io", "clonesets.apps.kruise.io":
		return "", usageError{fmt.Errorf("kind %q: approve works on Kruise Rollouts (rollout/NAME); a CloneSet's rollout goes on when you lower spec.updateStrategy.partition, or with `kubectl kruise rollout resume cloneset/%s` when it is paused", kind, name)}
	default:
		return "", usageError{fmt.Errorf("kind %q: approve works on Kruise Rollouts (rollout/NAME)", kind)}
	}
	if name == "" {
		return "", usageError{fmt.Errorf("the Rollout's name is empty: use rollout/NAME")}
	}
	return name, nil
}

// approve moves Rollout ns/name from StepPaused to StepReady.
func approve(ctx context.Context, dyn dynamic.Interface, ns, name string) (string, error) {
	var r *unstructured.Unstructured
	var gvr schema.GroupVersionResource
	for _, v := range rolloutVersions {
		got, err := dyn.Resource(v).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("get rollout %s/%s: %w", ns, name, err)
		}
		r, gvr = got, v
		break
	}
	if r == nil {
		return "", fmt.Errorf("rollout %s/%s not found (rollouts.kruise.io v1beta1 or v1alpha1; is Kruise Rollout installed?)", ns, name)
	}
	state, _, _ := unstructured.NestedString(r.Object, "status", "canaryStatus", "currentStepState")
	if state != canaryStepPaused {
		return "", fmt.Errorf("rollout %s/%s cannot be approved: its canary step state is %q, not %s", ns, name, state, canaryStepPaused)
	}
	patch := fmt.Sprintf(`{"status":{"canaryStatus":{"currentStepState":%q}}}`, canaryStepReady)
	if _, err := dyn.Resource(gvr).Namespace(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		return "", fmt.Errorf("approve rollout %s/%s: %w", ns, name, err)
	}
	return fmt.Sprintf("rollout.rollouts.kruise.io/%s approved", name), nil
}
