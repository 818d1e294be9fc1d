package service

import "golang.org/x/time/rate"

// UnlimitRefusalEvents lets every refusal reach s's event log, for tests
// of the log's own bounds under a flood.
func UnlimitRefusalEvents(s *Service) { s.refusalLog.limit = rate.NewLimiter(rate.Inf, 0) }
