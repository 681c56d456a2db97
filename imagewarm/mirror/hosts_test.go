package mirror_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shoal-io/shoal/imagewarm/mirror"
)

const agent = "http://127.0.0.1:30021"

// plainHTTP is a cluster's own config for a plain-HTTP registry, as an
// installer writes it.
const plainHTTP = `# written by the cluster installer
server = "http://172.31.250.1:5001"

[host."http://172.31.250.1:5001"]
  capabilities = ["pull", "resolve"]
  skip_verify = true
`

// agentBlock is the block Install writes for endpoint with the defaults.
func agentBlock(endpoint string) string {
	return mirror.BeginMarker + "\n" +
		`[host."` + endpoint + `"]` + "\n" +
		`  capabilities = ["pull"]` + "\n" +
		`  dial_timeout = "200ms"` + "\n" +
		mirror.EndMarker + "\n"
}

// tomlSummary is what a minimal reading of a hosts.toml finds: the
// top-level keys, and the hosts in the order of their tables.
type tomlSummary struct {
	topLevel []string
	hosts    []string
}

var (
	keyLine    = regexp.MustCompile(`^([A-Za-z0-9_-]+)\s*=\s*\S`)
	headerLine = regexp.MustCompile(`^\[([^\[].*)\]$`)
	hostName   = regexp.MustCompile(`^host\."([^"]+)"$`)
)

// readTOML checks data line by line for the subset of TOML a hosts.toml
// uses here (comments, `key = value` lines, table headers) and that no
// top-level key follows a table. No TOML parser is in the module graph.
func readTOML(t *testing.T, data string) tomlSummary {
	t.Helper()
	var s tomlSummary
	inTable := false
	for i, l := range strings.Split(data, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case headerLine.MatchString(l):
			inTable = true
			if m := hostName.FindStringSubmatch(headerLine.FindStringSubmatch(l)[1]); m != nil {
				require.NotContains(t, s.hosts, m[1], "line %d: host table defined twice", i+1)
				s.hosts = append(s.hosts, m[1])
			}
		case keyLine.MatchString(l):
			if !inTable {
				s.topLevel = append(s.topLevel, keyLine.FindStringSubmatch(l)[1])
			}
		default:
			t.Fatalf("line %d is not TOML this test reads: %q", i+1, l)
		}
	}
	return s
}

func hostsPath(certsDir, dir string) string { return filepath.Join(certsDir, dir, mirror.FileName) }

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(data), 0o644))
}

func requirePerm(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, want, fi.Mode().Perm(), path)
}

func TestInstallNewFile(t *testing.T) {
	for _, tc := range []struct {
		name    string
		m       mirror.Mirror
		premade string // a directory made before Install
		dir     string // where the file must land
		want    string
	}{
		{
			name: "docker.io with server",
			m:    mirror.Mirror{Registry: "docker.io", Server: "https://registry-1.docker.io", Endpoint: agent},
			dir:  "docker.io",
			want: mirror.CreatedMarker + "\nserver = \"https://registry-1.docker.io\"\n\n" + agentBlock(agent),
		},
		{
			name: "no server",
			m:    mirror.Mirror{Registry: "ghcr.io", Endpoint: agent},
			dir:  "ghcr.io",
			want: mirror.CreatedMarker + "\n" + agentBlock(agent),
		},
		{
			name: "_default",
			m:    mirror.Mirror{Registry: mirror.DefaultRegistry, Endpoint: agent},
			dir:  "_default",
			want: mirror.CreatedMarker + "\n" + agentBlock(agent),
		},
		{
			name: "host:port gets a directory named so",
			m:    mirror.Mirror{Registry: "172.31.250.1:5001", Server: "http://172.31.250.1:5001", Endpoint: agent},
			dir:  "172.31.250.1:5001",
			want: mirror.CreatedMarker + "\nserver = \"http://172.31.250.1:5001\"\n\n" + agentBlock(agent),
		},
		{
			name:    "an existing host_port_ directory is the one containerd reads",
			m:       mirror.Mirror{Registry: "172.31.250.1:5001", Endpoint: agent},
			premade: "172.31.250.1_5001_",
			dir:     "172.31.250.1_5001_",
			want:    mirror.CreatedMarker + "\n" + agentBlock(agent),
		},
		{
			name: "options",
			m: mirror.Mirror{Registry: "quay.io", Endpoint: "https://[::1]:30021/base", DialTimeout: 1500 * time.Millisecond,
				Capabilities: []string{"Pull", "resolve", "pull"}},
			dir: "quay.io",
			want: mirror.CreatedMarker + "\n" + mirror.BeginMarker + "\n" +
				`[host."https://[::1]:30021/base"]` + "\n" +
				`  capabilities = ["pull", "resolve"]` + "\n" +
				`  dial_timeout = "1.5s"` + "\n" +
				mirror.EndMarker + "\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			certs := filepath.Join(t.TempDir(), "certs.d") // does not exist yet
			if tc.premade != "" {
				require.NoError(t, os.MkdirAll(filepath.Join(certs, tc.premade), 0o755))
			}
			changed, err := mirror.Install(certs, tc.m)
			require.NoError(t, err)
			require.True(t, changed)
			path := hostsPath(certs, tc.dir)
			got := readFile(t, path)
			require.Equal(t, tc.want, got)
			requirePerm(t, path, 0o644)
			if tc.premade == "" {
				requirePerm(t, filepath.Dir(path), 0o755)
			}
			entries, err := os.ReadDir(certs)
			require.NoError(t, err)
			require.Len(t, entries, 1, "one registry directory")
			entries, err = os.ReadDir(filepath.Dir(path))
			require.NoError(t, err)
			require.Len(t, entries, 1, "no temporary file left")

			s := readTOML(t, got)
			require.Equal(t, []string{tc.m.Endpoint}, s.hosts)
			if tc.m.Server != "" {
				require.Equal(t, []string{"server"}, s.topLevel)
			}
			endpoint, ok, err := mirror.Installed(certs, tc.m.Registry)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, tc.m.Endpoint, endpoint)
		})
	}
}

