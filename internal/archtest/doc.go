// Package archtest holds no code, only tests of the tree's shape: every
// package has exactly one package comment, and the pure policy packages
// import no process, network or engine packages, so their plans stay
// testable without effects; and the docs link only to files of the
// repository.
package archtest
