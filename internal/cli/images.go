package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/runtime/docker"
	"github.com/sfclab/sfclab/runtime/vm"
)

func newImages() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "images",
		Short: "Build, list and remove the docker runtime's node image and the vm runtime's guest images",
		Long: `The docker runtime runs every node in sfclab's node image: a minimal Debian root file
system with ` + strings.Join(docker.Packages(), ", ") + `,
bootstrapped with debootstrap from the mirror in this host's APT sources and imported into the
Docker Engine. No registry is needed. The tag is a hash of the suite and the package list, so an
image is reused until the list changes; deploy builds it when it is missing.

With --runtime vm: the guest images of VM nodes, under ` + vm.DefaultImageRoot + `: the
default busybox initramfs, or (vm: {image: debian}, --image debian) a Debian root file system
bootstrapped by the same debootstrap step with the packages the node's kind needs, on a
read-only disk, cached by suite, kernel and package list. Building a new guest image removes
the ones it supersedes (the same programs built from an older agent or kernel; a Debian root
only for an older kernel) unless a running VM boots them or a deploy used them within the hour;
list shows the VMs using each image, rm keeps an image in use.`,
	}
	cmd.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		if imagesRuntime != "docker" && imagesRuntime != "vm" {
			return fmt.Errorf("images --runtime %s: only docker (the node image) and vm (the guest images) have images", imagesRuntime)
		}
		return nil
	}
	cmd.AddCommand(newImagesBuild(), newImagesList(), newImagesRemove())
	cmd.PersistentFlags().StringVar(&imagesRuntime, "runtime", "docker", "whose images: docker (the node image) or vm (guest kernel and initramfs, under "+vm.DefaultImageRoot+")")
	return cmd
}

// imagesRuntime is the --runtime of `sfclab images`.
var imagesRuntime string

func newImagesBuild() *cobra.Command {
	var force bool
	var mirror, suite, labFile, vmImage, expFile string
	cmd := &cobra.Command{
		Use:   "build",
		Short: "Build the node image (minutes; reused when it exists, --force rebuilds)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := imagesBuildFlags(force, mirror, suite, labFile, vmImage, expFile); err != nil {
				return err
			}
			if imagesRuntime == "vm" {
				return buildVMImage(cmd, labFile, vmImage, expFile)
			}
			if err := deploy.CheckRoot(); err != nil {
				return err
			}
			opts := docker.BuildOptions{Force: force, Source: docker.Source{Mirror: mirror, Suite: suite},
				Progress: imageProgress(cmd.ErrOrStderr())}
			start := time.Now()
			ref, err := docker.Runtime{}.BuildImage(cmd.Context(), opts)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s (%s)\n", ref, time.Since(start).Round(time.Second))
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "rebuild even if the image exists")
	cmd.Flags().StringVar(&mirror, "mirror", "", "Debian mirror URL (default: the one in /etc/apt/sources.list*)")
	cmd.Flags().StringVar(&suite, "suite", "", "Debian suite (default: the host's)")
	cmd.Flags().StringVar(&labFile, "lab", "", "with --runtime vm: the images this lab file's VM nodes boot (their vm: image, the programs and packages their kinds need)")
	cmd.Flags().StringVar(&vmImage, "image", "", "with --runtime vm and no --lab: busybox (default) or debian (a debootstrap root with the base packages)")
	cmd.Flags().StringVar(&expFile, "experiment", "", "with --runtime vm: the images the VM nodes of this experiment's labs boot, with the programs its probes run in them (http's ab: true from a VM source), so its first trial does not wait on a build")
	return cmd
}

