// Package lazyregexp holds regular expressions that compile on first use
// instead of at package init. Every hutch process, each CLI call
// included, runs the init of every package linked into the binary; a
// pattern compiled there costs each call its compile time (and the page
// faults of its allocations) though most calls never match it.
package lazyregexp

import (
	"regexp"
	"sync"
)

// Regexp is a regular expression compiled on its first use. An invalid
// expression panics then, as regexp.MustCompile would have at init;
// archtest's TestLazyRegexps_Compile compiles every literal one.
type Regexp struct {
	re func() *regexp.Regexp
}

// New returns expr, to be compiled when first used.
func New(expr string) *Regexp {
	return &Regexp{re: sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })}
}

// MatchString reports whether s contains any match of the expression.
func (r *Regexp) MatchString(s string) bool { return r.re().MatchString(s) }

// FindStringSubmatch is regexp.Regexp.FindStringSubmatch.
func (r *Regexp) FindStringSubmatch(s string) []string { return r.re().FindStringSubmatch(s) }

// ReplaceAllStringFunc is regexp.Regexp.ReplaceAllStringFunc.
func (r *Regexp) ReplaceAllStringFunc(src string, repl func(string) string) string {
	return r.re().ReplaceAllStringFunc(src, repl)
}
