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
//   - SuspicionMaxTimeoutMult 6 -> 3: with fewer than ten nodes the suspicion
//     timeout is 4 s when enough peers confirm and at most 12 s (instead of
//     24 s) when they do not, so a node cut off for 30 s is declared dead
//     well within the cut: first probe <= N x 1 s, probe + indirect probes
//     ~1 s, then the suspicion timeout.
//   - DeadNodeReclaimTime 0 -> 30 s: a node that restarts with the same name
//     but a new address (a re-created node) may take its name back after it
//     has been dead for 30 s; memberlist otherwise refuses it forever.
//   - GossipInterval 200 ms -> 1 s: the mesh carries membership only, so
//     there is little to gossip, and an idle agent should cost next to no
//     CPU (issue 4's goal: <= 5 millicores); suspicion and death still reach
//     every member within a few seconds at 3 nodes per round.
//
// Everything else (1 s probe interval, 500 ms probe timeout, 3 indirect
// checks, 30 s push/pull and gossip-to-the-dead) is the LAN default. Memberlist forgets dead nodes after GossipToTheDeadTime and never
// contacts them again, so a partition longer than that heals only through
// the mesh's periodic rejoin (every 10 s).
func lanConfig() *memberlist.Config {
	c := memberlist.DefaultLANConfig()
	c.SuspicionMaxTimeoutMult = 3
	c.DeadNodeReclaimTime = 30 * time.Second
	c.GossipInterval = time.Second
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
