package tracker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/shoal-io/shoal/imagewarm/placement"
)

// Client defaults.
const (
	// DefaultTimeout bounds one RPC to one tracker.
	DefaultTimeout = 2 * time.Second
	// announceParallelism is how many trackers a re-announce round talks
	// to at once.
	announceParallelism = 8
)

// ErrNoTrackers is returned when the membership has no member that can act
// as a tracker.
var ErrNoTrackers = errors.New("no live members to act as trackers")

// Holding is a blob this node holds, whole or in part, as the store
// reports it for re-announcement.
type Holding struct {
	// Digest is the blob's digest.
	Digest string
	// Complete says the whole blob is present and verified.
	Complete bool
	// Size is the blob's size; required when not Complete.
	Size int64
	// PieceSize is the piece size; required when not Complete.
	PieceSize int64
	// Pieces are the pieces present when not Complete.
	Pieces Bitmap
	// Leased says this node is fetching the blob from upstream under a
	// lease (see Announcement.Leased).
	Leased bool
}

// Holdings lists what this node holds; the store implements it.
type Holdings interface {
	// Holdings returns every blob to announce.
	Holdings() []Holding
}

// HoldingsFunc adapts a function to Holdings.
type HoldingsFunc func() []Holding

// Holdings calls f.
func (f HoldingsFunc) Holdings() []Holding { return f() }

// ClientConfig configures a Client.
type ClientConfig struct {
	// Self is this node: Name and Endpoint are required, Zone is used to
	// prefer nearby holders.
	Self placement.Member
	// Members lists the live members trackers are chosen from. Required.
	Members Membership
	// Holdings is what Run re-announces; nil announces nothing.
	Holdings Holdings
	// Local is this node's own Tracker: calls that land on this node skip
	// HTTP. Optional.
	Local *Tracker
	// Replicas is k, the trackers per digest (placement.DefaultReplicas).
	Replicas int
	// HTTPClient sends the RPCs (a plain http.Client when nil).
	HTTPClient *http.Client
	// Scheme is the URL scheme of the trackers' endpoints ("http").
	Scheme string
	// PathPrefix is where trackers mount Handler (DefaultPathPrefix).
	PathPrefix string
	// Timeout bounds one RPC to one tracker (DefaultTimeout).
	Timeout time.Duration
	// AnnounceInterval is the re-announce period of Run
	// (DefaultAnnounceInterval); trackers expire holdings after about
	// three of them.
	AnnounceInterval time.Duration
	// Clock is the time source (the real clock when nil).
	Clock clock.WithTicker
	// Registerer receives the client metrics; nil registers none.
	Registerer prometheus.Registerer
	// Logger receives the client's messages (klog.Background() when zero).
	Logger klog.Logger
}

// Client is a node's side of the trackers: it announces and withdraws
// holdings, takes and gives back upstream leases, publishes piece hashes
// and looks holders up, each time at the digest's k trackers chosen by
// rendezvous hashing over the current members. Its methods are safe for
// concurrent use.
//
// Announcements, withdrawals, lease releases and piece hashes go to all k
// trackers (success when at least one accepts); lookups ask all k and
// merge. A lease is asked of the trackers in rendezvous order and the
// first one that answers decides; see the package documentation for why
// that is enough.
type Client struct {
	cfg  ClientConfig
	clk  clock.WithTicker
	log  klog.Logger
	http *http.Client
	met  *clientMetrics
}

// NewClient validates cfg and returns a Client.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.Self.Name == "" || cfg.Self.Endpoint == "" {
		return nil, errors.New("tracker client: Self needs a name and an endpoint")
	}
	if cfg.Members == nil {
		return nil, errors.New("tracker client: Members is required")
	}
	if cfg.Replicas < 0 || cfg.Timeout < 0 || cfg.AnnounceInterval < 0 {
		return nil, errors.New("tracker client: negative replicas, timeout or interval")
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = placement.DefaultReplicas
	}
	if cfg.Scheme == "" {
		cfg.Scheme = "http"
	}
	if cfg.PathPrefix == "" {
		cfg.PathPrefix = DefaultPathPrefix
	}
	cfg.PathPrefix = "/" + strings.Trim(cfg.PathPrefix, "/")
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.AnnounceInterval == 0 {
		cfg.AnnounceInterval = DefaultAnnounceInterval
	}
	c := &Client{cfg: cfg, clk: cfg.Clock, log: cfg.Logger, http: cfg.HTTPClient}
	if c.clk == nil {
		c.clk = clock.RealClock{}
	}
	if c.log.GetSink() == nil {
		c.log = klog.Background()
	}
	c.log = c.log.WithName("tracker-client")
	if c.http == nil {
		c.http = &http.Client{}
	}
	met, err := newClientMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("tracker client: %w", err)
	}
	c.met = met
	return c, nil
}

