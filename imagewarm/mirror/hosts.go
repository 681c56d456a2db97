package mirror

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/shoal-io/shoal/internal/fsutil"
)

// How containerd reads a certs directory, from containerd 1.6/1.7
// (remotes/docker/config/hosts.go, config_unix.go) and docs/hosts.md:
//
//   - The hosts of a registry are tried in the order of their
//     `[host."…"]` tables in the file, then `server` last. go-toml keeps
//     tables in a map, so getSortedHosts re-sorts the host names by the
//     line of their table ("We retrieve line number for each key and sort
//     the keys by position", sort.Slice on Position().Line), and
//     parseHostsFile appends the root `server` config after them. docs:
//     "When host(s) are specified, the hosts will be tried first in the
//     order listed. If all host(s) are tried then server will be used as
//     a fallback." Hence the agent's table goes above every other one.
//   - For "host:port", hostPaths tries the directories "host_port_", then
//     "host:port", then "_default"; HostDirFromRoot takes the first that
//     exists, hosts.toml or not. So an existing "host_port_" directory
//     wins, and a registry's own directory shadows "_default" entirely.
//   - An unknown capability fails the whole file (parseHostConfig), and a
//     file that fails to parse is ignored in favour of certificate files
//     only, so capabilities are checked here.
//   - dial_timeout is read from containerd 2.1 on (containerd PR #11106,
//     backported to 2.0 by #12136); 1.6/1.7 decode hosts.toml with go-toml
//     v1 in non-strict mode and ignore the key. cri's
//     TestContentStoreWithContainerd checks both points on a real
//     containerd: blobs come through a block put first, and not through
//     the same block put last.

// Names and defaults of the agent's hosts.toml blocks.
const (
	// DefaultRegistry is containerd's fallback host namespace: its
	// hosts.toml applies to every registry without a directory of its own.
	DefaultRegistry = "_default"
	// DefaultDialTimeout is the dial_timeout written when Mirror sets none:
	// a local agent that does not answer within it is skipped (containerd's
	// own default is 30s).
	DefaultDialTimeout = 200 * time.Millisecond
	// FileName is the name of the file containerd reads in a registry's
	// directory.
	FileName = "hosts.toml"
	// BeginMarker is the comment line that opens the agent's block.
	BeginMarker = "# BEGIN shoal-agent mirror (managed; do not edit)"
	// EndMarker is the comment line that closes the agent's block.
	EndMarker = "# END shoal-agent mirror"
	// CreatedMarker is the first line of a hosts.toml the agent created:
	// Uninstall deletes such a file once only its `server` line is left.
	CreatedMarker = "# created by shoal-agent"
)

// ErrInvalid is wrapped by the errors about an invalid Mirror or registry.
var ErrInvalid = errors.New("invalid mirror")

// Mirror is what the agent adds to one registry's hosts.toml.
type Mirror struct {
	// Registry is the registry host[:port] as in image references
	// ("docker.io", "172.31.250.1:5001"), or DefaultRegistry.
	Registry string
	// Server is the upstream URL written as `server` when the file is new,
	// such as "https://registry-1.docker.io" or "http://172.31.250.1:5001".
	// Empty: no `server` line (containerd then uses https://<Registry>).
	Server string
	// Endpoint is the agent's mirror URL, such as "http://127.0.0.1:30021".
	Endpoint string
	// DialTimeout is written as dial_timeout (default DefaultDialTimeout).
	DialTimeout time.Duration
	// Capabilities are the host's capabilities, each "pull", "resolve" or
	// "push" (default ["pull"]: tags are resolved upstream and only
	// digest-addressed content comes through the agent).
	Capabilities []string
}

var (
	// hostHeader matches a `[host.…]` table header line (trimmed).
	hostHeader = regexp.MustCompile(`^\[\s*(host|"host"|'host')\s*\.`)
	// topLevelHost matches a `host.… =` or `host = {…}` key line (trimmed).
	topLevelHost = regexp.MustCompile(`^(host|"host"|'host')\s*[.=]`)
	// tableHeader matches any table header line (trimmed), not an array
	// of arrays spread over lines.
	tableHeader = regexp.MustCompile(`^\[[^\[\],]+\]\s*(#.*)?$`)
	// serverKey matches a `server = …` line (trimmed).
	serverKey = regexp.MustCompile(`^(server|"server"|'server')\s*=`)
	// blockHost matches the host header the agent writes, capturing the
	// endpoint.
	blockHost = regexp.MustCompile(`^\[host\."([^"]*)"\]$`)
)

