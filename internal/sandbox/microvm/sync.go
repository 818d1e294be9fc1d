package microvm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"sync"
	"time"

	"github.com/hutchsandbox/hutch/internal/atomicfile"
)

// syncer keeps the single files a guest may write (MEMORY.md under
// /workspace) in step with the host: every interval, and once more when
// the VM stops. A side that changed since the last sync wins; when both
// did, the later modification wins and the conflict is logged.
type syncer struct {
	r     *Runtime
	v     *vm
	files []copied
	last  map[string]synced // by runtime path

	stopOnce sync.Once
	stopc    chan struct{}
	done     chan struct{}
}

// synced is what both sides of a file held after the last sync.
type synced struct {
	sum                  [32]byte
	hostSize, guestSize  int64
	hostTime, guestTime  time.Time
	hostKnown, guestSeen bool
}

func (r *Runtime) startSyncer(v *vm, files []copied) *syncer {
	s := &syncer{r: r, v: v, last: map[string]synced{}, stopc: make(chan struct{}), done: make(chan struct{})}
	for _, f := range files {
		if f.Sync {
			s.files = append(s.files, f)
		}
	}
	if len(s.files) == 0 {
		close(s.done)
		return s
	}
	// What was copied in at boot is the common base.
	for _, f := range s.files {
		if data, err := os.ReadFile(f.HostPath); err == nil {
			st := synced{sum: sha256.Sum256(data)}
			if fi, err := os.Stat(f.HostPath); err == nil {
				st.hostSize, st.hostTime, st.hostKnown = fi.Size(), fi.ModTime(), true
			}
			s.last[f.RuntimePath] = st
		}
	}
	go s.loop()
	return s
}

func (s *syncer) loop() {
	defer close(s.done)
	t := time.NewTicker(s.r.cfg.SyncInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stopc:
			s.syncAll()
			return
		case <-t.C:
			s.syncAll()
		}
	}
}

// stop makes the last sync and waits for it.
func (s *syncer) stop() {
	s.stopOnce.Do(func() { close(s.stopc) })
	<-s.done
}

func (s *syncer) syncAll() {
	for _, f := range s.files {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s.syncOne(ctx, f)
		cancel()
	}
}

func (s *syncer) syncOne(ctx context.Context, f copied) {
	log := s.r.log.With("office_key", s.v.key, "file", f.RuntimePath)
	last := s.last[f.RuntimePath]
	gi, err := s.v.client.Stat(ctx, f.RuntimePath, nil)
	if err != nil {
		log.Debug("sync: guest file not readable", "error", err)
		return
	}
	guestMoved := !last.guestSeen || gi.Size != last.guestSize || !gi.ModTime.Equal(last.guestTime)
	hi, herr := os.Stat(f.HostPath)
	hostMoved := herr == nil && (!last.hostKnown || hi.Size() != last.hostSize || !hi.ModTime().Equal(last.hostTime))
	if !guestMoved && !hostMoved {
		return
	}
	var guest, host []byte
	if guestMoved {
		var buf bytes.Buffer
		if err := s.v.client.ReadFile(ctx, f.RuntimePath, &buf); err != nil {
			log.Debug("sync: guest file not readable", "error", err)
			return
		}
		guest = buf.Bytes()
		last.guestSize, last.guestTime, last.guestSeen = gi.Size, gi.ModTime, true
		if sha256.Sum256(guest) == last.sum {
			guestMoved = false
		}
	}
	if hostMoved {
		if host, err = os.ReadFile(f.HostPath); err != nil {
			log.Debug("sync: host file not readable", "error", err)
			return
		}
		last.hostSize, last.hostTime, last.hostKnown = hi.Size(), hi.ModTime(), true
		if sha256.Sum256(host) == last.sum {
			hostMoved = false
		}
	}
	if guestMoved && hostMoved {
		winner := "guest"
		if hi.ModTime().After(gi.ModTime) {
			winner = "host"
			guestMoved = false
		} else {
			hostMoved = false
		}
		log.Warn("sync conflict: the file changed on the host and in the microVM; the later write wins", "winner", winner)
	}
	switch {
	case guestMoved:
		if err := atomicfile.WriteFile(f.HostPath, guest, f.Mode); err != nil {
			log.Warn("sync: could not write the host file", "error", err)
			return
		}
		// The host side is read back on the next round rather than
		// stat'ed now: a host write between the rename and a stat here
		// would be recorded as what was synced, and lost.
		last.sum = sha256.Sum256(guest)
		last.hostKnown = false
		log.Debug("synced to host")
	case hostMoved:
		if err := s.v.client.WriteFile(ctx, f.RuntimePath, bytes.NewReader(host), f.Mode); err != nil {
			log.Warn("sync: could not write the guest file", "error", err)
			return
		}
		// Likewise the guest side: read back next round, so a guest write
		// right after this one is not mistaken for it.
		last.sum = sha256.Sum256(host)
		last.guestSeen = false
		log.Debug("synced to guest")
	}
	s.last[f.RuntimePath] = last
}
