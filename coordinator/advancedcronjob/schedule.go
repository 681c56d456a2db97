package advancedcronjob

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// maxMissed is how many missed slots make the controller say so (an
// event), as the CronJob controller warns of "too many missed start
// times"; only the latest slot runs either way.
const maxMissed = 100

// schedule is a parsed spec.schedule in its time zone.
type schedule struct {
	sched cron.Schedule
	loc   *time.Location
}

// parseSchedule reads spec.schedule (standard five-field cron, plus the
// @every and @hourly-style macros, as CronJob accepts them) and
// spec.timeZone (IANA; local time when unset, as the CronJob controller's
// default is the controller's zone: here UTC).
func parseSchedule(acj *v1beta1.AdvancedCronJob) (schedule, error) {
	loc := time.UTC
	if tz := acj.Spec.TimeZone; tz != nil && *tz != "" {
		var err error
		if loc, err = time.LoadLocation(*tz); err != nil {
			return schedule{}, fmt.Errorf("spec.timeZone %q: %w", *tz, err)
		}
	}
	s, err := cron.ParseStandard(acj.Spec.Schedule)
	if err != nil {
		return schedule{}, fmt.Errorf("spec.schedule %q: %w", acj.Spec.Schedule, err)
	}
	return schedule{sched: s, loc: loc}, nil
}

// next is the first slot after t.
func (s schedule) next(t time.Time) time.Time { return s.sched.Next(t.In(s.loc)) }

// due returns the most recent slot in (since, now] (zero time when
// none), how many slots that range held, and the slot after now.
func (s schedule) due(since, now time.Time) (last time.Time, missed int, next time.Time) {
	for t := s.next(since); !t.After(now); t = s.next(t) {
		last = t
		missed++
	}
	return last, missed, s.next(now)
}

// Validate checks what admission can: spec.schedule parses, spec.timeZone
// is a known IANA zone, and exactly one template is set. Each problem
// names its field.
func Validate(acj *v1beta1.AdvancedCronJob) []string {
	var problems []string
	if _, err := parseSchedule(acj); err != nil {
		problems = append(problems, err.Error()+"; use five cron fields (\"*/15 * * * *\"), a descriptor such as \"@hourly\", or an IANA time zone such as \"Asia/Shanghai\"")
	}
	if _, err := kindOf(acj); err != nil {
		problems = append(problems, err.Error())
	}
	return problems
}
