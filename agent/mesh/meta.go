package mesh

import (
	"encoding/json"
	"fmt"

	"github.com/hashicorp/memberlist"
)

// MaxMetaSize is the largest encoded Meta memberlist accepts for a node.
const MaxMetaSize = memberlist.MetaMaxSize

// Meta is the small per-node metadata every agent gossips with its
// membership. Keep it tiny: it travels in every alive message. (The JSON
// names are for display; the wire form uses one-letter keys.)
type Meta struct {
	// Endpoint is host:port of the agent's HTTP endpoint (metrics,
	// health, inventory).
	Endpoint string `json:"endpoint,omitempty"`
	// P2P is host:port of the agent's image swarm (peers and trackers);
	// empty when the swarm is off, and on agents older than the swarm, so
	// that such members are never chosen as trackers.
	P2P string `json:"p2p,omitempty"`
	// Zone is the node's topology zone, if known.
	Zone string `json:"zone,omitempty"`
	// Version is the agent's version.
	Version string `json:"version,omitempty"`
	// Arch is the node's CPU architecture (GOARCH).
	Arch string `json:"arch,omitempty"`
}

// wireMeta is Meta as gossiped (one-letter keys), plus the mesh's own
// leaving flag.
type wireMeta struct {
	Endpoint string `json:"e,omitempty"`
	P2P      string `json:"p,omitempty"`
	Zone     string `json:"z,omitempty"`
	Version  string `json:"v,omitempty"`
	Arch     string `json:"a,omitempty"`
	// Leaving is set in the last metadata a node broadcasts before it
	// leaves gracefully. Memberlist tells its event delegate that a node
	// went away but not whether it left or failed; this flag tells peers.
	Leaving bool `json:"l,omitempty"`
}

// toWire converts m to its wire form.
func toWire(m Meta, leaving bool) wireMeta {
	return wireMeta{Endpoint: m.Endpoint, P2P: m.P2P, Zone: m.Zone, Version: m.Version, Arch: m.Arch, Leaving: leaving}
}

// meta returns the Meta part of w.
func (w wireMeta) meta() Meta {
	return Meta{Endpoint: w.Endpoint, P2P: w.P2P, Zone: w.Zone, Version: w.Version, Arch: w.Arch}
}

// Encode returns the compact wire form of m (JSON with one-letter keys). It
// refuses metadata larger than MaxMetaSize bytes, memberlist's limit.
func (m Meta) Encode() ([]byte, error) {
	return toWire(m, false).encode()
}

// encode marshals w within memberlist's limit.
func (w wireMeta) encode() ([]byte, error) {
	b, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("encoding mesh metadata: %w", err)
	}
	if len(b) > MaxMetaSize {
		return nil, fmt.Errorf("mesh metadata is %d bytes encoded, more than memberlist's limit of %d bytes: shorten endpoint, zone or version", len(b), MaxMetaSize)
	}
	return b, nil
}

// leavingMeta returns m's wire form flagged as leaving, dropping m itself
// when both do not fit.
func leavingMeta(m Meta) []byte {
	if b, err := toWire(m, true).encode(); err == nil {
		return b
	}
	return []byte(`{"l":true}`)
}

// DecodeMeta parses the wire form written by Meta.Encode. Empty input gives
// an empty Meta; unknown keys (from newer agents) are ignored.
func DecodeMeta(b []byte) (Meta, error) {
	w, err := decodeWire(b)
	return w.meta(), err
}

// decodeWire parses the wire form including the leaving flag.
func decodeWire(b []byte) (wireMeta, error) {
	var w wireMeta
	if len(b) == 0 {
		return w, nil
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return wireMeta{}, fmt.Errorf("decoding mesh metadata: %w", err)
	}
	return w, nil
}