// Trackers returns digest's trackers under the current membership, in
// rendezvous order.
func (c *Client) Trackers(digest string) []placement.Member {
	return placement.Trackers(digest, c.cfg.Members.Members(), c.cfg.Replicas)
}

// announcement turns a holding of this node, read at readAt, into an
// announcement.
func (c *Client) announcement(h Holding, readAt time.Time) Announcement {
	a := Announcement{
		ReadAt:   readAt.UnixNano(),
		Digest:   h.Digest,
		Node:     c.cfg.Self.Name,
		Endpoint: c.cfg.Self.Endpoint,
		Zone:     c.cfg.Self.Zone,
		Complete: h.Complete,
		Size:     h.Size,
	}
	if !h.Complete {
		a.PieceSize = h.PieceSize
		a.Pieces = h.Pieces
		a.Leased = h.Leased
	}
	return a
}

// Announce tells digest's trackers that this node holds h, read no
// earlier than the call. It succeeds when at least one tracker recorded it.
func (c *Client) Announce(ctx context.Context, h Holding) error {
	a := c.announcement(h, time.Now())
	if err := a.Validate(); err != nil {
		return fmt.Errorf("announcing %s: %w", h.Digest, err)
	}
	return c.toAll(ctx, h.Digest, "announcing", func(ctx context.Context, m placement.Member) error {
		return c.announceBatch(ctx, m, []Announcement{a})
	})
}

// announceBatch sends announcements to one tracker; a tracker that
// rejected any of them as full counts as failed.
func (c *Client) announceBatch(ctx context.Context, m placement.Member, as []Announcement) error {
	resp, err := call(ctx, c, m, opAnnounce, PathAnnounce, AnnounceRequest{Announcements: as}, func(t *Tracker) (AnnounceResponse, error) {
		var r AnnounceResponse
		for _, a := range as {
			if err := t.Announce(a); err != nil {
				if !errors.Is(err, ErrFull) {
					return r, err
				}
				r.Rejected++
				continue
			}
			r.Accepted++
		}
		return r, nil
	})
	if err == nil && resp.Rejected > 0 {
		err = fmt.Errorf("tracker %s rejected %d of %d announcements: %w", m.Name, resp.Rejected, len(as), ErrFull)
	}
	return err
}

// Withdraw tells the trackers of each digest that this node no longer
// holds it. It succeeds when every digest reached at least one tracker.
func (c *Client) Withdraw(ctx context.Context, digests ...string) error {
	var errs []error
	for _, d := range digests {
		req := WithdrawRequest{Node: c.cfg.Self.Name, Digests: []string{d}}
		if err := req.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("withdrawing %s: %w", d, err))
			continue
		}
		err := c.toAll(ctx, d, "withdrawing", func(ctx context.Context, m placement.Member) error {
			_, err := call(ctx, c, m, opWithdraw, PathWithdraw, req, func(t *Tracker) (struct{}, error) {
				t.Withdraw(d, req.Node)
				return struct{}{}, nil
			})
			return err
		})
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// AcquireLease asks for an upstream lease on digest. The trackers are
// asked in rendezvous order and the first that answers decides: it is the
// lease authority while it is alive and the membership agrees on it; the
// next ones are fallbacks that know nothing of leases the first granted.
// req.Node is set to this node.
func (c *Client) AcquireLease(ctx context.Context, req LeaseRequest) (LeaseGrant, error) {
	req.Node = c.cfg.Self.Name
	digest := req.Digest
	if err := req.Validate(); err != nil {
		return LeaseGrant{}, fmt.Errorf("acquiring upstream lease on %s: %w", digest, err)
	}
	trackers := c.Trackers(digest)
	if len(trackers) == 0 {
		return LeaseGrant{}, fmt.Errorf("acquiring upstream lease on %s: %w", digest, ErrNoTrackers)
	}
	var errs []error
	for _, m := range trackers {
		g, err := call(ctx, c, m, opAcquire, PathLeaseAcquire, req, func(t *Tracker) (LeaseGrant, error) {
			return t.AcquireLease(req)
		})
		if err == nil {
			return g, nil
		}
		errs = append(errs, err)
		if errors.Is(err, ErrInvalid) || ctx.Err() != nil {
			break
		}
	}
	return LeaseGrant{}, fmt.Errorf("acquiring upstream lease on %s: %w", digest, errors.Join(errs...))
}

