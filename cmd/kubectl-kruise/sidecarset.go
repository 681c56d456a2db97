package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/shoal-io/shoal/coordinator/sidecarset/sidecarcontrol"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	shoalclient "github.com/shoal-io/shoal/protocol/client/clientset/versioned"
)

// sidecarSetDebounce is how long `get sidecarset NAME -w` waits after a
// change for more changes before it prints again, so that a rollout
// touching many pods at once prints once, not once per pod.
const sidecarSetDebounce = 200 * time.Millisecond

// newGetSidecarSetCommand returns `kubectl kruise get sidecarset`.
func newGetSidecarSetCommand(g *globalOptions) *cobra.Command {
	var watchFlag bool
	cmd := &cobra.Command{
		Use:     "sidecarset [NAME] [-w]",
		Aliases: []string{"sidecarsets"},
		Short:   "Show SidecarSets and, for one, the revision and sidecars of each pod it injected",
		Long: "Without NAME, list the SidecarSets. With NAME, show the set's counts and one row per pod\n" +
			"injected with it (in every namespace): the pod's ControllerRevision of the set, whether it\n" +
			"runs the set's current sidecars, whether it is ready, and the image of each sidecar (for a\n" +
			"hot-upgrade sidecar, the one of the two containers doing the work), then how many pods run\n" +
			"each revision. With -w, print the view again whenever the set or one of its pods changes,\n" +
			"until Ctrl-C.",
		Example: "  kubectl kruise get sidecarset\n" +
			"  kubectl kruise get sidecarset mesh -w",
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) > 1:
				return usageError{fmt.Errorf("%q takes at most one name, got %d arguments", cmd.CommandPath(), len(args))}
			case len(args) == 0 && watchFlag:
				return usageError{errors.New("-w needs a SidecarSet name: kubectl kruise get sidecarset NAME -w")}
			}
			shoal, kube, _, err := g.env.clients(g)
			if err != nil {
				return err
			}
			if len(args) == 0 {
				ctx, cancel := context.WithTimeout(cmd.Context(), g.requestTimeout)
				defer cancel()
				return listSidecarSets(ctx, g, shoal, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			return showSidecarSet(cmd.Context(), g, shoal, kube, args[0], watchFlag, cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVarP(&watchFlag, "watch", "w", false, "print again whenever the SidecarSet or one of its pods changes, until Ctrl-C")
	return cmd
}

// listSidecarSets prints every SidecarSet, with its status counts.
func listSidecarSets(ctx context.Context, g *globalOptions, shoal shoalclient.Interface, out, errOut io.Writer) error {
	list, err := shoal.AppsV1beta1().SidecarSets().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list SidecarSets: %w", err)
	}
	if len(list.Items) == 0 {
		_, err := fmt.Fprintln(errOut, "No SidecarSets found.")
		return err
	}
	slices.SortFunc(list.Items, func(a, b v1beta1.SidecarSet) int { return strings.Compare(a.Name, b.Name) })
	now := g.env.now()
	_, err = io.WriteString(out, table(func(w io.Writer) {
		fmt.Fprintln(w, "NAME\tMATCHED\tUPDATED\tREADY\tLATEST-REVISION\tAGE")
		for i := range list.Items {
			s := &list.Items[i]
			fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%s\t%s\n", s.Name, s.Status.MatchedPods, s.Status.UpdatedPods, s.Status.ReadyPods,
				orNone(s.Status.LatestRevision), age(s.CreationTimestamp, now))
		}
	}))
	return err
}

// showSidecarSet prints the SidecarSet name and its pods and, with watch,
// prints them again on every change until ctx ends. The first reads are
// bounded by --request-timeout; the watch is not.
func showSidecarSet(ctx context.Context, g *globalOptions, shoal shoalclient.Interface, kube kubernetes.Interface, name string, watchFlag bool, out io.Writer) error {
	view, err := readSidecarSetView(ctx, g, shoal, kube, name)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(out, view); err != nil {
		return err
	}
	if !watchFlag {
		return nil
	}
	return watchSidecarSet(ctx, shoal, kube, name, view, out)
}

