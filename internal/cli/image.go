package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/imagebuild"
)

func newImageCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Build the curated sandbox image",
	}
	cmd.AddCommand(newImageBuildCmd(g))
	return cmd
}

func newImageBuildCmd(g *globals) *cobra.Command {
	var tag, base, tz string
	cmd := &cobra.Command{
		Use:   "build",
		Short: "Build the curated sandbox image (hutch-sandbox:<version>)",
		Long: `Build hutch's curated sandbox image from deploy/sandbox.Dockerfile (embedded
in hutch): Debian bookworm with bash, coreutils, git, curl, ssh, python3
(pip, venv), nodejs and npm, ripgrep, fd, jq, build-essential, less, procps,
a UTF-8 locale and the chosen time zone.

The base image is used when the engine has it, pulled when a registry
answers, and otherwise built here: debootstrap --variant=minbase of bookworm
(installed with apt-get when missing; needs root) imported as
hutch-base:bookworm. The build's progress is shown as it runs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			eng, err := engine.Connect(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = eng.Close() }()
			start := time.Now()
			ref, err := imagebuild.Build(cmd.Context(), eng, imagebuild.Options{
				Tag:      tag,
				Version:  Version,
				Base:     base,
				TimeZone: tz,
				Progress: g.stdout,
				Log:      log,
			})
			if err != nil {
				return err
			}
			return printf(g.stdout, "Built %s in %s.\nUse it: hutch serve --sandbox image:%s\n", ref, time.Since(start).Round(time.Second), ref)
		},
	}
	f := cmd.Flags()
	f.StringVar(&tag, "tag", "", "image name (default hutch-sandbox:<version>)")
	f.StringVar(&base, "base", "", "base image (default "+imagebuild.DefaultBase+", built locally when no registry answers)")
	f.StringVar(&tz, "timezone", "", "the sandbox's time zone (default "+imagebuild.DefaultTimeZone+")")
	return cmd
}
