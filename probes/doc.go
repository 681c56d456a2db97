// Package probes runs PodProbeMarker probes on the agent: exec through
// CRI ExecSync, TCP and HTTP against the pod IP, with thresholds, reporting
// only changes. It is the node half of OpenKruise's PodProbeMarker +
// NodePodProbe (kruise-daemon's pkg/daemon/podprobe), shaped after the
// kubelet's prober (one worker per probe, a results manager).
//
// # Use
//
// New builds a Runner over a Runtime (CRIRuntime for the node's CRI, or
// probestest.Runtime in tests). Set gives it the node's full list of probes
// (level-based: it starts, updates and stops workers to match), Run runs
// them until its context ends, Changes streams the results whose state or
// message changed, and Results lists the current result of every probe
// for a periodic full report. Restore seeds the results an earlier agent
// process reported, so that an agent restart does not flap them.
//
// # One worker per probe
//
// Each Key (pod UID, container name, probe name) has its own goroutine,
// which owns its spec, the container id it last saw, its threshold counters
// and its last result; workers share nothing. Each probe period (counted
// from the start of the previous probe) a worker:
//
//  1. finds the latest attempt of its container (Runtime.ContainerOf). Not
//     found, or a runtime error: nothing changes.
//  2. if the container id differs from the last one seen (first sight, or
//     a restart), resets the result to Unknown with an empty message and
//     forgets the threshold counters.
//  3. if the container is not running, sets Failed, "Container(<name>) is
//     Non-running", at once, without thresholds.
//  4. waits for initialDelaySeconds counted from the container's start
//     (CRI ContainerStatus startedAt), not from the worker's start.
//  5. runs the probe, then applies the thresholds: the state changes only
//     after successThreshold successes, or failureThreshold failures, in a
//     row; a verdict below its threshold only refreshes LastProbeTime.
//
// Workers started within one period of Run's start (an agent restart) wait
// a random part of their period before their first probe; later ones
// probe at once.
//
// Workers wake on the runner's tick (DefaultTick, 200 ms; WithTick): a
// probe due at t runs at the multiple of the tick nearest to t, and every
// worker counts the same multiples. Probes due within one tick of each
// other then share one wake-up of the process. A Go process woken from
// idle for each probe spends about as much CPU on the wake-up (timers,
// netpoller, futexes) as on a TCP probe itself: `make bench-probecost`
// measures a tcp probe at 0.09 ms of CPU on the tick and 0.47 ms with
// each worker woken exactly when due. A spec change handed over by Set applies in place; if it
// changes what the probe checks (the handler, or the address a TCP or HTTP
// probe dials), the result is reset to Unknown and the probe runs at once.
//
// # Timing defaults
//
// PodProbeMarker's CRD applies no defaults to the probe's timing fields,
// and OpenKruise's daemon does not apply the Kubernetes API's either: a
// field below 1 (unset) counts as 1. So a zero periodSeconds is 1 s,
// initialDelaySeconds 1 s, timeoutSeconds 1 s, and successThreshold and
// failureThreshold 1. The runner does the same.
//
// # Verdicts
//
//   - exec runs the command in the container through CRI ExecSync with the
//     probe's timeout: exit code 0 is Succeeded with stdout as the message,
//     another exit code is Failed with stderr. A timeout is Failed (as in
//     the kubelet; OpenKruise's daemon would keep the previous state). Any
//     other runtime error gives no verdict: it is logged and the previous
//     state is kept.
//   - tcpSocket dials the pod's IP (or the handler's host) from the node: a
//     connection is Succeeded, anything else (refused, unreachable, timed
//     out) is Failed with the error.
//   - httpGet sends a GET to the pod's IP (or host) with User-Agent
//     UserAgent unless the probe's headers set one, over a connection of
//     its own closed after the answer (HTTP/1.1, no compression, as the
//     kubelet's probes), without verifying HTTPS certificates, following
//     redirects to the same host only: a
//     status in 200-399 is Succeeded (with the body as the message), any
//     other status or a failed request is Failed.
//   - a port given by name is resolved through the container's ports
//     (Spec.ContainerPorts); an unknown name is Failed with a message that
//     says so.
//   - gRPC probes are not supported by PodProbeMarker: Failed, saying so.
//
// Messages are cut to MaxMessageBytes (1024) bytes, at a UTF-8 boundary.
//
// # Results
//
// A Result carries State (Succeeded, Failed, Unknown), Message,
// LastProbeTime, LastTransitionTime and the ContainerID it is about.
// Changes sends a key's result when its State or Message changed; a slow
// reader gets each key's latest result, never a stale one. Results are
// dropped when their key leaves the specs; nothing is sent for that.
//
// # Metrics
//
// WithRegisterer registers MetricResults (probes run by kind and result),
// MetricStateChanges (state changes by new state) and MetricWorkers.
package probes
