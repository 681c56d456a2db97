package cri

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Runtime names that Detect and GuessRuntimeName report.
const (
	// RuntimeContainerd is containerd's CRI plugin.
	RuntimeContainerd = "containerd"
	// RuntimeCRIO is CRI-O.
	RuntimeCRIO = "cri-o"
	// RuntimeCRIDockerd is Mirantis' cri-dockerd in front of Docker Engine.
	RuntimeCRIDockerd = "cri-dockerd"
	// RuntimeUnknown is used when the socket path does not tell.
	RuntimeUnknown = "unknown"
)

// unixScheme is the only endpoint scheme the CRI client supports here.
const unixScheme = "unix://"

// probeDialTimeout bounds each dial Detect makes to a candidate socket.
const probeDialTimeout = 2 * time.Second

// defaultSocket is one well-known CRI socket location on a node.
type defaultSocket struct {
	path    string
	runtime string
}

// defaultSockets are the sockets Detect probes, in order.
var defaultSockets = []defaultSocket{
	{"/run/containerd/containerd.sock", RuntimeContainerd},
	{"/run/crio/crio.sock", RuntimeCRIO},
	{"/var/run/crio/crio.sock", RuntimeCRIO},
	{"/run/cri-dockerd.sock", RuntimeCRIDockerd},
	{"/var/run/cri-dockerd.sock", RuntimeCRIDockerd},
}

// DefaultSocketPaths returns the host paths Detect probes, in order, before
// they are prefixed with the host root.
func DefaultSocketPaths() []string {
	out := make([]string, 0, len(defaultSockets))
	for _, s := range defaultSockets {
		out = append(out, s.path)
	}
	return out
}

// Endpoint is a CRI runtime socket.
type Endpoint struct {
	// Name is the runtime guessed from the socket path: RuntimeContainerd,
	// RuntimeCRIO, RuntimeCRIDockerd or RuntimeUnknown. Runtime.Name reports
	// the name the runtime itself gives.
	Name string `json:"name"`
	// Address is the endpoint as the CRI client takes it: "unix:///path".
	Address string `json:"address"`
}

// Path returns the filesystem path of the endpoint's unix socket.
func (e Endpoint) Path() string {
	return strings.TrimPrefix(e.Address, unixScheme)
}

// String returns the address and the guessed runtime name.
func (e Endpoint) String() string {
	return fmt.Sprintf("%s (%s)", e.Address, e.Name)
}

// ProbeCause says why a candidate socket was not used.
type ProbeCause string

const (
	// ProbeNotFound means nothing exists at the path.
	ProbeNotFound ProbeCause = "not found"
	// ProbeStatFailed means the path could not be examined (for example
	// permission denied on a parent directory).
	ProbeStatFailed ProbeCause = "stat error"
	// ProbeNotSocket means something other than a unix socket is at the path.
	ProbeNotSocket ProbeCause = "not a socket"
	// ProbeDialFailed means a unix socket is there but connecting to it failed
	// (typically a stale socket of a runtime that is not running).
	ProbeDialFailed ProbeCause = "dial error"
)

// ProbeResult is the outcome of probing one candidate socket.
type ProbeResult struct {
	// Path is the path probed, host root included.
	Path string
	// Runtime is the runtime that normally listens there.
	Runtime string
	// Cause says why the socket was not used.
	Cause ProbeCause
	// Err is the underlying error, if any.
	Err error
}

// String describes the result on one line.
func (p ProbeResult) String() string {
	s := fmt.Sprintf("%s (%s): %s", p.Path, p.Runtime, p.Cause)
	if p.Err != nil {
		s += ": " + p.Err.Error()
	}
	return s
}

// DetectError is returned by Detect when no candidate socket works. It lists
// every path tried and why each failed, and says how to fix it.
type DetectError struct {
	// HostRoot is the host root Detect was given.
	HostRoot string
	// Probes has one entry per candidate, in the order tried.
	Probes []ProbeResult
}