// ReleaseLease gives this node's lease on digest back, at every tracker
// (the authority may have changed since the grant).
func (c *Client) ReleaseLease(ctx context.Context, digest string) error {
	req := LeaseRequest{Digest: digest, Node: c.cfg.Self.Name}
	if err := req.Validate(); err != nil {
		return fmt.Errorf("releasing upstream lease on %s: %w", digest, err)
	}
	return c.toAll(ctx, digest, "releasing upstream lease on", func(ctx context.Context, m placement.Member) error {
		_, err := call(ctx, c, m, opRelease, PathLeaseRelease, req, func(t *Tracker) (struct{}, error) {
			t.ReleaseLease(req.Digest, req.Node)
			return struct{}{}, nil
		})
		return err
	})
}

// PublishPieceHashes publishes digest's piece hashes, which this node
// computed while verifying the whole blob, to the digest's trackers.
func (c *Client) PublishPieceHashes(ctx context.Context, digest string, p PieceHashes) error {
	p.Publisher = c.cfg.Self.Name
	req := PublishRequest{Digest: digest, Hashes: p}
	if err := req.Validate(); err != nil {
		return fmt.Errorf("publishing piece hashes of %s: %w", digest, err)
	}
	return c.toAll(ctx, digest, "publishing piece hashes of", func(ctx context.Context, m placement.Member) error {
		_, err := call(ctx, c, m, opPublish, PathPieceHashes, req, func(t *Tracker) (struct{}, error) {
			return struct{}{}, t.PublishPieceHashes(req.Digest, req.Hashes)
		})
		return err
	})
}

// LookupOptions tune a lookup.
type LookupOptions struct {
	// Limit caps the holders returned (DefaultMaxHandout when 0).
	Limit int
	// PieceHashes asks for the blob's piece hashes.
	PieceHashes bool
}

// Lookup asks all of digest's trackers who holds it and merges the
// answers: the union of the holders (one entry per node, the most complete
// and most recent), complete ones first, then this node's zone, shuffled
// within, capped; the lease state and piece hashes of the first tracker
// in rendezvous order that answered. It fails only when no tracker
// answered.
func (c *Client) Lookup(ctx context.Context, digest string, opts LookupOptions) (LookupResult, error) {
	req := LookupRequest{Digest: digest, Node: c.cfg.Self.Name, Zone: c.cfg.Self.Zone, Limit: opts.Limit, PieceHashes: opts.PieceHashes}
	if err := req.Validate(); err != nil {
		return LookupResult{}, fmt.Errorf("looking up %s: %w", digest, err)
	}
	trackers := c.Trackers(digest)
	if len(trackers) == 0 {
		return LookupResult{}, fmt.Errorf("looking up %s: %w", digest, ErrNoTrackers)
	}
	results := make([]*LookupResult, len(trackers))
	errs := c.fanout(ctx, trackers, func(ctx context.Context, i int, m placement.Member) error {
		r, err := call(ctx, c, m, opLookup, PathLookup, req, func(t *Tracker) (LookupResult, error) { return t.Lookup(req) })
		if err == nil {
			results[i] = &r
		}
		return err
	})
	limit := opts.Limit
	if limit <= 0 {
		limit = DefaultMaxHandout
	}
	merged, ok := mergeLookups(results, c.cfg.Self.Zone, limit)
	if !ok {
		return LookupResult{}, fmt.Errorf("looking up %s: no tracker answered: %w", digest, errors.Join(errs...))
	}
	if err := errors.Join(errs...); err != nil {
		c.log.V(2).Info("Some trackers did not answer a lookup", "digest", digest, "err", err)
	}
	return merged, nil
}

