package qemu

import "time"

// rdtsc reads the processor's time-stamp counter.
func rdtsc() uint64

// HostTSCKHz measures the host's time-stamp counter frequency in kHz.
//
// Under TCG a guest's TSC is the host's, and a Debian cloud kernel on the
// microvm machine has nothing to calibrate it against (no HPET, no PM
// timer): one boot in eight hangs in calibration. Booting with
// tsc_early_khz set to the host's frequency avoids that. /proc/cpuinfo's
// "cpu MHz" is a nominal figure (2100.000 where the counter runs at
// 2096.014 MHz on the machines hutch was built on), off enough to make a
// guest clock drift by minutes a day, so the counter is measured: 50 ms
// against the monotonic clock gives a few parts per million.
func HostTSCKHz() int64 {
	const window = 50 * time.Millisecond
	t0, c0 := time.Now(), rdtsc()
	time.Sleep(window)
	t1, c1 := time.Now(), rdtsc()
	elapsed := t1.Sub(t0)
	if elapsed <= 0 || c1 <= c0 {
		return 0
	}
	return int64(float64(c1-c0) / (float64(elapsed) / float64(time.Millisecond)))
}
