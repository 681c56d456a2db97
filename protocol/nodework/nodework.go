// Package nodework holds the rules of the node-work protocol that the
// generated code in protocol/nodework/v1 cannot express: the protocol
// version, size limits, and the checks every received message goes through
// before a handler sees it. Both ends use it, so an agent and a coordinator
// agree on what a well-formed stream is.
package nodework

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
	"google.golang.org/protobuf/proto"
)

const (
	// ProtocolVersion is the version this build speaks.
	ProtocolVersion uint32 = 1
	// MinProtocolVersion is the oldest peer version this build accepts.
	MinProtocolVersion uint32 = 1

	// MaxMessageBytes bounds one encoded message on the stream (gRPC's
	// receive limit is set to it on both ends).
	MaxMessageBytes = 4 << 20
	// MaxIDBytes bounds a work item id.
	MaxIDBytes = 512
	// MaxMessageTextBytes bounds a report's human message.
	MaxMessageTextBytes = 1024
	// MaxSyncItems bounds the work items in one WorkSync.
	MaxSyncItems = 10000
	// MaxPeers bounds the peers in one Peers message.
	MaxPeers = 64
	// MaxHeld bounds the held work refs in a Hello.
	MaxHeld = 10000
	// maxShortString bounds names, versions and addresses.
	maxShortString = 253
)

// Kind names of the work item spec cases. A WorkItem's kind field must match
// its spec case when the receiver knows the case.
const (
	// KindNoop is the test-only noop kind.
	KindNoop = "noop"
	// KindRecreate recreates containers of a pod (ContainerRecreateRequest).
	KindRecreate = "recreate"
	// KindPull makes an image present on the node (ImagePullJob).
	KindPull = "pull"
	// KindSidecarTerminate stops a Job pod's sidecar containers once its
	// main containers have finished (the Job sidecar terminator).
	KindSidecarTerminate = "sidecar-terminate"
	// KindProbe runs the PodProbeMarker probes of a pod and reports their
	// states.
	KindProbe = "probe"
)

// SameSpec reports whether two work items are the same work: equal in
// everything but their generation. Both ends use it: a generation that moves
// on with the same spec is not new work.
func SameSpec(a, b *nodeworkv1.WorkItem) bool {
	ac, bc := proto.Clone(a).(*nodeworkv1.WorkItem), proto.Clone(b).(*nodeworkv1.WorkItem)
	ac.Generation, bc.Generation = 0, 0
	return proto.Equal(ac, bc)
}

// KnownKind reports whether this build knows the work kind.
func KnownKind(kind string) bool {
	return kind == KindNoop || kind == KindRecreate || kind == KindPull || kind == KindSidecarTerminate || kind == KindProbe
}

// ErrProtocol marks a message that breaks the protocol. The receiver logs
// the reason and ends the stream; it never crashes.
var ErrProtocol = errors.New("nodework protocol violation")

func violation(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...))
}

// KindOf returns the kind of the item's spec case, or "" when the spec is
// empty or a case this build does not know (a newer peer's kind).
func KindOf(item *nodeworkv1.WorkItem) string {
	switch item.GetSpec().(type) {
	case *nodeworkv1.WorkItem_Noop:
		return KindNoop
	case *nodeworkv1.WorkItem_Recreate:
		return KindRecreate
	case *nodeworkv1.WorkItem_Pull:
		return KindPull
	case *nodeworkv1.WorkItem_SidecarTerminate:
		return KindSidecarTerminate
	case *nodeworkv1.WorkItem_Probe:
		return KindProbe
	default:
		return ""
	}
}