// Install puts the agent's block into the hosts.toml containerd reads for
// m.Registry, above every `[host.…]` table already there, creating the
// directory (0755) and the file (0644, with m.Server as `server`) when
// there is none. Any block of the agent's already in the file is replaced;
// every other byte of the file stays as it was. The file is replaced
// atomically. changed is false when the file already was as it would be
// written; it is then left untouched.
func Install(certsDir string, m Mirror) (changed bool, err error) {
	m, err = m.normalized()
	if err != nil {
		return false, err
	}
	dir := hostDir(certsDir, m.Registry)
	path := filepath.Join(dir, FileName)
	old, perm, err := readHosts(path)
	if err != nil {
		return false, err
	}
	var out []byte
	if old == nil {
		out = newFile(m)
		perm = 0o644
	} else {
		lines, _, err := removeBlocks(splitLines(old), path)
		if err != nil {
			return false, err
		}
		at, err := insertionPoint(lines, path)
		if err != nil {
			return false, err
		}
		if n := len(lines); at == n && n > 0 && !strings.HasSuffix(lines[n-1], "\n") {
			lines[n-1] += "\n"
		}
		lines = slices.Insert(lines, at, block(m))
		out = []byte(strings.Join(lines, ""))
		if bytes.Equal(out, old) {
			return false, nil
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, fmt.Errorf("create hosts dir %q: %w", dir, err)
	}
	if err := writeHosts(path, out, perm); err != nil {
		return false, err
	}
	return true, nil
}

// Uninstall removes the agent's block from the registry's hosts.toml (in
// each directory containerd may read for it), keeping the rest of the file
// as it is. A file the agent created is deleted, and then its directory if
// empty, when nothing but its `server` line is left. changed is false when
// there was no block to remove.
func Uninstall(certsDir, registry string) (changed bool, err error) {
	if err := validRegistry(registry); err != nil {
		return false, err
	}
	for _, dir := range hostDirs(certsDir, registry) {
		c, err := uninstallIn(dir)
		if err != nil {
			return changed, err
		}
		changed = changed || c
	}
	return changed, nil
}

// Installed reports the endpoint of the agent's block in the hosts.toml
// containerd reads for registry; ok is false when there is none.
func Installed(certsDir, registry string) (endpoint string, ok bool, err error) {
	if err := validRegistry(registry); err != nil {
		return "", false, err
	}
	path := filepath.Join(hostDir(certsDir, registry), FileName)
	data, _, err := readHosts(path)
	if err != nil || data == nil {
		return "", false, err
	}
	lines := splitLines(data)
	begin, end, err := findBlock(lines, path)
	if err != nil || begin < 0 {
		return "", false, err
	}
	for _, l := range lines[begin+1 : end] {
		if m := blockHost.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
			return m[1], true, nil
		}
	}
	return "", false, fmt.Errorf("hosts.toml %q: the shoal-agent block has no host table", path)
}

// normalized validates m and fills in its defaults.
func (m Mirror) normalized() (Mirror, error) {
	if err := validRegistry(m.Registry); err != nil {
		return m, err
	}
	if err := validURL("Endpoint", m.Endpoint); err != nil {
		return m, err
	}
	if m.Server != "" {
		if err := validURL("Server", m.Server); err != nil {
			return m, err
		}
	}
	switch {
	case m.DialTimeout == 0:
		m.DialTimeout = DefaultDialTimeout
	case m.DialTimeout < 0:
		return m, fmt.Errorf("%w: DialTimeout %s: must be > 0", ErrInvalid, m.DialTimeout)
	}
	caps := []string{"pull"}
	if len(m.Capabilities) > 0 {
		caps = nil
		for _, c := range m.Capabilities {
			c = strings.ToLower(strings.TrimSpace(c))
			switch c {
			case "pull", "resolve", "push":
			default:
				return m, fmt.Errorf("%w: Capabilities: %q is not pull, resolve or push", ErrInvalid, c)
			}
			if !slices.Contains(caps, c) {
				caps = append(caps, c)
			}
		}
	}
	m.Capabilities = caps
	return m, nil
}

