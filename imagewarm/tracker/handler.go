package tracker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// DefaultPathPrefix is where agents mount the tracker RPC on their HTTP
// server.
const DefaultPathPrefix = "/tracker/v1"

// RPC paths under the prefix. Every RPC is a POST of a JSON body.
const (
	// PathAnnounce takes an AnnounceRequest and answers an AnnounceResponse.
	PathAnnounce = "/announce"
	// PathWithdraw takes a WithdrawRequest; 204.
	PathWithdraw = "/withdraw"
	// PathLeaseAcquire takes a LeaseRequest and answers a LeaseGrant.
	PathLeaseAcquire = "/lease/acquire"
	// PathLeaseRelease takes a LeaseRequest; 204.
	PathLeaseRelease = "/lease/release"
	// PathPieceHashes takes a PublishRequest; 204, or 409 on a conflict.
	PathPieceHashes = "/hashes"
	// PathLookup takes a LookupRequest and answers a LookupResult.
	PathLookup = "/lookup"
)

// errorBody is the JSON body of every error response.
type errorBody struct {
	Error string `json:"error"`
}

// Handler returns the tracker's HTTP RPC, mounted under prefix (for
// example DefaultPathPrefix). Bodies are limited to MaxRequestBytes;
// malformed requests get 400, oversized ones 413, a full tracker 503 and
// conflicting piece hashes 409, each with a JSON {"error": ...} body.
func (t *Tracker) Handler(prefix string) http.Handler {
	prefix = "/" + strings.Trim(prefix, "/")
	if prefix == "/" {
		prefix = ""
	}
	mux := http.NewServeMux()
	mux.Handle("POST "+prefix+PathAnnounce, rpc(t, opAnnounce, func(req AnnounceRequest) (any, error) {
		if err := req.Validate(); err != nil {
			return nil, err
		}
		var resp AnnounceResponse
		for _, a := range req.Announcements {
			if err := t.Announce(a); err != nil {
				if !errors.Is(err, ErrFull) {
					return nil, err
				}
				resp.Rejected++
				continue
			}
			resp.Accepted++
		}
		return resp, nil
	}))
	mux.Handle("POST "+prefix+PathWithdraw, rpc(t, opWithdraw, func(req WithdrawRequest) (any, error) {
		if err := req.Validate(); err != nil {
			return nil, err
		}
		for _, d := range req.Digests {
			t.Withdraw(d, req.Node)
		}
		return nil, nil
	}))
	mux.Handle("POST "+prefix+PathLeaseAcquire, rpc(t, opAcquire, func(req LeaseRequest) (any, error) {
		return t.AcquireLease(req)
	}))
	mux.Handle("POST "+prefix+PathLeaseRelease, rpc(t, opRelease, func(req LeaseRequest) (any, error) {
		if err := req.Validate(); err != nil {
			return nil, err
		}
		t.ReleaseLease(req.Digest, req.Node)
		return nil, nil
	}))
	mux.Handle("POST "+prefix+PathPieceHashes, rpc(t, opPublish, func(req PublishRequest) (any, error) {
		return nil, t.PublishPieceHashes(req.Digest, req.Hashes)
	}))
	mux.Handle("POST "+prefix+PathLookup, rpc(t, opLookup, func(req LookupRequest) (any, error) {
		return t.Lookup(req)
	}))
	return mux
}

// rpc adapts one operation: decode the bounded JSON body into Req, run do,
// write its result as JSON (204 when nil) or the error with its status.
func rpc[Req any](t *Tracker, op string, do func(Req) (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req Req
		err := decodeRequest(http.MaxBytesReader(w, r.Body, MaxRequestBytes), &req)
		var resp any
		if err == nil {
			resp, err = do(req)
		}
		if err != nil {
			status, result := statusOf(err)
			t.met.rpcs.WithLabelValues(op, result).Inc()
			if status == http.StatusServiceUnavailable {
				w.Header().Set("Retry-After", "10")
			}
			writeJSON(w, status, errorBody{Error: err.Error()})
			return
		}
		t.met.rpcs.WithLabelValues(op, resultOK).Inc()
		if resp == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		writeJSON(w, http.StatusOK, resp)
	})
}

// decodeRequest parses one JSON value from r into v, refusing trailing
// data. Unknown fields are ignored, so newer agents can add some.
func decodeRequest(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	if err := dec.Decode(v); err != nil {
		if errors.As(err, new(*http.MaxBytesError)) {
			return fmt.Errorf("reading tracker request: %w", err)
		}
		return fmt.Errorf("%w: decoding JSON body: %w", ErrInvalid, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if errors.As(err, new(*http.MaxBytesError)) {
			return fmt.Errorf("reading tracker request: %w", err)
		}
		return fmt.Errorf("%w: data after the JSON body", ErrInvalid)
	}
	return nil
}

// statusOf maps an error to an HTTP status and a metric result.
func statusOf(err error) (int, string) {
	switch {
	case errors.As(err, new(*http.MaxBytesError)):
		return http.StatusRequestEntityTooLarge, resultTooLarge
	case errors.Is(err, ErrInvalid):
		return http.StatusBadRequest, resultInvalid
	case errors.Is(err, ErrFull):
		return http.StatusServiceUnavailable, resultFull
	case errors.Is(err, ErrConflict):
		return http.StatusConflict, resultConflict
	default:
		return http.StatusInternalServerError, resultError
	}
}

// writeJSON writes v as a JSON response.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// The status is out; a failed write is the peer's problem.
	_ = json.NewEncoder(w).Encode(v)
}
