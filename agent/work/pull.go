package work

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/shoal-io/shoal/cri"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

const (
	// AnnotationPullingImageBy is added to the sandbox config of every pull
	// the agent makes, with the value PullingImageByAgent, so a runtime (or
	// a person reading its logs) can tell the agent's pulls from the
	// kubelet's. kruise-daemon sets the same key.
	AnnotationPullingImageBy = "apps.kruise.io/pulling-image-by"
	// PullingImageByAgent is the value of AnnotationPullingImageBy.
	PullingImageByAgent = "shoal-agent"
	// DefaultMaxConcurrentPulls is the default cap on the pulls that run at
	// once on a node.
	DefaultMaxConcurrentPulls = 2

	// pullProgressInterval is how often a pull's bytes are measured (and
	// so, at most, reported).
	pullProgressInterval = time.Second
	// pullBackoffBase and pullBackoffMax bound the delay between attempts:
	// 1 s after the first failure, doubling up to 30 s.
	pullBackoffBase = time.Second
	pullBackoffMax  = 30 * time.Second
	// defaultPullRuntimePoll is how often an item looks for the runtime
	// while there is none.
	defaultPullRuntimePoll = time.Second
)

// PullSlots caps the image pulls under way at once on the node. One is
// shared by every pull item (and could be by other pullers): a pull holds a
// slot from the start of its CRI PullImage calls to their end.
type PullSlots struct {
	ch chan struct{}
}

// NewPullSlots returns a cap of n pulls at once (at least 1).
func NewPullSlots(n int) *PullSlots {
	return &PullSlots{ch: make(chan struct{}, max(n, 1))}
}

// Cap returns the most pulls that may run at once.
func (s *PullSlots) Cap() int { return cap(s.ch) }

// Running returns how many slots are taken now.
func (s *PullSlots) Running() int { return len(s.ch) }

func (s *PullSlots) release() { <-s.ch }

// Pull runs pull work items (an ImagePullJob's work on one node): it makes
// the spec's image present through the runtime's CRI PullImage, as the
// kubelet would, and reports the pull's bytes as it goes.
//
//   - Without always (IfNotPresent), an image the runtime already has
//     succeeds at once, with present set.
//   - Each round makes up to backoff_limit+1 attempts, each bounded by
//     timeout_seconds, 1 s apart after the first failure, doubling up to
//     30 s. The attempts are counted in the saved progress: an agent
//     restart, or a new generation of the spec, resumes the attempt under
//     way instead of starting the count again.
//   - The spec's credentials are tried in order and the first that works
//     wins; when some are given and none works the attempt fails (there is
//     no anonymous fallback); none given means an anonymous pull.
//   - At most PullSlots.Cap pulls run at once on the node; an item waiting
//     for a slot is PENDING and says so.
//   - An item whose image (with the same always) is already being pulled
//     on the node for another item joins that pull instead of starting its
//     own, without taking a slot, and reports shared. If the pull it joined
//     fails, so does its attempt; its next attempt pulls with its own
//     credentials (or joins another pull).
type Pull struct {
	runtime func() (*cri.Runtime, error)
	slots   *PullSlots
	meter   cri.PullMeter
	clock   clock.Clock
	poll    time.Duration
	warmer  Warmer

	mu      sync.Mutex
	flights map[flightKey]*pullFlight
	started chan struct{} // closed, and replaced, whenever a flight starts
	wg      sync.WaitGroup
}

// PullOption configures a Pull.
type PullOption func(*Pull)

// PullClock sets the clock that times attempts, the delays between them,
// progress measurements and the durations reported (default: the real
// clock). Looking for a missing runtime uses real time.
func PullClock(c clock.Clock) PullOption {
	return func(p *Pull) { p.clock = c }
}

// PullProgressMeter sets what measures pulls' bytes (default:
// cri.NewContentMeter()).
func PullProgressMeter(m cri.PullMeter) PullOption {
	return func(p *Pull) { p.meter = m }
}