func TestInstallExistingFile(t *testing.T) {
	for _, tc := range []struct {
		name      string
		foreign   string
		want      string // the file after Install
		preserved string // the file once the block is taken out again; default foreign
		hosts     []string
		topLevel  []string
	}{
		{
			name:     "plain-HTTP registry config: agent goes before its host",
			foreign:  plainHTTP,
			want:     "# written by the cluster installer\nserver = \"http://172.31.250.1:5001\"\n\n" + agentBlock(agent) + strings.SplitAfterN(plainHTTP, "\n\n", 2)[1],
			hosts:    []string{agent, "http://172.31.250.1:5001"},
			topLevel: []string{"server"},
		},
		{
			name: "several hosts and a top-level header table",
			foreign: "server = \"https://registry-1.docker.io\"\nskip_verify = false\n\n[header]\n  x-custom = \"a\"\n\n" +
				"[host.\"https://mirror-a.example\"]\n  capabilities = [\"pull\"]\n\n[host.\"https://mirror-b.example\"]\n  capabilities = [\"pull\"]\n",
			want: "server = \"https://registry-1.docker.io\"\nskip_verify = false\n\n[header]\n  x-custom = \"a\"\n\n" + agentBlock(agent) +
				"[host.\"https://mirror-a.example\"]\n  capabilities = [\"pull\"]\n\n[host.\"https://mirror-b.example\"]\n  capabilities = [\"pull\"]\n",
			hosts:    []string{agent, "https://mirror-a.example", "https://mirror-b.example"},
			topLevel: []string{"server", "skip_verify"},
		},
		{
			name:     "no host table: appended",
			foreign:  "server = \"https://registry-1.docker.io\"\n",
			want:     "server = \"https://registry-1.docker.io\"\n" + agentBlock(agent),
			hosts:    []string{agent},
			topLevel: []string{"server"},
		},
		{
			name:      "no final newline: one is added before the block",
			foreign:   "server = \"https://registry-1.docker.io\"",
			want:      "server = \"https://registry-1.docker.io\"\n" + agentBlock(agent),
			preserved: "server = \"https://registry-1.docker.io\"\n",
			hosts:     []string{agent},
			topLevel:  []string{"server"},
		},
		{
			name:    "empty file",
			foreign: "",
			want:    agentBlock(agent),
			hosts:   []string{agent},
		},
		{
			name:    "host table indented and with single quotes",
			foreign: "server = \"https://r.example\"\n  [ host.'https://m.example' ]\n  capabilities = [\"pull\"]\n",
			want:    "server = \"https://r.example\"\n" + agentBlock(agent) + "  [ host.'https://m.example' ]\n  capabilities = [\"pull\"]\n",
			// (the minimal reader does not know single-quoted host names)
			topLevel: []string{"server"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			certs := t.TempDir()
			path := hostsPath(certs, "172.31.250.1:5001")
			writeFile(t, path, tc.foreign)
			require.NoError(t, os.Chmod(path, 0o640))

			changed, err := mirror.Install(certs, mirror.Mirror{Registry: "172.31.250.1:5001", Server: "http://ignored.example", Endpoint: agent})
			require.NoError(t, err)
			require.True(t, changed)
			got := readFile(t, path)
			require.Equal(t, tc.want, got)
			requirePerm(t, path, 0o640) // the file's own mode is kept

			s := readTOML(t, got)
			if tc.hosts != nil {
				require.Equal(t, tc.hosts, s.hosts, "containerd tries hosts in file order: the agent first")
			}
			require.Equal(t, tc.topLevel, s.topLevel)
			require.NotContains(t, got, "ignored.example", "server is only written into a new file")

			preserved := tc.preserved
			if preserved == "" {
				preserved = tc.foreign
			}
			require.Equal(t, preserved, strings.Replace(got, agentBlock(agent), "", 1), "every foreign byte is kept")

			changed, err = mirror.Uninstall(certs, "172.31.250.1:5001")
			require.NoError(t, err)
			require.True(t, changed)
			require.Equal(t, preserved, readFile(t, path), "uninstall restores the foreign file")
			requirePerm(t, path, 0o640)
		})
	}
}

