// Command testserver is the local cluster's e2e test image and its pod
// sandbox (pause) image: one static binary with subcommands.
//
//	testserver serve [--port 8080] [--reuse-port] HTTP server for e2e tests
//	testserver pause                            sleep until SIGTERM or SIGINT
//	testserver cri-pods [--socket S] [--watch]  print the node's pod sandboxes
//	testserver get [--timeout 5s] URL           print the body of an HTTP GET
//	testserver sleep DURATION                   wait (exec and lifecycle hooks)
//	testserver poll [--interval 50ms] URL       GET URL on a fixed rate until SIGTERM, one
//	                                            JSON line of running counts per second
//
// Invoked as "pause" (for example as /pause), it pauses without arguments, so
// an image whose entrypoint is /pause is a sandbox image.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// soReusePort is SO_REUSEPORT on Linux (the syscall package does not name
// it on every architecture).
const soReusePort = 0xf

const usage = "usage: testserver serve [--port N] [--reuse-port] | pause | cri-pods [--socket PATH] [--watch] | get [--timeout D] URL | sleep DURATION | poll [--interval D] URL | env NAME"

func main() {
	cmd, args := subcommand(os.Args)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, cmd, args, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "testserver %s: %v\n", cmd, err)
		stop()
		os.Exit(1)
	}
}

// subcommand splits the command line into the subcommand and its
// arguments; invoked as "pause", the binary pauses.
func subcommand(argv []string) (string, []string) {
	switch {
	case len(argv) > 0 && filepath.Base(argv[0]) == "pause":
		return "pause", nil
	case len(argv) > 1:
		return argv[1], argv[2:]
	default:
		return "", nil
	}
}

// run runs one subcommand until it ends or ctx is done.
func run(ctx context.Context, cmd string, args []string, out io.Writer) error {
	switch cmd {
	case "serve":
		fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
		port := fs.Int("port", 8080, "TCP port to listen on")
		reusePort := fs.Bool("reuse-port", false, "listen with SO_REUSEPORT, so that two instances (a SidecarSet hot-upgrade pair) serve one port")
		if err := fs.Parse(args); err != nil {
			return err
		}
		return serve(ctx, net.JoinHostPort("", strconv.Itoa(*port)), *reusePort)
	case "pause":
		return pause(ctx, os.Getpid() == 1)
	case "cri-pods":
		fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
		socket := fs.String("socket", "/run/containerd/containerd.sock", "CRI runtime socket")
		watch := fs.Bool("watch", false, "print the pods again every 5s until terminated")
		if err := fs.Parse(args); err != nil {
			return err
		}
		interval := time.Duration(0)
		if *watch {
			interval = watchInterval
		}
		return criPods(ctx, *socket, interval, out)
	case "get":
		fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
		timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return errors.New("get: want exactly one URL")
		}
		return get(ctx, fs.Arg(0), *timeout, out)
	case "poll":
		fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
		interval := fs.Duration("interval", 50*time.Millisecond, "time between requests")
		timeout := fs.Duration("timeout", 2*time.Second, "a request not answered by then fails")
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() != 1 || *interval <= 0 {
			return errors.New("poll: want exactly one URL and a positive interval")
		}
		return poll(ctx, fs.Arg(0), *interval, *timeout, time.Second, out)
	case "sleep":
		if len(args) != 1 {
			return errors.New("sleep: want exactly one duration, e.g. 5s")
		}
		d, err := time.ParseDuration(args[0])
		if err != nil {
			return fmt.Errorf("sleep: %w", err)
		}
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
		}
		return nil
	case "env":
		// What a container's env holds (e2e tests of env from the
		// Downward API): the value of NAME, or an error if it is unset.
		if len(args) != 1 {
			return errors.New("env: want exactly one variable name")
		}
		v, ok := os.LookupEnv(args[0])
		if !ok {
			return fmt.Errorf("env: %s is not set", args[0])
		}
		_, err := fmt.Fprintln(out, v)
		return err
	default:
		return errors.New(usage)
	}
}

// serve answers HTTP on addr until ctx is done; with reusePort, other
// processes may listen on the same port.
func serve(ctx context.Context, addr string, reusePort bool) error {
	hostname := os.Getenv("HOSTNAME")
	if hostname == "" {
		var err error
		if hostname, err = os.Hostname(); err != nil {
			return fmt.Errorf("hostname: %w", err)
		}
	}
	var lc net.ListenConfig
	if reusePort {
		lc.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, soReusePort, 1)
			}); err != nil {
				return err
			}
			return serr
		}
	}
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: newHandler(hostname), ReadHeaderTimeout: 10 * time.Second}
	errs := make(chan error, 1)
	go func() { errs <- srv.Serve(ln) }()
	select {
	case err := <-errs:
		return fmt.Errorf("serve on %s: %w", addr, err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdownCtx)
}

// newHandler serves "/" (the pod's host name), "/healthz" and
// "/echo?msg=TEXT".
func newHandler(hostname string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprintln(w, hostname)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /echo", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.URL.Query().Get("msg"))
	})
	return mux
}

// get prints the body of a GET of url; a non-2xx answer is an error. It is
// the e2e client: Debian's static busybox wget crashes resolving names.
func get(ctx context.Context, url string, timeout time.Duration, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	_, err = io.Copy(out, resp.Body)
	return err
}

// pollCounts are poll's running counts, printed as one JSON line.
type pollCounts struct {
	// OK and Failed count the requests answered 2xx, and the others.
	OK     int `json:"ok"`
	Failed int `json:"failed"`
	// LastError is the error of the last failed request.
	LastError string `json:"lastError,omitempty"`
}

// poll GETs url every interval, each on a new connection, until ctx is
// done, and prints the running counts every report and at the end: the
// e2e load of a service that must not drop a request (a SidecarSet hot
// upgrade).
func poll(ctx context.Context, url string, interval, timeout, report time.Duration, out io.Writer) error {
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	var counts pollCounts
	enc := json.NewEncoder(out)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	flush := time.NewTicker(report)
	defer flush.Stop()
	for {
		select {
		case <-ctx.Done():
			return enc.Encode(counts)
		case <-flush.C:
			if err := enc.Encode(counts); err != nil {
				return err
			}
		case <-tick.C:
			resp, err := client.Get(url)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode/100 != 2 {
					err = fmt.Errorf("GET %s: %s", url, resp.Status)
				}
			}
			if err != nil {
				counts.Failed++
				counts.LastError = err.Error()
				continue
			}
			counts.OK++
		}
	}
}