// mergeLookups merges the answers of a digest's trackers (nil for those
// that did not answer), in rendezvous order. It reports false when none
// answered.
func mergeLookups(results []*LookupResult, zone string, limit int) (LookupResult, bool) {
	var out LookupResult
	answered := false
	byNode := map[string]int{}
	var all []Holder
	for _, r := range results {
		if r == nil {
			continue
		}
		if !answered {
			out.Lease = r.Lease
			out.PieceHashes = r.PieceHashes
			answered = true
		}
		if out.PieceHashes == nil {
			out.PieceHashes = r.PieceHashes
		}
		out.Complete = max(out.Complete, r.Complete)
		out.Partial = max(out.Partial, r.Partial)
		for _, h := range r.Holders {
			i, seen := byNode[h.Node]
			if !seen {
				byNode[h.Node] = len(all)
				all = append(all, h)
				continue
			}
			if preferHolder(h, all[i]) {
				all[i] = h
			}
		}
	}
	if !answered {
		return out, false
	}
	var tiers [4][]Holder
	for _, h := range all {
		tier := 0
		if !h.Complete {
			tier = 2
		}
		if zone == "" || h.Zone != zone {
			tier++
		}
		tiers[tier] = append(tiers[tier], h)
	}
	complete, partial := len(tiers[0])+len(tiers[1]), len(tiers[2])+len(tiers[3])
	out.Complete = max(out.Complete, complete)
	out.Partial = max(out.Partial, partial)
	for _, tier := range tiers {
		rand.Shuffle(len(tier), func(i, j int) { tier[i], tier[j] = tier[j], tier[i] })
		for _, h := range tier {
			if len(out.Holders) == limit {
				break
			}
			out.Holders = append(out.Holders, h)
		}
	}
	return out, true
}

// preferHolder reports whether a describes a node's holding better than b:
// complete beats partial, then the more recent announcement, then more
// pieces.
func preferHolder(a, b Holder) bool {
	if a.Complete != b.Complete {
		return a.Complete
	}
	if !a.LastAnnounce.Equal(b.LastAnnounce) {
		return a.LastAnnounce.After(b.LastAnnounce)
	}
	return a.Pieces.Count() > b.Pieces.Count()
}

// AnnounceAll re-announces every holding once, in batches per tracker (a
// tracker hears about all the digests it tracks for this node in a few
// requests). It returns an error naming the trackers that could not be
// reached; the others are announced to regardless.
func (c *Client) AnnounceAll(ctx context.Context) error {
	if c.cfg.Holdings == nil {
		return nil
	}
	readAt := time.Now()
	holdings := c.cfg.Holdings.Holdings()
	if len(holdings) == 0 {
		return nil
	}
	view := placement.NewView(c.cfg.Members.Members())
	if view.Len() == 0 {
		return fmt.Errorf("re-announcing %d holdings: %w", len(holdings), ErrNoTrackers)
	}
	batches := map[string][]Announcement{}
	members := map[string]placement.Member{}
	skipped := 0
	for _, h := range holdings {
		a := c.announcement(h, readAt)
		if err := a.Validate(); err != nil {
			skipped++
			c.log.V(1).Info("Not announcing an invalid holding", "digest", h.Digest, "err", err)
			continue
		}
		for _, m := range view.Trackers(h.Digest, c.cfg.Replicas) {
			members[m.Name] = m
			batches[m.Name] = append(batches[m.Name], a)
		}
	}
	type job struct {
		m  placement.Member
		as []Announcement
	}
	var jobs []job
	for name, as := range batches {
		for len(as) > 0 {
			n := min(len(as), MaxBatch)
			jobs = append(jobs, job{m: members[name], as: as[:n]})
			as = as[n:]
		}
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed []error
		sem    = make(chan struct{}, announceParallelism)
	)
	for _, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := c.announceBatch(ctx, j.m, j.as); err != nil {
				mu.Lock()
				failed = append(failed, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	c.log.V(3).Info("Re-announced holdings", "holdings", len(holdings), "skipped", skipped, "trackers", len(batches), "requests", len(jobs), "failed", len(failed))
	if len(failed) > 0 {
		return fmt.Errorf("re-announcing %d holdings: %d of %d requests failed: %w", len(holdings), len(failed), len(jobs), errors.Join(failed...))
	}
	return nil
}

// announceRetry is the wait after a re-announcement round that failed in
// part; it doubles with each failed round, up to the announce interval.
const announceRetry = time.Second

// Run re-announces every holding right away and then every announce
// interval (with ±10% jitter, so that nodes started together spread out)
// until ctx is done. Failed rounds are logged and retried after
// announceRetry, doubling.
func (c *Client) Run(ctx context.Context) error {
	retry := announceRetry
	for {
		jitter := time.Duration((rand.Float64()*0.2 - 0.1) * float64(c.cfg.AnnounceInterval))
		wait := c.cfg.AnnounceInterval + jitter
		if err := c.AnnounceAll(ctx); err != nil && ctx.Err() == nil {
			c.log.Info("Re-announcing holdings to trackers failed in part", "err", err, "retryIn", min(retry, wait))
			// A node that started before the mesh formed would otherwise
			// stay unknown to the swarm for a whole interval.
			wait = min(retry, wait)
			retry = min(2*retry, c.cfg.AnnounceInterval)
		} else {
			retry = announceRetry
		}
		timer := c.clk.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C():
		}
	}
}

// toAll runs fn against each of digest's trackers in parallel and succeeds
// when at least one call did.
func (c *Client) toAll(ctx context.Context, digest, what string, fn func(context.Context, placement.Member) error) error {
	trackers := c.Trackers(digest)
	if len(trackers) == 0 {
		return fmt.Errorf("%s %s: %w", what, digest, ErrNoTrackers)
	}
	errs := c.fanout(ctx, trackers, func(ctx context.Context, _ int, m placement.Member) error { return fn(ctx, m) })
	if len(errs) == len(trackers) {
		return fmt.Errorf("%s %s: no tracker accepted: %w", what, digest, errors.Join(errs...))
	}
	if len(errs) > 0 {
		c.log.V(2).Info("Some trackers did not accept", "op", what, "digest", digest, "err", errors.Join(errs...))
	}
	return nil
}

// fanout calls fn for every tracker in parallel and returns the errors.
func (c *Client) fanout(ctx context.Context, trackers []placement.Member, fn func(context.Context, int, placement.Member) error) []error {
	errs := make([]error, len(trackers))
	var wg sync.WaitGroup
	for i, m := range trackers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(ctx, i, m)
		}()
	}
	wg.Wait()
	return slices.DeleteFunc(errs, func(err error) bool { return err == nil })
}