func TestInstallIdempotentAndReplace(t *testing.T) {
	certs := t.TempDir()
	path := hostsPath(certs, "docker.io")
	writeFile(t, path, plainHTTP)
	m := mirror.Mirror{Registry: "docker.io", Endpoint: agent}

	changed, err := mirror.Install(certs, m)
	require.NoError(t, err)
	require.True(t, changed)
	first := readFile(t, path)
	before, err := os.Stat(path)
	require.NoError(t, err)

	t.Run("same input leaves the file untouched", func(t *testing.T) {
		for range 2 {
			changed, err := mirror.Install(certs, m)
			require.NoError(t, err)
			require.False(t, changed)
		}
		after, err := os.Stat(path)
		require.NoError(t, err)
		require.True(t, os.SameFile(before, after), "not rewritten")
		require.Equal(t, first, readFile(t, path))
	})

	t.Run("defaults spelled out are the same input", func(t *testing.T) {
		changed, err := mirror.Install(certs, mirror.Mirror{Registry: "docker.io", Endpoint: agent,
			DialTimeout: mirror.DefaultDialTimeout, Capabilities: []string{"pull"}})
		require.NoError(t, err)
		require.False(t, changed)
	})

	t.Run("a new endpoint replaces the block in place", func(t *testing.T) {
		const next = "http://10.0.0.7:30021"
		changed, err := mirror.Install(certs, mirror.Mirror{Registry: "docker.io", Endpoint: next, Capabilities: []string{"pull", "resolve"}})
		require.NoError(t, err)
		require.True(t, changed)
		got := readFile(t, path)
		require.Equal(t, 1, strings.Count(got, mirror.BeginMarker))
		require.NotContains(t, got, agent)
		require.Equal(t, []string{next, "http://172.31.250.1:5001"}, readTOML(t, got).hosts)
		require.Contains(t, got, `[host."`+next+`"]`+"\n"+`  capabilities = ["pull", "resolve"]`)
		endpoint, ok, err := mirror.Installed(certs, "docker.io")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, next, endpoint)

		changed, err = mirror.Install(certs, m)
		require.NoError(t, err)
		require.True(t, changed)
		require.Equal(t, first, readFile(t, path), "back to the first install, byte for byte")
	})

	t.Run("a host table added above the block: the block moves up", func(t *testing.T) {
		edited := strings.Replace(first, mirror.BeginMarker, "[host.\"https://added.example\"]\n  capabilities = [\"pull\"]\n"+mirror.BeginMarker, 1)
		writeFile(t, path, edited)
		changed, err := mirror.Install(certs, m)
		require.NoError(t, err)
		require.True(t, changed)
		got := readFile(t, path)
		require.Equal(t, []string{agent, "https://added.example", "http://172.31.250.1:5001"}, readTOML(t, got).hosts)
		require.Equal(t, strings.Replace(edited, agentBlock(agent), "", 1), strings.Replace(got, agentBlock(agent), "", 1))
	})
}

