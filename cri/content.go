package cri

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync/atomic"

	contentapi "github.com/containerd/containerd/api/services/content/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// containerdNamespaceHeader is the gRPC metadata key that carries the
// namespace of a containerd API call.
const containerdNamespaceHeader = "containerd-namespace"

// ContentStore reads committed blobs from containerd's content store, over
// containerd's own gRPC API (served on the same socket as its CRI), the
// way Spegel serves peers from it. Blobs stay there after a pull only while
// the CRI plugin's discard_unpacked_layers is false (see
// Runtime.RegistryConfig).
type ContentStore struct {
	namespace string
	conn      *grpc.ClientConn
	client    contentapi.ContentClient
}

// NewContentStore returns a ContentStore for the containerd at socketPath
// (a path, or a unix:// address) in namespace (default
// ContainerdNamespace, the CRI plugin's). It does not connect yet: the
// first call does.
func NewContentStore(socketPath, namespace string) (*ContentStore, error) {
	if socketPath == "" || socketPath == "unix://" {
		return nil, errors.New("containerd content store: socket path is empty")
	}
	target := socketPath
	if !strings.HasPrefix(target, "unix://") {
		target = "unix://" + target
	}
	if namespace == "" {
		namespace = ContainerdNamespace
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("containerd content store at %s: %w", target, err)
	}
	return &ContentStore{namespace: namespace, conn: conn, client: contentapi.NewContentClient(conn)}, nil
}

// Close closes the connection to containerd. Blobs opened from the store
// cannot be read afterwards.
func (c *ContentStore) Close() error {
	if err := c.conn.Close(); err != nil {
		return fmt.Errorf("close containerd content store: %w", err)
	}
	return nil
}

// withNamespace adds the store's containerd namespace to ctx's outgoing
// gRPC metadata.
func (c *ContentStore) withNamespace(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, containerdNamespaceHeader, c.namespace)
}

// contentErr wraps an error of the content service about digest; NotFound
// becomes an error matching fs.ErrNotExist.
func (c *ContentStore) contentErr(op, digest string, err error) error {
	if status.Code(err) == codes.NotFound {
		return fmt.Errorf("%s %s in containerd namespace %q: %w", op, digest, c.namespace, fs.ErrNotExist)
	}
	return fmt.Errorf("%s %s in containerd namespace %q: %w", op, digest, c.namespace, err)
}

// Has tells whether containerd has committed blob digest.
func (c *ContentStore) Has(ctx context.Context, digest string) (bool, error) {
	_, err := c.client.Info(c.withNamespace(ctx), &contentapi.InfoRequest{Digest: digest})
	switch {
	case err == nil:
		return true, nil
	case status.Code(err) == codes.NotFound:
		return false, nil
	default:
		return false, c.contentErr("content info of", digest, err)
	}
}

// Open returns committed blob digest for reading. When containerd does not
// have it, the error matches fs.ErrNotExist. The blob's reads are made
// under ctx: they fail once it ends.
func (c *ContentStore) Open(ctx context.Context, digest string) (*ContentBlob, error) {
	ctx = c.withNamespace(ctx)
	resp, err := c.client.Info(ctx, &contentapi.InfoRequest{Digest: digest})
	if err != nil {
		return nil, c.contentErr("content info of", digest, err)
	}
	return &ContentBlob{store: c, ctx: ctx, digest: digest, size: resp.GetInfo().GetSize()}, nil
}

// ContentIngest is a blob containerd is writing to its content store.
type ContentIngest struct {
	// Ref is the ingest's reference; containerd's pulls name the blob in
	// it, e.g. "layer-sha256:<hex>".
	Ref string
	// Offset is how many bytes of the blob are written.
	Offset int64
	// Total is the blob's expected size, 0 when unknown.
	Total int64
}

// Ingests lists the blobs containerd is writing in the store's namespace
// (the content service's ListStatuses).
func (c *ContentStore) Ingests(ctx context.Context) ([]ContentIngest, error) {
	resp, err := c.client.ListStatuses(c.withNamespace(ctx), &contentapi.ListStatusesRequest{})
	if err != nil {
		return nil, fmt.Errorf("list content ingests in containerd namespace %q: %w", c.namespace, err)
	}
	out := make([]ContentIngest, 0, len(resp.GetStatuses()))
	for _, st := range resp.GetStatuses() {
		out = append(out, ContentIngest{Ref: st.GetRef(), Offset: st.GetOffset(), Total: st.GetTotal()})
	}
	return out, nil
}

// ContentBlob is a committed blob of containerd's content store. It is an
// io.ReaderAt; each ReadAt is one Read call of the content service. It is
// safe for concurrent use.
type ContentBlob struct {
	store  *ContentStore
	ctx    context.Context // Open's, namespaced: ReadAt has none of its own
	digest string
	size   int64
	closed atomic.Bool
}

// Digest returns the blob's digest.
func (b *ContentBlob) Digest() string { return b.digest }

