// Package auth authenticates the node agents that open a node-work stream
// to the coordinator.
//
// An agent presents its projected ServiceAccount token (audience
// "shoal-coordinator", backbone.md) as a bearer token in the stream's gRPC
// metadata. The coordinator checks it with a TokenReview and requires a
// token of the agent ServiceAccount that is bound to a pod: the
// apiserver then reports the pod and the node that pod runs on (the
// ServiceAccountTokenPodNodeInfo feature, GA and locked on since
// Kubernetes 1.32) in the user's extra fields. The stream is bound to that
// node: CheckNode refuses an agent that claims to be another node.
package auth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"google.golang.org/grpc/metadata"
)

// Keys of the user's extra fields that the apiserver fills in for a
// pod-bound ServiceAccount token (k8s.io/apiserver/pkg/authentication/
// serviceaccount).
const (
	ExtraPodName  = "authentication.kubernetes.io/pod-name"
	ExtraPodUID   = "authentication.kubernetes.io/pod-uid"
	ExtraNodeName = "authentication.kubernetes.io/node-name"
)

// Defaults of the Authenticator's optional fields.
const (
	// DefaultCacheTTL is how long a successful review is reused.
	DefaultCacheTTL = time.Minute
	// DefaultCacheSize bounds the number of cached reviews.
	DefaultCacheSize = 4096
)

// serviceAccountUserPrefix starts the username of every ServiceAccount.
const serviceAccountUserPrefix = "system:serviceaccount:"

var (
	// ErrUnauthenticated is wrapped by every error that refuses a missing,
	// malformed, invalid or expired token, or one of another audience. A
	// gRPC server answers it with codes.Unauthenticated.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrForbidden is wrapped by every error that refuses a valid token that
	// may not open a node stream: another ServiceAccount, a token that is
	// not bound to a pod or whose pod has no node, or an agent claiming a
	// node that is not its own. A gRPC server answers it with
	// codes.PermissionDenied.
	ErrForbidden = errors.New("forbidden")
)

// Identity is an authenticated agent: its ServiceAccount user and the pod
// and node its token is bound to.
type Identity struct {
	// Username is "system:serviceaccount:<namespace>:<name>".
	Username string
	// NodeName is the node the token's pod runs on.
	NodeName string
	// PodName is the name of the pod the token is bound to.
	PodName string
	// PodUID is the UID of the pod the token is bound to.
	PodUID string
}

// Authenticator checks agent tokens with the TokenReview API and caches
// the successful reviews. Set the exported fields before the first call;
// it is then safe for concurrent use.
type Authenticator struct {
	// Client sends the TokenReviews; it needs create on
	// tokenreviews.authentication.k8s.io.
	Client kubernetes.Interface
	// Audience is the audience the agents' tokens must carry.
	Audience string
	// ServiceAccount is the agents' ServiceAccount, "namespace:name".
	ServiceAccount string
	// Clock tells the time for the cache; nil means the real clock.
	Clock clock.PassiveClock
	// CacheTTL is how long a successful review is reused, at most until
	// the token expires; zero means DefaultCacheTTL, a negative value
	// turns the cache off.
	CacheTTL time.Duration
	// CacheSize bounds the number of cached reviews; zero means
	// DefaultCacheSize.
	CacheSize int

	mu    sync.Mutex
	cache map[[sha256.Size]byte]cacheEntry
}

type cacheEntry struct {
	id      Identity
	expires time.Time
}

// Authenticate reviews token and returns the identity of the agent it
// belongs to. A refused token gives an error wrapping ErrUnauthenticated
// or ErrForbidden with the reason; any other error (the apiserver could not
// be asked, a misconfigured Authenticator) wraps neither and may be
// retried.
func (a *Authenticator) Authenticate(ctx context.Context, token string) (Identity, error) {
	if token == "" {
		return Identity{}, fmt.Errorf("%w: no token", ErrUnauthenticated)
	}
	wantUser, err := a.config()
	if err != nil {
		return Identity{}, err
	}
	key := sha256.Sum256([]byte(token))
	now := a.now()
	if id, ok := a.lookup(key, now); ok {
		return id, nil
	}

	review, err := a.Client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{a.Audience}},
	}, metav1.CreateOptions{})
	if err != nil {
		return Identity{}, fmt.Errorf("token review: %w", err)
	}
	id, err := a.check(&review.Status, wantUser)
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Agent token refused", "err", err)
		return Identity{}, err
	}
	a.store(key, id, now, a.cacheUntil(token, now))
	return id, nil
}

