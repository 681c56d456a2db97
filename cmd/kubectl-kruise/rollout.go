package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	workloadrevision "github.com/shoal-io/shoal/coordinator/workload/revision"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	shoalclient "github.com/shoal-io/shoal/protocol/client/clientset/versioned"
)

// annotationRestartedAt is the template annotation `rollout restart` sets,
// as kubectl does for Deployments.
const annotationRestartedAt = "kubectl.kubernetes.io/restartedAt"

// rolloutOptions are the flags the rollout subcommands share.
type rolloutOptions struct {
	namespace string
	dryRun    string
	output    string
}

// newRolloutCommand returns `kubectl kruise rollout`.
func newRolloutCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Manage the rollout of a CloneSet",
		Long: "Watch, pause, resume, restart and undo the rollout of a CloneSet, and list its\n" +
			"revisions. Name the workload as cloneset/NAME (or cloneset NAME). approve lets a\n" +
			"Kruise Rollout (rollout/NAME, rollouts.kruise.io) go on to its next canary step.",
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return unknownCommand(cmd, args[0])
		},
	}
	cmd.AddCommand(newRolloutStatusCommand(g), newRolloutHistoryCommand(g), newRolloutUndoCommand(g), newRolloutApproveCommand(g),
		newRolloutPatchCommand(g, "pause", "Pause the rollout: pods keep their revision until it is resumed",
			func(cs *v1beta1.CloneSet) (any, error) { return pausedPatch(cs, true) }, "paused"),
		newRolloutPatchCommand(g, "resume", "Resume a paused rollout",
			func(cs *v1beta1.CloneSet) (any, error) { return pausedPatch(cs, false) }, "resumed"),
		newRolloutPatchCommand(g, "restart", "Restart every pod: a new revision with the same spec (the restartedAt template annotation)",
			func(cs *v1beta1.CloneSet) (any, error) { return restartPatch(g.env.now()), nil }, "restarted"))
	return cmd
}

// parseWorkload reads cloneset/NAME or the two arguments cloneset NAME.
func parseWorkload(cmd *cobra.Command, args []string) (string, error) {
	var kind, name string
	switch {
	case len(args) == 1 && strings.Contains(args[0], "/"):
		kind, name, _ = strings.Cut(args[0], "/")
	case len(args) == 2:
		kind, name = args[0], args[1]
	default:
		return "", usageError{fmt.Errorf("%q takes one workload, as cloneset/NAME or cloneset NAME", cmd.CommandPath())}
	}
	switch strings.ToLower(kind) {
	case "cloneset", "clonesets", "cs", "cloneset.apps.kruise.io", "clonesets.apps.kruise.io":
	case "deployment", "deployments", "deploy", "statefulset", "statefulsets", "sts", "daemonset", "daemonsets", "ds":
		return "", usageError{fmt.Errorf("kind %q: kubectl kruise rollout works on CloneSets in this Shoal version; use kubectl rollout for %s", kind, kind)}
	default:
		return "", usageError{fmt.Errorf("kind %q: kubectl kruise rollout works on CloneSets (cloneset/NAME)", kind)}
	}
	if name == "" {
		return "", usageError{errors.New("the workload's name is empty: use cloneset/NAME")}
	}
	return name, nil
}

// addRolloutFlags registers the namespace flag (and, when mutating, the
// dry-run and output flags).
func addRolloutFlags(cmd *cobra.Command, o *rolloutOptions, mutating bool) {
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", "", "the CloneSet's namespace (default: the kubeconfig context's)")
	if mutating {
		cmd.Flags().StringVar(&o.dryRun, "dry-run", "none", "none, client (print the change, send nothing) or server (the server checks it, nothing is stored)")
		cmd.Flags().StringVarP(&o.output, "output", "o", "", "print the CloneSet as name, json or yaml instead of a message")
	}
}

// cloneSetTarget is the CloneSet a command works on and the clients it
// was read with.
type cloneSetTarget struct {
	shoal shoalclient.Interface
	kube  kubernetes.Interface
	cs    *v1beta1.CloneSet
}