// Warmer fetches an image's blobs alongside the runtime's pull, into the
// node's registry mirror (the image swarm), with the pull's credentials:
// the runtime's own requests through the mirror then find them there, in
// flight or complete.
type Warmer interface {
	// Warm resolves image upstream with auth (nil: anonymous) and fetches
	// its blobs; it is cancelled when the runtime's pull ends.
	Warm(ctx context.Context, image string, auth *runtimeapi.AuthConfig) error
	// Settle runs after a successful pull: the runtime now holds the
	// blobs, so the mirror's own copies can go.
	Settle(ctx context.Context)
}

// PullWarmer sets the Warmer that runs alongside every pull (default:
// none; pulls go through the runtime alone).
func PullWarmer(w Warmer) PullOption {
	return func(p *Pull) { p.warmer = w }
}

// PullRuntimePoll sets how often an item looks for the runtime while
// there is none (default 1 s).
func PullRuntimePoll(d time.Duration) PullOption {
	return func(p *Pull) {
		if d > 0 {
			p.poll = d
		}
	}
}

// NewPull returns the pull handler. runtime returns the node's CRI
// runtime, or an error while there is none (items wait for it); slots is
// the node's cap on pulls at once.
func NewPull(runtime func() (*cri.Runtime, error), slots *PullSlots, opts ...PullOption) *Pull {
	p := &Pull{
		runtime: runtime,
		slots:   slots,
		clock:   clock.RealClock{},
		poll:    defaultPullRuntimePoll,
		flights: map[flightKey]*pullFlight{},
		started: make(chan struct{}),
	}
	for _, o := range opts {
		o(p)
	}
	if p.slots == nil {
		p.slots = NewPullSlots(DefaultMaxConcurrentPulls)
	}
	if p.meter == nil {
		p.meter = cri.NewContentMeter()
	}
	return p
}

// pullProgress is a pull item's saved progress.
type pullProgress struct {
	// Image and Round are the spec's: progress of another image or round
	// does not carry over.
	Image string `json:"image"`
	Round uint32 `json:"round,omitempty"`
	// Attempts counts the attempts started in the round.
	Attempts int `json:"attempts"`
	// Open is set while attempt number Attempts has no result: a later Run
	// resumes it rather than starting another.
	Open bool `json:"open,omitempty"`
	// LastError is why the last attempt failed.
	LastError string `json:"lastError,omitempty"`
	// Succeeded is set once the round succeeded; a later Run of the same
	// round (a new generation of the spec) starts a new count.
	Succeeded bool `json:"succeeded,omitempty"`
}

// flightKey names the pulls that can be shared.
type flightKey struct {
	image  string
	always bool
}

// pullFlight is one pull under way on the node, shared by the items that
// wait for it. The result fields are written before done is closed.
type pullFlight struct {
	key    flightKey
	cancel context.CancelFunc
	done   chan struct{}
	users  int // under Pull.mu: items waiting for it

	// result
	imageID string
	err     error

	mu      sync.Mutex
	bytes   cri.PullBytes
	updated chan struct{} // closed, and replaced, when bytes change
}

// progress returns the flight's bytes and a channel closed when they
// change next.
func (f *pullFlight) progress() (cri.PullBytes, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bytes, f.updated
}

func (f *pullFlight) publish(b cri.PullBytes) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b == f.bytes {
		return
	}
	f.bytes = b
	close(f.updated)
	f.updated = make(chan struct{})
}

// pullResult is a successful attempt.
type pullResult struct {
	imageID string
	bytes   cri.PullBytes
	millis  int64
	shared  bool
}