// readSidecarSetView reads the SidecarSet name and the pods its selector
// matches, and renders them.
func readSidecarSetView(ctx context.Context, g *globalOptions, shoal shoalclient.Interface, kube kubernetes.Interface, name string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, g.requestTimeout)
	defer cancel()
	set, err := shoal.AppsV1beta1().SidecarSets().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("get sidecarset %s: %w", name, err)
	}
	sel, err := sidecarSetSelector(set)
	if err != nil {
		return "", err
	}
	list, err := kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return "", fmt.Errorf("list the pods of SidecarSet %s (selector %s): %w", name, sel, err)
	}
	pods := make([]*corev1.Pod, 0, len(list.Items))
	for i := range list.Items {
		pods = append(pods, &list.Items[i])
	}
	return sidecarSetView(set, sel, pods), nil
}

// sidecarSetSelector is the label selector of set's pods.
func sidecarSetSelector(set *v1beta1.SidecarSet) (labels.Selector, error) {
	if set.Spec.Selector == nil {
		return nil, fmt.Errorf("SidecarSet %s has no spec.selector", set.Name)
	}
	sel, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("SidecarSet %s: spec.selector: %w", set.Name, err)
	}
	return sel, nil
}

// sidecarSetHash is the hash of set's current sidecars: the one the
// controller writes on the set, or, before it has, the one it will write.
func sidecarSetHash(set *v1beta1.SidecarSet) string {
	if h := set.Annotations[wellknown.AnnotationSidecarSetHash]; h != "" {
		return h
	}
	h, _, err := sidecarcontrol.Hashes(set)
	if err != nil {
		return ""
	}
	return h
}

// sidecarSetPodRow is one pod injected with a SidecarSet.
type sidecarSetPodRow struct {
	namespace, name, revision string
	updated, ready            bool
	sidecars                  string
}

