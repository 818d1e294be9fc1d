package cli

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/internal/egress"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/imagebuild"
	"github.com/hutchsandbox/hutch/internal/microvm/build"
	"github.com/hutchsandbox/hutch/internal/service"
)

// Without a daemon a CLI process owns the VMs it boots and powers them
// off when it exits (nothing would stop them otherwise), so each hutch
// exec in gondolin:default pays a boot, where image: finds its container
// still there. These texts say so where a user reads, with the way out.
const (
	// execGondolinHelp is the paragraph of hutch exec --help.
	execGondolinHelp = `gondolin:default without a daemon boots a fresh microVM for every
hutch exec and powers it off when the command ends (seconds under TCG),
where image: keeps its container between calls. With hutch serve
--sandbox gondolin:default running, hutch exec goes through it and a VM
stays up between commands until sandbox.idleTimeout.`
	// microvmNoDaemonNote is the line on stderr before such a command.
	microvmNoDaemonNote = "hutch: no daemon serves gondolin:default here, so this command boots a microVM of its own and powers it off after; hutch serve --sandbox gondolin:default keeps VMs up between commands"
	// microvmNoDaemonDoc is the sentence of docs/microvm.md (white space
	// folded).
	microvmNoDaemonDoc = "Without a daemon, every `hutch exec` boots a fresh VM and powers it off when the command ends"
)

func newMicrovmCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "microvm",
		Short: "Manage the guest of the microVM mode (gondolin:default)",
	}
	image := &cobra.Command{
		Use:   "image",
		Short: "Build the microVM guest's kernel, initrd and root filesystem",
	}
	image.AddCommand(newMicrovmImageBuildCmd(g))
	cmd.AddCommand(image, newMicrovmEgressPipeCmd(g))
	return cmd
}

// newMicrovmEgressPipeCmd is what QEMU runs for each connection a guest
// makes to its proxy address: it joins the connection (stdin and stdout)
// to the VM's egress proxy socket. Hidden: QEMU starts it, people do not.
func newMicrovmEgressPipeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:    "egress-pipe <socket>",
		Short:  "Join stdin and stdout to a microVM's egress proxy (run by QEMU)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := egress.Pipe(cmd.Context(), args[0], g.stdin, g.stdout); err != nil {
				return &exitError{code: 1, msg: err.Error()}
			}
			return nil
		},
	}
}

func newMicrovmImageBuildCmd(g *globals) *cobra.Command {
	var from, dir, kernelDeb, free string
	cmd := &cobra.Command{
		Use:   "build",
		Short: "Build the guest that gondolin:default boots",
		Long: `Build the guest that the microVM mode (gondolin:default) boots under QEMU, into
<state-dir>/microvm/default unless --dir says otherwise:

  vmlinuz       the kernel of Debian's cloud kernel package
                (linux-image-cloud-amd64, resolved and downloaded with apt
                into <state-dir>/microvm/cache once, or --kernel-deb)
  initrd.img    the kernel modules the guest needs (virtio-mmio, block,
                console, virtiofs, net) and their dependencies
  rootfs.ext4   an ext4 image of a local Docker image's filesystem (--from,
                default hutch's curated image hutch-sandbox:<version>), with
                owners, modes, setuid bits, symlinks, hardlinks and device
                nodes kept, and --free space for the guest's writes
  manifest.json the size and SHA-256 of each, checked before every boot

The image's filesystem is exported from a container that is created and
never started, so the Docker engine must answer. Extracting it keeps its
file owners only as root: run this as root (sudo). Without --kernel-deb,
apt-get and apt-cache must be able to fetch Debian's cloud kernel.

The build happens next to the directory and replaces an older build only
when complete; an interrupted or failed build leaves the older one as it was.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			freeBytes, err := build.ParseSize(free)
			if err != nil {
				return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("--free: %v", err))
			}
			if freeBytes == 0 {
				return errdefs.New(errdefs.ErrInvalid, "--free must be more than 0, such as 512M or 1G: the guest writes to its root filesystem")
			}
			if err := build.CheckHost(kernelDeb); err != nil {
				return err
			}
			log, err := g.logger()
			if err != nil {
				return err
			}
			layout, err := service.ResolveLayout(service.LayoutOptions{StateDir: g.stateDir, Workspace: g.workspace, Getenv: g.getenv})
			if err != nil {
				return err
			}
			defaultDir := build.DefaultDir(layout.StateDir)
			if dir == "" {
				dir = defaultDir
			}
			if dir, err = filepath.Abs(dir); err != nil {
				return err
			}
			curated := from == ""
			if curated {
				from = imagebuild.DefaultTag(Version)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
			defer stop()
			eng, err := engine.Connect(ctx)
			if err != nil {
				return err
			}
			defer func() { _ = eng.Close() }()
			_, err = build.Build(ctx, build.Options{
				Engine:    eng,
				From:      from,
				Dir:       dir,
				CacheDir:  build.DefaultCacheDir(layout.StateDir),
				KernelDeb: kernelDeb,
				Free:      freeBytes,
				Progress:  g.stdout,
				Log:       log,
			})
			var missing *build.MissingImageError
			switch {
			case err == nil:
			case ctx.Err() != nil:
				return &exitError{code: 130, msg: fmt.Sprintf("Interrupted; nothing was changed in %s.", dir)}
			case errors.As(err, &missing) && curated:
				return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
					"The curated sandbox image %s does not exist yet: build it with `hutch image build`, or pass --from with a local image (docker images lists them).", from))
			case errors.As(err, &missing):
				return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
					"The image %s does not exist in the container engine; --from takes a local image (docker images lists them).", from))
			default:
				return err
			}
			if dir == defaultDir {
				return printf(g.stdout, "Use it: hutch serve --sandbox gondolin:default\n")
			}
			return printf(g.stdout, "gondolin:default boots from %s; to use this build, build into that directory (leave out --dir).\n", defaultDir)
		},
	}
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "local Docker image for the root filesystem (default hutch-sandbox:<version>, see hutch image build)")
	f.StringVar(&dir, "dir", "", "asset directory to build (default <state-dir>/microvm/default)")
	f.StringVar(&kernelDeb, "kernel-deb", "", "use this Debian kernel package (.deb) instead of downloading "+build.KernelMetapackage+" with apt")
	f.StringVar(&free, "free", "1G", "free space of the root filesystem for the guest's writes (e.g. 512M, 1G, 4GiB)")
	return cmd
}