// Run implements Handler.
func (p *Pull) Run(ctx context.Context, t *Task) error {
	spec := t.Item.GetPull()
	if spec == nil {
		return errors.New("pull work item has no pull spec")
	}
	x := &pullRun{p: p, t: t, spec: spec, log: klog.FromContext(ctx).WithValues("image", spec.GetImage()),
		maxAttempts: int(spec.GetBackoffLimit()) + 1, st: &nodeworkv1.PullStatus{}}
	x.resume()
	for {
		if !x.prog.Open && x.prog.LastError != "" {
			// The last attempt failed.
			if x.prog.Attempts >= x.maxAttempts {
				if err := x.save(nodeworkv1.Phase_PHASE_FAILED, x.prog.LastError); err != nil {
					return err
				}
				return errors.New(x.prog.LastError)
			}
			if err := x.backoff(ctx); err != nil {
				return err
			}
		}
		rt, err := x.waitRuntime(ctx)
		if err != nil {
			return err
		}
		if !spec.GetAlways() {
			id, present, err := rt.ImagePresent(ctx, spec.GetImage())
			switch {
			case ctx.Err() != nil:
				return ctx.Err()
			case err != nil:
				x.log.Info("Could not tell whether the image is present; pulling it", "err", err.Error())
			case present:
				x.log.V(2).Info("Image already present", "imageID", id)
				x.st.Present, x.st.ImageId, x.st.Shared = true, id, false
				x.prog.Open, x.prog.Succeeded = false, true
				return x.save(nodeworkv1.Phase_PHASE_SUCCEEDED, "image already present")
			}
		}
		res, err := x.attempt(ctx, rt)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil {
			x.prog.Open, x.prog.LastError, x.prog.Succeeded = false, "", true
			x.st.ImageId, x.st.PullMillis, x.st.Shared = res.imageID, res.millis, res.shared
			x.st.BytesDone, x.st.BytesTotal = res.bytes.Done, res.bytes.Total
			x.log.Info("Pulled image", "imageID", res.imageID, "attempt", x.prog.Attempts,
				"millis", res.millis, "bytes", res.bytes.Total, "shared", res.shared)
			return x.save(nodeworkv1.Phase_PHASE_SUCCEEDED, "")
		}
		if errors.Is(err, errStale) {
			return err
		}
		x.prog.Open, x.prog.LastError = false, clip(err.Error())
		x.log.Info("Pull attempt failed", "attempt", x.prog.Attempts, "of", x.maxAttempts, "err", err.Error())
	}
}

// pullRun is one Run of one pull item.
type pullRun struct {
	p           *Pull
	t           *Task
	spec        *nodeworkv1.PullSpec
	log         klog.Logger
	maxAttempts int
	prog        pullProgress
	st          *nodeworkv1.PullStatus // the report's status, kept up to date
	lastMsg     string                 // of the last non-durable report
}

// resume loads the saved progress if it is about this image and round.
func (x *pullRun) resume() {
	var saved pullProgress
	ok, err := x.t.LoadProgress(&saved)
	if err != nil {
		x.log.Error(err, "Ignoring unreadable pull progress")
	}
	if ok && err == nil && saved.Image == x.spec.GetImage() && saved.Round == x.spec.GetRound() && !saved.Succeeded {
		x.prog = saved
		if x.prog.Attempts > 0 {
			x.log.Info("Resuming pull", "attempts", x.prog.Attempts, "attemptOpen", x.prog.Open)
		}
	} else {
		x.prog = pullProgress{Image: x.spec.GetImage(), Round: x.spec.GetRound()}
	}
	x.st.Attempts = uint32(x.prog.Attempts)
}

// save persists the progress and the report (durable).
func (x *pullRun) save(phase nodeworkv1.Phase, msg string) error {
	x.st.Attempts = uint32(x.prog.Attempts)
	x.lastMsg = ""
	return x.t.Update(x.prog, phase, msg, x.setStatus())
}

// report sends the report without saving it; a message that did not
// change with the same status is not sent again.
func (x *pullRun) report(phase nodeworkv1.Phase, msg string, force bool) error {
	msg = clip(msg)
	if !force && msg == x.lastMsg {
		return nil
	}
	x.lastMsg = msg
	return x.t.Report(phase, msg, x.setStatus())
}

func (x *pullRun) setStatus() func(*nodeworkv1.WorkReport) {
	st := proto.Clone(x.st).(*nodeworkv1.PullStatus)
	return func(rep *nodeworkv1.WorkReport) { rep.Status = &nodeworkv1.WorkReport_Pull{Pull: st} }
}