// ValidateRegistryServer checks a registry and its upstream server URL
// (empty: https://<registry>) as Install would, for flag parsing.
func ValidateRegistryServer(registry, server string) error {
	if err := validRegistry(registry); err != nil {
		return err
	}
	if server != "" {
		return validURL("Server", server)
	}
	return nil
}

// validRegistry checks that registry names one directory under the certs
// directory.
func validRegistry(registry string) error {
	switch {
	case registry == "":
		return fmt.Errorf("%w: Registry is empty", ErrInvalid)
	case strings.ContainsAny(registry, `/\`):
		return fmt.Errorf("%w: Registry %q: must not contain path separators", ErrInvalid, registry)
	case strings.Contains(registry, ".."), registry == ".":
		return fmt.Errorf("%w: Registry %q: must not contain \"..\" or be \".\"", ErrInvalid, registry)
	case strings.IndexFunc(registry, isSpaceOrControl) >= 0:
		return fmt.Errorf("%w: Registry %q: must not contain spaces or control characters", ErrInvalid, registry)
	}
	return nil
}

// validURL checks that s is an absolute http(s) URL that can be written
// between TOML double quotes as is.
func validURL(field, s string) error {
	if s == "" {
		return fmt.Errorf("%w: %s is empty", ErrInvalid, field)
	}
	if strings.ContainsAny(s, `"\`) || strings.IndexFunc(s, isSpaceOrControl) >= 0 {
		return fmt.Errorf("%w: %s %q: must not contain quotes, backslashes, spaces or control characters", ErrInvalid, field, s)
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%w: %s %q: %w", ErrInvalid, field, s, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%w: %s %q: must be an http:// or https:// URL", ErrInvalid, field, s)
	case u.Host == "":
		return fmt.Errorf("%w: %s %q: has no host", ErrInvalid, field, s)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("%w: %s %q: must not have user info, a query or a fragment", ErrInvalid, field, s)
	}
	return nil
}

func isSpaceOrControl(r rune) bool { return r <= ' ' || r == 0x7f }

// hostDirectory is containerd's "host:port" → "host_port_" mapping
// (remotes/docker/config/hosts.go).
func hostDirectory(host string) string {
	if i := strings.LastIndex(host, ":"); i > 0 {
		return host[:i] + "_" + host[i+1:] + "_"
	}
	return host
}

// hostDirs are the directories containerd looks in for registry, in its
// order, without the "_default" fallback.
func hostDirs(certsDir, registry string) []string {
	dirs := []string{filepath.Join(certsDir, registry)}
	if ch := hostDirectory(registry); ch != registry {
		dirs = slices.Insert(dirs, 0, filepath.Join(certsDir, ch))
	}
	return dirs
}

// hostDir is the directory containerd reads for registry: the first of
// hostDirs that exists, else the one named as the registry.
func hostDir(certsDir, registry string) string {
	dirs := hostDirs(certsDir, registry)
	for _, d := range dirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			return d
		}
	}
	return dirs[len(dirs)-1]
}

// readHosts reads path; data is nil (and err nil) when it does not exist.
func readHosts(path string) (data []byte, perm fs.FileMode, err error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("stat hosts.toml %q: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("hosts.toml %q is not a regular file", path)
	}
	data, err = os.ReadFile(path)
	if err != nil {
		return nil, 0, fmt.Errorf("read hosts.toml %q: %w", path, err)
	}
	if data == nil {
		data = []byte{}
	}
	return data, fi.Mode().Perm(), nil
}

// writeHosts replaces path with data atomically and durably, with mode
// perm.
func writeHosts(path string, data []byte, perm fs.FileMode) error {
	if err := fsutil.WriteFile(path, data, true); err != nil {
		return fmt.Errorf("write hosts.toml %q: %w", path, err)
	}
	// fsutil.WriteFile leaves the file 0600; containerd runs as root, so
	// the moment before the chmod does not matter to it.
	if err := os.Chmod(path, perm); err != nil {
		return fmt.Errorf("chmod hosts.toml %q: %w", path, err)
	}
	if err := fsutil.SyncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("write hosts.toml %q: %w", path, err)
	}
	return nil
}

