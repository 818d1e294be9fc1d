package build

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/engine"
)

// RootfsLabel is the ext4 label of the root filesystem image.
const RootfsLabel = "hutch-root"

// labelBuild marks the never-started container a build exports the image
// filesystem from; its value is the target asset directory, so a build
// can remove what an earlier, killed build into the same directory left.
const labelBuild = "hutch.microvm-build"

// mountPoints are the directories the guest mounts over, with the mode
// they get when the image lacks them.
var mountPoints = []struct {
	path string
	mode fs.FileMode
}{
	{"proc", 0o755},
	{"sys", 0o755},
	{"dev", 0o755},
	{"tmp", 0o777 | fs.ModeSticky},
	{"run", 0o755},
	{"workspace", 0o755},
}

// exportTree creates a container from imageID (never started), streams its
// filesystem into GNU tar extracting as root into tree, and removes the
// container again, also when the context is cancelled.
func (b *builder) exportTree(ctx context.Context, imageID, tree string) (err error) {
	cli := b.opts.Engine.Client
	name := "hutch-microvm-export-" + randomHex()
	created, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: name,
		Config: &container.Config{
			Image: imageID,
			// Never run; create only insists on some command.
			Cmd:             []string{"/nonexistent"},
			NetworkDisabled: true,
			Labels: map[string]string{
				engine.LabelManaged: "true",
				engine.LabelImage:   b.opts.From,
				labelBuild:          b.dir,
			},
		},
		HostConfig: &container.HostConfig{NetworkMode: "none"},
	})
	if err != nil {
		return engine.Classify(err, "creating a container to export "+b.opts.From)
	}
	defer func() {
		if rmErr := b.removeContainer(context.WithoutCancel(ctx), created.ID); rmErr != nil && err == nil {
			err = rmErr
		}
	}()

	rc, err := cli.ContainerExport(ctx, created.ID, client.ContainerExportOptions{})
	if err != nil {
		return engine.Classify(err, "exporting the filesystem of "+b.opts.From)
	}
	defer func() { _ = rc.Close() }()
	counter := &progressReader{r: rc, every: 2 * time.Second, now: time.Now, report: func(n int64) {
		b.say("Root filesystem: exported %s so far", formatSize(n))
	}}
	start := time.Now()
	if _, err := b.runStdin(ctx, counter, "", "tar", "-x", "--numeric-owner", "--same-permissions",
		"--xattrs", "--xattrs-include=*", "-f", "-", "-C", tree); err != nil {
		if rerr := counter.Err(); rerr != nil && ctx.Err() == nil {
			return engine.Classify(rerr, "exporting the filesystem of "+b.opts.From)
		}
		return fmt.Errorf("extracting the filesystem of %s: %w", b.opts.From, err)
	}
	b.say("Root filesystem: exported %s in %s", formatSize(counter.Total()), time.Since(start).Round(100*time.Millisecond))
	return nil
}

// removeContainer force-removes a container the build created.
func (b *builder) removeContainer(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err := b.opts.Engine.Client.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !engine.IsNotFound(err) {
		return engine.Classify(err, "removing the export container "+id)
	}
	return nil
}

// sweepContainers removes export containers that an earlier build into
// the same directory left behind (it was killed before its cleanup ran).
func (b *builder) sweepContainers(ctx context.Context) error {
	list, err := b.opts.Engine.Client.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", labelBuild+"="+b.dir),
	})
	if err != nil {
		return engine.Classify(err, "listing leftover export containers")
	}
	for _, c := range list.Items {
		b.log.Debug("removing a leftover export container", "container_id", c.ID)
		if err := b.removeContainer(ctx, c.ID); err != nil {
			return err
		}
	}
	return nil
}

// progressReader counts the bytes read through it and reports the count
// at most once per every.
type progressReader struct {
	r      io.Reader
	every  time.Duration
	now    func() time.Time
	report func(total int64)

	mu    sync.Mutex // guards the following: exec reads from its own goroutine
	total int64
	last  time.Time
	err   error
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total += int64(n)
	if err != nil && err != io.EOF {
		p.err = err
	}
	now := p.now()
	if p.last.IsZero() {
		p.last = now
	} else if now.Sub(p.last) >= p.every {
		p.last = now
		p.report(p.total)
	}
	return n, err
}

// Total is the number of bytes read so far.
func (p *progressReader) Total() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total
}