// loadCloneSet checks the dry-run and output flags (when mutating) and
// reads CloneSet name from -n's namespace, or the kubeconfig context's.
func loadCloneSet(ctx context.Context, g *globalOptions, o *rolloutOptions, name string, mutating bool) (*cloneSetTarget, error) {
	if mutating {
		if err := checkMutatingFlags(o); err != nil {
			return nil, err
		}
	}
	shoal, kube, ns, err := g.env.clients(g)
	if err != nil {
		return nil, err
	}
	if o.namespace != "" {
		ns = o.namespace
	}
	cs, err := shoal.AppsV1beta1().CloneSets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get cloneset %s/%s: %w", ns, name, err)
	}
	return &cloneSetTarget{shoal: shoal, kube: kube, cs: cs}, nil
}

// checkMutatingFlags validates --dry-run and -o.
func checkMutatingFlags(o *rolloutOptions) error {
	switch o.dryRun {
	case "none", "client", "server":
	default:
		return usageError{fmt.Errorf("--dry-run %q: use none, client or server", o.dryRun)}
	}
	switch o.output {
	case "", "name", "json", "yaml":
	default:
		return usageError{fmt.Errorf("--output %q: use name, json or yaml", o.output)}
	}
	return nil
}

// newRolloutPatchCommand returns a rollout subcommand that merge-patches
// the CloneSet (pause, resume, restart).
func newRolloutPatchCommand(g *globalOptions, use, short string, patch func(*v1beta1.CloneSet) (any, error), done string) *cobra.Command {
	var o rolloutOptions
	cmd := &cobra.Command{
		Use:     use + " cloneset/NAME",
		Short:   short,
		Example: fmt.Sprintf("  kubectl kruise rollout %s cloneset/web", use),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := parseWorkload(cmd, args)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), g.requestTimeout)
			defer cancel()
			t, err := loadCloneSet(ctx, g, &o, name, true)
			if err != nil {
				return err
			}
			p, err := patch(t.cs)
			if err != nil {
				return err
			}
			if p == nil {
				return printResult(cmd.OutOrStdout(), o, t.cs, fmt.Sprintf("cloneset.apps.kruise.io/%s already %s", name, done))
			}
			return applyPatch(ctx, cmd.OutOrStdout(), t.shoal, o, t.cs, p, done)
		},
	}
	addRolloutFlags(cmd, &o, true)
	return cmd
}

// pausedPatch sets updateStrategy.rollingUpdate.paused (nil when it is so
// already).
func pausedPatch(cs *v1beta1.CloneSet, paused bool) (any, error) {
	if ru := cs.Spec.UpdateStrategy.RollingUpdate; (ru != nil && ru.Paused) == paused {
		return nil, nil
	}
	return map[string]any{"spec": map[string]any{"updateStrategy": map[string]any{"rollingUpdate": map[string]any{"paused": paused}}}}, nil
}

// restartPatch stamps the template, so every pod moves to a new revision.
func restartPatch(now time.Time) any {
	return map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{annotationRestartedAt: now.UTC().Format(time.RFC3339)}}}}}
}

