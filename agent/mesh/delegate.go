package mesh

import (
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
)

// delegate receives memberlist's callbacks for a Mesh. It keeps them off the
// Mesh's exported method set.
type delegate struct {
	m *Mesh
}

var (
	_ memberlist.Delegate      = delegate{}
	_ memberlist.EventDelegate = delegate{}
	_ memberlist.PingDelegate  = delegate{}
)

// NodeMeta returns this node's encoded metadata.
func (d delegate) NodeMeta(limit int) []byte {
	b := *d.m.meta.Load()
	if len(b) > limit {
		// Encode already refused this; never make memberlist panic.
		return nil
	}
	return b
}

// NotifyMsg ignores user messages: the mesh sends none.
func (delegate) NotifyMsg([]byte) {}

// GetBroadcasts returns nothing: the mesh gossips no user data.
func (delegate) GetBroadcasts(int, int) [][]byte { return nil }

// LocalState returns nothing: the mesh has no user state to push/pull.
func (delegate) LocalState(bool) []byte { return nil }

// MergeRemoteState ignores remote user state.
func (delegate) MergeRemoteState([]byte, bool) {}

// NotifyJoin records a node that joined or came back.
func (d delegate) NotifyJoin(n *memberlist.Node) { d.m.observe(n, StateAlive, EventJoin) }

// NotifyLeave records a node that left or was declared dead.
// (Node.State is not filled in by memberlist; observe tells them apart.)
func (d delegate) NotifyLeave(n *memberlist.Node) { d.m.observe(n, StateDead, EventLeave) }

// NotifyUpdate records a node's new metadata.
func (d delegate) NotifyUpdate(n *memberlist.Node) { d.m.observe(n, StateAlive, EventUpdate) }

// AckPayload adds nothing to acks.
func (delegate) AckPayload() []byte { return nil }

// NotifyPingComplete clears a suspicion of a node that answered a probe.
func (d delegate) NotifyPingComplete(other *memberlist.Node, _ time.Duration, _ []byte) {
	d.m.clearSuspect(other.Name)
}

// logWriter turns memberlist's log lines ("[LEVEL] memberlist: text") into
// structured log entries, and notices this node's failed probes: memberlist
// reports suspicion nowhere else.
type logWriter struct {
	m *Mesh
}

// suspectPrefix and suspectSuffix frame the node name in the line memberlist
// logs right before it marks a node suspect after a failed probe.
const (
	suspectPrefix = "Suspect "
	suspectSuffix = " has failed, no acks received"
)

// Write handles one log line.
func (w logWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	level := "DEBUG"
	if strings.HasPrefix(line, "[") {
		if end := strings.Index(line, "]"); end > 0 {
			level = line[1:end]
			line = strings.TrimSpace(line[end+1:])
		}
	}
	line = strings.TrimPrefix(line, "memberlist: ")
	if strings.HasPrefix(line, suspectPrefix) && strings.HasSuffix(line, suspectSuffix) {
		w.m.markSuspect(strings.TrimSuffix(strings.TrimPrefix(line, suspectPrefix), suspectSuffix))
	}
	v := 4
	switch level {
	case "ERR", "ERROR", "WARN":
		v = 1
	case "INFO":
		v = 2
	}
	w.m.log.V(v).Info("memberlist", "level", level, "msg", line)
	return len(p), nil
}
