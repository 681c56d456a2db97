package mesh

import (
	"fmt"
	"math"
	"time"

	"github.com/hashicorp/memberlist"
)

// Tuning profile names accepted in Config.Tuning.
const (
	// TuningLAN is the production profile (the default).
	TuningLAN = "lan"
	// TuningLocal is a fast profile for tests on one machine.
	TuningLocal = "local"
)

// tuning is a memberlist configuration profile plus the mesh's own timers.
type tuning struct {
	// base returns the memberlist configuration to start from.
	base func() *memberlist.Config
	// rejoinInterval is how often Run re-joins dead members and bootstrap
	// peers so that a healed partition merges again.
	rejoinInterval time.Duration
	// leaveTimeout bounds the graceful leave on shutdown.
	leaveTimeout time.Duration
	// retention is how long dead and left members are remembered (shown by
	// Members and re-joined) before they are forgotten.
	retention time.Duration
}

// lanConfig is memberlist.DefaultLANConfig with these changes:
//
//   - SuspicionMult 4 -> 2 and SuspicionMaxTimeoutMult 6 -> 3: with fewer
//     than ten nodes and the 5 s probe interval below, the suspicion timeout
//     is 10 s when enough peers confirm and at most 30 s when they do not. A
//     node cut off for 30 s is probed within one or two rounds (5-10 s with
//     three nodes), suspected about a second later, and declared dead when
//     the suspicion times out, within the cut.
//   - DeadNodeReclaimTime 0 -> 30 s: a node that restarts with the same name
//     but a new address (a re-created node) may take its name back after it
//     has been dead for 30 s; memberlist otherwise refuses it forever.
//   - ProbeInterval 1 s -> 5 s and GossipInterval 200 ms -> 2 s: the mesh
//     carries membership only, and every memberlist round is a few thread
//     wake-ups (tick, ping, ack, the peers' pings), which is what an idle
//     agent spends its CPU on (issue 4's goal: <= 5 millicores; measured
//     with hack/agent-footprint.sh: 1 s rounds cost 12-25, 3 s rounds
//     6-8). Broadcasts ride on every ping and ack as well as on gossip.
//   - EnableCompression true -> false: memberlist LZW-compresses every
//     packet, pings and acks included, and each compression allocates a
//     fresh LZW table; that was a third of an idle agent's CPU and most of
//     its garbage. Membership messages are a few hundred bytes and gain
//     nothing from it.
//
// Everything else (500 ms probe timeout, 3 indirect checks, 30 s push/pull
// and gossip-to-the-dead) is the LAN default. Memberlist forgets dead nodes
// after GossipToTheDeadTime and never contacts them again, so a partition
// longer than that heals only through the mesh's periodic rejoin (every
// 10 s).
func lanConfig() *memberlist.Config {
	c := memberlist.DefaultLANConfig()
	c.SuspicionMult = 2
	c.SuspicionMaxTimeoutMult = 3
	c.DeadNodeReclaimTime = 30 * time.Second
	c.ProbeInterval = 5 * time.Second
	c.GossipInterval = 2 * time.Second
	c.EnableCompression = false
	return c
}

// localConfig is memberlist.DefaultLocalConfig made faster for tests in one
// process (detection in about two seconds). It is not meant for real networks.
func localConfig() *memberlist.Config {
	c := memberlist.DefaultLocalConfig()
	c.ProbeInterval = 300 * time.Millisecond
	c.ProbeTimeout = 150 * time.Millisecond
	c.SuspicionMult = 2
	c.SuspicionMaxTimeoutMult = 2
	c.GossipInterval = 50 * time.Millisecond
	c.PushPullInterval = 2 * time.Second
	c.GossipToTheDeadTime = 2 * time.Second
	c.DeadNodeReclaimTime = time.Second
	c.TCPTimeout = time.Second
	return c
}

// tuningFor returns the profile named name ("" means TuningLAN).
func tuningFor(name string) (tuning, error) {
	switch name {
	case "", TuningLAN:
		return tuning{base: lanConfig, rejoinInterval: 10 * time.Second, leaveTimeout: 3 * time.Second, retention: time.Hour}, nil
	case TuningLocal:
		return tuning{base: localConfig, rejoinInterval: 500 * time.Millisecond, leaveTimeout: time.Second, retention: time.Hour}, nil
	default:
		return tuning{}, fmt.Errorf("unknown mesh tuning %q: want %q or %q", name, TuningLAN, TuningLocal)
	}
}

// maxSuspicion is an upper bound of memberlist's suspicion timeout for a
// cluster of n nodes under c, plus one probe interval of slack. A node the
// mesh saw become suspect is shown as alive again after this long unless
// memberlist declared it dead meanwhile.
func maxSuspicion(c *memberlist.Config, n int) time.Duration {
	scale := math.Max(1, math.Log10(math.Max(1, float64(n))))
	lo := time.Duration(float64(c.SuspicionMult) * scale * float64(c.ProbeInterval))
	return time.Duration(c.SuspicionMaxTimeoutMult)*lo + c.ProbeInterval
}