// sidecarSetRows returns a row for each of pods that sel matches and that
// was injected with set (its kruise.io/sidecarset-hash annotation has an
// entry for the set), sorted by namespace and name. Matching sel again
// keeps out the pods a watch without server-side filtering delivers.
func sidecarSetRows(set *v1beta1.SidecarSet, sel labels.Selector, pods []*corev1.Pod) []sidecarSetPodRow {
	hash := sidecarSetHash(set)
	var rows []sidecarSetPodRow
	for _, p := range pods {
		if !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		spec, ok := sidecarcontrol.PodUpgradeSpecs(p, wellknown.AnnotationSidecarSetHash)[set.Name]
		if !ok {
			continue
		}
		rows = append(rows, sidecarSetPodRow{
			namespace: p.Namespace,
			name:      p.Name,
			revision:  spec.ControllerRevision,
			updated:   hash != "" && spec.Hash == hash,
			ready:     podReady(p),
			sidecars:  podSidecars(set, p, spec.SidecarList),
		})
	}
	slices.SortFunc(rows, func(a, b sidecarSetPodRow) int {
		if c := strings.Compare(a.namespace, b.namespace); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	return rows
}

// sidecarSetView renders set and, of pods, those injected with it: a
// header with the set's counts, a row per pod, and how many pods run each
// revision.
func sidecarSetView(set *v1beta1.SidecarSet, sel labels.Selector, pods []*corev1.Pod) string {
	s := set.Status
	var b strings.Builder
	fmt.Fprintf(&b, "SidecarSet %s: %d matched, %d updated, %d ready, %d updated and ready; latest revision %s (observed generation %d of %d)\n",
		set.Name, s.MatchedPods, s.UpdatedPods, s.ReadyPods, s.UpdatedReadyPods, orNone(s.LatestRevision), s.ObservedGeneration, set.Generation)
	rows := sidecarSetRows(set, sel, pods)
	if len(rows) == 0 {
		fmt.Fprintf(&b, "No pods injected with SidecarSet %s (selector %s).\n", set.Name, sel)
		return b.String()
	}
	b.WriteString(table(func(w io.Writer) {
		fmt.Fprintln(w, "NAMESPACE\tPOD\tREVISION\tUPDATED\tREADY\tSIDECARS")
		for _, r := range rows {
			fmt.Fprintf(w, "%s\t%s\t%s\t%t\t%t\t%s\n", r.namespace, r.name, orUnknown(r.revision), r.updated, r.ready, r.sidecars)
		}
	}))
	b.WriteString(revisionSummary(rows, s.LatestRevision) + "\n")
	return b.String()
}

// revisionSummary counts rows by revision on one line: the latest
// revision first, then the others by name, e.g.
// "revision mesh-7c9d (latest): 1 pod, revision mesh-5b8f: 2 pods".
func revisionSummary(rows []sidecarSetPodRow, latest string) string {
	counts := map[string]int{}
	for _, r := range rows {
		counts[r.revision]++
	}
	revs := make([]string, 0, len(counts))
	for rev := range counts {
		revs = append(revs, rev)
	}
	slices.SortFunc(revs, func(a, b string) int {
		switch {
		case a == b:
			return 0
		case latest != "" && a == latest:
			return -1
		case latest != "" && b == latest:
			return 1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, len(revs))
	for _, rev := range revs {
		label := orUnknown(rev)
		if rev != "" && rev == latest {
			label += " (latest)"
		}
		unit := "pods"
		if counts[rev] == 1 {
			unit = "pod"
		}
		parts = append(parts, fmt.Sprintf("revision %s: %d %s", label, counts[rev], unit))
	}
	return strings.Join(parts, ", ")
}

// podSidecars renders the image of each of the set's sidecars in pod,
// "name: image", and for a hot-upgrade sidecar the container doing the
// work, "name: name-2 (image)". sidecars are the names the pod's
// annotation lists; when it lists none (an older annotation), the set's
// containers and native sidecar init containers are shown.
func podSidecars(set *v1beta1.SidecarSet, pod *corev1.Pod, sidecars []string) string {
	hot := map[string]bool{}
	var fromSet []string
	for i := range set.Spec.Containers {
		c := &set.Spec.Containers[i]
		hot[c.Name] = sidecarcontrol.IsHotUpgrade(c)
		fromSet = append(fromSet, c.Name)
	}
	for i := range set.Spec.InitContainers {
		if c := &set.Spec.InitContainers[i]; sidecarcontrol.IsNativeSidecar(&c.Container) {
			fromSet = append(fromSet, c.Name)
		}
	}
	if len(sidecars) == 0 {
		slices.Sort(fromSet)
		sidecars = fromSet
	}
	working := sidecarcontrol.WorkingHotUpgradeContainers(pod)
	parts := make([]string, 0, len(sidecars))
	for _, name := range sidecars {
		container := name
		if w, ok := working[name]; ok {
			container = w
		} else if hot[name] {
			// No record of the working one: the first of the pair.
			container, _ = sidecarcontrol.HotUpgradeNames(name)
		}
		image, found := podContainerImage(pod, container)
		switch {
		case !found:
			parts = append(parts, name+": <missing>")
		case container != name:
			parts = append(parts, fmt.Sprintf("%s: %s (%s)", name, container, image))
		default:
			parts = append(parts, name+": "+image)
		}
	}
	if len(parts) == 0 {
		return "<none>"
	}
	return strings.Join(parts, ", ")
}

// podContainerImage is the image of pod's container (or init container)
// called name.
func podContainerImage(pod *corev1.Pod, name string) (string, bool) {
	for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for _, c := range cs {
			if c.Name == name {
				return c.Image, true
			}
		}
	}
	return "", false
}

// podReady reports whether pod's Ready condition is True.
func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// orNone is s, or "<none>" when it is empty, as kubectl prints it.
func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// orUnknown is s, or "<unknown>" when it is empty.
func orUnknown(s string) string {
	if s == "" {
		return "<unknown>"
	}
	return s
}

// watchSidecarSet keeps the SidecarSet name and the pods of its selector
// in informers and prints the view again, after a blank line, whenever it
// differs from the last one printed (first is the view already printed),
// until ctx ends. Changes are debounced by sidecarSetDebounce.
func watchSidecarSet(ctx context.Context, shoal shoalclient.Interface, kube kubernetes.Interface, name, first string, out io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	w := &sidecarSetWatch{kube: kube, name: name, changed: make(chan struct{}, 1)}
	defer w.wg.Wait()
	defer cancel()

	byName := fields.OneTermEqualSelector("metadata.name", name).String()
	w.sets = w.start(ctx, &v1beta1.SidecarSet{}, cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = byName
			return shoal.AppsV1beta1().SidecarSets().List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = byName
			return shoal.AppsV1beta1().SidecarSets().Watch(ctx, opts)
		},
	}, shoal))

	last := first
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.changed:
		}
		t := time.NewTimer(sidecarSetDebounce)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		// Handlers run after their store changed: the view below holds
		// every change notified so far.
		select {
		case <-w.changed:
		default:
		}
		view, ok := w.view(ctx)
		if !ok || view == last {
			continue
		}
		if _, err := io.WriteString(out, "\n"+view); err != nil {
			return err
		}
		last = view
	}
}

