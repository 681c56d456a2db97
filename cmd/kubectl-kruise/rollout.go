package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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
		Short: "Manage the rollout of a CloneSet, Advanced StatefulSet or Advanced DaemonSet",
		Long: "Watch, pause, resume, restart and undo the rollout of a CloneSet, an Advanced\n" +
			"StatefulSet or an Advanced DaemonSet (apps.kruise.io), and list its revisions.\n" +
			"Name the workload as cloneset/NAME, statefulset/NAME (sts, asts) or\n" +
			"daemonset/NAME (ds), or as KIND NAME. approve lets a Kruise Rollout\n" +
			"(rollout/NAME, rollouts.kruise.io) go on to its next canary step.",
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
			func(w workload) (any, error) { return w.pausedPatch(true) }, "paused"),
		newRolloutPatchCommand(g, "resume", "Resume a paused rollout",
			func(w workload) (any, error) { return w.pausedPatch(false) }, "resumed"),
		newRolloutPatchCommand(g, "restart", "Restart every pod: a new revision with the same spec (the restartedAt template annotation)",
			func(workload) (any, error) { return restartPatch(g.env.now()), nil }, "restarted"))
	return cmd
}

// workloadUse is the workload argument of the rollout and set commands'
// usage lines.
const workloadUse = "(cloneset|statefulset|daemonset)/NAME"

// addRolloutFlags registers the namespace flag (and, when mutating, the
// dry-run and output flags).
func addRolloutFlags(cmd *cobra.Command, o *rolloutOptions, mutating bool) {
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", "", "the workload's namespace (default: the kubeconfig context's)")
	if mutating {
		cmd.Flags().StringVar(&o.dryRun, "dry-run", "none", "none, client (print the change, send nothing) or server (the server checks it, nothing is stored)")
		cmd.Flags().StringVarP(&o.output, "output", "o", "", "print the workload as name, json or yaml instead of a message")
	}
}

// workloadTarget is the workload a command works on and the clients it
// was read with.
type workloadTarget struct {
	shoal shoalclient.Interface
	kube  kubernetes.Interface
	kind  *workloadKind
	w     workload
}

// loadWorkload checks the dry-run and output flags (when mutating) and
// reads the workload ref from -n's namespace, or the kubeconfig context's.
func loadWorkload(ctx context.Context, g *globalOptions, o *rolloutOptions, ref workloadRef, mutating bool) (*workloadTarget, error) {
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
	w, err := ref.kind.get(ctx, shoal, ns, ref.name)
	if err != nil {
		return nil, ref.kind.readError(ns, ref.name, err)
	}
	return &workloadTarget{shoal: shoal, kube: kube, kind: ref.kind, w: w}, nil
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
// the workload (pause, resume, restart).
func newRolloutPatchCommand(g *globalOptions, use, short string, patch func(workload) (any, error), done string) *cobra.Command {
	var o rolloutOptions
	cmd := &cobra.Command{
		Use:     use + " " + workloadUse,
		Short:   short,
		Example: fmt.Sprintf("  kubectl kruise rollout %s cloneset/web\n  kubectl kruise rollout %s sts/db", use, use),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseWorkload(cmd, args, rolloutKinds...)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), g.requestTimeout)
			defer cancel()
			t, err := loadWorkload(ctx, g, &o, ref, true)
			if err != nil {
				return err
			}
			p, err := patch(t.w)
			if err != nil {
				return err
			}
			if p == nil {
				return printResult(cmd.OutOrStdout(), o, t.kind, t.w, fmt.Sprintf("%s/%s already %s", t.kind.resource(), ref.name, done))
			}
			return applyPatch(ctx, cmd.OutOrStdout(), t, o, p, done)
		},
	}
	addRolloutFlags(cmd, &o, true)
	return cmd
}

// restartPatch stamps the template, so every pod moves to a new revision.
func restartPatch(now time.Time) any {
	return map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{annotationRestartedAt: now.UTC().Format(time.RFC3339)}}}}}
}