// check turns a TokenReview's status into an Identity, or refuses it.
func (a *Authenticator) check(st *authenticationv1.TokenReviewStatus, wantUser string) (Identity, error) {
	if !st.Authenticated {
		reason := st.Error
		if reason == "" {
			reason = "token not authenticated"
		}
		return Identity{}, fmt.Errorf("%w: %s", ErrUnauthenticated, reason)
	}
	if !slices.Contains(st.Audiences, a.Audience) {
		return Identity{}, fmt.Errorf("%w: token is not valid for audience %q (valid for %q)",
			ErrUnauthenticated, a.Audience, st.Audiences)
	}
	if st.User.Username != wantUser {
		return Identity{}, fmt.Errorf("%w: user %q is not the agent ServiceAccount %q",
			ErrForbidden, st.User.Username, wantUser)
	}
	id := Identity{Username: st.User.Username}
	for _, f := range []struct {
		key string
		dst *string
	}{
		{ExtraPodName, &id.PodName},
		{ExtraPodUID, &id.PodUID},
		{ExtraNodeName, &id.NodeName},
	} {
		v := st.User.Extra[f.key]
		if len(v) != 1 || v[0] == "" {
			return Identity{}, fmt.Errorf("%w: token of %s is not bound to a pod on a node (user extra %s is %q); use a projected token of the agent pod",
				ErrForbidden, wantUser, f.key, []string(v))
		}
		*f.dst = v[0]
	}
	return id, nil
}

// config checks the Authenticator's fields and returns the username the
// agents' ServiceAccount authenticates as.
func (a *Authenticator) config() (string, error) {
	if a.Client == nil {
		return "", errors.New("agent authenticator: no Kubernetes client")
	}
	if a.Audience == "" {
		return "", errors.New("agent authenticator: no audience")
	}
	ns, name, ok := strings.Cut(a.ServiceAccount, ":")
	if !ok || ns == "" || name == "" || strings.Contains(name, ":") {
		return "", fmt.Errorf("agent service account %q: want namespace:name", a.ServiceAccount)
	}
	return serviceAccountUserPrefix + ns + ":" + name, nil
}

func (a *Authenticator) now() time.Time {
	if a.Clock == nil {
		return time.Now()
	}
	return a.Clock.Now()
}

func (a *Authenticator) ttl() time.Duration {
	if a.CacheTTL == 0 {
		return DefaultCacheTTL
	}
	return a.CacheTTL
}

// cacheUntil is when a successful review of token stops being reused: after
// the TTL, or when the token expires if that is sooner.
func (a *Authenticator) cacheUntil(token string, now time.Time) time.Time {
	until := now.Add(a.ttl())
	if exp, ok := tokenExpiry(token); ok && exp.Before(until) {
		until = exp
	}
	return until
}

func (a *Authenticator) lookup(key [sha256.Size]byte, now time.Time) (Identity, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.cache[key]
	if !ok {
		return Identity{}, false
	}
	if !now.Before(e.expires) {
		delete(a.cache, key)
		return Identity{}, false
	}
	return e.id, true
}

// store caches a successful review. When the cache is full it drops the
// expired entries, then the one that expires first.
func (a *Authenticator) store(key [sha256.Size]byte, id Identity, now, expires time.Time) {
	if a.ttl() < 0 || !now.Before(expires) {
		return
	}
	size := a.CacheSize
	if size <= 0 {
		size = DefaultCacheSize
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cache == nil {
		a.cache = make(map[[sha256.Size]byte]cacheEntry)
	}
	if _, ok := a.cache[key]; !ok && len(a.cache) >= size {
		var oldest [sha256.Size]byte
		var oldestExp time.Time
		for k, e := range a.cache {
			if !now.Before(e.expires) {
				delete(a.cache, k)
				continue
			}
			if oldestExp.IsZero() || e.expires.Before(oldestExp) {
				oldest, oldestExp = k, e.expires
			}
		}
		if len(a.cache) >= size {
			delete(a.cache, oldest)
		}
	}
	a.cache[key] = cacheEntry{id: id, expires: expires}
}

// tokenExpiry reads the exp claim of a JWT without verifying it. It is
// only used to shorten the cache life of a token the apiserver accepted.
func tokenExpiry(token string) (time.Time, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp *json.Number `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Exp == nil {
		return time.Time{}, false
	}
	sec, err := claims.Exp.Float64()
	if err != nil || sec <= 0 {
		return time.Time{}, false
	}
	return time.Unix(int64(sec), 0), true
}

// BearerFromMetadata returns the bearer token of gRPC metadata that holds
// exactly one "authorization: Bearer <token>". Anything else is an error
// wrapping ErrUnauthenticated.
func BearerFromMetadata(md metadata.MD) (string, error) {
	values := md.Get("authorization")
	switch len(values) {
	case 0:
		return "", fmt.Errorf("%w: no authorization metadata", ErrUnauthenticated)
	case 1:
	default:
		return "", fmt.Errorf("%w: %d authorization metadata values, want one", ErrUnauthenticated, len(values))
	}
	scheme, token, _ := strings.Cut(strings.TrimSpace(values[0]), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", fmt.Errorf("%w: authorization metadata is not \"Bearer <token>\"", ErrUnauthenticated)
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return "", fmt.Errorf("%w: empty bearer token", ErrUnauthenticated)
	}
	return token, nil
}

// CheckNode refuses, with an error wrapping ErrForbidden, an agent that
// claims to be a node other than the one its token is bound to.
func CheckNode(id Identity, claimed string) error {
	if claimed == "" {
		return fmt.Errorf("%w: the agent named no node; its token is bound to node %q", ErrForbidden, id.NodeName)
	}
	if id.NodeName != claimed {
		return fmt.Errorf("%w: the agent claims node %q but its token (pod %s) is bound to node %q",
			ErrForbidden, claimed, id.PodName, id.NodeName)
	}
	return nil
}