// Error implements error.
func (e *DetectError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "no CRI runtime socket found (host root %q); tried:", e.HostRoot)
	for _, p := range e.Probes {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	runDir := filepath.Join(hostRootOrSlash(e.HostRoot), "run")
	fmt.Fprintf(&b, "\nto fix: mount the host's /run at %s (the --host-root flag plus /run) "+
		"or pass --runtime-endpoint=unix:///path/to/cri.sock", runDir)
	return b.String()
}

// Detect finds the node's CRI runtime endpoint.
//
// A non-empty explicit endpoint ("unix:///path" or a plain path) is used as
// given, without probing: Connect reports whether it works. Otherwise Detect
// probes the default sockets of containerd, CRI-O and cri-dockerd, in that
// order, each under hostRoot (the agent sees the host's /run at
// hostRoot+"/run"; hostRoot "" or "/" means the paths as they are). A
// candidate counts only if it is a unix socket that accepts a connection.
// When none does, the error is a *DetectError.
func Detect(hostRoot, explicit string) (Endpoint, error) {
	if explicit != "" {
		return parseExplicit(explicit)
	}
	derr := &DetectError{HostRoot: hostRoot}
	for _, s := range defaultSockets {
		path := filepath.Join(hostRootOrSlash(hostRoot), s.path)
		res := probeSocket(path)
		if res == nil {
			return Endpoint{Name: s.runtime, Address: unixScheme + path}, nil
		}
		res.Runtime = s.runtime
		derr.Probes = append(derr.Probes, *res)
	}
	return Endpoint{}, derr
}

// GuessRuntimeName guesses the runtime from a socket path or address.
func GuessRuntimeName(pathOrAddress string) string {
	p := strings.ToLower(strings.TrimPrefix(pathOrAddress, unixScheme))
	switch {
	case strings.Contains(p, "cri-dockerd") || strings.Contains(p, "cri-docker"):
		return RuntimeCRIDockerd
	case strings.Contains(p, "crio") || strings.Contains(p, "cri-o"):
		return RuntimeCRIO
	case strings.Contains(p, "containerd"):
		return RuntimeContainerd
	default:
		return RuntimeUnknown
	}
}

// parseExplicit turns a --runtime-endpoint value into an Endpoint.
func parseExplicit(explicit string) (Endpoint, error) {
	path := explicit
	if strings.HasPrefix(explicit, unixScheme) {
		path = strings.TrimPrefix(explicit, unixScheme)
	} else if i := strings.Index(explicit, "://"); i >= 0 {
		return Endpoint{}, fmt.Errorf("runtime endpoint %q: unsupported scheme %q, only unix:// sockets are supported", explicit, explicit[:i])
	}
	if path == "" {
		return Endpoint{}, fmt.Errorf("runtime endpoint %q: empty socket path", explicit)
	}
	path = filepath.Clean(path)
	return Endpoint{Name: GuessRuntimeName(path), Address: unixScheme + path}, nil
}

// probeSocket returns nil when path is a unix socket that accepts a
// connection, and why not otherwise (Runtime left empty).
func probeSocket(path string) *ProbeResult {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &ProbeResult{Path: path, Cause: ProbeNotFound}
	case err != nil:
		return &ProbeResult{Path: path, Cause: ProbeStatFailed, Err: err}
	case fi.Mode()&fs.ModeSocket == 0:
		return &ProbeResult{Path: path, Cause: ProbeNotSocket, Err: fmt.Errorf("found %s", describeMode(fi.Mode()))}
	}
	conn, err := net.DialTimeout("unix", path, probeDialTimeout)
	if err != nil {
		return &ProbeResult{Path: path, Cause: ProbeDialFailed, Err: err}
	}
	_ = conn.Close()
	return nil
}

// describeMode names the kind of file a mode is, for error messages.
func describeMode(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeDevice != 0:
		return "a device"
	default:
		return "file mode " + m.String()
	}
}

// hostRootOrSlash maps an empty host root to "/".
func hostRootOrSlash(hostRoot string) string {
	if hostRoot == "" {
		return "/"
	}
	return hostRoot
}