// applyPatch sends (or, with --dry-run client, only shows) a merge patch
// of the target's workload and reports the result.
func applyPatch(ctx context.Context, out io.Writer, t *workloadTarget, o rolloutOptions, p any, done string) error {
	raw, err := json.Marshal(p)
	if err != nil {
		return err
	}
	k, ns, name := t.kind, t.w.GetNamespace(), t.w.GetName()
	suffix := ""
	switch o.dryRun {
	case "client":
		if o.output == "" {
			_, err := fmt.Fprintf(out, "%s/%s %s (dry run)\npatch: %s\n", k.resource(), name, done, raw)
			return err
		}
		return printResult(out, o, k, t.w, "")
	case "server":
		suffix = " (server dry run)"
	}
	opts := metav1.PatchOptions{}
	if o.dryRun == "server" {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	got, err := k.patch(ctx, t.shoal, ns, name, raw, opts)
	if err != nil {
		return fmt.Errorf("patch %s %s/%s: %w", k.name, ns, name, err)
	}
	return printResult(out, o, k, got, fmt.Sprintf("%s/%s %s%s", k.resource(), name, done, suffix))
}

// printResult prints the workload as -o asks, or the message.
func printResult(out io.Writer, o rolloutOptions, k *workloadKind, w workload, message string) error {
	obj := w.object().DeepCopyObject()
	obj.GetObjectKind().SetGroupVersionKind(v1beta1.SchemeGroupVersion.WithKind(k.kind))
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	var err error
	switch o.output {
	case "name":
		_, err = fmt.Fprintf(out, "%s/%s\n", k.resource(), w.GetName())
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
		Use:   "status " + workloadUse,
		Short: "Show the rollout's progress, and wait for it to finish",
		Long: "Print the workload's rollout progress until it has rolled out (as far as its\n" +
			"partition lets it): a CloneSet's or StatefulSet's replicas updated, ready and\n" +
			"available, a DaemonSet's pods updated and available. Exit status 1 if a\n" +
			"CloneSet exceeded its progress deadline, the workload updates OnDelete, or\n" +
			"--timeout passed first.",
		Example: "  kubectl kruise rollout status cloneset/web\n  kubectl kruise rollout status cloneset/web --watch=false\n" +
			"  kubectl kruise rollout status statefulset/db --timeout 5m",
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseWorkload(cmd, args, rolloutKinds...)
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
			k, name := ref.kind, ref.name
			timedOut := fmt.Errorf("timed out waiting for %s %q to roll out", k.name, name)
			last := ""
			for {
				w, err := k.get(ctx, shoal, ns, name)
				if err != nil {
					if ctx.Err() != nil {
						return timedOut
					}
					return k.readError(ns, name, err)
				}
				msg, done, err := rolloutStatus(k, w)
				if msg != last {
					fmt.Fprintln(cmd.OutOrStdout(), msg)
					last = msg
				}
				if err != nil || done || !watch {
					return err
				}
				select {
				case <-ctx.Done():
					return timedOut
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

// revisionsOf lists the workload's ControllerRevisions (those it
// controls among the ones its selector matches), oldest first.
func revisionsOf(ctx context.Context, t *workloadTarget) ([]appsv1.ControllerRevision, error) {
	w := t.w
	sel, err := metav1.LabelSelectorAsSelector(w.podSelector())
	if err != nil {
		return nil, fmt.Errorf("%s %s/%s: selector: %w", t.kind.name, w.GetNamespace(), w.GetName(), err)
	}
	list, err := t.kube.AppsV1().ControllerRevisions(w.GetNamespace()).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("list the revisions of %s %s/%s: %w", t.kind.name, w.GetNamespace(), w.GetName(), err)
	}
	var out []appsv1.ControllerRevision
	for _, r := range list.Items {
		if ref := metav1.GetControllerOf(&r); ref != nil && ref.UID == w.GetUID() {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b appsv1.ControllerRevision) int { return cmp.Compare(a.Revision, b.Revision) })
	return out, nil
}

// noRevision is the error for a revision number the workload does not
// have.
func noRevision(k *workloadKind, name string, revision int64) error {
	return fmt.Errorf("%s %q has no revision %d; list them with 'kubectl kruise rollout history %s/%s'", k.name, name, revision, k.name, name)
}

// newRolloutHistoryCommand returns `kubectl kruise rollout history`.
func newRolloutHistoryCommand(g *globalOptions) *cobra.Command {
	var o rolloutOptions
	var revision int64
	cmd := &cobra.Command{
		Use:   "history " + workloadUse,
		Short: "List the workload's revisions, or show one's pod template",
		Example: "  kubectl kruise rollout history cloneset/web\n  kubectl kruise rollout history cloneset/web --revision 2\n" +
			"  kubectl kruise rollout history daemonset/agent",
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseWorkload(cmd, args, rolloutKinds...)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), g.requestTimeout)
			defer cancel()
			t, err := loadWorkload(ctx, g, &o, ref, false)
			if err != nil {
				return err
			}
			revs, err := revisionsOf(ctx, t)
			if err != nil {
				return err
			}
			out, k, name := cmd.OutOrStdout(), t.kind, ref.name
			if revision > 0 {
				i := slices.IndexFunc(revs, func(r appsv1.ControllerRevision) bool { return r.Revision == revision })
				if i < 0 {
					return noRevision(k, name, revision)
				}
				tmpl, err := workloadrevision.Template(&revs[i])
				if err != nil {
					return err
				}
				raw, err := yaml.Marshal(tmpl)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(out, "%s/%s with revision #%d (%s)\nPod Template:\n%s", k.resource(), name, revision, revs[i].Name, indent(string(raw)))
				return err
			}
			update, current, updated := t.w.revisions()
			fmt.Fprintf(out, "%s/%s\n", k.resource(), name)
			tw := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
			fmt.Fprintln(tw, "REVISION\tNAME\tPODS\tCHANGE-CAUSE")
			for _, r := range revs {
				pods := ""
				switch r.Name {
				case update:
					pods = fmt.Sprintf("%d (update)", updated)
				case current:
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
		Use:   "undo " + workloadUse,
		Short: "Roll back to an earlier revision's pod template",
		Long: "Set the workload's pod template to that of an earlier revision (the one before\n" +
			"the current template by default, or --to-revision), from the ControllerRevisions\n" +
			"it owns. The rollback is a new rollout, under the workload's update strategy.",
		Example: "  kubectl kruise rollout undo cloneset/web\n  kubectl kruise rollout undo cloneset/web --to-revision 3 --dry-run=server\n" +
			"  kubectl kruise rollout undo statefulset/db",
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseWorkload(cmd, args, rolloutKinds...)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), g.requestTimeout)
			defer cancel()
			t, err := loadWorkload(ctx, g, &o, ref, true)
			if err != nil {
				return err
			}
			revs, err := revisionsOf(ctx, t)
			if err != nil {
				return err
			}
			target, err := undoTarget(t, revs, to)
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
			current, err := asMap(t.w.podTemplate())
			if err != nil {
				return err
			}
			p := map[string]any{"spec": map[string]any{"template": mergeReplace(current, want)}}
			return applyPatch(ctx, cmd.OutOrStdout(), t, o, p, fmt.Sprintf("rolled back to revision %d", target.Revision))
		},
	}
	addRolloutFlags(cmd, &o, true)
	cmd.Flags().Int64Var(&to, "to-revision", 0, "the revision to roll back to (0: the one before the current template)")
	return cmd
}

// undoTarget picks the revision to roll back to: --to-revision, or the
// newest revision whose template differs from the current one.
func undoTarget(t *workloadTarget, revs []appsv1.ControllerRevision, to int64) (*appsv1.ControllerRevision, error) {
	name := t.w.GetName()
	if to > 0 {
		for i := range revs {
			if revs[i].Revision == to {
				return &revs[i], nil
			}
		}
		return nil, noRevision(t.kind, name, to)
	}
	cur, _ := json.Marshal(t.w.podTemplate())
	for i := len(revs) - 1; i >= 0; i-- {
		tmpl, err := workloadrevision.Template(&revs[i])
		if err != nil {
			continue
		}
		if raw, _ := json.Marshal(tmpl); string(raw) != string(cur) {
			return &revs[i], nil
		}
	}
	return nil, fmt.Errorf("%s %q has no earlier revision to roll back to", t.kind.name, name)
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