func TestUninstall(t *testing.T) {
	for _, tc := range []struct {
		name     string
		registry string
		setup    func(t *testing.T, certs string)
		changed  bool
		// files left, relative to certs, with their content; nil: none
		want map[string]string
	}{
		{
			name:     "created with server: file and directory go",
			registry: "docker.io",
			setup: func(t *testing.T, certs string) {
				_, err := mirror.Install(certs, mirror.Mirror{Registry: "docker.io", Server: "https://registry-1.docker.io", Endpoint: agent})
				require.NoError(t, err)
			},
			changed: true,
		},
		{
			name:     "created without server",
			registry: "172.31.250.1:5001",
			setup: func(t *testing.T, certs string) {
				_, err := mirror.Install(certs, mirror.Mirror{Registry: "172.31.250.1:5001", Endpoint: agent})
				require.NoError(t, err)
			},
			changed: true,
		},
		{
			name:     "created, then someone added a host: only the block goes",
			registry: "docker.io",
			setup: func(t *testing.T, certs string) {
				_, err := mirror.Install(certs, mirror.Mirror{Registry: "docker.io", Server: "https://registry-1.docker.io", Endpoint: agent})
				require.NoError(t, err)
				path := hostsPath(certs, "docker.io")
				writeFile(t, path, readFile(t, path)+"[host.\"https://theirs.example\"]\n")
			},
			changed: true,
			want: map[string]string{"docker.io/hosts.toml": mirror.CreatedMarker + "\nserver = \"https://registry-1.docker.io\"\n\n" +
				"[host.\"https://theirs.example\"]\n"},
		},
		{
			name:     "foreign file: restored",
			registry: "docker.io",
			setup: func(t *testing.T, certs string) {
				writeFile(t, hostsPath(certs, "docker.io"), plainHTTP)
				_, err := mirror.Install(certs, mirror.Mirror{Registry: "docker.io", Endpoint: agent})
				require.NoError(t, err)
			},
			changed: true,
			want:    map[string]string{"docker.io/hosts.toml": plainHTTP},
		},
		{
			name:     "foreign file without the block: untouched",
			registry: "docker.io",
			setup:    func(t *testing.T, certs string) { writeFile(t, hostsPath(certs, "docker.io"), plainHTTP) },
			want:     map[string]string{"docker.io/hosts.toml": plainHTTP},
		},
		{
			name:     "nothing there",
			registry: "docker.io",
			setup:    func(*testing.T, string) {},
		},
		{
			name:     "blocks in both host:port directories",
			registry: "10.0.0.1:5000",
			setup: func(t *testing.T, certs string) {
				_, err := mirror.Install(certs, mirror.Mirror{Registry: "10.0.0.1:5000", Endpoint: agent})
				require.NoError(t, err)
				writeFile(t, hostsPath(certs, "10.0.0.1_5000_"), plainHTTP+agentBlock(agent))
			},
			changed: true,
			want:    map[string]string{"10.0.0.1_5000_/hosts.toml": plainHTTP},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			certs := t.TempDir()
			tc.setup(t, certs)
			changed, err := mirror.Uninstall(certs, tc.registry)
			require.NoError(t, err)
			require.Equal(t, tc.changed, changed)

			got := map[string]string{}
			require.NoError(t, filepath.WalkDir(certs, func(p string, d os.DirEntry, err error) error {
				require.NoError(t, err)
				if !d.IsDir() {
					rel, err := filepath.Rel(certs, p)
					require.NoError(t, err)
					got[rel] = readFile(t, p)
				}
				return nil
			}))
			want := tc.want
			if want == nil {
				want = map[string]string{}
			}
			require.Equal(t, want, got)
			if len(want) == 0 {
				entries, err := os.ReadDir(certs)
				require.NoError(t, err)
				require.Empty(t, entries, "the registry directory went with the file")
			}
			_, ok, err := mirror.Installed(certs, tc.registry)
			require.NoError(t, err)
			require.False(t, ok)

			changed, err = mirror.Uninstall(certs, tc.registry)
			require.NoError(t, err)
			require.False(t, changed, "a second uninstall has nothing to do")
		})
	}
}