// applyPatch sends (or, with --dry-run client, only shows) a merge patch
// and reports the result.
func applyPatch(ctx context.Context, out io.Writer, shoal shoalclient.Interface, o rolloutOptions, cs *v1beta1.CloneSet, p any, done string) error {
	raw, err := json.Marshal(p)
	if err != nil {
		return err
	}
	suffix := ""
	switch o.dryRun {
	case "client":
		if o.output == "" {
			_, err := fmt.Fprintf(out, "cloneset.apps.kruise.io/%s %s (dry run)\npatch: %s\n", cs.Name, done, raw)
			return err
		}
		return printResult(out, o, cs, "")
	case "server":
		suffix = " (server dry run)"
	}
	opts := metav1.PatchOptions{}
	if o.dryRun == "server" {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	got, err := shoal.AppsV1beta1().CloneSets(cs.Namespace).Patch(ctx, cs.Name, types.MergePatchType, raw, opts)
	if err != nil {
		return fmt.Errorf("patch cloneset %s/%s: %w", cs.Namespace, cs.Name, err)
	}
	return printResult(out, o, got, fmt.Sprintf("cloneset.apps.kruise.io/%s %s%s", cs.Name, done, suffix))
}

// printResult prints the CloneSet as -o asks, or the message.
func printResult(out io.Writer, o rolloutOptions, cs *v1beta1.CloneSet, message string) error {
	obj := cs.DeepCopy()
	obj.APIVersion, obj.Kind = v1beta1.SchemeGroupVersion.String(), "CloneSet"
	obj.ManagedFields = nil
	var err error
	switch o.output {
	case "name":
		_, err = fmt.Fprintf(out, "cloneset.apps.kruise.io/%s\n", cs.Name)
	case "json":
		var raw []byte
		if raw, err = json.MarshalIndent(obj, "", "    "); err == nil {
			_, err = fmt.Fprintf(out, "%s\n", raw)
		}
	case "yaml":
		var raw []byte
		if raw, err = yaml.Marshal(obj); err == nil {
			_, err = out.Write(raw)
		}
	default:
		_, err = fmt.Fprintln(out, message)
	}
	return err
}

// newRolloutStatusCommand returns `kubectl kruise rollout status`.
func newRolloutStatusCommand(g *globalOptions) *cobra.Command {
	var o rolloutOptions
	var watch bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "status cloneset/NAME",
		Short: "Show the rollout's progress, and wait for it to finish",
		Long: "Print the CloneSet's rollout progress until it has rolled out (as far as its\n" +
			"partition lets it). Exit status 1 if it exceeded its progress deadline, or\n" +
			"--timeout passed first.",
		Example: "  kubectl kruise rollout status cloneset/web\n  kubectl kruise rollout status cloneset/web --watch=false",
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := parseWorkload(cmd, args)
			if err != nil {
				return err
			}
			shoal, _, ns, err := g.env.clients(g)
			if err != nil {
				return err
			}
			if o.namespace != "" {
				ns = o.namespace
			}
			ctx := cmd.Context()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			last := ""
			for {
				cs, err := shoal.AppsV1beta1().CloneSets(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					if ctx.Err() != nil {
						return fmt.Errorf("timed out waiting for cloneset %q to roll out", name)
					}
					return fmt.Errorf("get cloneset %s/%s: %w", ns, name, err)
				}
				msg, done, err := rolloutStatus(cs)
				if msg != last {
					fmt.Fprintln(cmd.OutOrStdout(), msg)
					last = msg
				}
				if err != nil || done || !watch {
					return err
				}
				select {
				case <-ctx.Done():
					return fmt.Errorf("timed out waiting for cloneset %q to roll out", name)
				case <-time.After(g.env.refresh):
				}
			}
		},
	}
	addRolloutFlags(cmd, &o, false)
	cmd.Flags().BoolVarP(&watch, "watch", "w", true, "wait until the rollout finishes")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long (0: wait for ever)")
	return cmd
}

