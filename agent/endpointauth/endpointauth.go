// Package endpointauth guards the agent's own HTTP endpoints that show
// what runs on its node (/inventory, /mesh, /debug/pprof/) the way kubelet
// guards its API: a client sends a Kubernetes bearer token, the token is
// reviewed (TokenReview) and its user must be allowed to get the path, a
// non-resource URL (SubjectAccessReview). A ClusterRole rule such as
//
//	nonResourceURLs: ["/inventory", "/mesh"]
//	verbs: ["get"]
//
// grants it; deploy/rbac.yaml ships one, shoal-agent-endpoints-reader.
//
// The agent has no Kubernetes API access of its own: the reviews go to the
// coordinator over the node-work connection (Reviewer). Decisions are
// cached for a while, so a client polling an endpoint costs one review per
// TTL; while the coordinator is away the cached decisions still hold and
// new tokens get 503.
package endpointauth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Decision is a review's answer.
type Decision struct {
	// Authenticated is true when the apiserver accepted the token.
	Authenticated bool
	// Allowed is true when the token's user may get the path.
	Allowed bool
	// User is the token's username, when authenticated.
	User string
	// Reason explains a refusal; it is sent to the client.
	Reason string
}

// Reviewer decides whether token may use verb on path. An error means no
// decision could be made (the coordinator is unreachable); it is not
// cached.
type Reviewer interface {
	Review(ctx context.Context, token, verb, path string) (Decision, error)
}

// ReviewerFunc adapts a function to Reviewer.
type ReviewerFunc func(ctx context.Context, token, verb, path string) (Decision, error)

// Review implements Reviewer.
func (f ReviewerFunc) Review(ctx context.Context, token, verb, path string) (Decision, error) {
	return f(ctx, token, verb, path)
}

// Defaults of the Guard's optional fields, as kubelet's webhook
// authorizer caches (allowed longer than denied).
const (
	DefaultAllowTTL  = time.Minute
	DefaultDenyTTL   = 10 * time.Second
	DefaultCacheSize = 1024
	// reviewTimeout bounds one review.
	reviewTimeout = 5 * time.Second
)

// Guard puts a bearer-token check in front of handlers. Set the exported
// fields before the first request; it is then safe for concurrent use.
type Guard struct {
	// Reviewer makes the decisions. Required.
	Reviewer Reviewer
	// AllowTTL and DenyTTL are how long an allowed and a refused decision
	// are reused (zero: the defaults).
	AllowTTL, DenyTTL time.Duration
	// CacheSize bounds the cached decisions (zero: DefaultCacheSize).
	CacheSize int
	// Clock tells the time for the cache; nil means the real clock.
	Clock clock.PassiveClock
	// Registerer receives the guard's metric (nil: not registered).
	Registerer prometheus.Registerer

	once     sync.Once
	requests *prometheus.CounterVec
	mu       sync.Mutex
	cache    map[cacheKey]cacheEntry
}

type cacheKey struct {
	token      [sha256.Size]byte
	verb, path string
}

type cacheEntry struct {
	d       Decision
	expires time.Time
}

func (g *Guard) init() {
	g.once.Do(func() {
		g.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shoal_agent_endpoint_requests_total",
			Help: "Requests to the agent's guarded endpoints (/inventory, /mesh, /debug/pprof/) by answer: allowed, unauthenticated (401), forbidden (403), unavailable (503: no review possible).",
		}, []string{"result"})
		for _, r := range []string{"allowed", "unauthenticated", "forbidden", "unavailable"} {
			g.requests.WithLabelValues(r)
		}
		if g.Registerer != nil {
			g.Registerer.MustRegister(g.requests)
		}
		g.cache = map[cacheKey]cacheEntry{}
	})
}

// Protect returns h behind the check: 401 without a valid token, 403 when
// its user may not get the path, 503 when no review can be made now.
func (g *Guard) Protect(h http.Handler) http.Handler {
	g.init()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		verb := "get"
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "only GET is served here", http.StatusMethodNotAllowed)
			return
		}
		token, ok := bearer(r)
		if !ok {
			g.refuse(w, http.StatusUnauthorized, "unauthenticated",
				"send a Kubernetes bearer token (Authorization: Bearer ...), for example of a ServiceAccount bound to the ClusterRole shoal-agent-endpoints-reader: kubectl create token NAME")
			return
		}
		d, err := g.decide(r.Context(), token, verb, r.URL.Path)
		switch {
		case err != nil:
			klog.FromContext(r.Context()).V(2).Info("Endpoint access review failed", "path", r.URL.Path, "err", err)
			w.Header().Set("Retry-After", "5")
			g.refuse(w, http.StatusServiceUnavailable, "unavailable", "cannot review the token now: "+err.Error())
		case !d.Authenticated:
			g.refuse(w, http.StatusUnauthorized, "unauthenticated", "token not accepted: "+d.Reason)
		case !d.Allowed:
			g.refuse(w, http.StatusForbidden, "forbidden", d.Reason)
		default:
			g.requests.WithLabelValues("allowed").Inc()
			h.ServeHTTP(w, r)
		}
	})
}

func (g *Guard) refuse(w http.ResponseWriter, code int, result, msg string) {
	g.requests.WithLabelValues(result).Inc()
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="shoal-agent"`)
	}
	http.Error(w, fmt.Sprintf("%s: %s", http.StatusText(code), msg), code)
}

// bearer returns the request's bearer token.
func bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	token = strings.TrimSpace(token)
	return token, ok && strings.EqualFold(scheme, "Bearer") && token != ""
}

// decide returns the cached decision or asks the Reviewer.
func (g *Guard) decide(ctx context.Context, token, verb, path string) (Decision, error) {
	key := cacheKey{token: sha256.Sum256([]byte(token)), verb: verb, path: path}
	now := g.now()
	g.mu.Lock()
	e, ok := g.cache[key]
	if ok && !now.Before(e.expires) {
		delete(g.cache, key)
		ok = false
	}
	g.mu.Unlock()
	if ok {
		return e.d, nil
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	d, err := g.Reviewer.Review(ctx, token, verb, path)
	if err != nil {
		return Decision{}, err
	}
	ttl := g.ttl(g.DenyTTL, DefaultDenyTTL)
	if d.Allowed {
		ttl = g.ttl(g.AllowTTL, DefaultAllowTTL)
	}
	g.store(key, cacheEntry{d: d, expires: now.Add(ttl)}, now)
	return d, nil
}

// store caches a decision; a full cache first drops expired entries, then
// an arbitrary one.
func (g *Guard) store(key cacheKey, e cacheEntry, now time.Time) {
	size := g.CacheSize
	if size <= 0 {
		size = DefaultCacheSize
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.cache[key]; !ok && len(g.cache) >= size {
		for k, old := range g.cache {
			if !now.Before(old.expires) {
				delete(g.cache, k)
			}
		}
		for k := range g.cache {
			if len(g.cache) < size {
				break
			}
			delete(g.cache, k)
		}
	}
	g.cache[key] = e
}

func (g *Guard) ttl(set, def time.Duration) time.Duration {
	if set > 0 {
		return set
	}
	return def
}

func (g *Guard) now() time.Time {
	if g.Clock == nil {
		return time.Now()
	}
	return g.Clock.Now()
}
