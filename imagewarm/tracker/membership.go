package tracker

import (
	"github.com/shoal-io/shoal/agent/mesh"
	"github.com/shoal-io/shoal/imagewarm/placement"
)

// Membership is the live member list trackers are chosen from.
type Membership interface {
	// Members returns the live members that can act as trackers.
	Members() []placement.Member
}

// MembersFunc adapts a function to Membership.
type MembersFunc func() []placement.Member

// Members calls f.
func (f MembersFunc) Members() []placement.Member { return f() }

// MeshMembership is the Membership of the agent's mesh: MeshMembers of its
// current members.
func MeshMembership(m *mesh.Mesh) Membership {
	return MembersFunc(func() []placement.Member { return MeshMembers(m.Members()) })
}

// MeshMembers converts the mesh's members to placement members, keeping
// those that can serve as trackers: alive or suspect, with a swarm
// endpoint (Meta.P2P) in their metadata. Members that left or died are dropped (the mesh shows a
// graceful leave as left).
func MeshMembers(members []mesh.Member) []placement.Member {
	out := make([]placement.Member, 0, len(members))
	for _, m := range members {
		if (m.State != mesh.StateAlive && m.State != mesh.StateSuspect) || m.Meta.P2P == "" {
			continue
		}
		out = append(out, placement.Member{Name: m.Name, Endpoint: m.Meta.P2P, Zone: m.Meta.Zone, Version: m.Meta.Version})
	}
	return out
}

// ForgetDeparted returns a mesh OnChange callback that calls forget (a
// Tracker's ForgetNode, typically) with every member the mesh reports gone:
// left or declared dead.
func ForgetDeparted(forget func(node string)) func(mesh.Member, mesh.Event) {
	return func(m mesh.Member, ev mesh.Event) {
		if ev == mesh.EventLeave {
			forget(m.Name)
		}
	}
}