// backoff waits before the next attempt, saying why.
func (x *pullRun) backoff(ctx context.Context) error {
	d := pullBackoff(x.prog.Attempts)
	// The timer exists before the message does: a test that sees the
	// message may step a fake clock past it.
	timer := x.p.clock.NewTimer(d)
	defer timer.Stop()
	msg := fmt.Sprintf("attempt %d of %d failed: %s; retrying in %s", x.prog.Attempts, x.maxAttempts, x.prog.LastError, d)
	if err := x.save(nodeworkv1.Phase_PHASE_PENDING, msg); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C():
		return nil
	}
}

// pullBackoff is the delay after failed attempts: 1 s after the first,
// doubling up to 30 s.
func pullBackoff(failed int) time.Duration {
	d := pullBackoffBase
	for i := 1; i < failed && d < pullBackoffMax; i++ {
		d *= 2
	}
	return min(d, pullBackoffMax)
}

// waitRuntime returns the node's runtime, waiting while there is none.
func (x *pullRun) waitRuntime(ctx context.Context) (*cri.Runtime, error) {
	for {
		rt, err := x.p.runtime()
		if err == nil {
			return rt, nil
		}
		if err := x.report(nodeworkv1.Phase_PHASE_PENDING, "waiting for the container runtime: "+err.Error(), false); err != nil {
			return nil, err
		}
		timer := time.NewTimer(x.p.poll)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-timer.C:
		}
	}
}

// attempt makes (or resumes) one attempt: it gets a pull slot or joins a
// pull under way, then waits for the pull within the spec's timeout,
// reporting its bytes.
func (x *pullRun) attempt(ctx context.Context, rt *cri.Runtime) (pullResult, error) {
	image := x.spec.GetImage()
	f, owner, err := x.p.enter(ctx, x, rt)
	if err != nil {
		return pullResult{}, err
	}
	defer x.p.leave(f)

	resumed := x.prog.Open
	if !resumed {
		x.prog.Attempts++
		x.prog.Open, x.prog.LastError = true, ""
	}
	x.st.Shared, x.st.Present, x.st.BytesDone, x.st.BytesTotal = !owner, false, 0, 0
	msg := fmt.Sprintf("pulling (attempt %d of %d)", x.prog.Attempts, x.maxAttempts)
	if resumed {
		msg = fmt.Sprintf("pulling (attempt %d of %d, resumed)", x.prog.Attempts, x.maxAttempts)
	}
	if !owner {
		msg += "; joined a pull of the same image already under way"
	}
	timeout := time.Duration(x.spec.GetTimeoutSeconds()) * time.Second
	timer := x.p.clock.NewTimer(timeout) // before the message, as in backoff
	defer timer.Stop()
	start := x.p.clock.Now()
	if err := x.save(nodeworkv1.Phase_PHASE_RUNNING, msg); err != nil {
		return pullResult{}, err
	}
	x.log.V(2).Info("Pull attempt", "attempt", x.prog.Attempts, "of", x.maxAttempts, "resumed", resumed, "shared", !owner)
	for {
		b, updated := f.progress()
		if b.Done != x.st.BytesDone || b.Total != x.st.BytesTotal {
			x.st.BytesDone, x.st.BytesTotal = b.Done, b.Total
			if err := x.report(nodeworkv1.Phase_PHASE_RUNNING, msg, true); err != nil {
				return pullResult{}, err
			}
		}
		select {
		case <-ctx.Done():
			return pullResult{}, ctx.Err()
		case <-timer.C():
			return pullResult{}, fmt.Errorf("pull %s: not done within the attempt's timeout of %s", image, timeout)
		case <-updated:
		case <-f.done:
			if f.err != nil {
				if !owner {
					return pullResult{}, fmt.Errorf("%w (a pull of the same image this item had joined)", f.err)
				}
				return pullResult{}, f.err
			}
			fb, _ := f.progress()
			return pullResult{imageID: f.imageID, bytes: fb, millis: x.p.clock.Since(start).Milliseconds(), shared: !owner}, nil
		}
	}
}