// sidecarSetWatch is the state of `get sidecarset NAME -w`.
type sidecarSetWatch struct {
	kube kubernetes.Interface
	name string
	// changed has an item when an informer saw a change since the last
	// view.
	changed chan struct{}
	// sets holds the SidecarSet; pods the pods of podsSelector, the set's
	// selector when they were first watched or last changed.
	sets, pods   *informer
	podsSelector string
	// wg counts the informers' goroutines.
	wg sync.WaitGroup
}

// poke notes a change without blocking.
func (w *sidecarSetWatch) poke() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// view renders what the informers hold, or reports false when they are
// not listed yet. The first time, and whenever the set's selector
// changed, it starts watching the pods of the selector (and reports
// false: they are shown once listed).
func (w *sidecarSetWatch) view(ctx context.Context) (string, bool) {
	if !w.sets.ctrl.HasSynced() {
		return "", false
	}
	obj, exists, _ := w.sets.store.GetByKey(w.name) // cluster-scoped: the key is the name
	set, ok := obj.(*v1beta1.SidecarSet)
	if !exists || !ok {
		return fmt.Sprintf("SidecarSet %s is gone (deleted)\n", w.name), true
	}
	sel, err := sidecarSetSelector(set)
	if err != nil {
		return err.Error() + "\n", true
	}
	if selector := sel.String(); w.pods == nil || selector != w.podsSelector {
		if w.pods != nil {
			w.pods.stop()
		}
		w.podsSelector = selector
		w.pods = w.start(ctx, &corev1.Pod{}, cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				opts.LabelSelector = selector
				return w.kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
			},
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				opts.LabelSelector = selector
				return w.kube.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, opts)
			},
		}, w.kube))
		return "", false
	}
	if !w.pods.ctrl.HasSynced() {
		return "", false
	}
	var pods []*corev1.Pod
	for _, o := range w.pods.store.List() {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	return sidecarSetView(set, sel, pods), true
}

// start runs an informer of objType objects from lw until ctx ends or
// its stop is called. It pokes w on every change and once the first list
// is in the store (even an empty one, which has no event of its own).
func (w *sidecarSetWatch) start(ctx context.Context, objType runtime.Object, lw cache.ListerWatcher) *informer {
	ctx, stop := context.WithCancel(ctx)
	store, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    objType,
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { w.poke() },
			UpdateFunc: func(any, any) { w.poke() },
			DeleteFunc: func(any) { w.poke() },
		},
	})
	w.wg.Add(2)
	go func() {
		defer w.wg.Done()
		ctrl.RunWithContext(ctx)
	}()
	go func() {
		defer w.wg.Done()
		if cache.WaitForCacheSync(ctx.Done(), ctrl.HasSynced) {
			w.poke()
		}
	}()
	return &informer{store: store, ctrl: ctrl, stop: stop}
}

// informer is a running informer of one kind of object.
type informer struct {
	store cache.Store
	ctrl  cache.Controller
	// stop ends the informer.
	stop context.CancelFunc
}