// imagesBuildFlags refuses the flags of `images build` that the chosen runtime's images do
// not use, rather than ignoring them: a guest image is rebuilt by removing it (its key changes
// by itself when its content would), its Debian root comes from this host's APT sources; --lab
// and --image choose guest images.
func imagesBuildFlags(force bool, mirror, suite, labFile, vmImage, expFile string) error {
	if imagesRuntime == "vm" {
		switch {
		case force:
			return fmt.Errorf("images build --runtime vm --force: not supported; remove the image (sfclab images rm --runtime vm KEY, keys in sfclab images list --runtime vm) and build again")
		case mirror != "" || suite != "":
			return fmt.Errorf("images build --runtime vm: --mirror and --suite are the docker node image's; a guest's Debian root comes from this host's APT sources")
		}
		return nil
	}
	if labFile != "" || vmImage != "" || expFile != "" {
		return fmt.Errorf("images build: --lab, --image and --experiment choose VM guest images; add --runtime vm")
	}
	return nil
}

func newImagesList() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the node images sfclab built (* marks the one deploys use)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if imagesRuntime == "vm" {
				return listVMImages(cmd)
			}
			imgs, err := docker.Runtime{}.Images(cmd.Context())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if len(imgs) == 0 {
				fmt.Fprintf(out, "no node image; build one: sfclab images build (deploys use %s)\n", docker.DefaultImage())
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "IMAGE\tID\tCREATED\tSIZE")
			for _, im := range imgs {
				mark := " "
				if im.Current {
					mark = "*"
				}
				fmt.Fprintf(tw, "%s %s\t%s\t%s\t%d MB\n", mark, strings.Join(im.Tags, ","), strings.TrimPrefix(im.ID, "sha256:")[:12],
					im.Created.Format(time.DateTime), im.Size/1e6)
			}
			return tw.Flush()
		},
	}
}

func newImagesRemove() *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "rm",
		Short: "Remove outdated node images (--all: every node image sfclab built; --runtime vm: the KEYs named, or --all)",
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if imagesRuntime == "vm" {
				return removeVMImages(cmd, args, all)
			}
			if len(args) > 0 {
				return fmt.Errorf("sfclab images rm takes no arguments for docker images")
			}
			removed, err := docker.Runtime{}.RemoveImages(cmd.Context(), !all)
			for _, r := range removed {
				fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", r)
			}
			if err == nil && len(removed) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "nothing to remove")
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "also remove the image deploys use")
	return cmd
}

// imageProgress shows an image build: one line rewritten in place on a terminal, a line per
// phase (and per quarter of a phase with a known size) otherwise. The docker runtime calls it
// when deploy builds a missing image (register it with docker.Runtime{Progress: ...}).
func imageProgress(w io.Writer) func(docker.BuildProgress) {
	f, ok := w.(*os.File)
	tty := ok && isatty.IsTerminal(f.Fd())
	var mu sync.Mutex
	start := time.Now()
	phase, quarter := "", int64(-1)
	var lastDraw time.Time
	return func(p docker.BuildProgress) {
		mu.Lock()
		defer mu.Unlock()
		count := ""
		switch {
		case p.Phase == "import" && p.Total > 0:
			count = fmt.Sprintf(" %d/%d MB", p.Done/1e6, p.Total/1e6)
		case p.Total > 0:
			count = fmt.Sprintf(" %d/%d", p.Done, p.Total)
		case p.Done > 0:
			count = fmt.Sprintf(" %d", p.Done)
		}
		elapsed := time.Since(start).Round(time.Second)
		if tty {
			if p.Phase == "done" {
				fmt.Fprintf(w, "\r\033[Kimage: %s (%s)\n", p.Message, elapsed)
				return
			}
			if time.Since(lastDraw) < 100*time.Millisecond && p.Phase == phase {
				return
			}
			lastDraw, phase = time.Now(), p.Phase
			msg := p.Message
			if len(msg) > 50 {
				msg = msg[:50]
			}
			fmt.Fprintf(w, "\r\033[Kbuilding node image [%s] %s%s: %s", elapsed, p.Phase, count, msg)
			return
		}
		q := p.Done / 50 // unknown size: a line every 50 packages
		if p.Total > 0 {
			q = p.Done * 4 / p.Total
		}
		if p.Phase != phase || q != quarter || p.Phase == "done" {
			phase, quarter = p.Phase, q
			fmt.Fprintf(w, "building node image [%s] %s%s: %s\n", elapsed, p.Phase, count, p.Message)
		}
	}
}