// enter joins the pull of x's image under way or, with a free slot,
// starts one. While neither is possible the item is PENDING and says why.
func (p *Pull) enter(ctx context.Context, x *pullRun, rt *cri.Runtime) (f *pullFlight, owner bool, err error) {
	key := flightKeyOf(x.spec)
	for {
		p.mu.Lock()
		if f := p.flights[key]; f != nil {
			f.users++
			p.mu.Unlock()
			return f, false, nil
		}
		wake := p.started
		p.mu.Unlock()

		select {
		case p.slots.ch <- struct{}{}:
			return p.claim(ctx, key, x, rt)
		default:
		}
		msg := fmt.Sprintf("waiting for a pull slot (%d pulls running, cap %d)", p.slots.Running(), p.slots.Cap())
		if err := x.report(nodeworkv1.Phase_PHASE_PENDING, msg, false); err != nil {
			return nil, false, err
		}
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-wake: // a pull started: perhaps of this image
		case p.slots.ch <- struct{}{}:
			return p.claim(ctx, key, x, rt)
		}
	}
}

// claim starts the pull of key with the slot the caller took, or joins
// (and gives the slot back) if one started meanwhile.
func (p *Pull) claim(ctx context.Context, key flightKey, x *pullRun, rt *cri.Runtime) (*pullFlight, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f := p.flights[key]; f != nil {
		p.slots.release()
		f.users++
		return f, false, nil
	}
	// The flight outlives the item that started it while others wait for
	// it; it ends when the last one leaves.
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	f := &pullFlight{key: key, cancel: cancel, done: make(chan struct{}), users: 1, updated: make(chan struct{})}
	p.flights[key] = f
	close(p.started)
	p.started = make(chan struct{})
	// The timer exists before anyone sees the pull running: a test that
	// sees it may step a fake clock.
	tick := p.clock.NewTimer(pullProgressInterval)
	p.wg.Add(1)
	go p.fly(fctx, f, rt, x.spec, tick)
	return f, true, nil
}

// leave stops waiting for f; the last to leave a flight under way ends it.
func (p *Pull) leave(f *pullFlight) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f.users--
	if f.users > 0 {
		return
	}
	f.cancel()
	if p.flights[f.key] == f {
		delete(p.flights, f.key)
	}
}

// fly runs one pull: the CRI PullImage calls, with the spec's credentials
// in order, while its bytes are measured each time tick fires (re-armed
// for pullProgressInterval after each measurement). It holds a slot
// until it ends.
func (p *Pull) fly(ctx context.Context, f *pullFlight, rt *cri.Runtime, spec *nodeworkv1.PullSpec, tick clock.Timer) {
	defer p.wg.Done()
	defer f.cancel()
	log := klog.FromContext(ctx)
	image := spec.GetImage()
	auths := authConfigs(spec.GetAuths())

	watch := p.meter.Watch(ctx, rt, image, auths)
	sctx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		defer tick.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-tick.C():
				f.publish(watch.Sample(sctx))
				tick.Reset(pullProgressInterval)
			}
		}
	}()

	log.Info("Pulling image", "always", spec.GetAlways(), "credentials", len(auths))
	stopWarm := p.warm(ctx, image, auths)
	imageRef, err := pullWithAuths(ctx, rt, image, spec.GetAuths(), auths, sandboxConfig(spec))
	stopWarm()
	if err == nil && p.warmer != nil {
		p.warmer.Settle(ctx)
	}
	stopSampling()
	<-sampled
	var imageID string
	if err == nil {
		b := watch.Sample(ctx)
		imageID = imageRef
		var size int64
		if img, serr := rt.ImageStatus(ctx, imageRef); serr == nil && img != nil {
			imageID, size = img.GetId(), int64(img.GetSize())
		} else if serr != nil {
			log.V(2).Info("Image status after the pull", "imageRef", imageRef, "err", serr.Error())
		}
		if b.Total == 0 {
			// Not measured: the runtime's size of the image is the best
			// figure there is.
			b.Total = size
		}
		b.Done = b.Total
		f.publish(b)
	}
	watch.Close()
	// The slot is free before anyone sees the result.
	p.slots.release()

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.flights[f.key] == f {
		delete(p.flights, f.key)
	}
	f.imageID, f.err = imageID, err
	close(f.done)
}

