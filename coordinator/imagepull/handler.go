package imagepull

import (
	"net/http"
	"slices"
	"strings"

	"github.com/shoal-io/shoal/coordinator/imagepull/pullview"
	"github.com/shoal-io/shoal/internal/httpserve"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
)

// Nodes returns the per-node view of the job namespace/name, and false
// when the job does not exist. Meaningful on the leader only: a standby
// has not heard from the nodes.
func (c *Controller) Nodes(namespace, name string) (pullview.JobNodes, bool) {
	key := namespace + "/" + name
	obj, ok, err := c.jobs.GetByKey(key)
	if err != nil || !ok {
		return pullview.JobNodes{}, false
	}
	job, ok := obj.(*v1alpha1.ImagePullJob)
	if !ok {
		return pullview.JobNodes{}, false
	}
	out := pullview.JobNodes{Namespace: namespace, Name: name, Image: job.Spec.Image, Nodes: []pullview.NodeState{}}
	c.mu.Lock()
	st := c.states[key]
	c.mu.Unlock()
	if st != nil && st.uid == job.UID {
		st.mu.Lock()
		for _, n := range st.order {
			if m := st.nodes[n]; m != nil {
				out.Nodes = append(out.Nodes, m.view(n))
			}
		}
		st.mu.Unlock()
	}
	if len(out.Nodes) == 0 && job.Status.CompletionTime != nil {
		// Finished before this replica led: only the status is left.
		for _, n := range job.Status.FailedNodes {
			out.Nodes = append(out.Nodes, pullview.NodeState{Node: n, Phase: pullview.PhaseFailed})
		}
		slices.SortFunc(out.Nodes, func(a, b pullview.NodeState) int { return strings.Compare(a.Node, b.Node) })
	}
	return out, true
}

// view is the node's part of the per-node view; callers hold the job
// state's lock.
func (m *nodeMem) view(node string) pullview.NodeState {
	s := pullview.NodeState{Node: node, Phase: m.phase, Round: m.round, Message: m.message, Since: m.since}
	if m.report != nil {
		p := m.report.GetPull()
		s.Attempts, s.BytesDone, s.BytesTotal = p.GetAttempts(), p.GetBytesDone(), p.GetBytesTotal()
		s.ImageID, s.Present, s.Shared = p.GetImageId(), p.GetPresent(), p.GetShared()
	}
	return s
}

// NodesHandler serves GET pullview.NodesPathPrefix + "<namespace>/<name>": the
// job's pullview.JobNodes as JSON, 404 for a job that does not exist, 503 on a
// replica that is not the leader.
func (c *Controller) NodesHandler() http.Handler {
	return httpserve.ObjectView(pullview.NodesPathPrefix, "ImagePullJob", c.o.IsLeader, func(ns, name string) (any, bool) {
		return c.Nodes(ns, name)
	})
}
