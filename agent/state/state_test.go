package state_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/shoal-io/shoal/agent/state"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)

// open opens dir with a test logger and a fake clock, closing it at the end.
func open(t *testing.T, dir string) *state.Store {
	t.Helper()
	logger, _ := ktesting.NewTestContext(t)
	s, err := state.Open(dir, state.WithLogger(logger), state.WithClock(testingclock.NewFakePassiveClock(now)))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// recordFile is where the store keeps id's record.
func recordFile(dir, id string) string {
	sum := sha256.Sum256([]byte(id))
	return filepath.Join(dir, "work", hex.EncodeToString(sum[:])+".json")
}

// record returns a realistic record for id.
func record(t *testing.T, id string, gen int64, step int) state.Record {
	t.Helper()
	item, err := proto.Marshal(&nodeworkv1.WorkItem{Id: id, Generation: gen, Kind: "noop"})
	require.NoError(t, err)
	report, err := proto.Marshal(&nodeworkv1.WorkReport{Id: id, ObservedGeneration: gen, Kind: "noop", Phase: nodeworkv1.Phase_PHASE_RUNNING})
	require.NoError(t, err)
	return state.Record{
		ID:         id,
		Generation: gen,
		Kind:       "noop",
		Item:       item,
		Report:     report,
		Progress:   json.RawMessage(fmt.Sprintf(`{"stepsDone":%d}`, step)),
		UpdatedAt:  now.Add(time.Duration(step) * time.Second),
	}
}

// workFiles lists the names in dir/work.
func workFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "work"))
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s := open(t, dir)

	fi, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	tests := []struct {
		name string
		id   string
		rec  state.Record
		want state.Record
	}{
		{name: "full record", id: "noop/default/a", rec: record(t, "noop/default/a", 3, 1), want: record(t, "noop/default/a", 3, 1)},
		{name: "id filled in, time defaulted", id: "noop/default/b", rec: state.Record{Kind: "noop"}, want: state.Record{ID: "noop/default/b", Kind: "noop", UpdatedAt: now}},
		{name: "awkward id", id: "../../etc/passwd\x00/é", rec: state.Record{Generation: 1}, want: state.Record{ID: "../../etc/passwd\x00/é", Generation: 1, UpdatedAt: now}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, s.Put(tc.id, tc.rec))
			got, err := s.Get(tc.id)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			fi, err := os.Stat(recordFile(dir, tc.id))
			require.NoError(t, err)
			require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		})
	}

	t.Run("items decode", func(t *testing.T) {
		got, err := s.Get("noop/default/a")
		require.NoError(t, err)
		var item nodeworkv1.WorkItem
		require.NoError(t, proto.Unmarshal(got.Item, &item))
		require.Equal(t, "noop/default/a", item.GetId())
		require.EqualValues(t, 3, item.GetGeneration())
	})

	t.Run("list sorted by id", func(t *testing.T) {
		recs, err := s.List()
		require.NoError(t, err)
		var ids []string
		for _, r := range recs {
			ids = append(ids, r.ID)
		}
		require.Equal(t, []string{"../../etc/passwd\x00/é", "noop/default/a", "noop/default/b"}, ids)
	})

	t.Run("missing", func(t *testing.T) {
		_, err := s.Get("noop/default/none")
		require.ErrorIs(t, err, state.ErrNotFound)
	})
}

func TestPutRejects(t *testing.T) {
	s := open(t, t.TempDir())
	tests := []struct {
		name    string
		id      string
		rec     state.Record
		wantErr string
	}{
		{name: "empty id", id: "", rec: state.Record{}, wantErr: "empty id"},
		{name: "id mismatch", id: "a", rec: state.Record{ID: "b"}, wantErr: `record carries id "b"`},
		{name: "bad progress", id: "a", rec: state.Record{Progress: json.RawMessage(`{"x":`)}, wantErr: "progress is not valid JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorContains(t, s.Put(tc.id, tc.rec), tc.wantErr)
		})
	}
	recs, err := s.List()
	require.NoError(t, err)
	require.Empty(t, recs)
}

func TestRestart(t *testing.T) {
	dir := t.TempDir()
	logger, _ := ktesting.NewTestContext(t)
	s, err := state.Open(dir, state.WithLogger(logger))
	require.NoError(t, err)
	var want []state.Record
	for i := range 5 {
		rec := record(t, fmt.Sprintf("noop/ns/item-%d", i), int64(i+1), i)
		require.NoError(t, s.Put(rec.ID, rec))
		want = append(want, rec)
	}
	require.NoError(t, s.Delete("noop/ns/item-4"))
	want = want[:4]
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close is idempotent")

	s2 := open(t, dir)
	got, err := s2.List()
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Empty(t, s2.Corrupt())
}

func TestAtomicOverwrite(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	id := "noop/default/x"
	for step := range 10 {
		require.NoError(t, s.Put(id, record(t, id, 1, step)))
	}
	got, err := s.Get(id)
	require.NoError(t, err)
	require.Equal(t, record(t, id, 1, 9), got)
	require.Equal(t, []string{filepath.Base(recordFile(dir, id))}, workFiles(t, dir), "no temp files left behind")

	t.Run("concurrent writers leave one whole record", func(t *testing.T) {
		var wg sync.WaitGroup
		for step := range 8 {
			rec := record(t, id, 2, step)
			wg.Add(1)
			go func() {
				defer wg.Done()
				assert.NoError(t, s.Put(id, rec))
			}()
		}
		wg.Wait()
		got, err := s.Get(id)
		require.NoError(t, err)
		require.EqualValues(t, 2, got.Generation)
		require.Len(t, workFiles(t, dir), 1)
	})
}