// rolloutStatus tells where a CloneSet's rollout stands, whether it is
// over, and an error when it cannot get anywhere (the progress deadline).
func rolloutStatus(cs *v1beta1.CloneSet) (string, bool, error) {
	st := cs.Status
	replicas := ptr.Deref(cs.Spec.Replicas, 1)
	if st.ObservedGeneration < cs.Generation {
		return "Waiting for the CloneSet's spec update to be observed...", false, nil
	}
	for _, c := range st.Conditions {
		if c.Type == v1beta1.CloneSetConditionTypeProgressing && c.Reason == string(v1beta1.CloneSetProgressDeadlineExceeded) {
			return fmt.Sprintf("cloneset %q exceeded its progress deadline: %s", cs.Name, c.Message), false,
				fmt.Errorf("cloneset %q exceeded its progress deadline", cs.Name)
		}
	}
	if ru := cs.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Paused && st.UpdatedReplicas < st.ExpectedUpdatedReplicas {
		return fmt.Sprintf("cloneset %q is paused at %d of %d updated replicas; resume it with 'kubectl kruise rollout resume cloneset/%s'",
			cs.Name, st.UpdatedReplicas, st.ExpectedUpdatedReplicas, cs.Name), false, nil
	}
	switch {
	case st.UpdatedReplicas < st.ExpectedUpdatedReplicas:
		return fmt.Sprintf("Waiting for cloneset %q rollout to finish: %d out of %d new replicas have been updated...",
			cs.Name, st.UpdatedReplicas, st.ExpectedUpdatedReplicas), false, nil
	case st.Replicas > replicas:
		return fmt.Sprintf("Waiting for cloneset %q rollout to finish: %d old replicas are pending termination...",
			cs.Name, st.Replicas-replicas), false, nil
	case st.UpdatedAvailableReplicas < st.ExpectedUpdatedReplicas:
		return fmt.Sprintf("Waiting for cloneset %q rollout to finish: %d of %d updated replicas are available...",
			cs.Name, st.UpdatedAvailableReplicas, st.ExpectedUpdatedReplicas), false, nil
	case st.ExpectedUpdatedReplicas < replicas:
		return fmt.Sprintf("cloneset %q partition rolled out: %d of %d replicas at revision %s, %d kept at the old one by the partition",
			cs.Name, st.UpdatedReplicas, replicas, st.UpdateRevision, replicas-st.ExpectedUpdatedReplicas), true, nil
	}
	return fmt.Sprintf("cloneset %q successfully rolled out", cs.Name), true, nil
}

// revisionsOf lists the CloneSet's ControllerRevisions, oldest first.
func revisionsOf(ctx context.Context, kube kubernetes.Interface, cs *v1beta1.CloneSet) ([]appsv1.ControllerRevision, error) {
	sel, err := metav1.LabelSelectorAsSelector(cs.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("cloneset %s: selector: %w", cs.Name, err)
	}
	list, err := kube.AppsV1().ControllerRevisions(cs.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("list the revisions of cloneset %s/%s: %w", cs.Namespace, cs.Name, err)
	}
	var out []appsv1.ControllerRevision
	for _, r := range list.Items {
		if ref := metav1.GetControllerOf(&r); ref != nil && ref.UID == cs.UID {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b appsv1.ControllerRevision) int { return int(a.Revision - b.Revision) })
	return out, nil
}

// newRolloutHistoryCommand returns `kubectl kruise rollout history`.
func newRolloutHistoryCommand(g *globalOptions) *cobra.Command {
	var o rolloutOptions
	var revision int64
	cmd := &cobra.Command{
		Use:     "history cloneset/NAME",
		Short:   "List the CloneSet's revisions, or show one's pod template",
		Example: "  kubectl kruise rollout history cloneset/web\n  kubectl kruise rollout history cloneset/web --revision 2",
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := parseWorkload(cmd, args)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), g.requestTimeout)
			defer cancel()
			t, err := loadCloneSet(ctx, g, &o, name, false)
			if err != nil {
				return err
			}
			cs := t.cs
			revs, err := revisionsOf(ctx, t.kube, cs)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if revision > 0 {
				i := slices.IndexFunc(revs, func(r appsv1.ControllerRevision) bool { return r.Revision == revision })
				if i < 0 {
					return fmt.Errorf("cloneset %q has no revision %d; list them with 'kubectl kruise rollout history cloneset/%s'", name, revision, name)
				}
				tmpl, err := workloadrevision.Template(&revs[i])
				if err != nil {
					return err
				}
				raw, err := yaml.Marshal(tmpl)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(out, "cloneset.apps.kruise.io/%s with revision #%d (%s)\nPod Template:\n%s", name, revision, revs[i].Name, indent(string(raw)))
				return err
			}
			fmt.Fprintf(out, "cloneset.apps.kruise.io/%s\n", name)
			tw := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
			fmt.Fprintln(tw, "REVISION\tNAME\tPODS\tCHANGE-CAUSE")
			for _, r := range revs {
				pods := ""
				switch r.Name {
				case cs.Status.UpdateRevision:
					pods = fmt.Sprintf("%d (update)", cs.Status.UpdatedReplicas)
				case cs.Status.CurrentRevision:
					pods = "current"
				}
				cause := r.Annotations[workloadrevision.AnnotationChangeCause]
				if cause == "" {
					cause = "<none>"
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", r.Revision, r.Name, orDash(pods), cause)
			}
			return tw.Flush()
		},
	}
	addRolloutFlags(cmd, &o, false)
	cmd.Flags().Int64Var(&revision, "revision", 0, "show the pod template of this revision")
	return cmd
}

