package cli

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/internal/agentbin"
	"github.com/hutchsandbox/hutch/internal/atomicfile"
	"github.com/hutchsandbox/hutch/internal/kubeagent"
	"github.com/hutchsandbox/hutch/internal/settings"
)

func newKubeCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kube",
		Short: "Kubernetes mode helpers",
	}
	cmd.AddCommand(newKubeAgentImageCmd(g))
	return cmd
}

// defaultAgentArchive is where `hutch kube agent-image` writes by default.
const defaultAgentArchive = "hutch-agent.tar"

func newKubeAgentImageCmd(g *globals) *cobra.Command {
	var output, repository string
	cmd := &cobra.Command{
		Use:   "agent-image",
		Short: "Write the agent image that kube: pods get hutch from",
		Long: `Write the agent image of the kube: mode as an image archive (the format
docker save writes), which docker load, podman load and ctr images import
read.

A pod cannot mount a file of the daemon's machine, so every conversation's
pod gets the hutch agent from this image: an init container copies the
image's only file, /hutch, into the pod, and the sandbox image runs it.
The image holds the very binary this hutch uses as its agent
($HUTCH_AGENT_BINARY when set, otherwise this executable) and is tagged
sha-<first 16 hex digits of its SHA-256>. A pod whose agent image holds
another hutch fails at once, naming this command: rerun it, and load or
push the result, after every upgrade of hutch.

The cluster's nodes must find the image: import the archive into each
node's containerd, or load it and push it to a registry they pull from.
Set sandbox.kube.agentImage to its repository when that is not
hutch-agent.

The archive is written next to --output and renamed over it when
complete; --output - writes it to standard output.`,
		Example: "  hutch kube agent-image\n  hutch kube agent-image --repository registry.example.com:5000/hutch-agent --output /tmp/agent.tar",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if repository != "" {
				if _, err := settings.ParseKubeAgentImage(repository); err != nil {
					return err
				}
			}
			if output == "" {
				return &exitError{code: 2, msg: "--output needs a file name, or - for standard output"}
			}
			b, err := agentbin.Locate(g.env("HUTCH_AGENT_BINARY"))
			if err != nil {
				return err
			}
			ref := kubeagent.Ref(repository, b)
			var archive bytes.Buffer
			if err := kubeagent.Write(&archive, b, ref); err != nil {
				return err
			}
			size := archive.Len()
			// The summary is the result, on stdout, unless the archive
			// itself goes there.
			report := g.stdout
			if output == "-" {
				report = g.stderr
				if _, err := archive.WriteTo(g.stdout); err != nil {
					return fmt.Errorf("write the agent image to standard output: %w", err)
				}
			} else if err := atomicfile.WriteFile(output, archive.Bytes(), 0o644); err != nil {
				return err
			}
			// On standard error the summary is a note.
			if err := printAgentImageSteps(report, ref, output, repository, size); err != nil && output != "-" {
				return err
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&output, "output", "o", defaultAgentArchive, "file to write the image archive to; - for standard output")
	f.StringVar(&repository, "repository", kubeagent.DefaultRepository, "image repository, without a tag (the tag comes from the agent's hash)")
	return cmd
}

// printAgentImageSteps says what was written and how to get it to the
// cluster's nodes.
func printAgentImageSteps(w io.Writer, ref, output, repository string, size int) error {
	out := &printer{w: w}
	file := output
	if output == "-" {
		file = "<file>"
		out.printf("Wrote %s to standard output (%.1f MiB).\n", ref, float64(size)/(1<<20))
	} else {
		out.printf("Wrote %s to %s (%.1f MiB).\n", ref, output, float64(size)/(1<<20))
	}
	out.println("Load it where the cluster's nodes find it:")
	out.printf("  containerd:  ctr -n k8s.io images import %s   (on every node)\n", file)
	if repository == "" || repository == kubeagent.DefaultRepository {
		pushed := "<registry>/" + kubeagent.DefaultRepository + ref[strings.LastIndex(ref, ":"):]
		out.printf("  a registry:  docker load -i %s\n", file)
		out.printf("               docker tag %s %s\n", ref, pushed)
		out.printf("               docker push %s\n", pushed)
		out.printf("               hutch sandbox settings sandbox.kube.agentImage <registry>/%s\n", kubeagent.DefaultRepository)
		return out.err
	}
	out.printf("  a registry:  docker load -i %s\n", file)
	out.printf("               docker push %s\n", ref)
	out.printf("Then point kube: pods at it: hutch sandbox settings sandbox.kube.agentImage %s\n", repository)
	return out.err
}
