package advancedcronjob

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

func cronJob(schedule string, tz *string) *v1beta1.AdvancedCronJob {
	return &v1beta1.AdvancedCronJob{ObjectMeta: metav1.ObjectMeta{Name: "nightly"}, Spec: v1beta1.AdvancedCronJobSpec{Schedule: schedule, TimeZone: tz}}
}

func TestSchedule(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return v
	}
	t.Run("every minute: the latest of the missed slots, and the next", func(t *testing.T) {
		s, err := parseSchedule(cronJob("*/1 * * * *", nil))
		require.NoError(t, err)
		last, missed, next := s.due(at("2026-11-27T10:00:30Z"), at("2026-11-27T10:03:10Z"))
		require.Equal(t, at("2026-11-27T10:03:00Z"), last)
		require.Equal(t, 3, missed)
		require.Equal(t, at("2026-11-27T10:04:00Z"), next)
	})
	t.Run("nothing due yet", func(t *testing.T) {
		s, err := parseSchedule(cronJob("@hourly", nil))
		require.NoError(t, err)
		last, missed, next := s.due(at("2026-11-27T10:00:30Z"), at("2026-11-27T10:30:00Z"))
		require.True(t, last.IsZero())
		require.Zero(t, missed)
		require.Equal(t, at("2026-11-27T11:00:00Z"), next)
	})
	t.Run("timeZone: 02:00 in Shanghai is 18:00 UTC", func(t *testing.T) {
		s, err := parseSchedule(cronJob("0 2 * * *", ptr.To("Asia/Shanghai")))
		require.NoError(t, err)
		_, _, next := s.due(at("2026-11-27T10:00:00Z"), at("2026-11-27T10:00:00Z"))
		require.Equal(t, at("2026-11-27T18:00:00Z").Unix(), next.Unix())
	})
	t.Run("@every", func(t *testing.T) {
		_, err := parseSchedule(cronJob("@every 30s", nil))
		require.NoError(t, err)
	})
	for _, tc := range []struct{ schedule, tz, want string }{
		{"61 * * * *", "", `spec.schedule "61 * * * *"`},
		{"* * * * *", "Mars/Olympus", `spec.timeZone "Mars/Olympus"`},
	} {
		t.Run("rejects "+tc.want, func(t *testing.T) {
			var tz *string
			if tc.tz != "" {
				tz = &tc.tz
			}
			_, err := parseSchedule(cronJob(tc.schedule, tz))
			require.ErrorContains(t, err, tc.want)
		})
	}
	require.Equal(t, "nightly-29403960", runName(cronJob("", nil), at("2025-11-27T10:00:00Z")), "<name>-<slot in Unix minutes>")
	require.Equal(t, "nightly-1764237605", runName(cronJob("", nil), at("2025-11-27T10:00:05Z")), "a slot off the minute: Unix seconds")
}

func TestKindOf(t *testing.T) {
	acj := cronJob("* * * * *", nil)
	_, err := kindOf(acj)
	require.ErrorContains(t, err, "set exactly one of jobTemplate, broadcastJobTemplate and imageListPullJobTemplate (0 set)")
	acj.Spec.Template.BroadcastJobTemplate = &v1beta1.BroadcastJobTemplateSpec{}
	k, err := kindOf(acj)
	require.NoError(t, err)
	require.Equal(t, v1beta1.BroadcastJobTemplate, k)
}
