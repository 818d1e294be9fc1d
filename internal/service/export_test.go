package service

import (
	"time"

	"golang.org/x/time/rate"
)

// UnlimitRefusalEvents lets every refusal reach s's event log, for tests
// of the log's own bounds under a flood.
func UnlimitRefusalEvents(s *Service) { s.refusalLog.limit = rate.NewLimiter(rate.Inf, 0) }

// SetRefusalSourceEvery sets how often one source of refusals may add
// one past its burst, for tests that cannot wait 10 s.
func SetRefusalSourceEvery(s *Service, d time.Duration) { s.refusalLog.every = d }
