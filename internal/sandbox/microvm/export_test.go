package microvm

// SetBeforeShare makes h run between the start of each share's virtiofsd
// and QEMU's, until the returned func is called.
func SetBeforeShare(h func(source string)) (reset func()) {
	testHookBeforeShare.Store(&h)
	return func() { testHookBeforeShare.Store(nil) }
}