// nameRE is what ids and kinds are made of: printable, no spaces.
var (
	kindRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)
	idRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@-]*$`)
)

// DecodeAgentMessage unmarshals and validates one agent message. It is the
// path every byte from an agent takes before the coordinator acts on it.
func DecodeAgentMessage(b []byte) (*nodeworkv1.AgentMessage, error) {
	if len(b) > MaxMessageBytes {
		return nil, violation("message of %d bytes is over the %d-byte limit", len(b), MaxMessageBytes)
	}
	m := &nodeworkv1.AgentMessage{}
	if err := proto.Unmarshal(b, m); err != nil {
		return nil, violation("malformed message: %v", err)
	}
	if err := ValidateAgentMessage(m); err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeCoordinatorMessage unmarshals and validates one coordinator message.
func DecodeCoordinatorMessage(b []byte) (*nodeworkv1.CoordinatorMessage, error) {
	if len(b) > MaxMessageBytes {
		return nil, violation("message of %d bytes is over the %d-byte limit", len(b), MaxMessageBytes)
	}
	m := &nodeworkv1.CoordinatorMessage{}
	if err := proto.Unmarshal(b, m); err != nil {
		return nil, violation("malformed message: %v", err)
	}
	if err := ValidateCoordinatorMessage(m); err != nil {
		return nil, err
	}
	return m, nil
}

// ValidateAgentMessage checks one agent message on its own (not its place in
// the stream; see Sequencer for that).
func ValidateAgentMessage(m *nodeworkv1.AgentMessage) error {
	if m == nil {
		return violation("nil message")
	}
	if m.GetSeq() == 0 {
		return violation("seq: must start at 1")
	}
	switch b := m.GetBody().(type) {
	case *nodeworkv1.AgentMessage_Hello:
		return validateHello(b.Hello)
	case *nodeworkv1.AgentMessage_Report:
		return validateReport(b.Report)
	default:
		return violation("body: empty or of an unknown type")
	}
}

func validateHello(h *nodeworkv1.Hello) error {
	if h.GetProtocolVersion() == 0 {
		return violation("hello.protocolVersion: must be set")
	}
	if err := shortString("hello.nodeName", h.GetNodeName(), true); err != nil {
		return err
	}
	c := h.GetCapabilities()
	for field, v := range map[string]string{
		"runtimeName": c.GetRuntimeName(), "runtimeVersion": c.GetRuntimeVersion(), "os": c.GetOs(),
		"arch": c.GetArch(), "zone": c.GetZone(), "agentVersion": c.GetAgentVersion(),
	} {
		if err := shortString("hello.capabilities."+field, v, false); err != nil {
			return err
		}
	}
	if len(c.GetWorkKinds()) > 64 {
		return violation("hello.capabilities.workKinds: %d kinds, at most 64", len(c.GetWorkKinds()))
	}
	for i, k := range c.GetWorkKinds() {
		if !kindRE.MatchString(k) {
			return violation("hello.capabilities.workKinds[%d]: %q is not a kind name", i, k)
		}
	}
	if err := shortString("hello.meshAddress", h.GetMeshAddress(), false); err != nil {
		return err
	}
	if len(h.GetHeld()) > MaxHeld {
		return violation("hello.held: %d refs, at most %d", len(h.GetHeld()), MaxHeld)
	}
	for i, r := range h.GetHeld() {
		if err := validateID(fmt.Sprintf("hello.held[%d].id", i), r.GetId()); err != nil {
			return err
		}
		if r.GetGeneration() < 0 {
			return violation("hello.held[%d].generation: negative", i)
		}
	}
	return nil
}

func validateReport(r *nodeworkv1.WorkReport) error {
	if err := validateID("report.id", r.GetId()); err != nil {
		return err
	}
	if r.GetObservedGeneration() < 0 {
		return violation("report.observedGeneration: negative")
	}
	if r.GetKind() != "" && !kindRE.MatchString(r.GetKind()) {
		return violation("report.kind: %q is not a kind name", r.GetKind())
	}
	if _, known := nodeworkv1.Phase_name[int32(r.GetPhase())]; !known || r.GetPhase() == nodeworkv1.Phase_PHASE_UNSPECIFIED {
		return violation("report.phase: %d is not a phase", r.GetPhase())
	}
	if len(r.GetMessage()) > MaxMessageTextBytes {
		return violation("report.message: %d bytes, at most %d", len(r.GetMessage()), MaxMessageTextBytes)
	}
	if s := r.GetRecreate(); s != nil {
		return validateRecreateStatus("report.recreate", s)
	}
	if s := r.GetPull(); s != nil {
		return validatePullStatus("report.pull", s)
	}
	if s := r.GetSidecarTerminate(); s != nil {
		return validateSidecarTerminateStatus("report.sidecarTerminate", s)
	}
	if s := r.GetProbe(); s != nil {
		return validateProbeStatus("report.probe", s)
	}
	return nil
}

// ValidateCoordinatorMessage checks one coordinator message on its own.
func ValidateCoordinatorMessage(m *nodeworkv1.CoordinatorMessage) error {
	if m == nil {
		return violation("nil message")
	}
	if m.GetSeq() == 0 {
		return violation("seq: must start at 1")
	}
	switch b := m.GetBody().(type) {
	case *nodeworkv1.CoordinatorMessage_Welcome:
		if b.Welcome.GetProtocolVersion() == 0 {
			return violation("welcome.protocolVersion: must be set")
		}
		return validatePeers("welcome.peers", b.Welcome.GetPeers())
	case *nodeworkv1.CoordinatorMessage_Sync:
		items := b.Sync.GetItems()
		if len(items) > MaxSyncItems {
			return violation("sync.items: %d items, at most %d", len(items), MaxSyncItems)
		}
		seen := make(map[string]bool, len(items))
		for i, it := range items {
			if err := ValidateWorkItem(fmt.Sprintf("sync.items[%d]", i), it); err != nil {
				return err
			}
			if seen[it.GetId()] {
				return violation("sync.items[%d].id: %q appears twice", i, it.GetId())
			}
			seen[it.GetId()] = true
		}
		return nil
	case *nodeworkv1.CoordinatorMessage_Upsert:
		return ValidateWorkItem("upsert", b.Upsert)
	case *nodeworkv1.CoordinatorMessage_Remove:
		return validateID("remove.id", b.Remove.GetId())
	case *nodeworkv1.CoordinatorMessage_Peers:
		return validatePeers("peers", b.Peers)
	default:
		return violation("body: empty or of an unknown type")
	}
}

// ValidateWorkItem checks a work item's envelope. A spec of a kind this
// build does not know is valid here: the agent reports it as unsupported.
func ValidateWorkItem(path string, it *nodeworkv1.WorkItem) error {
	if it == nil {
		return violation("%s: missing", path)
	}
	if err := validateID(path+".id", it.GetId()); err != nil {
		return err
	}
	if it.GetGeneration() < 1 {
		return violation("%s.generation: must be at least 1", path)
	}
	if !kindRE.MatchString(it.GetKind()) {
		return violation("%s.kind: %q is not a kind name", path, it.GetKind())
	}
	if k := KindOf(it); k != "" && k != it.GetKind() {
		return violation("%s.kind: %q but the spec is a %q", path, it.GetKind(), k)
	}
	if n := it.GetNoop(); n != nil {
		if n.GetSteps() < 1 || n.GetSteps() > 1000 {
			return violation("%s.noop.steps: %d, want 1..1000", path, n.GetSteps())
		}
		if n.GetStepMillis() > 60000 {
			return violation("%s.noop.stepMillis: %d, want 0..60000", path, n.GetStepMillis())
		}
	}
	if r := it.GetRecreate(); r != nil {
		return validateRecreateSpec(path+".recreate", r)
	}
	if p := it.GetPull(); p != nil {
		return validatePullSpec(path+".pull", p)
	}
	if s := it.GetSidecarTerminate(); s != nil {
		return validateSidecarTerminateSpec(path+".sidecarTerminate", s)
	}
	if s := it.GetProbe(); s != nil {
		return validateProbeSpec(path+".probe", s)
	}
	return nil
}

func validatePeers(path string, p *nodeworkv1.Peers) error {
	if len(p.GetPeers()) > MaxPeers {
		return violation("%s: %d peers, at most %d", path, len(p.GetPeers()), MaxPeers)
	}
	for i, peer := range p.GetPeers() {
		if err := shortString(fmt.Sprintf("%s[%d].nodeName", path, i), peer.GetNodeName(), true); err != nil {
			return err
		}
		if err := shortString(fmt.Sprintf("%s[%d].meshAddress", path, i), peer.GetMeshAddress(), true); err != nil {
			return err
		}
	}
	return nil
}

func validateID(path, id string) error {
	if id == "" {
		return violation("%s: must be set", path)
	}
	if len(id) > MaxIDBytes {
		return violation("%s: %d bytes, at most %d", path, len(id), MaxIDBytes)
	}
	if !idRE.MatchString(id) {
		return violation("%s: %q has characters outside [A-Za-z0-9._:/@-]", path, truncate(id))
	}
	return nil
}

func shortString(path, v string, required bool) error {
	if v == "" {
		if required {
			return violation("%s: must be set", path)
		}
		return nil
	}
	if len(v) > maxShortString {
		return violation("%s: %d bytes, at most %d", path, len(v), maxShortString)
	}
	if strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return violation("%s: %q has control characters", path, truncate(v))
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// Sequencer checks where a message falls in its stream: seq 1, 2, 3 ...
// without gaps or repeats, and the hello/welcome first and only once.
// The zero value is ready for a new stream.
type Sequencer struct {
	last  uint64
	greet bool
}

// AcceptAgent checks the next agent message's place in the stream.
func (s *Sequencer) AcceptAgent(m *nodeworkv1.AgentMessage) error {
	_, isHello := m.GetBody().(*nodeworkv1.AgentMessage_Hello)
	return s.accept(m.GetSeq(), isHello, "hello")
}

// AcceptCoordinator checks the next coordinator message's place in the stream.
func (s *Sequencer) AcceptCoordinator(m *nodeworkv1.CoordinatorMessage) error {
	_, isWelcome := m.GetBody().(*nodeworkv1.CoordinatorMessage_Welcome)
	return s.accept(m.GetSeq(), isWelcome, "welcome")
}

func (s *Sequencer) accept(seq uint64, greeting bool, greetingName string) error {
	if seq != s.last+1 {
		return violation("seq %d out of order: expected %d", seq, s.last+1)
	}
	switch {
	case !s.greet && !greeting:
		return violation("message %d before the %s", seq, greetingName)
	case s.greet && greeting:
		return violation("a second %s at message %d", greetingName, seq)
	}
	s.greet = true
	s.last = seq
	return nil
}
