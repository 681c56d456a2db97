package framework

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// MaxClusterLogBytes caps how much of the end of each cluster component log
// is copied into a failed test's artifacts.
const MaxClusterLogBytes = 20 << 20

// CollectArtifacts writes what helps to debug a failed test into
// <ArtifactsDir>/<test name>/ and returns that directory:
//
//	events.txt                      events of the test namespace, oldest first
//	pods/<pod>.yaml                 each pod as the API returns it (spec and status)
//	pods/<pod>/<container>.log      each container's log, and
//	pods/<pod>/<container>.previous.log  the last terminated instance's, if it restarted
//	nodes.txt                       every node with all of its conditions
//	cluster-logs/...                the end of each file in SHOAL_CLUSTER_LOGS
//
// It keeps going past errors and returns them all.
func (f *Framework) CollectArtifacts(ctx context.Context) (string, error) {
	dir := filepath.Join(f.Config.ArtifactsDir, strings.NewReplacer("/", "_", " ", "_").Replace(f.t.Name()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return dir, fmt.Errorf("create artifacts dir: %w", err)
	}
	errs := []error{
		f.writeEvents(ctx, dir),
		f.writePods(ctx, dir),
		f.writeNodes(ctx, dir),
	}
	if f.Config.ClusterLogsDir != "" {
		errs = append(errs, copyTails(f.Config.ClusterLogsDir, filepath.Join(dir, "cluster-logs"), MaxClusterLogBytes))
	}
	return dir, errors.Join(errs...)
}

func (f *Framework) writeEvents(ctx context.Context, dir string) error {
	events, err := f.Kube.CoreV1().Events(f.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list events: %w", err)
	}
	items := events.Items
	sort.SliceStable(items, func(i, j int) bool { return eventTime(&items[i]).Time.Before(eventTime(&items[j]).Time) })
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TIME\tTYPE\tREASON\tOBJECT\tCOUNT\tSOURCE\tMESSAGE")
	for _, e := range items {
		source := e.Source.Component
		if e.ReportingController != "" {
			source = e.ReportingController
		}
		if e.Source.Host != "" {
			source += "@" + e.Source.Host
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s/%s\t%d\t%s\t%s\n", eventTime(&e).UTC().Format("15:04:05.000"),
			e.Type, e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Count, source, e.Message)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "events.txt"), []byte(b.String()), 0o644)
}

// eventTime is when an event last happened, whichever API wrote it.
func eventTime(e *corev1.Event) metav1.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp
	case !e.EventTime.IsZero():
		return metav1.NewTime(e.EventTime.Time)
	default:
		return e.CreationTimestamp
	}
}

func (f *Framework) writePods(ctx context.Context, dir string) error {
	pods, err := f.Kube.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	var errs []error
	for _, pod := range pods.Items {
		podDir := filepath.Join(dir, "pods", pod.Name)
		if err := os.MkdirAll(podDir, 0o755); err != nil {
			errs = append(errs, err)
			continue
		}
		pod.APIVersion, pod.Kind = "v1", "Pod"
		pod.ManagedFields = nil
		data, err := yaml.Marshal(&pod)
		if err == nil {
			err = os.WriteFile(podDir+".yaml", data, 0o644)
		}
		errs = append(errs, err)

		statuses := append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
		for _, cs := range statuses {
			errs = append(errs, f.writeLog(ctx, pod.Name, cs.Name, false, filepath.Join(podDir, cs.Name+".log")))
			if cs.RestartCount > 0 {
				errs = append(errs, f.writeLog(ctx, pod.Name, cs.Name, true, filepath.Join(podDir, cs.Name+".previous.log")))
			}
		}
	}
	return errors.Join(errs...)
}

// writeLog saves a container log; when the log cannot be read, the file
// says why, so that a missing log is not mistaken for an empty one.
func (f *Framework) writeLog(ctx context.Context, pod, container string, previous bool, path string) error {
	log, err := f.Logs(ctx, f.Namespace, pod, container, previous)
	if err != nil {
		log = "could not read the log: " + err.Error() + "\n"
	}
	return os.WriteFile(path, []byte(log), 0o644)
}

func (f *Framework) writeNodes(ctx context.Context, dir string) error {
	nodes, err := f.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	var b strings.Builder
	if len(nodes.Items) == 0 {
		b.WriteString("no nodes\n")
	}
	for _, n := range nodes.Items {
		fmt.Fprintf(&b, "%s unschedulable=%t taints=%v addresses=%v\n", n.Name, n.Spec.Unschedulable, n.Spec.Taints, n.Status.Addresses)
		for _, c := range n.Status.Conditions {
			fmt.Fprintf(&b, "  %s=%s since %s (%s) %s\n", c.Type, c.Status,
				c.LastTransitionTime.UTC().Format("15:04:05"), c.Reason, c.Message)
		}
	}
	return os.WriteFile(filepath.Join(dir, "nodes.txt"), []byte(b.String()), 0o644)
}

// copyTails copies the last limit bytes of every regular file under src to
// the same relative path under dst.
func copyTails(src, dst string, limit int64) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		return copyTail(path, filepath.Join(dst, rel), limit)
	})
}

func copyTail(src, dst string, limit int64) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return err
	}
	if info.Size() > limit {
		if _, err := in.Seek(info.Size()-limit, io.SeekStart); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	// Copy at most limit bytes: a log that grows meanwhile stays bounded.
	_, err = io.Copy(out, io.LimitReader(in, limit))
	return errors.Join(err, out.Close())
}