// newRolloutUndoCommand returns `kubectl kruise rollout undo`.
func newRolloutUndoCommand(g *globalOptions) *cobra.Command {
	var o rolloutOptions
	var to int64
	cmd := &cobra.Command{
		Use:   "undo cloneset/NAME",
		Short: "Roll back to an earlier revision's pod template",
		Long: "Set the CloneSet's pod template to that of an earlier revision (the one before the\n" +
			"current template by default, or --to-revision). The rollback is a new rollout,\n" +
			"under the CloneSet's update strategy.",
		Example: "  kubectl kruise rollout undo cloneset/web\n  kubectl kruise rollout undo cloneset/web --to-revision 3 --dry-run=server",
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := parseWorkload(cmd, args)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), g.requestTimeout)
			defer cancel()
			t, err := loadCloneSet(ctx, g, &o, name, true)
			if err != nil {
				return err
			}
			cs := t.cs
			revs, err := revisionsOf(ctx, t.kube, cs)
			if err != nil {
				return err
			}
			target, err := undoTarget(cs, revs, to)
			if err != nil {
				return err
			}
			tmpl, err := workloadrevision.Template(target)
			if err != nil {
				return err
			}
			// A merge patch of the whole template: keys only the current
			// template has are set to null.
			want, err := asMap(tmpl)
			if err != nil {
				return err
			}
			current, err := asMap(&cs.Spec.Template)
			if err != nil {
				return err
			}
			p := map[string]any{"spec": map[string]any{"template": mergeReplace(current, want)}}
			return applyPatch(ctx, cmd.OutOrStdout(), t.shoal, o, cs, p, fmt.Sprintf("rolled back to revision %d", target.Revision))
		},
	}
	addRolloutFlags(cmd, &o, true)
	cmd.Flags().Int64Var(&to, "to-revision", 0, "the revision to roll back to (0: the one before the current template)")
	return cmd
}

// undoTarget picks the revision to roll back to: --to-revision, or the
// newest revision whose template differs from the current one.
func undoTarget(cs *v1beta1.CloneSet, revs []appsv1.ControllerRevision, to int64) (*appsv1.ControllerRevision, error) {
	if to > 0 {
		for i := range revs {
			if revs[i].Revision == to {
				return &revs[i], nil
			}
		}
		return nil, fmt.Errorf("cloneset %q has no revision %d; list them with 'kubectl kruise rollout history cloneset/%s'", cs.Name, to, cs.Name)
	}
	cur, _ := json.Marshal(cs.Spec.Template)
	for i := len(revs) - 1; i >= 0; i-- {
		t, err := workloadrevision.Template(&revs[i])
		if err != nil {
			continue
		}
		if raw, _ := json.Marshal(t); string(raw) != string(cur) {
			return &revs[i], nil
		}
	}
	return nil, fmt.Errorf("cloneset %q has no earlier revision to roll back to", cs.Name)
}

// mergeReplace is the JSON merge patch that turns cur into want: want's
// values, and null for keys only cur has.
func mergeReplace(cur, want map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range want {
		cv, ok := cur[k].(map[string]any)
		if wv, isMap := v.(map[string]any); isMap && ok {
			out[k] = mergeReplace(cv, wv)
			continue
		}
		out[k] = v
	}
	for k := range cur {
		if _, ok := want[k]; !ok {
			out[k] = nil
		}
	}
	return out
}

// asMap is v as generic JSON.
func asMap(v any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(raw, &m)
}

// indent indents every line by four spaces.
func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "    " + l
	}
	return strings.Join(lines, "\n") + "\n"
}

// orDash is s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