// Size returns the blob's size in bytes.
func (b *ContentBlob) Size() int64 { return b.size }

// Close releases the blob; later reads fail with fs.ErrClosed. It holds no
// resources of its own (the store's connection is shared).
func (b *ContentBlob) Close() error {
	b.closed.Store(true)
	return nil
}

// ReadAt implements io.ReaderAt: it reads len(p) bytes from off, or up to
// the end of the blob and then returns io.EOF. If the blob went from the
// store meanwhile, the error matches fs.ErrNotExist.
//
// containerd's content service (services/content/contentserver in 1.6,
// 1.7 and 2.x) streams the section in chunks whose Offset counts from the
// requested offset, not from the blob's start, and older
// versions fail a request reaching past the blob's end with OutOfRange; so
// the request is clamped to the blob and the chunks are taken in order,
// as containerd's own proxy reader does.
func (b *ContentBlob) ReadAt(p []byte, off int64) (int, error) {
	switch {
	case b.closed.Load():
		return 0, fmt.Errorf("read %s: %w", b.digest, fs.ErrClosed)
	case off < 0:
		return 0, fmt.Errorf("read %s at %d: negative offset", b.digest, off)
	case len(p) == 0:
		return 0, nil
	case off >= b.size:
		return 0, io.EOF
	}
	want := min(int64(len(p)), b.size-off)
	ctx, cancel := context.WithCancel(b.ctx) // ends the stream on an early return
	defer cancel()
	stream, err := b.store.client.Read(ctx, &contentapi.ReadContentRequest{Digest: b.digest, Offset: off, Size: want})
	if err != nil {
		return 0, b.store.contentErr("read", b.digest, err)
	}
	n := 0
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return n, b.store.contentErr("read", b.digest, err)
		}
		data := resp.GetData()
		if int64(n)+int64(len(data)) > want {
			return n, fmt.Errorf("read %s at %d: containerd sent more than the %d bytes asked for", b.digest, off, want)
		}
		n += copy(p[n:], data)
	}
	if int64(n) < want {
		return n, fmt.Errorf("read %s at %d: got %d of %d bytes: %w", b.digest, off, n, want, io.ErrUnexpectedEOF)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// RegistryConfig is what the agent needs to know about containerd's CRI
// registry settings.
type RegistryConfig struct {
	// ConfigPath is the CRI plugin's registry config_path: the directory
	// of the per-registry hosts.toml files (containerd splits it with
	// filepath.SplitList, so it may list several). Empty: unset, and
	// hosts.toml files are not read.
	ConfigPath string
	// DiscardUnpackedLayers is the CRI plugin's discard_unpacked_layers:
	// when true, containerd lets GC drop layer blobs once unpacked, and the
	// agent cannot serve them from its content store.
	DiscardUnpackedLayers bool
	// Known is false when the runtime did not tell these settings (not
	// containerd, or a containerd whose CRI Status does not carry them,
	// such as 2.x, where they moved to the images plugin); the other
	// fields are then zero.
	Known bool
}

// criConfig is the part of containerd's CRI config the agent reads, as
// containerd 1.6/1.7 put it, JSON-encoded, under the "config" key of a
// verbose CRI Status (pkg/cri/server/status.go): pkg/cri/config/config.go
// has Config embed PluginConfig, whose ContainerdConfig is tagged
// json:"containerd" with DiscardUnpackedLayers json:"discardUnpackedLayers",
// and whose Registry is json:"registry" with ConfigPath json:"configPath".
type criConfig struct {
	Containerd *struct {
		DiscardUnpackedLayers *bool `json:"discardUnpackedLayers"`
	} `json:"containerd"`
	Registry *struct {
		ConfigPath *string `json:"configPath"`
	} `json:"registry"`
}

// RegistryConfig asks containerd (a verbose CRI Status) for its CRI
// registry settings. For other runtimes it returns a RegistryConfig that
// is not Known, without asking.
func (r *Runtime) RegistryConfig(ctx context.Context) (RegistryConfig, error) {
	if r.name != RuntimeContainerd {
		return RegistryConfig{}, nil
	}
	resp, err := r.rs.Status(ctx, true)
	if err != nil {
		return RegistryConfig{}, fmt.Errorf("CRI Status from %s: %w", r.endpoint.Address, err)
	}
	raw, ok := resp.GetInfo()["config"]
	if !ok {
		return RegistryConfig{}, nil
	}
	var c criConfig
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		return RegistryConfig{}, fmt.Errorf("parse the CRI config in the Status of %s: %w", r.endpoint.Address, err)
	}
	if c.Containerd == nil || c.Containerd.DiscardUnpackedLayers == nil || c.Registry == nil || c.Registry.ConfigPath == nil {
		return RegistryConfig{}, nil
	}
	return RegistryConfig{
		ConfigPath:            *c.Registry.ConfigPath,
		DiscardUnpackedLayers: *c.Containerd.DiscardUnpackedLayers,
		Known:                 true,
	}, nil
}