// call runs one RPC against tracker m: in process when m is this node and
// a local Tracker is configured, over HTTP otherwise, within the per-call
// timeout. It counts the result.
func call[Resp any](ctx context.Context, c *Client, m placement.Member, op, path string, req any, local func(*Tracker) (Resp, error)) (Resp, error) {
	var resp Resp
	var err error
	if c.cfg.Local != nil && m.Name == c.cfg.Self.Name {
		resp, err = local(c.cfg.Local)
	} else {
		ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
		defer cancel()
		err = c.post(ctx, m, path, req, &resp)
	}
	result := resultOK
	if err != nil {
		result = resultOf(err)
		err = fmt.Errorf("tracker %s (%s) %s: %w", m.Name, m.Endpoint, op, err)
	}
	c.met.rpcs.WithLabelValues(op, result).Inc()
	return resp, err
}

// post sends one JSON request and decodes the JSON answer into resp.
func (c *Client) post(ctx context.Context, m placement.Member, path string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encoding request: %w", err)
	}
	url := c.cfg.Scheme + "://" + m.Endpoint + c.cfg.PathPrefix + path
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("building request: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hresp, err := c.http.Do(hreq)
	if err != nil {
		return fmt.Errorf("sending request: %w", err)
	}
	lr := io.LimitReader(hresp.Body, MaxResponseBytes)
	defer func() {
		// Read to the end (a JSON value's trailing newline, a chunked
		// body's last chunk) so that the connection is kept for the next
		// call: closing an unfinished body closes the connection, and every
		// call would dial anew.
		_, _ = io.Copy(io.Discard, lr)
		_ = hresp.Body.Close()
	}()
	if hresp.StatusCode/100 != 2 {
		var eb errorBody
		_ = json.NewDecoder(lr).Decode(&eb)
		return statusError(hresp.StatusCode, eb.Error)
	}
	if hresp.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.NewDecoder(lr).Decode(resp); err != nil {
		return fmt.Errorf("decoding response: %w", err)
	}
	return nil
}

// statusError turns an error response back into the tracker's error.
func statusError(status int, msg string) error {
	var sentinel error
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		sentinel = ErrInvalid
	case http.StatusServiceUnavailable:
		sentinel = ErrFull
	case http.StatusConflict:
		sentinel = ErrConflict
	default:
		return fmt.Errorf("HTTP %d: %s", status, msg)
	}
	return fmt.Errorf("%w (HTTP %d: %s)", sentinel, status, msg)
}

// resultOf classifies a failed call for the metrics.
func resultOf(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return resultTimeout
	case errors.Is(err, ErrInvalid):
		return resultInvalid
	case errors.Is(err, ErrFull):
		return resultFull
	case errors.Is(err, ErrConflict):
		return resultConflict
	default:
		return resultError
	}
}