// Err is the first read error other than io.EOF.
func (p *progressReader) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// addMountPoints creates the guest's mount points that tree lacks and
// returns their names. Anything already there (a directory, or a symlink
// such as /run -> /var/run) is left as the image has it.
func addMountPoints(tree string) ([]string, error) {
	var added []string
	for _, m := range mountPoints {
		p := filepath.Join(tree, m.path)
		if _, err := os.Lstat(p); err == nil {
			continue
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		if err := os.Mkdir(p, 0o700); err != nil {
			return nil, err
		}
		if err := os.Chmod(p, m.mode); err != nil { // past the umask
			return nil, err
		}
		added = append(added, "/"+m.path)
	}
	return added, nil
}

// treeStats is what the root filesystem's content needs on ext4.
type treeStats struct {
	// Bytes is the space of the content's blocks: files and long
	// symlinks rounded up to whole 4 KiB blocks (hardlinks counted once)
	// and directories at the size ext4 gives their entries.
	Bytes int64
	// Inodes is the number of distinct files, directories and other nodes.
	Inodes int64
}

const blockSize = 4096

// measureTree walks tree and adds up what its content takes on ext4. It
// does not trust the host's block counts (another file system, compression
// or holes would make them lie about ext4) but computes them from sizes.
func measureTree(tree string) (treeStats, error) {
	var st treeStats
	type inode struct{ dev, ino uint64 }
	seen := make(map[inode]bool)
	dirs := make(map[string]int64) // directory -> bytes of its entries
	err := filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if p != tree {
			dirs[filepath.Dir(p)] += direntBytes(len(d.Name()))
		}
		if sys, ok := info.Sys().(*syscall.Stat_t); ok {
			k := inode{uint64(sys.Dev), sys.Ino}
			if seen[k] {
				return nil // another name of a file already counted
			}
			seen[k] = true
		}
		st.Inodes++
		switch {
		case info.IsDir():
			dirs[p] += 0 // an empty directory still takes a block
		case info.Mode().IsRegular():
			st.Bytes += roundUp(info.Size(), blockSize)
		case info.Mode()&fs.ModeSymlink != 0 && info.Size() >= 60:
			st.Bytes += blockSize // shorter targets live in the inode
		}
		return nil
	})
	if err != nil {
		return treeStats{}, fmt.Errorf("measuring the root filesystem: %w", err)
	}
	for _, n := range dirs {
		st.Bytes += dirBytes(n)
	}
	return st, nil
}

// direntBytes is the size of an ext4 directory entry for a name.
func direntBytes(nameLen int) int64 { return 8 + roundUp(int64(nameLen), 4) }

// dirBytes is the size of a directory whose entries take n bytes: "." and
// "..", the entries, in blocks that each keep 12 bytes for a checksum.
func dirBytes(n int64) int64 {
	perBlock := int64(blockSize - 12)
	blocks := (24 + n + perBlock - 1) / perBlock
	return blocks * blockSize
}

func roundUp(n, to int64) int64 { return (n + to - 1) / to * to }

// inodeRatio is mke2fs's default for ordinary file systems: one inode per
// 16 KiB, which is what the guest's free space gets.
const inodeRatio = 16384

// inodeSize is the size of one inode on disk (mke2fs's default).
const inodeSize = 256

// imageLayout returns the size of the ext4 image and its inode count for
// content plus free bytes of free space. The size is the content's size on
// ext4 plus free, rounded up to a MiB, where the content's size is its
// blocks plus what ext4 needs to hold them: the inode table, the journal
// and an allowance of 1/64 for bitmaps, group descriptors and the blocks
// reserved for growing the file system. The inodes are the content's plus
// one per 16 KiB of free space (mke2fs's default ratio) and 1024 spare.
func imageLayout(content treeStats, free int64) (size, inodes int64) {
	inodes = content.Inodes + free/inodeRatio + 1024
	base := content.Bytes + free
	meta := inodes*inodeSize + journalBytes(base) + base/64 + 4<<20
	return roundUp(base+meta, 1<<20), inodes
}

// journalBytes is the journal mke2fs makes for a file system of size bytes
// with 4 KiB blocks (e2fsprogs' ext2fs_default_journal_size).
func journalBytes(size int64) int64 {
	blocks := size / blockSize
	switch {
	case blocks < 2048:
		return 0
	case blocks < 32768:
		return 1024 * blockSize
	case blocks < 256*1024:
		return 4096 * blockSize
	case blocks < 512*1024:
		return 8192 * blockSize
	case blocks < 4096*1024:
		return 16384 * blockSize
	case blocks < 8192*1024:
		return 32768 * blockSize
	case blocks < 16384*1024:
		return 65536 * blockSize
	case blocks < 32768*1024:
		return 131072 * blockSize
	}
	return 262144 * blockSize
}

// makeExt4 turns tree into the ext4 image out, sized for its content and
// free bytes of free space, and returns the image's size.
func (b *builder) makeExt4(ctx context.Context, tree, out string, free int64) (int64, error) {
	st, err := measureTree(tree)
	if err != nil {
		return 0, err
	}
	size, inodes := imageLayout(st, free)
	b.say("Root filesystem: making %s (%s: %s of files, %s free)",
		filepath.Base(out), formatSize(size), formatSize(st.Bytes), formatSize(free))
	// -T default: the same block size and inode layout at every size
	// (mke2fs would pick 1 KiB blocks and denser inodes below 512 MiB),
	// so that imageLayout's arithmetic holds. -N: enough inodes for the
	// content even when it is many small files.
	if _, err := b.run(ctx, "", "mke2fs", "-q", "-t", "ext4", "-T", "default", "-N", fmt.Sprint(inodes),
		"-L", RootfsLabel, "-d", tree, "-E", "root_owner=0:0", out, fmt.Sprintf("%dM", size>>20)); err != nil {
		return 0, fmt.Errorf("making the root filesystem image: %w", err)
	}
	return size, nil
}