// warm starts the Warmer (if any) on image with the first credential and
// returns the function that stops it once the runtime's pull is over.
func (p *Pull) warm(ctx context.Context, image string, auths []*runtimeapi.AuthConfig) func() {
	if p.warmer == nil {
		return func() {}
	}
	var auth *runtimeapi.AuthConfig
	if len(auths) > 0 {
		auth = auths[0]
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := p.warmer.Warm(wctx, image, auth); err != nil && wctx.Err() == nil {
			klog.FromContext(ctx).V(2).Info("Swarm warm-up failed; the runtime pulls upstream", "err", err.Error())
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// pullWithAuths pulls image with each credential in turn until one works;
// without credentials it pulls anonymously. specs are the credentials as
// the work item gave them (for their server names), auths the same in CRI
// form.
func pullWithAuths(ctx context.Context, rt *cri.Runtime, image string, specs []*nodeworkv1.RegistryAuth, auths []*runtimeapi.AuthConfig, sandbox *runtimeapi.PodSandboxConfig) (string, error) {
	if len(auths) == 0 {
		return rt.PullImage(ctx, image, nil, sandbox)
	}
	log := klog.FromContext(ctx)
	var failures []string
	var last error
	for i, a := range auths {
		ref, err := rt.PullImage(ctx, image, a, sandbox)
		if err == nil {
			log.V(2).Info("Pulled with credential", "credential", i+1, "of", len(auths), "server", specs[i].GetServer())
			return ref, nil
		}
		if ctx.Err() != nil {
			return "", err
		}
		last = err
		log.V(2).Info("Credential failed", "credential", i+1, "of", len(auths), "server", specs[i].GetServer(), "err", err.Error())
		failures = append(failures, fmt.Sprintf("credential %d of %d (%s): %s", i+1, len(auths), specs[i].GetServer(),
			strings.TrimPrefix(err.Error(), "pull "+image+": ")))
	}
	if len(auths) == 1 {
		return "", last
	}
	return "", fmt.Errorf("pull %s: no credential worked: %s", image, strings.Join(failures, "; "))
}

// authConfigs turns the spec's credentials into CRI ones, in order. The
// server stays out of them: the coordinator already matched each
// credential to the image's registry (as the kubelet's keyring does), and
// containerd would parse a server_address as a URL and drop the credential
// unless its host equals the endpoint it resolves ("registry-1.docker.io"
// for docker.io, say), or fail on a bare "host:port".
func authConfigs(auths []*nodeworkv1.RegistryAuth) []*runtimeapi.AuthConfig {
	out := make([]*runtimeapi.AuthConfig, 0, len(auths))
	for _, a := range auths {
		out = append(out, &runtimeapi.AuthConfig{
			Username: a.GetUsername(), Password: a.GetPassword(), Auth: a.GetAuth(),
			IdentityToken: a.GetIdentityToken(), RegistryToken: a.GetRegistryToken(),
		})
	}
	return out
}

// sandboxConfig is the pull request's sandbox config: the job's labels and
// annotations, plus the agent's mark.
func sandboxConfig(spec *nodeworkv1.PullSpec) *runtimeapi.PodSandboxConfig {
	annotations := maps.Clone(spec.GetSandboxAnnotations())
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[AnnotationPullingImageBy] = PullingImageByAgent
	return &runtimeapi.PodSandboxConfig{Labels: maps.Clone(spec.GetSandboxLabels()), Annotations: annotations}
}

// flightKeyOf names the pulls spec can share: the image as the runtime
// stores it, and always.
func flightKeyOf(spec *nodeworkv1.PullSpec) flightKey {
	image := spec.GetImage()
	if ref, err := cri.RuntimeImageRef(image); err == nil {
		image = ref
	}
	return flightKey{image: image, always: spec.GetAlways()}
}

// waitFlights waits for every pull under way to end (for tests).
func (p *Pull) waitFlights() { p.wg.Wait() }