// uninstallIn removes the agent's block from the hosts.toml in dir.
func uninstallIn(dir string) (bool, error) {
	path := filepath.Join(dir, FileName)
	data, perm, err := readHosts(path)
	if err != nil || data == nil {
		return false, err
	}
	lines, removed, err := removeBlocks(splitLines(data), path)
	if err != nil || !removed {
		return false, err
	}
	if onlyOurs(lines) {
		if err := os.Remove(path); err != nil {
			return false, fmt.Errorf("remove hosts.toml %q: %w", path, err)
		}
		if err := fsutil.SyncDir(dir); err != nil {
			return true, fmt.Errorf("remove hosts.toml %q: %w", path, err)
		}
		// An empty registry directory would still shadow "_default".
		if err := os.Remove(dir); err == nil {
			_ = fsutil.SyncDir(filepath.Dir(dir))
		}
		return true, nil
	}
	if err := writeHosts(path, []byte(strings.Join(lines, "")), perm); err != nil {
		return false, err
	}
	return true, nil
}

// onlyOurs tells whether lines (without the agent's block) are a file the
// agent created with nothing else left than its `server` line.
func onlyOurs(lines []string) bool {
	created := false
	for _, l := range lines {
		t := strings.TrimSpace(l)
		switch {
		case t == CreatedMarker:
			created = true
		case t == "", serverKey.MatchString(t):
		default:
			return false
		}
	}
	return created
}

// newFile is the hosts.toml the agent creates for m.
func newFile(m Mirror) []byte {
	var b strings.Builder
	b.WriteString(CreatedMarker + "\n")
	if m.Server != "" {
		b.WriteString("server = \"" + m.Server + "\"\n\n")
	}
	b.WriteString(block(m))
	return []byte(b.String())
}

// block is the agent's block for m, every line ending in "\n". m's URLs
// hold no quotes or backslashes (validURL), so they are written as TOML
// basic strings as they are.
func block(m Mirror) string {
	var b strings.Builder
	b.WriteString(BeginMarker + "\n")
	fmt.Fprintf(&b, "[host.\"%s\"]\n", m.Endpoint)
	caps := make([]string, len(m.Capabilities))
	for i, c := range m.Capabilities {
		caps[i] = `"` + c + `"`
	}
	fmt.Fprintf(&b, "  capabilities = [%s]\n", strings.Join(caps, ", "))
	fmt.Fprintf(&b, "  dial_timeout = \"%s\"\n", m.DialTimeout)
	b.WriteString(EndMarker + "\n")
	return b.String()
}

// splitLines splits data after each "\n"; the last line may lack one.
func splitLines(data []byte) []string {
	lines := strings.SplitAfter(string(data), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// findBlock returns the line indices of the first agent block's begin and
// end markers; begin is -1 when there is none.
func findBlock(lines []string, path string) (begin, end int, err error) {
	begin = -1
	for i, l := range lines {
		switch strings.TrimSpace(l) {
		case BeginMarker:
			if begin >= 0 {
				return -1, -1, fmt.Errorf("hosts.toml %q: line %d: shoal-agent BEGIN marker inside its block; fix the file by hand", path, i+1)
			}
			begin = i
		case EndMarker:
			if begin >= 0 {
				return begin, i, nil
			}
		}
	}
	if begin >= 0 {
		return -1, -1, fmt.Errorf("hosts.toml %q: line %d: shoal-agent BEGIN marker without END; fix the file by hand", path, begin+1)
	}
	return -1, -1, nil
}

// removeBlocks removes every agent block, markers included.
func removeBlocks(lines []string, path string) (out []string, removed bool, err error) {
	for {
		begin, end, err := findBlock(lines, path)
		if err != nil {
			return nil, false, err
		}
		if begin < 0 {
			return lines, removed, nil
		}
		lines = slices.Delete(lines, begin, end+1)
		removed = true
	}
}

// insertionPoint is the index of the line the agent's block goes before:
// the first `[host.…]` table header, else the end. Top-level keys always
// come before it (TOML puts every key after a table header into that
// table). Hosts given as top-level dotted keys or inline tables cannot be
// preceded by a table, so they are refused.
func insertionPoint(lines []string, path string) (int, error) {
	inTable := false
	for i, l := range lines {
		t := strings.TrimSpace(l)
		switch {
		case hostHeader.MatchString(t):
			return i, nil
		case tableHeader.MatchString(t):
			inTable = true
		case !inTable && topLevelHost.MatchString(t):
			return 0, fmt.Errorf("hosts.toml %q: line %d: hosts given as top-level keys, not [host.\"…\"] tables: cannot put the agent first", path, i+1)
		}
	}
	return len(lines), nil
}