func TestCorruptFilesQuarantined(t *testing.T) {
	goodID := "noop/default/good"
	tests := []struct {
		name    string
		id      string
		content string
		reason  string
	}{
		{name: "truncated", id: "noop/default/t", content: `{"version":1,"id":"noop/default/t","gener`, reason: "partial write"},
		{name: "empty", id: "noop/default/e", content: "", reason: "partial write"},
		{name: "garbage", id: "noop/default/g", content: "\x00\x01\x02", reason: "not a valid record"},
		{name: "unknown version", id: "noop/default/v", content: `{"version":7,"id":"noop/default/v"}`, reason: "unsupported record format version 7"},
		{name: "no id", id: "noop/default/n", content: `{"version":1}`, reason: "record has no id"},
		{name: "wrong name", id: "noop/default/w", content: `{"version":1,"id":"noop/default/other"}`, reason: "stored under the wrong name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir)
			require.NoError(t, s.Put(goodID, record(t, goodID, 1, 1)))
			require.NoError(t, s.Close())
			path := recordFile(dir, tc.id)
			require.NoError(t, os.WriteFile(path, []byte(tc.content), 0o600))
			// A crash in the middle of a write leaves a temp file behind.
			require.NoError(t, os.WriteFile(filepath.Join(dir, "work", ".tmp-123"), []byte(`{"vers`), 0o600))

			s2 := open(t, dir)
			corrupt := s2.Corrupt()
			require.Len(t, corrupt, 1)
			require.Equal(t, path, corrupt[0].Path)
			require.Equal(t, path+".corrupt", corrupt[0].MovedTo)
			require.ErrorContains(t, corrupt[0].Reason, tc.reason)
			moved, err := os.ReadFile(path + ".corrupt")
			require.NoError(t, err)
			require.Equal(t, tc.content, string(moved))

			recs, err := s2.List()
			require.NoError(t, err)
			require.Len(t, recs, 1)
			require.Equal(t, goodID, recs[0].ID)
			_, err = s2.Get(tc.id)
			require.ErrorIs(t, err, state.ErrNotFound)
			require.ElementsMatch(t, []string{filepath.Base(recordFile(dir, goodID)), filepath.Base(path) + ".corrupt"}, workFiles(t, dir))
		})
	}

	t.Run("found by Get and List after Open", func(t *testing.T) {
		dir := t.TempDir()
		s := open(t, dir)
		id := "noop/default/late"
		require.NoError(t, s.Put(id, record(t, id, 1, 1)))
		path := recordFile(dir, id)

		require.NoError(t, os.WriteFile(path, []byte(`{"version":1,`), 0o600))
		_, err := s.Get(id)
		require.ErrorIs(t, err, state.ErrNotFound)
		require.ErrorContains(t, err, "moved to "+path+".corrupt")

		// A second corrupt copy does not overwrite the first one.
		require.NoError(t, os.WriteFile(path, []byte(`nope`), 0o600))
		recs, err := s.List()
		require.NoError(t, err)
		require.Empty(t, recs)
		corrupt := s.Corrupt()
		require.Len(t, corrupt, 2)
		require.Equal(t, path+".1.corrupt", corrupt[1].MovedTo)

		// The id is usable again.
		require.NoError(t, s.Put(id, record(t, id, 2, 0)))
		got, err := s.Get(id)
		require.NoError(t, err)
		require.EqualValues(t, 2, got.Generation)
	})
}

func TestLock(t *testing.T) {
	dir := t.TempDir()
	logger, _ := ktesting.NewTestContext(t)
	s, err := state.Open(dir, state.WithLogger(logger))
	require.NoError(t, err)

	_, err = state.Open(dir, state.WithLogger(logger))
	require.ErrorIs(t, err, state.ErrLocked)
	require.ErrorContains(t, err, fmt.Sprintf("held by pid %d", os.Getpid()))
	require.ErrorContains(t, err, filepath.Join(dir, "LOCK"))

	require.NoError(t, s.Close())
	for name, call := range map[string]func() error{
		"Put":    func() error { return s.Put("a", state.Record{}) },
		"Get":    func() error { _, err := s.Get("a"); return err },
		"List":   func() error { _, err := s.List(); return err },
		"Delete": func() error { return s.Delete("a") },
	} {
		require.ErrorIs(t, call(), state.ErrClosed, name)
	}

	s2 := open(t, dir)
	require.Equal(t, dir, s2.Dir())
	pid, err := os.ReadFile(filepath.Join(dir, "LOCK"))
	require.NoError(t, err)
	require.Equal(t, fmt.Sprint(os.Getpid()), strings.TrimSpace(string(pid)))
}

func TestDeleteIdempotent(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	id := "noop/default/d"
	require.NoError(t, s.Put(id, record(t, id, 1, 1)))
	for i := range 3 {
		require.NoError(t, s.Delete(id), "delete #%d", i+1)
		_, err := s.Get(id)
		require.ErrorIs(t, err, state.ErrNotFound)
	}
	require.NoError(t, s.Delete("never/existed"))
	require.Empty(t, workFiles(t, dir))
}

func TestOpenErrors(t *testing.T) {
	t.Run("dir is a file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "file")
		require.NoError(t, os.WriteFile(path, nil, 0o600))
		_, err := state.Open(path)
		require.ErrorContains(t, err, "creating state dir")
	})
}
