package framework

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// PrometheusBinary is where Debian's prometheus package installs the
// server (test/cluster installs the package with the cluster's others).
const PrometheusBinary = "/usr/bin/prometheus"

// ScrapeInterval is how often the test's Prometheus scrapes its targets.
const ScrapeInterval = 2 * time.Second

// Prometheus is a Prometheus server the test started on loopback, with its
// own storage, scraping the targets it was given.
type Prometheus struct {
	// URL is the server's base URL.
	URL string
	api promv1.API
}

// StartPrometheus starts Debian's Prometheus on a free loopback port,
// scraping /metrics of targets (job name to host:port list) every
// ScrapeInterval, and waits until it is ready. t's cleanup stops it and
// removes its storage; when t failed, its log is in the test output.
func StartPrometheus(t *testing.T, targets map[string][]string) *Prometheus {
	t.Helper()
	if _, err := os.Stat(PrometheusBinary); err != nil {
		t.Fatalf("%s is missing: install Debian's prometheus package (apt-get install --no-install-recommends prometheus; `go run ./cmd/shoal-cluster packages` does)", PrometheusBinary)
	}
	dir := t.TempDir()
	type staticConfig struct {
		Targets []string `json:"targets"`
	}
	type scrapeConfig struct {
		JobName       string         `json:"job_name"`
		StaticConfigs []staticConfig `json:"static_configs"`
	}
	var scrapes []scrapeConfig
	for job, hosts := range targets {
		scrapes = append(scrapes, scrapeConfig{JobName: job, StaticConfigs: []staticConfig{{Targets: hosts}}})
	}
	cfg, err := yaml.Marshal(map[string]any{
		"global":         map[string]string{"scrape_interval": ScrapeInterval.String(), "scrape_timeout": ScrapeInterval.String()},
		"scrape_configs": scrapes,
	})
	require.NoError(t, err)
	cfgFile := filepath.Join(dir, "prometheus.yml")
	require.NoError(t, os.WriteFile(cfgFile, cfg, 0o600))

	addr := freeLoopbackAddr(t)
	var logs lockedBuffer
	cmd := exec.Command(PrometheusBinary,
		"--config.file="+cfgFile,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn",
	)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start(), "start %s", PrometheusBinary)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("prometheus log:\n%s", logs.String())
		}
	})

	client, err := promapi.NewClient(promapi.Config{Address: "http://" + addr})
	require.NoError(t, err)
	p := &Prometheus{URL: "http://" + addr, api: promv1.NewAPI(client)}
	err = WaitFor(t.Context(), time.Minute, func(ctx context.Context) (bool, error) {
		select {
		case err := <-exited:
			return false, fmt.Errorf("prometheus exited: %v\n%s", err, logs.String())
		default:
		}
		_, err := p.api.Buildinfo(ctx)
		return err == nil, nil
	})
	require.NoError(t, err, "prometheus ready on %s", addr)
	return p
}

// WaitTargetsUp waits until Prometheus has scraped every target
// successfully once.
func (p *Prometheus) WaitTargetsUp(ctx context.Context, timeout time.Duration) error {
	var last string
	err := WaitFor(ctx, timeout, func(ctx context.Context) (bool, error) {
		res, err := p.api.Targets(ctx)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if len(res.Active) == 0 {
			last = "no active targets"
			return false, nil
		}
		var down []string
		for _, tg := range res.Active {
			if tg.Health != promv1.HealthGood {
				down = append(down, fmt.Sprintf("%s %s (%s)", tg.ScrapePool, tg.ScrapeURL, tg.LastError))
			}
		}
		last = strings.Join(down, "; ")
		return len(down) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("prometheus targets not all up: %s: %w", last, err)
	}
	return nil
}

// QueryResult is what one instant query gave.
type QueryResult struct {
	// Samples counts the series (or 1 for a scalar) with a value that is a
	// number (not NaN).
	Samples int
	// Text is the result in Prometheus's text form, shortened.
	Text string
}

// Query evaluates expr at the current time.
func (p *Prometheus) Query(ctx context.Context, expr string) (QueryResult, error) {
	v, warnings, _, err := p.api.Query(ctx, expr, time.Now())
	if err != nil {
		return QueryResult{}, fmt.Errorf("query %q: %w", expr, err)
	}
	if len(warnings) > 0 {
		return QueryResult{}, fmt.Errorf("query %q: warnings %v", expr, warnings)
	}
	var r QueryResult
	switch v := v.(type) {
	case model.Vector:
		var parts []string
		for _, s := range v {
			if !math.IsNaN(float64(s.Value)) {
				r.Samples++
			}
			parts = append(parts, s.Metric.String()+" "+strconv.FormatFloat(float64(s.Value), 'g', 4, 64))
		}
		r.Text = strings.Join(parts, ", ")
	case *model.Scalar:
		if !math.IsNaN(float64(v.Value)) {
			r.Samples = 1
		}
		r.Text = strconv.FormatFloat(float64(v.Value), 'g', 4, 64)
	default:
		return QueryResult{}, fmt.Errorf("query %q: unexpected result type %s", expr, v.Type())
	}
	if r.Text == "" {
		r.Text = "(empty)"
	}
	if len(r.Text) > 300 {
		r.Text = r.Text[:300] + "..."
	}
	return r, nil
}

// freeLoopbackAddr returns a loopback address with a port free right now.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// lockedBuffer is a bytes.Buffer safe for the process's writes and the
// test's reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