func TestBrokenFiles(t *testing.T) {
	for _, tc := range []struct {
		name, data, errContains string
	}{
		{"begin without end", plainHTTP + mirror.BeginMarker + "\n[host.\"" + agent + "\"]\n", "BEGIN marker without END"},
		{"nested begin", mirror.BeginMarker + "\n" + agentBlock(agent), "BEGIN marker inside its block"},
		{"hosts as dotted keys", "server = \"https://r.example\"\nhost.\"https://m.example\".capabilities = [\"pull\"]\n", "top-level keys"},
		{"hosts as an inline table", "host = { \"https://m.example\" = { capabilities = [\"pull\"] } }\n", "top-level keys"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			certs := t.TempDir()
			path := hostsPath(certs, "docker.io")
			writeFile(t, path, tc.data)
			_, err := mirror.Install(certs, mirror.Mirror{Registry: "docker.io", Endpoint: agent})
			require.ErrorContains(t, err, tc.errContains)
			require.ErrorContains(t, err, path)
			require.Equal(t, tc.data, readFile(t, path), "left as it was")
		})
	}
	t.Run("block without host table", func(t *testing.T) {
		certs := t.TempDir()
		writeFile(t, hostsPath(certs, "docker.io"), mirror.BeginMarker+"\n"+mirror.EndMarker+"\n")
		_, _, err := mirror.Installed(certs, "docker.io")
		require.ErrorContains(t, err, "no host table")
	})
	t.Run("hosts.toml is a directory", func(t *testing.T) {
		certs := t.TempDir()
		require.NoError(t, os.MkdirAll(hostsPath(certs, "docker.io"), 0o755))
		_, err := mirror.Install(certs, mirror.Mirror{Registry: "docker.io", Endpoint: agent})
		require.ErrorContains(t, err, "not a regular file")
	})
}

func TestInvalidInputs(t *testing.T) {
	valid := mirror.Mirror{Registry: "docker.io", Endpoint: agent}
	for _, tc := range []struct {
		name  string
		edit  func(m *mirror.Mirror)
		field string
	}{
		{"empty registry", func(m *mirror.Mirror) { m.Registry = "" }, "Registry"},
		{"registry with a slash", func(m *mirror.Mirror) { m.Registry = "docker.io/library" }, "Registry"},
		{"registry with a backslash", func(m *mirror.Mirror) { m.Registry = `a\b` }, "Registry"},
		{"registry ..", func(m *mirror.Mirror) { m.Registry = ".." }, "Registry"},
		{"registry .", func(m *mirror.Mirror) { m.Registry = "." }, "Registry"},
		{"registry with a space", func(m *mirror.Mirror) { m.Registry = "docker io" }, "Registry"},
		{"empty endpoint", func(m *mirror.Mirror) { m.Endpoint = "" }, "Endpoint"},
		{"endpoint without scheme", func(m *mirror.Mirror) { m.Endpoint = "127.0.0.1:30021" }, "Endpoint"},
		{"endpoint ftp", func(m *mirror.Mirror) { m.Endpoint = "ftp://127.0.0.1:30021" }, "Endpoint"},
		{"endpoint relative", func(m *mirror.Mirror) { m.Endpoint = "/mirror" }, "Endpoint"},
		{"endpoint without host", func(m *mirror.Mirror) { m.Endpoint = "http://" }, "Endpoint"},
		{"endpoint with a quote", func(m *mirror.Mirror) { m.Endpoint = `http://127.0.0.1:30021/"x` }, "Endpoint"},
		{"endpoint with a query", func(m *mirror.Mirror) { m.Endpoint = "http://127.0.0.1:30021/?a=b" }, "Endpoint"},
		{"server not a URL", func(m *mirror.Mirror) { m.Server = "registry-1.docker.io" }, "Server"},
		{"negative dial timeout", func(m *mirror.Mirror) { m.DialTimeout = -time.Second }, "DialTimeout"},
		{"unknown capability", func(m *mirror.Mirror) { m.Capabilities = []string{"pull", "mirror"} }, "Capabilities"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			certs := t.TempDir()
			m := valid
			tc.edit(&m)
			changed, err := mirror.Install(certs, m)
			require.ErrorIs(t, err, mirror.ErrInvalid)
			require.ErrorContains(t, err, tc.field)
			require.False(t, changed)
			entries, err := os.ReadDir(certs)
			require.NoError(t, err)
			require.Empty(t, entries, "nothing written")
		})
	}
	t.Run("uninstall and installed check the registry", func(t *testing.T) {
		for _, r := range []string{"", "../etc", "a/b"} {
			_, err := mirror.Uninstall(t.TempDir(), r)
			require.ErrorIs(t, err, mirror.ErrInvalid)
			_, _, err = mirror.Installed(t.TempDir(), r)
			require.ErrorIs(t, err, mirror.ErrInvalid)
		}
	})
}
